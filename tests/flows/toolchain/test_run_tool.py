"""``synth.run_tool``: progress lines while a long tool step runs, its failure reported with
the log's last lines, and the tool killed when qloom is interrupted."""

import sys

import pytest

from qloom.errors import ToolError
from qloom.flows.toolchain import synth

# A stand-in tool: prints numbered lines (nextpnr's prefix on some) a little apart.
TOOL = """
import sys, time
for k in range(int(sys.argv[1])):
    print(f"Info:     iter={k}   overused={100 - k}" if k % 2 else f"pass {k}", flush=True)
    time.sleep(float(sys.argv[2]))
sys.exit(int(sys.argv[3]))
"""


def _run(tmp_path, lines, pause, status, **kwargs):
    script = tmp_path / "tool.py"
    script.write_text(TOOL)
    return synth.run_tool("fake tool", [sys.executable, str(script), str(lines), str(pause),
                                        str(status)], tmp_path, tmp_path / "tool.log", **kwargs)


def test_progress_lines_follow_the_log(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(synth, "PROGRESS_SECONDS", 0.05)
    _run(tmp_path, 8, 0.2, 0)
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("[qloom] fake tool: done in ")
    progress = out[:-1]
    assert len(progress) >= 3, out
    assert all(line.startswith("[qloom] fake tool: 0 min, ") for line in progress), out
    shown = [line.split(", ", 1)[1] for line in progress]
    assert len(set(shown)) == len(shown), out                 # only when the line changed
    assert set(shown) <= {f"pass {k}" for k in range(0, 8, 2)} | \
        {f"iter={k} overused={100 - k}" for k in range(1, 8, 2)}, out


def test_quiet_prints_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(synth, "PROGRESS_SECONDS", 0.05)
    _run(tmp_path, 4, 0.1, 0, quiet=True)
    assert capsys.readouterr().out == ""


def test_watch_reads_another_file(tmp_path, monkeypatch, capsys):
    """Yosys runs with -q: its progress is in the -l log, not in its output."""
    monkeypatch.setattr(synth, "PROGRESS_SECONDS", 0.05)
    other = tmp_path / "yosys.log"
    other.write_text("1. Executing Verilog frontend\n\n2.3. Executing ABC9 pass.\n  \n")
    _run(tmp_path, 3, 0.2, 0, watch=other)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "[qloom] fake tool: 0 min, 2.3. Executing ABC9 pass.", out
    assert len(out) == 2, out


def test_failure_quotes_the_log(tmp_path, monkeypatch):
    monkeypatch.setattr(synth, "PROGRESS_SECONDS", 0.05)
    with pytest.raises(ToolError, match=r"fake tool failed \(exit 3\)[\s\S]*iter=1"):
        _run(tmp_path, 2, 0.05, 3)


def _recording_popen(monkeypatch) -> list:
    """The processes ``run_tool`` starts from now on."""
    started = []
    real_popen = synth.subprocess.Popen

    def popen(*args, **kwargs):
        proc = real_popen(*args, **kwargs)
        started.append(proc)
        return proc

    monkeypatch.setattr(synth.subprocess, "Popen", popen)
    return started


def test_interrupt_kills_the_tool(tmp_path, monkeypatch):
    """An exception in qloom while the tool runs (Ctrl-C, SIGTERM as ``Terminated``) ends
    the tool too, not only qloom."""
    monkeypatch.setattr(synth, "PROGRESS_SECONDS", 0.05)
    started = _recording_popen(monkeypatch)
    calls = []

    def last_line(path):
        calls.append(path)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return None

    monkeypatch.setattr(synth, "_last_line", last_line)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, 1, 60, 0)
    assert started[0].returncode is not None            # killed and reaped


@pytest.mark.parametrize("text, want", [
    ("", None),
    ("\n \n", None),
    ("a\nInfo:     iter=3 wires=1   overused=2\n\n", "iter=3 wires=1 overused=2"),
    ("x" * 300, "x" * 97 + "..."),
])
def test_last_line(tmp_path, text, want):
    path = tmp_path / "log"
    path.write_text(text)
    assert synth._last_line(path) == want


def test_last_line_of_a_missing_file(tmp_path):
    assert synth._last_line(tmp_path / "absent") is None


def test_stop_event_ends_the_tool(tmp_path, monkeypatch):
    """Another thread setting ``stop`` (a seed sweep whose other seed met the clock) ends
    the tool within a poll and raises ``Stopped``; progress lines still come once per
    ``PROGRESS_SECONDS``, not once per poll."""
    import threading
    import time
    monkeypatch.setattr(synth, "STOP_POLL_SECONDS", 0.02)
    started = _recording_popen(monkeypatch)
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    begin = time.monotonic()
    with pytest.raises(synth.Stopped):
        _run(tmp_path, 1, 60, 0, stop=stop)
    assert time.monotonic() - begin < 5
    assert started[0].returncode is not None            # killed and reaped
    monkeypatch.setattr(synth, "PROGRESS_SECONDS", 0.2)
    lines = []
    monkeypatch.setattr(synth, "_last_line", lambda path: lines.append(path) or None)
    _run(tmp_path, 5, 0.1, 0, stop=threading.Event())
    assert 1 <= len(lines) <= 4, lines                  # about 0.5 s / 0.2 s, not / 0.02 s
