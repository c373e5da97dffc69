"""Packaging: ``python -m build`` makes an sdist and a wheel that ``twine check`` passes,
and the wheel alone, installed into a fresh virtual environment outside the checkout, runs
every command of the README's quickstart on a bundled model (compile, simulate with
Icarus, build, deploy). Slow tier: the fresh environment installs every dependency (from
pip's cache after the first run)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

import qloom

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def _run(argv, **kwargs):
    run = subprocess.run([str(a) for a in argv], capture_output=True, text=True, **kwargs)
    assert run.returncode == 0, f"{' '.join(map(str, argv))}:\n{run.stdout}\n{run.stderr}"
    return run


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """The sdist and the wheel, built from a copy of the checkout's tracked files."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", out, ROOT], timeout=900)
    return out


def test_sdist_and_wheel_pass_twine_check(dist):
    wheel, = dist.glob("qloom-*.whl")
    sdist, = dist.glob("qloom-*.tar.gz")
    assert wheel.name.startswith(f"qloom-{qloom.__version__}-")
    assert sdist.name == f"qloom-{qloom.__version__}.tar.gz"
    report = _run([sys.executable, "-m", "twine", "check", "--strict", wheel, sdist])
    assert report.stdout.count("PASSED") == 2, report.stdout


def quickstart() -> list[list[str]]:
    """The qloom commands of README.md's quickstart block, comments dropped."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## Quickstart", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].split() for line in block.splitlines()
            if line.strip().startswith("qloom ")]


def test_the_wheel_alone_runs_the_quickstart(dist, tmp_path):
    """A fresh venv outside the checkout with only the wheel (and the simulators on PATH)
    runs every qloom command of the README's quickstart, bitstream and deploy included."""
    if shutil.which("iverilog") is None:
        pytest.skip("iverilog is not installed (make test installs it)")
    commands = quickstart()
    assert [c[1] for c in commands] == ["models", "inspect", "compile", "simulate", "build",
                                        "deploy"], commands
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    wheel, = dist.glob("qloom-*.whl")
    _run([python, "-m", "pip", "install", "--quiet", wheel], timeout=1800)
    work = tmp_path / "work"           # no checkout file in reach: not under ROOT
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{env_dir / 'bin'}:{env['PATH']}"
    where = _run([python, "-c", "import qloom; print(qloom.__file__, qloom.__version__)"],
                 cwd=work, env=env).stdout.split()
    assert Path(where[0]).is_relative_to(env_dir) and where[1] == qloom.__version__
    outputs = [_run([env_dir / "bin" / c[0], *c[1:]], cwd=work, env=env, timeout=1800).stdout
               for c in commands]
    assert "tfc_w1a1" in outputs[0] and str(ROOT) not in outputs[0]
    results = json.loads((work / "out" / "tfc" / "sim" / "results.json").read_text())
    assert results["frames"] == 200 and results["mismatches"] == 0
    build = json.loads((work / "out" / "tfc" / "build" / "report.json").read_text())
    assert (work / build["bitstream"]).is_file() and build["fmax_mhz"] > 0   # OUT as given
    assert (work / "out" / "tfc" / "deploy" / "program.sh").is_file()
