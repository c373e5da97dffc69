"""The Ray task of one sweep point: runs the point's process (``sweep_point``) on whichever
node Ray chose, writes the point's record into ``RESULTS/points/<id>/point.json`` as soon
as it is finished, and raises ``PointCrashed`` for a failure worth one retry (Ray then
retries it, on any node).

The task writes straight into RESULTS, so every node must see RESULTS at the same path:
one machine, or a shared file system on a cluster of several.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from qloom.errors import QloomError

__all__ = ["PointCrashed", "execute_point", "node_info", "read_attempts", "write_json",
           "log_tail", "RECORD", "LOG", "MARKER"]

RECORD = "point.json"
LOG = "log.txt"
ATTEMPTS = "attempts.jsonl"
MARKER = "sweep.json"          # RESULTS/sweep.json: RESULTS is a sweep's folder


class PointCrashed(Exception):
    """A point failed in a way that may pass on another try (a tool failed, the process
    was killed, qloom hit a bug); the message ends with the tail of the point's log."""


def write_json(path: Path, value):
    """Replace ``path`` in one rename: a reader sees the old record or the new one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value, indent=1) + "\n")
    os.replace(tmp, path)


def node_info() -> dict:
    """Where this task runs: Ray's node id, the host and the worker's process."""
    info = {"host": socket.gethostname(), "pid": os.getpid(), "node_id": None, "node_ip": None}
    import ray
    if ray.is_initialized():    # else called outside Ray, where asking would start one
        info["node_id"] = ray.get_runtime_context().get_node_id()
        info["node_ip"] = ray.util.get_node_ip_address()
    return info


def read_attempts(folder: Path, run: str) -> list[dict]:
    """The attempts of the current sweep run on this point (one JSON line each)."""
    try:
        lines = (folder / ATTEMPTS).read_text().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue            # a line cut short by a killed worker
        if entry.get("run") == run:
            out.append(entry)
    return out


def log_tail(folder: Path, lines: int = 15) -> str:
    try:
        text = (folder / LOG).read_text(errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def execute_point(request: dict, results: str, run: str) -> dict:
    """Run one point in its own process group and return its record (also written to
    ``point.json``). ``results`` is RESULTS' absolute path; ``run`` names this sweep
    run, so that the attempts of one run are counted apart from earlier runs'."""
    results_dir = Path(results)
    where = node_info()
    if not (results_dir / MARKER).is_file():
        raise QloomError(f"RESULTS {results_dir} is not visible on host {where['host']} (Ray "
                         f"node {where['node_id']}): a sweep on several machines needs RESULTS "
                         f"on a file system they share, at the same path")
    folder = results_dir / "points" / request["id"]
    folder.mkdir(parents=True, exist_ok=True)
    attempt = {"run": run, **where, "started": time.time()}
    with open(folder / ATTEMPTS, "a") as f:
        f.write(json.dumps(attempt) + "\n")
    write_json(folder / "request.json", request)
    outcome_file = folder / "outcome.json"
    outcome_file.unlink(missing_ok=True)
    with open(folder / LOG, "a") as log:
        log.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} attempt on host {where['host']}, "
                  f"Ray node {where['node_id']}, worker pid {where['pid']} ===\n")
        log.flush()
        proc = subprocess.run(
            [sys.executable, "-m", "qloom.flows.sweep.point", str(folder / "request.json"),
             str(outcome_file), "--parent", str(os.getpid())],
            cwd=folder, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
    outcome = json.loads(outcome_file.read_text()) if outcome_file.is_file() else None
    if proc.returncode != 0 or outcome is None:
        how = (f"was killed by signal {-proc.returncode}" if proc.returncode < 0
               else f"exited with status {proc.returncode}")
        raise PointCrashed(f"the point's process {how} without an outcome; log tail:\n"
                           f"{log_tail(folder)}")
    if outcome["status"] != "ok" and outcome.get("retry"):
        raise PointCrashed(f"{outcome['error_type']}: {outcome['error']}")
    record = {"id": request["id"], "key": request["key"], "request": request, **outcome,
              "node": where, "attempts": read_attempts(folder, run),
              "finished": time.time()}
    write_json(folder / RECORD, record)
    return record
