"""Every script qloom generates (deploy's program.sh and run.sh, the Vivado project's shell
script and Tcl, the open-flow build script and Yosys script) is run for real from folders
with hostile names, against fake tools on PATH that record their arguments: nothing a path
says is executed, and the right file reaches the tool. What cannot be quoted (a newline in
a name that reaches a script) is refused with a clear error; qloom refuses any control
character in the folders it writes, whether or not a script would see them."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qloom.errors import QloomError, ToolError
from qloom.flows.toolchain import build, synth
from qloom.flows.cli import main
from qloom.flows.deploy.bundle import deploy

from designs import toy_out

# Each name would run `touch pwned` if a script used it unquoted (or inside a comment).
HOSTILE = ["with space", "it's", 'say "hi"', "$(touch pwned)", "`touch pwned`",
           "a;touch pwned;b", "x && touch pwned", "*?[a]{b,c}~", "--help ünï"]
PAYLOAD = b"\x00\x7e\xaa\x99\x7e bitstream \xff" * 64

FAKE_TOOL = """#!{python}
import json, os, sys
arg = next((a for a in reversed(sys.argv[1:]) if os.path.isfile(a)), None)
record = {{"tool": os.path.basename(sys.argv[0]), "argv": sys.argv[1:], "cwd": os.getcwd(),
          "file": open(arg, "rb").read().hex() if arg else None}}
with open(os.environ["RECORD"], "a") as f:
    f.write(json.dumps(record) + "\\n")
"""


@pytest.fixture
def fake_tools(tmp_path):
    """A folder of fake tools first on PATH; returns a function that runs a script with
    them and gives back what they recorded."""
    fake = tmp_path / "fakebin"
    fake.mkdir()
    for name in ("iceprog", "openFPGALoader", "ecpprog", "qloom", "vivado", "yosys",
                 "nextpnr-ice40", "icepack"):
        tool = fake / name
        tool.write_text(FAKE_TOOL.format(python=sys.executable))
        tool.chmod(0o755)
    record = tmp_path / "record.jsonl"

    def run(script: Path, *args, cwd=None, sh=False):
        env = {k: v for k, v in os.environ.items()
               if k not in ("YOSYS", "NEXTPNR_ICE40", "ICEPACK", "VIVADO")}
        env.update(PATH=f"{fake}:{os.environ['PATH']}", RECORD=str(record))
        record.unlink(missing_ok=True)
        command = ["sh", str(script)] if sh else [str(script)]   # Amaranth's: not executable
        proc = subprocess.run([*command, *args], cwd=cwd or tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return [json.loads(line) for line in record.read_text().splitlines()]
    return run


def no_pwned(*folders):
    for folder in folders:
        assert not list(Path(folder).rglob("pwned")), f"a path was executed in {folder}"


def fake_build(out: Path, board: str, *, bitstream_name="board_top.bin", **extra):
    (out / "build").mkdir(parents=True)
    report = {"board": board, "target_mhz": 48.0, "fmax_mhz": 61.2, "timing_met": True,
              "baud": 1_000_000, **extra}
    if bitstream_name:
        (out / "build" / bitstream_name).write_bytes(PAYLOAD)
        report["bitstream"] = str(out / "build" / bitstream_name)
    else:
        report["bitstream"] = None
        report["vendor_script"] = str(out / "build" / "build_board_top.sh")
    (out / "build" / "report.json").write_text(json.dumps(report))
    return out


# -- deploy: program.sh and run.sh -----------------------------------------------------------

@pytest.mark.parametrize("name", HOSTILE)
@pytest.mark.parametrize("board, tool, argv", [
    ("icebreaker", "iceprog", ["board_top.bin"]),
    ("ulx3s-85f", "openFPGALoader", ["-b", "ulx3s", "board_top.bit"]),
    ("orangecrab-25f", "ecpprog", ["-S", "board_top.bit"]),
])
def test_program_script_with_hostile_paths(tmp_path, fake_tools, name, board, tool, argv):
    out = fake_build(tmp_path / name / "out", board, bitstream_name=f"{name}.bin")
    dest = deploy(out)
    [call] = fake_tools(dest / "program.sh")
    assert call == {"tool": tool, "argv": argv, "cwd": str(dest), "file": PAYLOAD.hex()}
    no_pwned(tmp_path)


@pytest.mark.parametrize("name", HOSTILE)
def test_run_script_with_hostile_arguments(tmp_path, fake_tools, name):
    out = fake_build(tmp_path / name / "out", "icebreaker")
    dest = deploy(out)
    [call] = fake_tools(dest / "run.sh", f"/dev/{name}", f"{name}.npy")
    assert call["tool"] == "qloom" and call["cwd"] == str(dest)
    assert call["argv"] == ["run", "..", "--port", f"/dev/{name}", "--inputs", f"{name}.npy",
                            "--baud", "1000000"]
    no_pwned(tmp_path)


@pytest.mark.parametrize("name", HOSTILE)
def test_vendor_program_script_with_hostile_paths(tmp_path, fake_tools, name):
    out = fake_build(tmp_path / name / "out", "arty-a7-35", bitstream_name=None)
    (out / "build" / "board_top.bit").write_bytes(PAYLOAD)      # as Vivado would leave it
    dest = deploy(out)
    text = (dest / "program.sh").read_text()
    assert str(tmp_path) not in text, "the script names nothing outside OUT"
    [call] = fake_tools(dest / "program.sh")
    assert call["argv"] == ["-b", "arty", "../build/board_top.bit"]
    assert call["file"] == PAYLOAD.hex()
    no_pwned(tmp_path)


@pytest.mark.parametrize("field, value, message", [
    ("baud", "1; touch pwned", r"baud must be a positive integer, not '1; touch pwned'"),
    ("baud", -3, r"baud must be a positive integer, not -3"),
    ("vendor_script", "/x/build_board_top.sh\ntouch pwned",
     r"the vendor build script name 'build_board_top\.sh\\ntouch pwned' contains the "
     r"control character\(s\) '\\n'"),
])
def test_report_values_that_cannot_reach_a_script(tmp_path, field, value, message):
    out = fake_build(tmp_path / "out", "arty-a7-35", bitstream_name=None)
    report = json.loads((out / "build" / "report.json").read_text())
    report[field] = value
    (out / "build" / "report.json").write_text(json.dumps(report))
    with pytest.raises(QloomError, match=message):
        deploy(out)
    assert not (out / "deploy").exists() and [p for p in out.iterdir() if p.name[0] == "."] == []


def test_missed_timing_is_refused_unless_forced(tmp_path, capsys):
    out = fake_build(tmp_path / "out", "icebreaker", timing_met=False, fmax_mhz=40.7)
    assert main(["deploy", str(out)]) == 2
    err = capsys.readouterr().err
    assert "missed timing: Fmax 40.7 MHz is below the 48.0 MHz it runs at" in err
    assert "--clock 40" in err and "--force" in err and "Traceback" not in err
    assert not (out / "deploy").exists()
    assert main(["deploy", str(out), "--force"]) == 0
    assert "WARNING: the bitstream in" in capsys.readouterr().err
    assert "MISSED TIMING" in (out / "deploy" / "README.txt").read_text()


@pytest.mark.parametrize("step", ["deploy", "build", "build-arty"])
def test_newline_in_out_is_refused(tmp_path, step):
    out = fake_build(tmp_path / "new\ntouch pwned" / "out", "icebreaker")
    run = {"deploy": lambda: deploy(out),
           "build": lambda: build.build_board(out, board="icebreaker"),
           "build-arty": lambda: build.build_board(out, board="arty-a7-35")}[step]
    port = {"lanes": 1, "element_bits": 4, "payload_bits": 5, "last_bit": 4,
            "words_per_frame": 3, "elements_per_frame": 3,
            "dtype": {"name": "INT4", "bits": 4, "signed": True}}
    (out / "manifest.json").write_text(json.dumps({"format": 1, "top": "qloom_top",
                                                   "rtl": ["rtl/qloom_top.v"],
                                                   "input": port, "output": port}))
    with pytest.raises(QloomError, match=r"contains the control character\(s\) '\\n'; qloom "
                                         r"writes paths into scripts"):
        run()
    assert sorted(p.name for p in out.iterdir()) == ["build", "manifest.json"]
    no_pwned(tmp_path)


# -- Vivado: the shell script and the Tcl ----------------------------------------------------

TCL_STUB = """
set log [open $env(RECORD) w]
proc unknown {args} { global log; puts $log [list {*}$args]; return "" }
source board_top.tcl
close $log
"""


@pytest.mark.parametrize("name", HOSTILE)
def test_vivado_scripts_with_hostile_paths(tmp_path, fake_tools, name):
    out = toy_out(tmp_path / name / "out")
    result = build.build_board(out, board="arty-a7-35")
    folder = out / "build"
    assert Path(result.report["vendor_script"]) == folder / "build_board_top.sh"
    for script in ("build_board_top.sh", "board_top.tcl"):
        assert str(tmp_path) not in (folder / script).read_text()
    assert "tee" not in (folder / "board_top.tcl").read_text(), "no Yosys command for Vivado"
    [call] = fake_tools(folder / "build_board_top.sh", sh=True, cwd=folder)
    assert call["tool"] == "vivado" and call["cwd"] == str(folder)
    assert call["argv"] == ["-mode", "batch", "-log", "board_top.log", "-source", "board_top.tcl"]
    # the Tcl itself, in a real Tcl interpreter whose unknown commands only record
    (tmp_path / "stub.tcl").write_text(TCL_STUB)
    record = tmp_path / "tcl.txt"
    subprocess.run(["tclsh", str(tmp_path / "stub.tcl")], cwd=folder, check=True, timeout=60,
                   env={**os.environ, "RECORD": str(record)})
    commands = record.read_text().splitlines()
    assert [c for c in commands if c.startswith("add_files")] == ["add_files qloom_top.v",
                                                                  "add_files board_top.v"]
    assert (folder / "qloom_top.v").read_text() == (out / "rtl" / "qloom_top.v").read_text()
    no_pwned(tmp_path)


@pytest.mark.parametrize("bad", ["rtl/$(touch pwned).v", 'rtl/say"hi".v', "rtl/a b.v",
                                 "rtl/x;y.v", "rtl/new\nline.v", "/etc/passwd.v",
                                 "../../other.v", "rtl/top.vhd"])
def test_manifest_file_names_that_would_reach_a_script_are_refused(tmp_path, bad):
    out = toy_out(tmp_path / "out")
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["rtl"] = [bad]
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(QloomError, match=r"RTL file .* is not allowed: qloom writes the file "
                                         r"names into build scripts"):
        build.build_board(out, board="arty-a7-35")
    manifest["rtl"], manifest["top"] = ["rtl/qloom_top.v"], "top; touch pwned"
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(QloomError, match=r"top module 'top; touch pwned' is not a Verilog "
                                         r"identifier"):
        build.build_asic(out)
    assert not (out / "build").exists()


# -- the open flow: Amaranth's build script and the Yosys script -------------------------------

@pytest.mark.parametrize("name", HOSTILE)
def test_open_flow_scripts_with_hostile_paths(tmp_path, fake_tools, monkeypatch, name):
    """The Yosys script and Amaranth's shell script of an iCE40 build, stopped before the
    real tools (build-failed keeps them); the shell script is then run with fake tools."""
    out = toy_out(tmp_path / name / "out")
    seen = {}

    def stop(script, cwd, log, **kw):
        seen["script"], seen["cwd"] = Path(script).read_text(), cwd
        raise ToolError("stopped before Yosys")
    monkeypatch.setattr(synth, "run_yosys", stop)
    with pytest.raises(ToolError):
        build.build_board(out, board="icebreaker", clock_mhz=24)
    folder = out / "build-failed"
    assert str(tmp_path) not in seen["script"]
    assert seen["script"].splitlines()[1].split() == ["read_verilog", "qloom_top.v"]
    calls = fake_tools(folder / "build_board_top.sh", sh=True, cwd=folder)
    assert [c["tool"] for c in calls] == ["yosys", "nextpnr-ice40", "icepack"]
    assert calls[0]["argv"] == ["-q", "-l", "board_top.rpt", "board_top.ys"]
    assert all(c["cwd"] == str(folder) for c in calls)
    no_pwned(tmp_path)


@pytest.mark.slow
def test_real_icebreaker_build_in_a_hostile_folder(tmp_path):
    name = "it's $(touch pwned) `touch pwned`; touch pwned"
    out = toy_out(tmp_path / name / "out")
    result = build.build_board(out, board="icebreaker", clock_mhz=24)
    assert Path(result.report["bitstream"]).stat().st_size > 100_000
    assert result.report["timing_met"] is True
    no_pwned(tmp_path)
