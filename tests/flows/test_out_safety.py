"""OUT is qloom's: `qloom compile` never deletes a user's files, never follows a link, and
a run killed at any moment leaves the old design or the new one, complete (issue 10).

Kills are real: a child Python process runs the compile with a hook that ends it with
``os._exit`` (no cleanup, like SIGKILL) at the chosen moment."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest

import qloom
from qloom.errors import QloomError
from qloom.flows import outdir
from qloom.flows.cli import main
from qloom.flows.compile.steps import compile_model

from graph_builder import GraphBuilder
from nets import binary_mlp, multibit_mlp

ROOT = Path(__file__).resolve().parents[2]


def tiny_model() -> onnx.ModelProto:
    """Quant -> MatMul with 3-bit weights: compiles in under a second."""
    g, rng = GraphBuilder(), np.random.default_rng(0)
    x = g.quant(g.input([1, 8]), 0.25, 4, signed=False)
    w = g.quant(g.const(rng.normal(0, 1, (8, 4)).astype(np.float32)), 0.5, 3)
    return g.model(g.node("MatMul", [x, w]))


def user_folder(path: Path) -> dict:
    """A folder of the user's own files; returns their contents to check later."""
    path.mkdir(parents=True)
    (path / "thesis.tex").write_text("years of work")
    (path / "data").mkdir()
    (path / "data" / "x.npy").write_bytes(b"\x93NUMPY")
    return snapshot(path)


def snapshot(path: Path) -> dict:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file()}


def complete_design(out: Path, model_name: str | None = None, *, hidden_copy=False) -> dict:
    """Check that OUT holds one whole design; returns its manifest. A hidden copy left by
    a killed run carries qloom's marker; a design in place does not."""
    manifest = json.loads((out / "manifest.json").read_text())
    assert (out / "rtl" / "qloom_top.v").read_text().count("endmodule") >= 1
    assert (out / "report.md").is_file() and json.loads((out / "report.json").read_text())
    if model_name:
        assert manifest["model"] == model_name
    assert (out / outdir.MARKER).exists() == hidden_copy
    return manifest


def hidden(folder: Path) -> list:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# -- what OUT may be ------------------------------------------------------------------------

def test_user_folder_with_files_is_refused(tmp_path):
    mine = user_folder(tmp_path / "mine")
    with pytest.raises(QloomError, match=r"OUT .*mine is a folder with other files in it "
                                         r"\(2 entries, e\.g\. 'data'\) that qloom did not "
                                         r"write; qloom replaces only an empty folder or one "
                                         r"it made"):
        compile_model(binary_mlp(), tmp_path / "mine")
    assert snapshot(tmp_path / "mine") == mine
    assert hidden(tmp_path) == []


def test_empty_folder_and_earlier_design_are_replaced(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    compile_model(binary_mlp(), out)
    assert complete_design(out, "binary_mlp")
    compile_model(multibit_mlp(), out)
    assert complete_design(out, "multibit_mlp")
    assert (out / "rtl" / "sim").exists() is False or (out / "rtl" / "sim").is_dir()
    assert hidden(tmp_path) == []


@pytest.mark.parametrize("name", [".", "..", "./", "sub/..", ""])
def test_dot_and_dotdot_are_refused(tmp_path, monkeypatch, name):
    work = tmp_path / "work"
    mine = user_folder(work)
    monkeypatch.chdir(work)
    with pytest.raises(QloomError, match=r"ends in '\.' or '\.\.'; qloom replaces OUT as a "
                                         r"whole, so give a folder of its own"):
        compile_model(binary_mlp(), name)
    assert snapshot(work) == mine and sorted(os.listdir(tmp_path)) == ["work"]


def test_cwd_and_its_ancestors_are_refused(tmp_path, monkeypatch):
    work = tmp_path / "a" / "work"
    mine = user_folder(work)
    monkeypatch.chdir(work)
    for out in (work, tmp_path / "a", tmp_path):
        with pytest.raises(QloomError, match=r"is the working directory or a folder above it"):
            compile_model(binary_mlp(), out)
    assert snapshot(work) == mine


def test_root_is_refused_by_the_cli(capsys):
    assert main(["compile", str(ROOT / "examples" / "models" / "tfc_w1a1.onnx"), "-o", "/"]) == 2
    err = capsys.readouterr().err
    assert "qloom compile: error: OUT '/' is the root folder" in err
    assert "Traceback" not in err


def test_symlink_is_never_followed(tmp_path):
    mine = user_folder(tmp_path / "mine")
    (tmp_path / "link").symlink_to(tmp_path / "mine")
    with pytest.raises(QloomError, match=r"OUT .*link is a symbolic link \(to .*mine\); qloom "
                                         r"never replaces a folder through a link"):
        compile_model(binary_mlp(), tmp_path / "link")
    assert snapshot(tmp_path / "mine") == mine
    # not even a link to a qloom design, nor a dangling link
    compile_model(binary_mlp(), tmp_path / "design")
    design = snapshot(tmp_path / "design")
    (tmp_path / "link2").symlink_to(tmp_path / "design")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    for link in ("link2", "dangling"):
        with pytest.raises(QloomError, match="is a symbolic link"):
            compile_model(binary_mlp(), tmp_path / link)
        assert (tmp_path / link).is_symlink()
    assert snapshot(tmp_path / "design") == design
    assert hidden(tmp_path) == []


def test_file_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("keep me")
    with pytest.raises(QloomError, match=r"OUT .*notes\.txt is an existing file; qloom writes "
                                         r"a folder there and never replaces a file"):
        compile_model(binary_mlp(), tmp_path / "notes.txt")
    assert (tmp_path / "notes.txt").read_text() == "keep me"


def test_model_folder_is_refused(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    onnx.save(tiny_model(), models / "tiny.onnx")
    compile_model(models / "tiny.onnx", tmp_path / "out")
    cases = [(models / "tiny.onnx", models), (models / "tiny.onnx", tmp_path),
             (tmp_path / "out" / "model.onnx", tmp_path / "out")]     # a design's own model
    for model, out in cases:
        with pytest.raises(QloomError, match=r"is the model's folder or a folder above it; "
                                             r"qloom replaces OUT as a whole"):
            compile_model(model, out)
    assert (models / "tiny.onnx").is_file() and complete_design(tmp_path / "out")


def test_read_only_target(tmp_path, capsys):
    """Unwritable places give one line, whoever runs the test (root ignores mode bits)."""
    targets = ["/proc/qloom-out"]
    if os.geteuid() != 0:
        (tmp_path / "ro").mkdir()
        (tmp_path / "ro").chmod(0o555)
        targets.append(str(tmp_path / "ro" / "out"))
    for target in targets:
        code = main(["compile", str(ROOT / "examples" / "models" / "tfc_w1a1.onnx"),
                     "-o", target])
        err = capsys.readouterr().err
        assert code == 2 and f"error: cannot write OUT {target}: cannot create a folder" in err
        assert "Traceback" not in err


def test_long_folder_name(tmp_path):
    out = tmp_path / ("n" * 255)
    compile_model(binary_mlp(), out)
    compile_model(binary_mlp(), out)          # replaced through a temporary name
    assert complete_design(out) and hidden(tmp_path) == []


def test_newline_in_out_is_refused(tmp_path):
    with pytest.raises(QloomError, match=r"contains the control character\(s\) '\\n'"):
        compile_model(binary_mlp(), tmp_path / "a\nb")
    assert os.listdir(tmp_path) == []


# -- kills ----------------------------------------------------------------------------------

KILLER = textwrap.dedent("""
    import os, sys
    sys.path[:0] = {paths!r}
    from qloom.flows import outdir
    from qloom.flows.compile.steps import compile_model
    from nets import multibit_mlp
    moment = sys.argv[2]
    if moment in ("between renames", "after first rename"):
        outdir._exchange = lambda a, b: False       # a kernel without RENAME_EXCHANGE
        real = os.rename
        def rename(src, dst):
            real(src, dst)
            if str(src) == sys.argv[1]:
                os._exit(9)                          # killed: no cleanup runs
        os.rename = rename
    elif moment == "after exchange":
        outdir._remove = lambda folder: os._exit(9)
    elif moment == "while writing":
        import qloom.flows.compile.steps as c
        c._documents = lambda *a: os._exit(9)
    compile_model(multibit_mlp(), sys.argv[1])
""")


def killed_compile(out: Path, moment: str):
    script = KILLER.format(paths=[str(ROOT), str(ROOT / "tests" / "flows"), str(ROOT / "tests")])
    proc = subprocess.run([sys.executable, "-c", script, str(out), moment], cwd=out.parent,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 9, proc.stderr


def test_killed_between_the_renames_keeps_the_old_design(tmp_path):
    """The fallback swap renames OUT away, then the staging folder in; a kill between the
    two leaves no OUT, and the next run puts the old design back before anything else."""
    out = tmp_path / "out"
    compile_model(binary_mlp(), out)
    killed_compile(out, "between renames")
    assert not out.exists()
    old = [p for p in tmp_path.iterdir() if p.name.startswith(".out.old-")]
    assert len(old) == 1 and complete_design(old[0], "binary_mlp", hidden_copy=True)
    outdir.Area.at(out, "OUT", outdir.is_design).prepare()
    assert complete_design(out, "binary_mlp") and hidden(tmp_path) == []
    # and a compile after such a kill ends with the new design, nothing left over
    killed_compile(out, "between renames")
    compile_model(multibit_mlp(), out)
    assert complete_design(out, "multibit_mlp") and hidden(tmp_path) == []


def test_killed_after_the_exchange_has_the_new_design(tmp_path):
    out = tmp_path / "out"
    compile_model(binary_mlp(), out)
    killed_compile(out, "after exchange")
    assert complete_design(out, "multibit_mlp")
    assert len(hidden(tmp_path)) == 1          # the old design, marked as qloom's
    compile_model(binary_mlp(), out)
    assert complete_design(out, "binary_mlp") and hidden(tmp_path) == []


def test_killed_while_writing_keeps_the_old_design(tmp_path):
    out = tmp_path / "out"
    compile_model(binary_mlp(), out)
    before = snapshot(out)
    killed_compile(out, "while writing")
    assert snapshot(out) == before
    assert len(hidden(tmp_path)) == 1          # the staging folder
    compile_model(binary_mlp(), out)
    assert hidden(tmp_path) == []


def test_foreign_hidden_folders_are_left_alone(tmp_path):
    """Cleaning leftovers deletes only marked folders qloom made."""
    out = tmp_path / "out"
    lookalike = tmp_path / ".out.stage-1-abcd"
    lookalike.mkdir()
    (lookalike / "precious").write_text("user's")
    compile_model(binary_mlp(), out)
    compile_model(binary_mlp(), out)
    assert (lookalike / "precious").read_text() == "user's"


# -- the model inside OUT -------------------------------------------------------------------

def save_with_external_data(model, folder: Path, location="tiny.data") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tiny.onnx"
    onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
              location=location, size_threshold=0)
    return path


def test_external_data_is_carried_into_out(tmp_path):
    path = save_with_external_data(tiny_model(), tmp_path / "models")
    compile_model(path, tmp_path / "out")
    (tmp_path / "models" / "tiny.data").unlink()          # the design stands on its own
    saved = onnx.load(str(tmp_path / "out" / "model.onnx"), load_external_data=False)
    assert all(t.data_location == onnx.TensorProto.DEFAULT for t in saved.graph.initializer)
    net = qloom.load(tmp_path / "out" / "model.onnx")
    x = np.random.default_rng(1).uniform(0, 3, (3, 8)).astype(np.float32)
    assert net.execute(x).shape == (3, 4)


def test_missing_or_outside_external_data_is_named(tmp_path):
    path = save_with_external_data(tiny_model(), tmp_path / "models")
    (tmp_path / "models" / "tiny.data").rename(tmp_path / "tiny.data")
    with pytest.raises(QloomError, match=r"the external data file 'tiny\.data' of tensor "
                                         r"'c\d+' is missing \(expected at .*models/tiny\.data\)"):
        compile_model(path, tmp_path / "out")
    proto = onnx.load(str(path), load_external_data=False)
    for tensor in proto.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = "../tiny.data"
    onnx.save(proto, str(path))
    with pytest.raises(QloomError, match=r"is '\.\./tiny\.data', outside the model's folder"):
        compile_model(path, tmp_path / "out")
    assert not (tmp_path / "out").exists()
