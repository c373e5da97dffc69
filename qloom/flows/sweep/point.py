"""One sweep point in a process of its own: compile -> simulate -> build with qloom's own
Python steps, into ``POINT/design``, and its outcome as JSON.

``python -m qloom.flows.sweep.point REQUEST.json OUTCOME.json --parent PID`` is started
by the point's Ray task (``sweep_task``) as the leader of a new process group. A process
per point keeps the tools' output in the point's log without swapping a shared worker's
streams, and lets the whole point (simulators, Yosys, nextpnr) end when its task is killed.
That takes two processes: Ray kills a dead worker's children with SIGKILL, which no
handler sees, so the process Ray knows only waits for a forked child that does the work;
the kernel sends that child SIGTERM when its parent dies (``PR_SET_PDEATHSIG``), and the
child then kills the process group, its tools with it.

The outcome says ``ok`` or ``failed``; a failure whose cause may pass (a tool failed, a
bug, a crash) is marked ``retry``, one the inputs decide (the design does not fit, a bad
fold file) is not: running it again would give the same answer.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

from qloom.errors import InternalError, QloomError, ToolError

__all__ = ["run_point", "main"]

_PR_SET_PDEATHSIG = 1


def _on_parent_death(parent: int, signum: int) -> bool:
    """Ask the kernel for ``signum`` when the parent dies; False if it has died already.
    Linux only; elsewhere a killed worker may leave its point running, and that is all."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
    except (AttributeError, OSError):
        pass
    return os.getppid() == parent


def _supervise(worker: int):
    """Fork. The parent dies with the Ray worker and otherwise waits for the child and
    ends as it ended (the same exit status or signal); the child returns and does the
    work, ending the whole process group if the parent dies first."""
    if not _on_parent_death(worker, signal.SIGKILL):
        os._exit(137)
    supervisor = os.getpid()
    sys.stdout.flush()
    child = os.fork()
    if child == 0:
        def end_group(signum, frame):
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.killpg(os.getpgid(0), signal.SIGKILL)
        signal.signal(signal.SIGTERM, end_group)
        if not _on_parent_death(supervisor, signal.SIGTERM):
            end_group(signal.SIGTERM, None)
        return
    # The task's own SIGTERM (a cancelled task) reaches the child through its death signal.
    _, status = os.waitpid(child, 0)
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status))


def _compile_part(report: dict) -> dict:
    return {k: report.get(k) for k in ("clock_mhz", "folding", "bottleneck", "ideal_ii_cycles",
                                       "fps_at_clock", "resources", "board", "step_seconds")}


def _build_part(report: dict) -> dict:
    keep = ("board", "device", "target_mhz", "fmax_mhz", "timing_met", "measured", "estimated",
            "estimate_error", "estimated_logic_cells", "bitstream")
    return {k: report.get(k) for k in keep}


def run_point(request: dict, folder: Path, log=print, out: dict | None = None) -> dict:
    """Compile, simulate and (unless ``build`` is false) build the point; returns the
    measurements. Raises what the steps raise; ``out`` then holds what was measured
    before (a build refused as too big still shows its estimate), ``step`` the step
    that failed."""
    from qloom.nn.dtypes import parse_dtype
    from qloom.flows.toolchain.build import build_board
    from qloom.flows.compile.steps import compile_model
    from qloom.flows.simulate import simulate

    design = folder / "design"
    options = dict(request.get("load_options") or {})
    if "input_type" in options:
        options["input_type"] = parse_dtype(options["input_type"])
    precision = options.pop("precision", None)      # a float model: OUT/quantized.onnx
    if precision is not None:
        from qloom.nn.quantize import precision_config
        precision = precision_config(precision)
    out = {} if out is None else out
    seconds = out["seconds"] = {}

    out["step"] = "compile"
    t0 = time.perf_counter()
    log(f"[sweep] compile {request['model']} for {request['board']}, folding "
        f"{request['folding']}")
    compiled = compile_model(request["model"], design, board=request["board"],
                             clock_mhz=request.get("clock_mhz"),
                             target_fps=request.get("target_fps"), fold=request.get("fold"),
                             load_options=options, precision=precision,
                             progress=lambda msg: log(f"[sweep] compile: {msg}"))
    seconds["compile"] = round(time.perf_counter() - t0, 3)
    out["compile"] = _compile_part(compiled.report)

    out["step"] = "simulate"
    t0 = time.perf_counter()
    log(f"[sweep] simulate {request['frames']} random frames on {request['simulator']}")
    sim = simulate(design, random=request["frames"], simulator=request["simulator"],
                   seed=request.get("seed", 0), progress=False, network=compiled.network)
    seconds["simulate"] = round(time.perf_counter() - t0, 3)
    out["simulate"] = sim
    if sim["mismatches"]:
        raise InternalError(f"simulation: {sim['mismatches']} of {sim['frames']} frames differ "
                            f"from the reference (first: {sim['first_mismatch']}); this is a "
                            f"bug in qloom")

    if request.get("build", True):
        out["step"] = "build"
        t0 = time.perf_counter()
        log(f"[sweep] build for {request['board']}")
        built = build_board(design, retry=request.get("timing_retry", True))
        seconds["build"] = round(time.perf_counter() - t0, 3)
        out["build"] = _build_part(built.report)
    del out["step"]
    return out


def _write_json(path: Path, value):
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value, indent=1) + "\n")
    os.replace(tmp, path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m qloom.flows.sweep.point")
    p.add_argument("request", type=Path)
    p.add_argument("outcome", type=Path)
    p.add_argument("--parent", type=int, required=True)
    args = p.parse_args(argv)
    _supervise(args.parent)
    request = json.loads(args.request.read_text())
    start = time.perf_counter()
    measured = {}
    try:
        outcome = {"status": "ok", "error": None, "error_type": None, "retry": False,
                   **run_point(request, args.request.parent,
                               log=lambda msg: print(msg, flush=True), out=measured)}
    except QloomError as e:
        # Tool failures and qloom bugs may pass (memory, a flaky tool); the rest is final.
        retry = isinstance(e, (ToolError, InternalError))
        if isinstance(e, InternalError):
            traceback.print_exc()
        outcome = {**measured, "status": "failed", "error": str(e),
                   "error_type": type(e).__name__, "retry": retry}
    except Exception as e:            # a bug outside qloom's errors: keep the traceback
        traceback.print_exc()
        outcome = {**measured, "status": "failed", "error": f"{type(e).__name__}: {e}",
                   "error_type": type(e).__name__, "retry": True}
    outcome["wall_seconds"] = round(time.perf_counter() - start, 3)
    print(f"[sweep] {outcome['status']}"
          + (f": {outcome['error']}" if outcome["error"] else ""), flush=True)
    _write_json(args.outcome, outcome)
    return 0


if __name__ == "__main__":
    sys.exit(main())
