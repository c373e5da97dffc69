"""``qloom sweep``: SPEC errors, ids and keys, the skip logic, the RESULTS folder's safety,
and sweeps end to end on a local Ray with TFC-w1a1 (compile + simulate; a slow test
builds a real iCEBreaker bitstream), including points whose worker or process is killed.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from qloom.errors import QloomError
from qloom.flows.sweep import spec as sweep_spec
from qloom.flows.sweep.run import _plan, sweep
from qloom.flows.sweep.results import Results
from qloom.flows.sweep.spec import read_spec
from qloom.flows.sweep.task import RECORD, execute_point, write_json

MODELS = Path(__file__).resolve().parents[3] / "examples" / "models"
TFC = MODELS / "tfc_w1a1.onnx"
JET = MODELS / "jettagging_w6a6.onnx"


def write_spec(folder: Path, text: str, name="spec.toml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


TINY = f"""
frames = 4
simulator = "icarus"
build = false
boards = ["icebreaker"]
foldings = ["auto", "default"]

[[models]]
path = "{TFC}"
"""


# -- SPEC errors: each names the key and the value ------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("frames = 0\n", ["frames", "0", "integer >= 1"]),
    ("frames = 'many'\n", ["frames", "'many'"]),
    ("simulator = 'modelsim'\n", ["simulator", "'modelsim'", "icarus, verilator"]),
    ("build = 'yes'\n", ["build", "'yes'", "true or false"]),
    ("boards = ['icebreaker', 'de0nano']\n", ["boards[1]", "'de0nano'", "icebreaker"]),
    ("boards = []\n", ["boards", "non-empty list"]),
    ("clocks = ['fast']\n", ["clocks[0]", "'fast'", "MHz"]),
    ("clocks = [-5]\n", ["clocks[0]", "-5", "positive"]),
    ("foldings = ['fastest']\n", ["foldings[0]", "'fastest'", "\"auto\", \"default\""]),
    ("foldings = [{ pe = 4 }]\n", ["foldings[0]", "'pe'", "target_fps"]),
    ("foldings = [{ label = 'x' }]\n", ["foldings[0]", "needs target_fps or fold"]),
    ("foldings = [{ target_fps = 0 }]\n", ["foldings[0].target_fps", "positive"]),
    ("foldings = [{ fold = 'missing.json' }]\n", ["foldings[0].fold", "'missing.json'",
                                                  "not found"]),
    ("foldings = ['auto', { fold = 'auto' }]\n", ["foldings", "labelled 'auto'"]),
    ("memory_gb = 0\n", ["memory_gb", "positive"]),
    ("retries = 3\n", ["top level", "'retries'", "known keys"]),
])
def test_spec_errors_name_key_and_value(tmp_path, text, expected):
    base = "boards = ['icebreaker']\n" if not text.startswith("boards") else ""
    spec = write_spec(tmp_path, base + text + f"[[models]]\npath = '{TFC}'\n")
    with pytest.raises(QloomError) as e:
        read_spec(spec)
    message = str(e.value)
    assert str(spec) in message
    for part in expected:
        assert part in message, message


@pytest.mark.parametrize("models, expected", [
    ("", ["models", "[[models]]"]),
    ("[[models]]\nname = 'x'\n", ["models[0]", "path"]),
    ("[[models]]\npath = 'nowhere.onnx'\n", ["models[0].path", "'nowhere.onnx'", "not found"]),
    (f"[[models]]\npath = '{TFC}'\nbatch = 3\n", ["models[0]", "'batch'"]),
    (f"[[models]]\npath = '{TFC}'\ninput_type = 'FLOAT7'\n",
     ["models[0].input_type", "'FLOAT7'", "INTn"]),
    (f"[[models]]\npath = '{TFC}'\nname = 'a b'\n", ["models[0].name", "'a b'"]),
    (f"[[models]]\npath = '{TFC}'\nprecision = 'fixed<16>'\n",
     ["models[0].precision", "needs the integer bits"]),
    (f"[[models]]\npath = '{TFC}'\n[[models]]\npath = '{TFC}'\n",
     ["models[1]", "tfc_w1a1 on icebreaker", "'default'", "also listed by models[0]"]),
    (f"[[models]]\npath = '{TFC}'\n[[models]]\npath = '{JET}'\nname = 'tfc_w1a1'\n",
     ["models[1].name", "'tfc_w1a1'", "different files"]),
])
def test_spec_model_errors(tmp_path, models, expected):
    spec = write_spec(tmp_path, "boards = ['icebreaker']\n" + models)
    with pytest.raises(QloomError) as e:
        read_spec(spec)
    for part in expected:
        assert part in str(e.value), str(e.value)


def test_spec_not_toml_and_missing(tmp_path):
    with pytest.raises(QloomError, match="not valid TOML"):
        read_spec(write_spec(tmp_path, "frames = = 3\n"))
    with pytest.raises(QloomError, match="not found"):
        read_spec(tmp_path / "absent.toml")
    spec = write_spec(tmp_path, f"[[models]]\npath = '{TFC}'\n")
    with pytest.raises(QloomError, match="no boards for model 'tfc_w1a1'"):
        read_spec(spec)


# -- points, ids and keys ---------------------------------------------------------------

def test_points_cross_models_boards_foldings_clocks(tmp_path):
    (tmp_path / "f.json").write_text('{"MatMul_0": {"pe": 2, "simd": 4}}')
    spec = read_spec(write_spec(tmp_path, f"""
boards = ["icebreaker", "ulx3s-85f"]
clocks = ["board", 40]
foldings = ["auto", {{ target_fps = 1e5 }}, {{ fold = "f.json" }}, "default"]
[[models]]
path = "{TFC}"
[[models]]
path = "{MODELS / 'jettagging_w6a6.onnx'}"
name = "jet"
boards = ["ulx3s-85f"]
foldings = [{{ target_fps = 2e5, fold = "auto" }}]
input_type = "int16"
"""))
    assert len(spec.points) == 2 * 4 * 2 + 1 * 1 * 2
    ids = [p.id for p in spec.points]
    assert len(set(ids)) == len(ids)
    jet = spec.points[-1]
    assert jet.id.startswith("jet-ulx3s-85f-fps200000+auto-40MHz-")
    assert jet.model.load_options == {"input_type": "INT16"}
    req = jet.request()
    assert req["fold"] == "auto" and req["target_fps"] == 2e5 and req["clock_mhz"] == 40.0
    fold_point = next(p for p in spec.points if p.folding.label == "fold-f")
    assert fold_point.request()["fold"] == str(tmp_path / "f.json")


def test_one_model_in_several_tables_has_foldings_per_board(tmp_path):
    spec = read_spec(write_spec(tmp_path, f"""
[[models]]
path = "{TFC}"
boards = ["icebreaker"]
foldings = ["auto", {{ target_fps = 3e4 }}]
[[models]]
path = "{TFC}"
boards = ["ulx3s-85f"]
foldings = [{{ target_fps = 1e6 }}, {{ target_fps = 3e4 }}]
"""))
    assert [(p.model.name, p.board, p.folding.label) for p in spec.points] == [
        ("tfc_w1a1", "icebreaker", "auto"), ("tfc_w1a1", "icebreaker", "fps30000"),
        ("tfc_w1a1", "ulx3s-85f", "fps1000000"), ("tfc_w1a1", "ulx3s-85f", "fps30000")]


def test_key_follows_inputs_and_id_follows_coordinates(tmp_path, monkeypatch):
    model = tmp_path / "m.onnx"
    shutil.copyfile(TFC, model)
    (tmp_path / "f.json").write_text('{"MatMul_0": {"pe": 2}}')
    text = f"""boards = ["icebreaker"]
foldings = ["auto", {{ fold = "f.json" }}]
[[models]]
path = "m.onnx"
"""
    spec = write_spec(tmp_path, text)
    first = read_spec(spec).points
    assert [p.key for p in read_spec(spec).points] == [p.key for p in first]   # stable

    with open(model, "ab") as f:                 # the model's bytes change: keys change
        f.write(b"\0")
    changed = read_spec(spec).points
    assert [p.id for p in changed] == [p.id for p in first]
    assert all(a.key != b.key for a, b in zip(first, changed))

    (tmp_path / "f.json").write_text('{"MatMul_0": {"pe": 4}}')   # only the fold file's
    refolded = read_spec(spec).points
    assert refolded[0].key == changed[0].key and refolded[1].key != changed[1].key

    more_frames = read_spec(write_spec(tmp_path, "frames = 99\n" + text)).points
    assert all(a.key != b.key for a, b in zip(refolded, more_frames))
    assert read_spec(spec, build=False).points[0].key != refolded[0].key

    monkeypatch.setattr(sweep_spec, "__version__", "99.0")
    versioned = read_spec(spec).points[0].key
    assert versioned != refolded[0].key
    # Changed compiler code with the same version number: keys change too.
    monkeypatch.setattr(sweep_spec, "code_digest", lambda: "0123456789abcdef")
    assert read_spec(spec).points[0].key != versioned


def test_code_digest_covers_the_package():
    """The digest of qloom's files is stable across calls and when recomputed."""
    digest = sweep_spec.code_digest()
    assert len(digest) == 16 and digest == sweep_spec.code_digest()
    sweep_spec.code_digest.cache_clear()
    assert sweep_spec.code_digest() == digest


# -- RESULTS and the skip logic -------------------------------------------------------

def _record(results, point, status="ok"):
    folder = results.folder(point)
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / RECORD, {"id": point.id, "key": point.key, "status": status,
                                 "error": None if status == "ok" else "boom"})


def test_skip_logic(tmp_path):
    spec = read_spec(write_spec(tmp_path, TINY))
    results = Results.open(tmp_path / "out", spec)
    try:
        auto, default = spec.points
        assert _plan(spec, results, force=False, retry_failed=False) == ({}, [auto, default])
        _record(results, auto)
        kept, todo = _plan(spec, results, force=False, retry_failed=False)
        assert list(kept) == [auto.id] and todo == [default]
        _record(results, default, status="failed")
        kept, todo = _plan(spec, results, force=False, retry_failed=False)
        assert list(kept) == [auto.id, default.id] and todo == []
        assert _plan(spec, results, force=False, retry_failed=True)[1] == [default]
        assert _plan(spec, results, force=True, retry_failed=False)[1] == [auto, default]
    finally:
        results.close()

    # Adding a folding and a clock runs only the new points; changing frames runs all.
    grown = read_spec(write_spec(tmp_path, TINY.replace(
        '"default"]', '"default", { target_fps = 50000 }]\nclocks = ["board", 30]')))
    results = Results.open(tmp_path / "out", grown)
    try:
        kept, todo = _plan(grown, results, force=False, retry_failed=False)
        assert set(kept) == {auto.id, default.id}
        assert len(todo) == len(grown.points) - 2 == 4
    finally:
        results.close()
    other = read_spec(write_spec(tmp_path, TINY.replace("frames = 4", "frames = 3")))
    results = Results.open(tmp_path / "out", other)
    try:
        assert _plan(other, results, force=False, retry_failed=False)[1] == list(other.points)
    finally:
        results.close()


def test_results_folder_safety(tmp_path):
    spec = read_spec(write_spec(tmp_path, TINY))
    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("keep me")
    with pytest.raises(QloomError, match="RESULTS .*mine.* other files in it .*'notes.txt'"):
        Results.open(user, spec)
    assert (user / "notes.txt").read_text() == "keep me"
    with pytest.raises(QloomError, match="the SPEC's folder"):
        Results.open(tmp_path, spec)
    link = tmp_path / "link"
    link.symlink_to(user)
    with pytest.raises(QloomError, match="symbolic link"):
        Results.open(link, spec)
    first = Results.open(tmp_path / "out", spec)
    try:
        with pytest.raises(QloomError, match="in use by another qloom sweep"):
            Results.open(tmp_path / "out", spec)
    finally:
        first.close()
    Results.open(tmp_path / "out", spec).close()        # a sweep's own folder: reused


def test_point_with_bad_input_fails_at_once_with_its_log(tmp_path):
    """A failure the inputs decide is recorded without a retry (it would fail again)."""
    bad = tmp_path / "bad.onnx"
    bad.write_text("not a model")
    spec = read_spec(write_spec(tmp_path, TINY.replace(str(TFC), str(bad))))
    results = Results.open(tmp_path / "out", spec)
    try:
        record = execute_point(spec.points[0].request(), str(results.path), "run1")
    finally:
        results.close()
    assert record["status"] == "failed" and record["retry"] is False
    assert "cannot read ONNX model" in record["error"] and record["step"] == "compile"
    assert len(record["attempts"]) == 1
    log = (results.folder(spec.points[0]) / "log.txt").read_text()
    assert "cannot read ONNX model" in log
    assert json.loads((results.folder(spec.points[0]) / RECORD).read_text())["key"] \
        == spec.points[0].key


def test_build_refused_as_too_big_keeps_the_estimate_and_simulation(tmp_path):
    """The fit check refuses the build (no tool runs): the point fails at once, and its
    row still shows the compile estimate and the simulated II."""
    spec = read_spec(write_spec(tmp_path, TINY.replace("build = false", "build = true")
                                .replace('["auto", "default"]', '[{ target_fps = 400000 }]')))
    (point,) = spec.points
    results = Results.open(tmp_path / "out", spec)
    try:
        record = execute_point(point.request(), str(results.path), "run1")
        (r,) = results.write_tables(spec.points, {point.id: record})
    finally:
        results.close()
    assert record["status"] == "failed" and record["retry"] is False
    assert record["step"] == "build" and "build" not in record
    assert r["error"].startswith("build: the design does not fit icebreaker")
    assert r["est_lut"] > 0 and r["ii_cycles"] == r["est_ii_cycles"] and r["mismatches"] == 0
    assert r["lut"] is None and r["fmax_mhz"] is None
    assert not (results.folder(point) / "design" / "build").exists()


# -- end to end on a local Ray ----------------------------------------------------------

def _point_processes():
    """(pid, command line) of the running point processes."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"qloom.flows.sweep.point" in cmd:
            yield int(entry), b" ".join(cmd).decode(errors="replace")


def _group_alive(pgid: int) -> list[int]:
    """Processes (not zombies) still in the process group ``pgid``."""
    alive = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()     # after "pid (command) "
            if int(fields[2]) == pgid and fields[0] != "Z":
                alive.append(int(entry))
    return alive


def _kill(pid: int, sig=signal.SIGKILL):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


class Killer(threading.Thread):
    """Kills, for point ids containing ``worker_once``, the Ray worker of the first attempt
    once the point's tools run (the point's processes and tools must die with it); for
    ``always``, the point's processes on every attempt."""

    def __init__(self, results: Path, worker_once: str, always: str):
        super().__init__(daemon=True)
        self.results, self.worker_once, self.always = results, worker_once, always
        self.stop = threading.Event()
        self.groups, self.killed_always = [], set()

    def run(self):
        done_once = False
        while not self.stop.is_set():
            for pid, cmd in _point_processes():
                if str(self.results) not in cmd:
                    continue
                if self.always in cmd and pid not in self.killed_always:
                    _kill(pid)
                    self.killed_always.add(pid)
                elif self.worker_once in cmd and not done_once:
                    try:
                        group = os.getpgid(pid)
                    except ProcessLookupError:
                        continue
                    if len(_group_alive(group)) < 3:   # wait for a tool under the point
                        continue
                    folder = next(p for p in (self.results / "points").iterdir()
                                  if self.worker_once in p.name)
                    worker = json.loads((folder / "attempts.jsonl").read_text()
                                        .splitlines()[-1])["pid"]
                    _kill(worker)
                    self.groups.append(group)
                    done_once = True
            time.sleep(0.02)


def test_sweep_on_local_ray_retries_killed_points_and_skips_on_rerun(tmp_path, monkeypatch):
    spec = write_spec(tmp_path, TINY)
    out = tmp_path / "results"
    killer = Killer(out, worker_once="-auto-", always="-default-")
    killer.start()
    try:
        rows = sweep(spec, out, jobs=2, progress=lambda text: None)
    finally:
        killer.stop.set()
        killer.join()

    by_folding = {r["folding"]: r for r in rows}
    auto, default = by_folding["auto"], by_folding["default"]
    # Its worker killed in the first attempt: retried, finished, measured.
    assert auto["status"] == "ok", auto["error"]
    assert auto["attempts"] == 2 and auto["mismatches"] == 0 and auto["frames"] == 4
    assert auto["ii_cycles"] == auto["est_ii_cycles"] and auto["est_lut"] > 0
    assert auto["fps"] == pytest.approx(auto["clock_mhz"] * 1e6 / auto["ii_cycles"], rel=1e-3)
    assert auto["node_id"] and auto["host"] and auto["pid"]
    # ... and the point's processes and tools died with the killed worker.
    assert killer.groups and not any(_group_alive(g) for g in killer.groups)
    # Killed on both attempts: recorded as failed with its log; the sweep went on.
    assert default["status"] == "failed" and default["attempts"] == 2
    assert len(killer.killed_always) >= 2
    assert "killed by signal 9" in default["error"]
    record = json.loads((Path(default["folder"]) / RECORD).read_text())
    assert "attempt on host" in record["log_tail"]

    with open(out / "results.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert [(t["id"], t["status"]) for t in table] == [(r["id"], r["status"]) for r in rows]
    assert json.loads((out / "results.json").read_text())["rows"] == rows
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 2 and auto["id"] not in page
    assert (out / "plots" / "fps_vs_lut.png").read_bytes()[:4] == b"\x89PNG"
    assert (Path(auto["folder"]) / "design" / "sim" / "results.json").is_file()

    # Re-running: nothing to run, Ray not even started.
    import qloom.flows.sweep.run as sweep_module

    def no_ray(*args, **kwargs):
        raise AssertionError("Ray was started for a sweep with nothing to run")
    monkeypatch.setattr(sweep_module, "_start_ray", no_ray)
    start = time.monotonic()
    again = sweep(spec, out, progress=lambda text: None)
    assert time.monotonic() - start < 10
    assert [(r["id"], r["status"], r["key"]) for r in again] == \
        [(r["id"], r["status"], r["key"]) for r in rows]


@pytest.mark.slow
def test_sweep_point_with_a_real_icebreaker_build(tmp_path):
    spec = write_spec(tmp_path, TINY.replace("build = false", "build = true")
                      .replace('["auto", "default"]', '[{ target_fps = 30000 }]'))
    rows = sweep(spec, tmp_path / "results", jobs=1, progress=lambda text: None)
    (row,) = rows
    assert row["status"] == "ok", row["error"]
    assert row["lut"] > 0 and row["fmax_mhz"] > 0 and row["build_s"] > 0
    assert row["built_mhz"] <= row["fmax_mhz"] or row["timing_met"] is False
    assert Path(row["folder"], "design", "build", "board_top.bin").is_file()
    assert row["fps"] == pytest.approx(row["built_mhz"] * 1e6 / row["ii_cycles"], rel=1e-3)


def test_cli_dry_run_and_errors(tmp_path, capsys):
    from qloom.flows.cli import main
    spec = write_spec(tmp_path, TINY)
    assert main(["sweep", str(spec), "-o", str(tmp_path / "out"), "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert "2 points: 0 with results for their inputs (skipped), 2 to run" in err
    assert "run  tfc_w1a1-icebreaker-auto-board-" in err
    bad = write_spec(tmp_path, TINY.replace('"icarus"', '"xsim"'), name="bad.toml")
    assert main(["sweep", str(bad), "-o", str(tmp_path / "out")]) == 2
    assert "qloom sweep: error: sweep spec" in capsys.readouterr().err
    assert main(["sweep", str(spec), "-o", str(tmp_path / "out"), "--jobs", "0"]) == 2
    assert "--jobs must be a positive integer, not 0" in capsys.readouterr().err


@pytest.mark.slow
def test_sweep_of_a_float_model_at_a_precision(tmp_path):
    import onnx

    from float_models import mlp
    model = tmp_path / "mlp.onnx"
    onnx.save(mlp((16, 12, 5)), str(model))
    spec = write_spec(tmp_path, TINY.replace(str(TFC), str(model))
                      .replace('["auto", "default"]', '["default"]')
                      + 'precision = "fixed<16,6>"\n')
    (row,) = sweep(spec, tmp_path / "results", jobs=1, progress=lambda text: None)
    assert row["status"] == "ok", row["error"]
    design = Path(row["folder"], "design")
    assert (design / "quantized.onnx").is_file()
    assert json.loads((design / "report.json").read_text())["precision"]["precision"] == \
        "fixed<16,6>"
