"""``qloom sweep --address`` on a real Ray cluster made with ``ray start``: a head and a
second node on this machine (their own temp folder, ports and token), the second node
killed while it runs a point. The point is rescheduled on the head, none is lost, and a
second run skips every point. Slow tier: about 3-6 minutes on two cores.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
TFC = ROOT / "examples" / "models" / "tfc_w1a1.onnx"
BIN = Path(sys.executable).parent

# Four points of one CPU each on a cluster of two CPUs (one per node): both nodes work.
SPEC = f"""
frames = 4
simulator = "icarus"
build = false
boards = ["icebreaker"]
foldings = ["auto", "default", {{ target_fps = 20000 }}, {{ target_fps = 60000 }}]

[[models]]
path = "{TFC}"
"""

# The ports each `ray start` takes, by option; a node's are a block from a base.
PORT_OPTIONS = ("--node-manager-port", "--object-manager-port",
                "--dashboard-agent-listen-port", "--dashboard-agent-grpc-port",
                "--metrics-export-port", "--runtime-env-agent-port")
WORKER_PORTS = 40


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _port_block(start: int, size: int) -> int:
    """A base from ``start`` up whose ``size`` ports are all free."""
    for base in range(start, 60000, size):
        if all(_free(p) for p in range(base, base + size)):
            return base
    raise RuntimeError("no free ports for the test cluster")


def _node_args(base: int) -> list[str]:
    args = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--disable-usage-stats"]
    for k, option in enumerate(PORT_OPTIONS):
        args += [option, str(base + 1 + k)]
    return args + ["--min-worker-port", str(base + 10),
                   "--max-worker-port", str(base + 10 + WORKER_PORTS - 1)]


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        out[int(entry)] = (int(stat[stat.rindex(")") + 2:].split()[1]), cmd)
    return out


def _tree(root: int, procs: dict) -> set[int]:
    """``root`` and its descendants."""
    found, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [p for p, (pp, _) in procs.items() if pp == parent and p not in found]
        found.update(children)
        frontier += children
    return found


def _kill(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Cluster:
    """A head and a second node started with ``ray start``, and the means to kill the
    second node or the whole cluster. Its processes are found by the cluster's own temp
    folder (every node's command lines name it), so that cleaning up touches no other Ray
    on the machine, as ``ray stop`` (every Ray of the user) would."""

    def __init__(self, tmp: Path):
        # Ray's socket paths live under its temp folder and may not exceed 107 bytes.
        self.temp = Path(tempfile.mkdtemp(prefix="qray", dir="/tmp"))
        token = tmp / "token"
        token.write_text(os.urandom(32).hex())
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token),
                    "PATH": f"{BIN}:{os.environ['PATH']}"}
        self.head_base = _port_block(26000 + os.getpid() % 1000 * 20, 60)
        self.node_base = _port_block(self.head_base + 60, 60)
        self.address = f"127.0.0.1:{self.head_base}"

    def ray(self, *args, timeout=180):
        run = subprocess.run([str(BIN / "ray"), *args], env=self.env, capture_output=True,
                             text=True, timeout=timeout)
        assert run.returncode == 0, f"ray {' '.join(args)}:\n{run.stdout}\n{run.stderr}"
        return run.stdout

    def start(self):
        self.ray("start", "--head", "--port", str(self.head_base), "--temp-dir",
                 str(self.temp), "--include-dashboard", "false", *_node_args(self.head_base))
        self.ray("start", "--address", self.address, *_node_args(self.node_base))

    def wait_for_nodes(self, count: int, timeout: float = 120):
        """Until ``ray status`` lists ``count`` active nodes."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.ray("status", "--address", self.address)
            active = status.split("Active:")[1].split("Pending:")[0]
            if active.count("node_") >= count or time.monotonic() > deadline:
                break
            time.sleep(2)
        assert active.count("node_") >= count, status

    def second_raylet(self, procs=None) -> int | None:
        procs = procs or _processes()
        flag = f"--node_manager_port={self.node_base + 1}"
        return next((p for p, (_, cmd) in procs.items()
                     if "raylet" in cmd.split(" ")[0] and flag in cmd), None)

    def kill_second_node(self) -> set[int]:
        procs = _processes()
        raylet = self.second_raylet(procs)
        assert raylet is not None, "the second node's raylet is not running"
        pids = _tree(raylet, procs)
        _kill(pids)
        return pids

    def pids(self) -> set[int]:
        return {p for p, (_, cmd) in _processes().items() if str(self.temp) in cmd}

    def stop(self):
        for _ in range(5):
            pids = set()
            for pid in self.pids():
                pids |= _tree(pid, _processes())
            if not pids:
                break
            _kill(pids)
            time.sleep(1)
        shutil.rmtree(self.temp, ignore_errors=True)


def _attempts(results: Path) -> dict[str, list[dict]]:
    """Point id -> its attempts so far (``attempts.jsonl`` of each point's folder)."""
    out = {}
    for folder in (results / "points").glob("*"):
        path = folder / "attempts.jsonl"
        if path.is_file():
            out[folder.name] = [json.loads(line) for line in path.read_text().splitlines()
                                if line.strip()]
    return out


def _on_node(attempt: dict, raylet: int | None, procs: dict) -> bool:
    """The attempt's Ray worker runs under ``raylet``."""
    return raylet is not None and attempt.get("pid") in _tree(raylet, procs)


def test_sweep_survives_a_node_killed_mid_sweep(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    results = tmp_path / "results"
    cluster = Cluster(tmp_path)
    try:
        cluster.start()
        cluster.wait_for_nodes(2)
        sweep = subprocess.Popen([str(BIN / "qloom"), "sweep", str(spec), "-o", str(results),
                                  "--address", cluster.address], env=cluster.env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        # Kill the second node once a point has run on it for a few seconds (its tools
        # have started: the kill lands in the middle of a point, not before it).
        victim, deadline = None, time.monotonic() + 600
        while victim is None and sweep.poll() is None and time.monotonic() < deadline:
            procs = _processes()
            raylet = cluster.second_raylet(procs)
            for point, attempts in _attempts(results).items():
                if attempts and _on_node(attempts[-1], raylet, procs):
                    victim = (point, attempts[-1])
            time.sleep(0.5 if victim is None else 3)    # found: let its tools start
        assert victim is not None, "no point ran on the second node"
        killed = cluster.kill_second_node()
        assert victim[1]["pid"] in killed
        output, _ = sweep.communicate(timeout=900)
        assert sweep.returncode == 0, output

        rows = json.loads((results / "results.json").read_text())["rows"]
        assert len(rows) == 4 and all(r["status"] == "ok" for r in rows), output
        assert all(r["mismatches"] == 0 and r["frames"] == 4 for r in rows)
        point = next(r for r in rows if r["id"] == victim[0])
        assert point["attempts"] == 2, point
        assert point["node_id"] != victim[1]["node_id"]      # rescheduled on the head

        again = subprocess.run([str(BIN / "qloom"), "sweep", str(spec), "-o", str(results),
                                "--address", cluster.address], env=cluster.env,
                               capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "4 points: 4 with results for their inputs (skipped), 0 to run" in again.stderr
    finally:
        cluster.stop()
        assert not cluster.pids(), "the test cluster's processes outlived it"
