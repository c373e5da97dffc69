"""The RESULTS folder of a sweep: checked before any work, locked while a sweep runs, one
record per point (``points/<id>/point.json``) and the table of all points
(``results.csv``, ``results.json``) rewritten whenever a point finishes.

RESULTS accumulates: a re-run adds and replaces points but never deletes a folder, so it
is not swapped in whole like ``OUT``. It is used only when it is new, empty or marked as a
sweep's (``sweep.json``); every file is replaced by a rename, so a kill leaves the old
file or the new one.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from qloom._version import __version__
from qloom.errors import QloomError
from qloom.flows import outdir
from qloom.flows.sweep.task import MARKER, RECORD, log_tail, read_attempts, write_json

__all__ = ["Results", "Status", "COLUMNS", "row"]

FORMAT = "qloom-sweep/1"


class Status:
    OK = "ok"
    FAILED = "failed"
    PENDING = "pending"       # in the SPEC, not run (yet) with its current key


def _is_results(folder: Path) -> bool:
    try:
        return json.loads((folder / MARKER).read_text()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


@dataclass
class Results:
    path: Path
    _lock: object = None

    @classmethod
    def open(cls, path, spec) -> "Results":
        """RESULTS for ``spec``, refused when it holds files qloom did not write, is a
        link, or is the SPEC's or a model's folder (or above one); locked against a second
        sweep writing into it at the same time."""
        keep = [(spec.path.parent, "the SPEC's folder")]
        keep += [(p.model.path.parent, f"the folder of model {p.model.name!r}")
                 for p in spec.points]
        area = outdir.Area.at(path, "RESULTS", _is_results,
                              hint="choose a new folder, an empty one or an earlier sweep's "
                                   "RESULTS")
        area.check(keep_clear_of=tuple(dict.fromkeys(keep)))
        results = cls(area.path)
        try:
            (results.path / "points").mkdir(parents=True, exist_ok=True)
            results._lock = open(results.path / ".lock", "w")
        except OSError as e:
            raise QloomError(f"cannot write RESULTS {results.path}: {e.strerror or e}") from None
        try:
            fcntl.flock(results._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise QloomError(f"RESULTS {results.path} is in use by another qloom sweep; wait "
                             f"for it or choose another folder") from None
        write_json(results.path / MARKER, {"format": FORMAT, "qloom_version": __version__,
                                           "spec": str(spec.path)})
        return results

    def close(self):
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def folder(self, point) -> Path:
        return self.path / "points" / point.id

    def record(self, point) -> dict | None:
        """The point's record, or None when it has none or one for other inputs."""
        try:
            record = json.loads((self.folder(point) / RECORD).read_text())
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) and record.get("key") == point.key else None

    def record_failure(self, point, run: str, error: str) -> dict:
        """The record of a point whose task failed for good (after its retry)."""
        folder = self.folder(point)
        folder.mkdir(parents=True, exist_ok=True)
        record = {"id": point.id, "key": point.key, "request": point.request(),
                  "status": Status.FAILED, "error": error, "error_type": "PointCrashed",
                  "retry": True, "attempts": read_attempts(folder, run),
                  "log_tail": log_tail(folder), "finished": time.time()}
        write_json(folder / RECORD, record)
        return record

    def read_rows(self) -> list[dict] | None:
        """The rows of ``results.json`` as last written, or None."""
        try:
            return json.loads((self.path / "results.json").read_text()).get("rows")
        except (OSError, ValueError, AttributeError):
            return None

    def write_tables(self, points, records: dict) -> list[dict]:
        """``results.json`` and ``results.csv``: one row per point of the SPEC, in its order."""
        rows = [row(p, records.get(p.id), self.folder(p)) for p in points]
        write_json(self.path / "results.json", {"format": FORMAT, "rows": rows})
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        tmp = self.path / f".results.csv.{os.getpid()}.tmp"
        tmp.write_text(text.getvalue())
        os.replace(tmp, self.path / "results.csv")
        return rows


COLUMNS = ["id", "model", "board", "folding", "clock_mhz", "status", "error",
           "est_lut", "est_ff", "est_dsp", "est_bram", "est_ii_cycles", "est_fps",
           "lut", "ff", "dsp", "bram", "fmax_mhz", "built_mhz", "timing_met",
           "ii_cycles", "latency_cycles", "fps", "latency_us", "frames", "mismatches",
           "compile_s", "simulate_s", "build_s", "host", "node_id", "pid", "attempts",
           "folder", "key"]


def _round(x, digits=3):
    return None if x is None else round(x, digits)


def row(point, record: dict | None, folder: Path) -> dict:
    """The table row of one point: estimates from compile, measured resources and Fmax
    from the build, II and latency from simulation; frames/s at the clock the bitstream
    was built for (or, without a build, the compiled clock)."""
    r = {c: None for c in COLUMNS}
    r.update(id=point.id, model=point.model.name, board=point.board,
             folding=point.folding.label, clock_mhz=point.clock_mhz, key=point.key,
             folder=str(folder), status=Status.PENDING)
    if record is None:
        return r
    # The table keeps the error's first line; the record has all of it and the log's tail.
    error = record.get("error")
    if error:
        error = error.splitlines()[0]
        error = f"{record['step']}: {error}" if record.get("step") else error
    r["status"], r["error"] = record.get("status"), error
    node = record.get("node") or {}
    attempts = record.get("attempts") or []
    last = attempts[-1] if attempts else {}
    r.update(host=node.get("host", last.get("host")), node_id=node.get("node_id",
             last.get("node_id")), pid=node.get("pid", last.get("pid")),
             attempts=len(attempts) or None)
    comp, sim, build = (record.get(k) or {} for k in ("compile", "simulate", "build"))
    seconds = record.get("seconds") or {}
    res = comp.get("resources") or {}
    clock = comp.get("clock_mhz")
    r.update(clock_mhz=clock if clock is not None else point.clock_mhz,
             est_lut=res.get("lut"), est_ff=res.get("ff"), est_dsp=res.get("dsp"),
             est_bram=res.get("bram"), est_ii_cycles=comp.get("ideal_ii_cycles"),
             est_fps=_round(comp.get("fps_at_clock"), 1),
             compile_s=seconds.get("compile"), simulate_s=seconds.get("simulate"),
             build_s=seconds.get("build"))
    if sim:
        r.update(ii_cycles=sim.get("ii_cycles"), latency_cycles=sim.get("latency_cycles"),
                 frames=sim.get("frames"), mismatches=sim.get("mismatches"))
    measured = build.get("measured") or {}
    r.update(lut=measured.get("lut"), ff=measured.get("ff"), dsp=measured.get("dsp"),
             bram=measured.get("bram"), fmax_mhz=_round(build.get("fmax_mhz"), 2),
             built_mhz=build.get("target_mhz"), timing_met=build.get("timing_met"))
    mhz = r["built_mhz"] or r["clock_mhz"]
    if mhz and r["ii_cycles"]:
        r["fps"] = round(mhz * 1e6 / r["ii_cycles"], 1)
    if mhz and r["latency_cycles"] is not None:
        r["latency_us"] = round(r["latency_cycles"] / mhz, 3)
    return r
