"""`qloom build` never loses the previous good build: each try is built in a staging folder,
the automatic second try at a lower clock included, and swapped into OUT/build only when
complete. A kill during the rebuild leaves the previous build, the next run leaves no
`.build*` folder, and SIGTERM ends the running tool with qloom (no orphan).

The fast tests replace the tools by a fake build step that runs a real child process
(``sleep``) through ``synth.run_tool``, as Yosys would be run."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from qloom.errors import QloomError
from qloom.flows.toolchain import build
from qloom.flows import outdir

ROOT = Path(__file__).resolve().parents[3]

FAKE = textwrap.dedent("""
    import json, os, sys, time
    sys.path[:0] = {paths!r}
    from qloom.flows.toolchain import build, synth
    calls = []
    def fake(out, area, failed, *, board, clock_mhz, baud, seeds):
        calls.append(clock_mhz)
        tmp = area.staging()
        (tmp / "board_top.bin").write_bytes(b"try %d" % len(calls))
        met = clock_mhz is not None
        report = {{"board": "icebreaker", "target_mhz": clock_mhz or 48.0, "fmax_mhz": 40.0,
                  "timing_met": met, "bitstream": str(out / "build" / "board_top.bin")}}
        (tmp / "report.json").write_text(json.dumps(report))
        if len(calls) == 2:                           # the second try: a long tool run
            print("tool", flush=True)
            mode = sys.argv[2]
            if mode == "exit":
                os._exit(9)
            try:
                synth.run_tool("yosys", ["sleep", "60"], tmp, tmp / "sleep.log", quiet=True)
            except BaseException:
                area.discard(tmp)                     # as the real build step does
                raise
        return build._Staged(tmp, build.BuildResult(out / "build", report, None))
    build._build_board = fake
    build.build_board(sys.argv[1], board="icebreaker")
""")


def design(path: Path) -> Path:
    """An OUT with a manifest (the fake build needs no Verilog) and a previous good build."""
    (path / "rtl").mkdir(parents=True)
    (path / "rtl" / "qloom_top.v").write_text("module qloom_top; endmodule\n")
    port = {"lanes": 1, "element_bits": 4, "payload_bits": 5, "last_bit": 4,
            "words_per_frame": 3, "elements_per_frame": 3,
            "dtype": {"name": "INT4", "bits": 4, "signed": True}}
    (path / "manifest.json").write_text(json.dumps(
        {"format": 1, "qloom_version": "test", "top": "qloom_top", "rtl": ["rtl/qloom_top.v"],
         "board": "icebreaker", "input": port, "output": port}))
    (path / "build").mkdir()
    (path / "build" / "board_top.bin").write_bytes(b"previous good build")
    (path / "build" / "report.json").write_text(json.dumps({"board": "icebreaker",
                                                            "timing_met": True}))
    return path


def previous_build_intact(out: Path):
    assert (out / "build" / "board_top.bin").read_bytes() == b"previous good build"
    assert json.loads((out / "build" / "report.json").read_text())["timing_met"] is True


def hidden(folder: Path) -> list:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def start(out: Path, mode: str) -> subprocess.Popen:
    script = FAKE.format(paths=[str(ROOT)])
    proc = subprocess.Popen([sys.executable, "-c", script, str(out), mode], cwd=out.parent,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:                  # wait until the second try runs its tool
        if line == "tool\n":
            break
    return proc


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


def running_tool(pid: int, name: str, seconds: float) -> list[int]:
    """Children of ``pid`` that have become ``name`` (exec done: qloom is waiting on them,
    not still inside ``Popen``)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        tools = []
        for child in children(pid):
            try:
                if name in Path(f"/proc/{child}/cmdline").read_bytes().decode(errors="replace"):
                    tools.append(child)
            except FileNotFoundError:
                pass
        if tools:
            time.sleep(0.2)
            return tools
        time.sleep(0.05)
    return []


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_sigterm_during_the_rebuild_keeps_the_previous_build_and_its_tool_dies(tmp_path):
    out = design(tmp_path / "out")
    proc = start(out, "tool")
    tools = running_tool(proc.pid, "sleep", 30)
    assert tools, "the fake tool did not start"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0 and "Terminated: signal SIGTERM" in err
    time.sleep(0.2)
    assert not any(alive(t) for t in tools), "the tool outlived qloom"
    previous_build_intact(out)
    assert hidden(out) == []


def test_kill_during_the_rebuild_keeps_the_previous_build(tmp_path):
    """SIGKILL (no cleanup at all): OUT/build is untouched; the next run removes the two
    staging folders the killed run left."""
    out = design(tmp_path / "out")
    proc = start(out, "exit")
    proc.communicate(timeout=60)
    assert proc.returncode == 9
    previous_build_intact(out)
    assert len(hidden(out)) == 2 and all(h.startswith(".build.stage-") for h in hidden(out))
    build._area(out, "build")                 # what every build does first
    previous_build_intact(out)
    assert hidden(out) == []


def fake_try(out, area, failed, *, board, clock_mhz, baud, seeds, fail_second=False):
    tmp = area.staging()
    met = clock_mhz is not None
    (tmp / "board_top.bin").write_bytes(b"met" if met else b"missed")
    report = {"board": "icebreaker", "target_mhz": clock_mhz or 48.0, "fmax_mhz": 40.0,
              "timing_met": met, "bitstream": str(out / "build" / "board_top.bin")}
    (tmp / "report.json").write_text(json.dumps(report))
    return build._Staged(tmp, build.BuildResult(out / "build", report, None))


def test_the_second_try_replaces_the_build_only_when_complete(tmp_path, monkeypatch):
    out = design(tmp_path / "out")
    monkeypatch.setattr(build, "_build_board", fake_try)
    result = build.build_board(out, board="icebreaker")
    assert result.report["target_mhz"] == 36.0 and result.report["timing_met"] is True
    assert (out / "build" / "board_top.bin").read_bytes() == b"met"
    assert hidden(out) == [] and not (out / "build" / outdir.MARKER).exists()


def test_ctrl_c_during_the_second_try_keeps_the_previous_build(tmp_path, monkeypatch):
    out = design(tmp_path / "out")

    def interrupted(out, area, failed, *, clock_mhz, **kw):
        if clock_mhz is not None:
            area.staging()
            raise KeyboardInterrupt
        return fake_try(out, area, failed, clock_mhz=clock_mhz, **kw)
    monkeypatch.setattr(build, "_build_board", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build.build_board(out, board="icebreaker")
    previous_build_intact(out)
    assert len(hidden(out)) == 1              # the second try's staging, removed next time
    monkeypatch.setattr(build, "_build_board", fake_try)
    build.build_board(out, board="icebreaker")
    assert hidden(out) == []


def test_tool_failure_in_the_second_try_installs_the_first(tmp_path, monkeypatch):
    from qloom.errors import ToolError
    out = design(tmp_path / "out")

    def failing(out, area, failed, *, clock_mhz, **kw):
        if clock_mhz is not None:
            raise ToolError("nextpnr-ice40 failed")
        return fake_try(out, area, failed, clock_mhz=clock_mhz, **kw)
    monkeypatch.setattr(build, "_build_board", failing)
    with pytest.raises(ToolError):
        build.build_board(out, board="icebreaker")
    assert (out / "build" / "board_top.bin").read_bytes() == b"missed"
    assert hidden(out) == []


@pytest.mark.parametrize("kind", ["symlink", "file"])
def test_build_folder_must_be_qloom_s(tmp_path, kind):
    out = design(tmp_path / "out")
    os.rename(out / "build", tmp_path / "elsewhere")
    if kind == "symlink":
        (out / "build").symlink_to(tmp_path / "elsewhere")
    else:
        (out / "build").write_text("a file")
    message = "is a symbolic link" if kind == "symlink" else "is an existing file"
    with pytest.raises(QloomError, match=f"OUT/build .* {message}"):
        build.build_board(out, board="icebreaker")
    assert (tmp_path / "elsewhere" / "board_top.bin").read_bytes() == b"previous good build"


@pytest.mark.slow
def test_real_rebuild_killed_keeps_the_previous_build(tmp_path):
    """A real iCEBreaker build that misses 200 MHz, SIGTERM'd while its second try runs
    Yosys or nextpnr: the previous build stays, no tool survives, nothing is left over."""
    from designs import toy_out
    out = toy_out(tmp_path / "out")
    build.build_board(out, board="icebreaker", clock_mhz=24)
    before = (out / "build" / "board_top.bin").read_bytes()
    manifest = json.loads((out / "manifest.json").read_text())
    manifest.update(board="icebreaker", clock_mhz=200.0)
    (out / "manifest.json").write_text(json.dumps(manifest))
    proc = subprocess.Popen([sys.executable, "-m", "qloom.flows.cli", "build", str(out)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    for line in proc.stdout:
        if "building again at" in line:
            break
    tools = running_tool(proc.pid, "yowasp", 120)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err
    time.sleep(0.5)
    assert tools and not any(alive(t) for t in tools)
    assert (out / "build" / "board_top.bin").read_bytes() == before
    assert hidden(out) == []
