"""Time from a QONNX model to a checked design, qloom against hls4ml, side by side.

qloom: `compile` (load, map, fold, Verilog) plus a 100-frame cycle-accurate RTL simulation
(Icarus, cocotb) checked bit for bit against the reference.
hls4ml: `convert_from_onnx_model` plus `compile()` (g++ builds its C++ emulation) plus
`predict` on the same 100 inputs: the peer's fastest route to a checkable model, with no
vendor tool. Both run on the jet-tagging model in one process, one after the other.

Needs the `peers` extra: `.venv/bin/pip install -e '.[peers]'`.
Usage: python bench/compile_speed.py [--model PATH] [--frames 100] [--sim icarus|verilator]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def jet_inputs(n, seed=0):
    """Jet-tagging features: roughly standardized, on the INT16 / 2**-10 input grid."""
    rng = np.random.default_rng(seed)
    return (np.round(rng.normal(0, 1.5, size=(n, 16)) * 1024) / 1024).astype(np.float32)


def time_qloom(model, x, work, sim):
    import qloom
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the input-grid note for the jet tagger
        design = qloom.compile(model, work / "qloom_out")
    t1 = time.perf_counter()
    result = design.simulate(x, simulator=sim, progress=False)
    t2 = time.perf_counter()
    if result["mismatches"]:
        raise SystemExit(f"qloom simulation mismatched: {result['first_mismatch']}")
    return {"compile_s": t1 - t0, "simulate_s": t2 - t1, "total_s": t2 - t0,
            "ii_cycles": result["ii_cycles"], "latency_cycles": result["latency_cycles"]}


def time_hls4ml(model, x, work):
    try:
        import hls4ml
    except ImportError:
        raise SystemExit("hls4ml is not installed: .venv/bin/pip install -e '.[peers]'")
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):   # hls4ml prints its whole topology
        hm = _hls4ml_model(hls4ml, model, work)
    t1 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        hm.compile()
    t2 = time.perf_counter()
    hm.predict(np.ascontiguousarray(x))
    t3 = time.perf_counter()
    return {"convert_s": t1 - t0, "compile_s": t2 - t1, "predict_s": t3 - t2, "total_s": t3 - t0}


def _hls4ml_model(hls4ml, model, work):
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean
    from qonnx.transformation.gemm_to_matmul import GemmToMatMul
    from qonnx.util.cleanup import cleanup_model

    m = cleanup_model(ModelWrapper(str(model)))
    m = cleanup_model(m.transform(ConvertToChannelsLastAndClean()).transform(GemmToMatMul()))
    cfg = hls4ml.utils.config.config_from_onnx_model(
        m, granularity="name", backend="Vitis", default_precision="fixed<16,6>")
    return hls4ml.converters.convert_from_onnx_model(
        m, output_dir=str(work / "hls4ml_prj"), io_type="io_parallel", backend="Vitis",
        hls_config=cfg)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=str(ROOT / "examples" / "models" / "jettagging_w6a6.onnx"))
    p.add_argument("--frames", type=int, default=100)
    p.add_argument("--sim", default="icarus", choices=["icarus", "verilator"])
    args = p.parse_args(argv)
    x = jet_inputs(args.frames)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        q = time_qloom(args.model, x, work, args.sim)
        h = time_hls4ml(args.model, x, work)
    print(f"model: {Path(args.model).name}, {args.frames} frames")
    print(f"qloom  compile {q['compile_s']:6.2f} s + RTL simulation ({args.sim}) "
          f"{q['simulate_s']:6.2f} s = {q['total_s']:6.2f} s  (bit-exact, "
          f"II {q['ii_cycles']} cycles, latency {q['latency_cycles']} cycles)")
    print(f"hls4ml convert {h['convert_s']:6.2f} s + C++ compile {h['compile_s']:6.2f} s + "
          f"predict {h['predict_s']:5.2f} s = {h['total_s']:6.2f} s  (C emulation, no RTL)")
    print(f"ratio hls4ml / qloom = {h['total_s'] / q['total_s']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
