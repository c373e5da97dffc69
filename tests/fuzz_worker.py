"""One process that loads, compiles, checks and simulates fuzz cases, one request at a time.

Started by ``FuzzWorker`` (below) with its data segment limited (``RLIMIT_DATA``; not ``RLIMIT_AS``: wasmtime, which runs
Amaranth's Yosys, reserves 4 GB of address space up front), so a
case that allocates beyond the limit fails here instead of taking the machine; each case
also has an alarm, and the parent kills the whole process group when even that does not
fire (a hang inside C code). Requests are JSON lines on stdin; each result is a JSON file,
announced by one line on the report pipe (stdout belongs to the tools).

Result ``status``: ``refused`` (a QloomError: fine), ``compiled`` (compiled, checked against
execute_onnx and, when asked, simulated bit exact: fine), or a failure: ``traceback`` (any
other exception), ``wrong`` (the network differs from execute_onnx), ``sim_mismatch``,
``reference_failed`` (qloom compiled what qonnx cannot execute), ``hang``, ``crash``.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

MEMORY_LIMIT = 2 << 30
OK = ("refused", "compiled")


class _Alarm(BaseException):
    pass


def _on_alarm(signum, frame):
    raise _Alarm()


def _inputs(path, net, frames, seed):
    """Random float frames; integers of the type a graph input is annotated with (qonnx
    refuses other values there)."""
    import numpy as np
    import onnx
    rng = np.random.default_rng(seed)
    shape = (frames, *net.input_shape[1:])
    graph = onnx.load(path).graph
    note = {a.tensor_name: p.value for a in graph.quantization_annotation
            for p in a.quant_parameter_tensor_names if p.key == "finn_datatype"}
    kind = note.get(graph.input[0].name, "")
    if kind == "BIPOLAR":
        return rng.choice([-1.0, 1.0], shape).astype(np.float32)
    if kind.startswith(("INT", "UINT", "BINARY")):
        from qonnx.core.datatype import DataType
        t = DataType[kind]
        return rng.integers(int(t.min()), int(t.max()) + 1, shape).astype(np.float32)
    x = rng.uniform(-1.5, 1.5, shape)
    scale = np.asarray(net.input_scale, np.float64)
    if scale.size == 1:     # on the fixed-point grid of a float input (what qloom documents)
        x = np.round(x / scale) * scale
    return x.astype(np.float32)


def run_case(req: dict) -> dict:
    import warnings

    from qloom.errors import InternalError, QloomError
    from qloom.flows.compile.steps import compile_model
    from qloom.nn.check import compare_with_qonnx

    result = {"status": None}
    out = Path(tempfile.mkdtemp(prefix="fuzz-")) / "out"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stage = "compile"
        try:
            signal.alarm(req["timeout"])
            if req.get("load_only"):
                from qloom.nn.load import load
                stage = "load"
                net = load(req["path"])
            else:
                net = compile_model(req["path"], out).network
            result["layers"] = len(net.layers)
            if req.get("check", True):
                stage = "check"
                x = _inputs(req["path"], net, req.get("frames", 3), req.get("seed", 0))
                try:
                    report = compare_with_qonnx(req["path"], net, x)
                except QloomError:
                    raise
                except Exception as e:
                    result.update(status="reference_failed",
                                  message=f"{type(e).__name__}: {e}",
                                  trace=traceback.format_exc())
                    return result
                if not report.ok:
                    result.update(status="wrong", message=report.summary())
                    return result
                result["ties"] = report.tie_frames
                if req.get("simulate"):
                    stage = "simulate"
                    from qloom.flows.simulate import simulate
                    sim = simulate(out, inputs=x, simulator="icarus", progress=False,
                                   network=net)
                    result["simulated"] = sim["frames"]
                    if sim["mismatches"]:
                        result.update(status="sim_mismatch", message=json.dumps(sim)[:2000])
                        return result
            result["status"] = "compiled"
        except InternalError as e:      # a bug reported politely is still a bug
            result.update(status="traceback", message=str(e), stage=stage,
                          trace="".join(traceback.format_exception(e.cause or e)))
        except QloomError as e:
            result.update(status="refused", message=str(e), error=type(e).__name__,
                          stage=stage)
        except _Alarm:
            result.update(status="hang", message=f"over {req['timeout']} s in {stage}")
        except BaseException as e:     # MemoryError, RecursionError, ... all count
            result.update(status="traceback", message=f"{type(e).__name__}: {e}",
                          trace=traceback.format_exc(), stage=stage)
        finally:
            signal.alarm(0)
            result["warnings"] = [f"{w.category.__name__}: {str(w.message)[:200]}"
                                  for w in caught]
            subprocess.run(["rm", "-rf", str(out.parent)])
    result["max_rss_mb"] = max(resource.getrusage(who).ru_maxrss for who in
                               (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) / 1024
    return result


def main():
    report = os.fdopen(int(sys.argv[1]), "w", buffering=1)
    resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_LIMIT, MEMORY_LIMIT))
    signal.signal(signal.SIGALRM, _on_alarm)
    import qloom.flows.compile.steps  # noqa: F401  (imports once, outside the cases' alarms)
    import qloom.nn.check  # noqa: F401
    for line in sys.stdin:
        req = json.loads(line)
        result = run_case(req)
        Path(req["result"]).write_text(json.dumps(result))
        report.write(req["result"] + "\n")


class FuzzWorker:
    """The parent's handle on one worker process; restarts it after a hang or a crash."""

    def __init__(self, log_dir: Path, env=None):
        self.log_dir, self.env, self.proc, self.count = Path(log_dir), env, None, 0

    def _start(self):
        read, write = os.pipe()
        self.log = open(self.log_dir / f"worker-{os.getpid()}-{self.count}.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(write)], stdin=subprocess.PIPE, stdout=self.log,
            stderr=subprocess.STDOUT, pass_fds=(write,), start_new_session=True,
            env=self.env, cwd=str(self.log_dir))
        os.close(write)
        self.report = os.fdopen(read, "r")

    def stop(self):
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.report.close()
            self.log.close()
            self.proc = None

    def run(self, path: Path, *, timeout: int, **options) -> dict:
        if self.proc is None:
            self._start()
        self.count += 1
        result_path = self.log_dir / f"result-{os.getpid()}-{self.count}.json"
        req = {"path": str(path), "result": str(result_path), "timeout": timeout, **options}
        self.proc.stdin.write((json.dumps(req) + "\n").encode())
        self.proc.stdin.flush()
        # the alarm covers the case; allow a margin for a slow start and the cleanup
        ready, _, _ = select.select([self.report], [], [], timeout + 30)
        line = self.report.readline() if ready else None
        if not line:
            died = self.proc.poll()
            self.stop()
            if ready:
                return {"status": "crash", "message": f"worker exited with {died}"}
            return {"status": "hang", "message": f"no answer within {timeout + 30} s"}
        return json.loads(result_path.read_text())


if __name__ == "__main__":
    main()
