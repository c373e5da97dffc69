"""mkdocs hook: pages generated from the code, so that the docs cannot drift from it.

A page holds a marker line ``<!-- qloom:NAME -->``; the hook replaces it, at build time,
with what ``GENERATORS[NAME]`` returns: the CLI reference from qloom's argument parsers,
the supported-op table from the lowering registry, the engines from the mapping registry,
the boards from the board catalog, and performance tables from the bench results kept in
the repository.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- qloom:([a-z_]+) -->$", re.MULTILINE)


def _cli() -> str:
    from qloom.flows.cli import build_parser
    parser = build_parser()
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parts = ["## qloom", "", "```text", parser.format_help().rstrip(), "```", ""]
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subs.choices.items():
        parts += [f"## qloom {name}", "", "```text", sub.format_help().rstrip(), "```", ""]
    return "\n".join(parts)


def _ops() -> str:
    from qloom.nn.passes.lower_to_network import LOWERINGS
    groups: dict[str, list[str]] = {}
    for op, lowering in LOWERINGS.items():
        groups.setdefault(lowering.becomes, []).append(op)
    rows = ["| ONNX / QONNX ops | become |", "|---|---|"]
    rows += [f"| {', '.join(f'`{op}`' for op in ops)} | {becomes} |"
             for becomes, ops in groups.items()]
    return "\n".join(rows)


def _engines() -> str:
    from qloom.flows.compile.engines.mapping import ENGINES, UNROLLED_ENGINES
    rows = ["| IR layer | engine | latency mode |", "|---|---|---|"]
    for layer, engine in ENGINES.items():
        unrolled = UNROLLED_ENGINES.get(layer)
        rows.append(f"| `{layer.__name__}` | `{engine.__name__}` | "
                    f"{f'`{unrolled.__name__}`' if unrolled else ''} |")
    return "\n".join(rows)


def _boards() -> str:
    from qloom.boards import BOARDS
    rows = ["| board | device | LUT4 | DSP | BRAM | default clock MHz | flow | SDRAM |",
            "|---|---|---:|---:|---:|---:|---|---|"]
    for b in BOARDS.values():
        sdram = (f"{b.sdram.geometry.bytes >> 20} MB x{b.sdram.geometry.data_bits} "
                 f"({b.sdram.name}, up to {b.sdram.timing.max_clock_mhz:g} MHz)"
                 if b.sdram else "")
        rows.append(f"| `{b.name}` | {b.device} | {b.budget.lut:,} | {b.budget.dsp} | "
                    f"{b.budget.bram} | {b.clock_mhz:g} | "
                    f"{'open (Yosys + nextpnr)' if b.family.open_flow else 'vendor scripts'} "
                    f"| {sdram} |")
    return "\n".join(rows)


def _build_suite() -> str:
    """The recorded build suite as ``bench/build_suite.py`` writes its table."""
    import importlib.util
    import sys
    spec = importlib.util.spec_from_file_location("bench_build_suite",
                                                  ROOT / "bench" / "build_suite.py")
    suite = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = suite           # its dataclasses look their module up
    spec.loader.exec_module(suite)
    rows = suite.read_results(suite.RESULTS)
    if not rows:
        return "No recorded results yet (`python bench/build_suite.py --record`)."
    return suite.table(rows.values())


GENERATORS = {"cli": _cli, "ops": _ops, "engines": _engines, "boards": _boards,
              "build_suite": _build_suite}


def on_page_markdown(markdown, page, config, files):
    def replace(match):
        name = match.group(1)
        if name not in GENERATORS:
            raise KeyError(f"{page.file.src_path}: unknown qloom marker {name!r}; "
                           f"known: {sorted(GENERATORS)}")
        return GENERATORS[name]()
    return MARKER.sub(replace, markdown)
