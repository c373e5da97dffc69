"""Ctrl-C during a compile: exit status 130, one line, no traceback, and OUT either absent
or a complete design (issue 10)."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "examples" / "models" / "tfc_w1a1.onnx"


@pytest.mark.parametrize("delay", [0.0, 1.0, 2.5])
def test_ctrl_c_during_compile(tmp_path, delay):
    """The signal is sent ``delay`` seconds after the compile says it started (a signal
    during the interpreter's own start-up is Python's to handle, not qloom's)."""
    out = tmp_path / "out"
    child = subprocess.Popen(
        [sys.executable, "-m", "qloom.flows.cli", "compile", str(MODEL), "-o", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    first = child.stdout.readline()
    assert "load" in first, first
    time.sleep(delay)
    child.send_signal(signal.SIGINT)
    text, _ = child.communicate(timeout=120)
    text = first + text
    assert "Traceback" not in text, text
    if child.returncode == 0:                  # finished before the signal arrived
        assert (out / "manifest.json").is_file()
        return
    assert child.returncode == 130, text
    assert text.strip().splitlines()[-1].endswith("interrupted"), text
    assert not out.exists() or (out / "manifest.json").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name != "out"] == []   # no leftovers
