"""Every command's error boundary (``qloom.flows.cli.main``): a bad model or a bad OUT
ends as one ``qloom COMMAND: error: ...`` line and exit status 2, never a traceback; a
bug ends as one ``internal error`` line and status 3; the statuses are in ``--help``."""

import json
import shutil

import numpy as np
import onnx
import pytest

from qloom.flows import cli
from qloom.flows.cli import EXIT_STATUSES, main

from foreign_models import kws_mlp

SHAPE = (1, 1, 2, 8)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A compiled design, and next to it bad models and bad OUT folders."""
    root = tmp_path_factory.mktemp("boundary")
    onnx.save(kws_mlp(SHAPE), root / "good.onnx")
    assert main(["compile", str(root / "good.onnx"), "-o", str(root / "design")]) == 0
    (root / "garbage.onnx").write_text("not an onnx model\n")
    g_unsupported = kws_mlp(SHAPE)
    next(n for n in g_unsupported.graph.node if n.op_type == "Relu").op_type = "Sin"
    onnx.save(g_unsupported, root / "unsupported.onnx")
    np.save(root / "x.npy", np.zeros((2, *SHAPE[1:]), np.float32))
    (root / "a_file").write_text("a file, not a folder\n")
    (root / "not_a_design").mkdir()
    for name, damage in [("bad_model", lambda d: (d / "model.onnx").write_text("garbage")),
                         ("bad_manifest", lambda d: (d / "manifest.json").write_text("{bad")),
                         ("no_input_port", _drop_input_port),
                         ("no_rtl", lambda d: shutil.rmtree(d / "rtl"))]:
        shutil.copytree(root / "design", root / name)
        damage(root / name)
    (root / "sweep.toml").write_text(
        "boards = ['icebreaker']\nbuild = false\n[[models]]\npath = 'absent.onnx'\n")
    return root


def _drop_input_port(design):
    manifest = json.loads((design / "manifest.json").read_text())
    del manifest["input"]
    (design / "manifest.json").write_text(json.dumps(manifest))


BAD_OUTS = ["absent", "a_file", "not_a_design", "bad_manifest", "no_input_port"]

# Per command: its arguments for an OUT folder (``{out}``), and a bad model case.
COMMANDS = {
    "simulate": ["simulate", "{out}", "--random", "2"],
    "build": ["build", "{out}", "--board", "icebreaker"],
    "deploy": ["deploy", "{out}"],
    "run": ["run", "{out}", "--port", "/dev/null", "--inputs", "{root}/x.npy"],
    "board-sim": ["board-sim", "{out}", "--board", "icebreaker"],
    "report": ["report", "{out}"],
}


def _expect_one_error(capsys, argv, command, says=None):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, (argv, code, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    errors = [l for l in lines if l.startswith(f"qloom {command}: error: ")]
    assert len(errors) == 1, err
    if says:
        assert says in errors[0], err


def _argv(template, root, out):
    return [a.format(root=root, out=root / out) for a in template]


@pytest.mark.parametrize("out", BAD_OUTS)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_bad_out(files, capsys, command, out):
    argv = _argv(COMMANDS[command], files, out)
    if out == "no_input_port" and command in ("deploy", "report"):
        # they read OUT/build/report.json and OUT/report.json, not the stream ports
        code = main(argv)
        err = capsys.readouterr().err
        assert code == (0 if command == "report" else 2) and "Traceback" not in err, err
        return
    _expect_one_error(capsys, argv, command)


@pytest.mark.parametrize("argv, command, says", [
    (["inspect", "{root}/garbage.onnx"], "inspect", "is truncated or not an ONNX model"),
    (["inspect", "{root}/unsupported.onnx"], "inspect", "op Sin is not supported"),
    (["compile", "{root}/garbage.onnx", "-o", "{root}/o"], "compile", "not an ONNX model"),
    (["compile", "{root}/unsupported.onnx", "-o", "{root}/o"], "compile", "op Sin"),
    (["simulate", "{root}/bad_model", "--random", "2"], "simulate", "not an ONNX model"),
    (["run", "{root}/bad_model", "--port", "/dev/null", "--inputs", "{root}/x.npy"], "run",
     "not an ONNX model"),
    # (a model that is no ONNX fails its sweep points, status 1: tests/flows/sweep/test_sweep.py)
    (["sweep", "{root}/sweep.toml", "-o", "{root}/s", "--dry-run"], "sweep",
     "models[0].path: model 'absent.onnx' not found"),
    (["simulate", "{root}/design", "--inputs", "{root}/garbage.onnx"], "simulate",
     "not a NumPy .npy file"),
    (["simulate", "{root}/no_rtl", "--random", "2"], "simulate", "does not exist"),
])
def test_bad_model_and_inputs(files, capsys, argv, command, says):
    _expect_one_error(capsys, [a.format(root=files) for a in argv], command, says)


@pytest.mark.parametrize("argv, command", [
    (["compile", "{root}/good.onnx", "-o", "{root}/a_file"], "compile"),
    (["sweep", "{root}/sweep.toml", "-o", "{root}/a_file"], "sweep"),
])
def test_bad_out_of_commands_that_write_one(files, capsys, argv, command):
    _expect_one_error(capsys, [a.format(root=files) for a in argv], command)


def test_a_bug_is_one_line_with_status_3(files, capsys, monkeypatch):
    def broken(args):
        return {}["missing"]
    monkeypatch.setattr(cli, "_run_inspect", broken)
    assert main(["inspect", str(files / "good.onnx")]) == 3
    err = capsys.readouterr().err
    assert err.startswith("qloom inspect: internal error: KeyError: 'missing' (at "
                          "test_error_boundary.py:") and "bug in qloom" in err
    assert len(err.strip().splitlines()) == 1


def test_an_os_error_is_an_error_line(files, capsys, monkeypatch):
    def refused(args):
        raise PermissionError(13, "Permission denied", "/somewhere")
    monkeypatch.setattr(cli, "_run_inspect", refused)
    assert main(["inspect", str(files / "good.onnx")]) == 2
    assert capsys.readouterr().err == "qloom inspect: error: Permission denied: /somewhere\n"


def test_statuses_are_documented(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "exit status:" in text
    for code in EXIT_STATUSES:
        assert f"\n  {code:<5}" in text
