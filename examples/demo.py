"""`make demo`: a real published model from QONNX to a verified accelerator and a bitstream.

1. load the bundled TFC-w1a1 (binary MNIST MLP, Brevitas/FINN) and print its layer table;
2. check the integer reference against qonnx's own executor on 200 MNIST-like inputs;
3. compile it for the iCEBreaker (iCE40UP5K), folding chosen to fit the board;
4. simulate 200 frames of the generated Verilog in Icarus (cocotb), bit for bit;
5. build the bitstream with Yosys + nextpnr (YoWASP) and print its report.

Run from the repository root: `make demo` (or `.venv/bin/python examples/demo.py`).
Pass `--model PATH --board B` to try another model or board, `--skip-build` to stop
after simulation.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def banner(text):
    print(f"\n=== {text} ===", flush=True)


def mnist_like(n, seed=0):
    """Pixels in [0, 1] on the 1/255 grid, mostly dark with bright strokes, like MNIST."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, size=(n, 1, 28, 28)) * (rng.random((n, 1, 28, 28)) < 0.2)
    return (x / 255.0).astype(np.float32)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=str(HERE / "models" / "tfc_w1a1.onnx"))
    p.add_argument("--board", default="icebreaker")
    p.add_argument("--out", default="out/demo")
    p.add_argument("--frames", type=int, default=200)
    p.add_argument("--skip-build", action="store_true")
    args = p.parse_args(argv)

    import qloom
    from qloom.nn.check import compare_with_qonnx
    from qloom.nn.summary import render_table, summarize

    t0 = time.perf_counter()
    banner(f"1. load and inspect {Path(args.model).name}")
    net = qloom.load(args.model)
    print(render_table(summarize(net)))

    banner("2. integer reference vs qonnx execute_onnx, 200 inputs")
    x = mnist_like(200)
    report = compare_with_qonnx(args.model, net, x)
    print(report.summary())
    if not report.ok:
        return 1

    banner(f"3. compile for {args.board} (--fold auto: fastest folding that fits)")
    design = qloom.compile(args.model, args.out, board=args.board, fold="auto",
                           progress=lambda m: print(f"  {m}", flush=True))
    print((Path(args.out) / "report.md").read_text())

    banner(f"4. simulate {args.frames} frames of the Verilog (Icarus, cocotb), bit for bit")
    res = design.simulate(mnist_like(args.frames, seed=1))
    print(json.dumps({k: res[k] for k in ("frames", "mismatches", "latency_cycles",
                                           "ii_cycles", "ideal_ii_cycles", "simulator")}))
    if res["mismatches"]:
        print(f"MISMATCH: {res['first_mismatch']}")
        return 1

    if not args.skip_build:
        banner(f"5. bitstream for {args.board} (Yosys + nextpnr from YoWASP)")
        from qloom.flows.toolchain.build import build_board
        built = build_board(args.out, board=args.board)
        r = built.report
        print(f"bitstream: {built.bitstream}")
        print(f"Fmax {r['fmax_mhz']:.1f} MHz at a target of {r['target_mhz']:g} MHz "
              f"(timing {'met' if r['timing_met'] else 'NOT met'})")
        for kind in ("lut", "ff", "dsp", "bram"):
            use = r["utilization"][kind]
            est = (r.get("estimated") or {}).get(kind)
            note = f"   (estimated {est})" if est is not None else ""
            if kind == "lut" and r.get("estimated_logic_cells") is not None:
                # iCE40: nextpnr counts logic cells, each one LUT4 and one flip-flop
                note = (f" logic cells (estimated {r['estimated_logic_cells']}; LUT4 "
                        f"{r['measured']['lut']}, estimated {est})")
            print(f"  {kind:5s} {use['used']:>6} of {use['available']:>6}{note}")

    print(f"\ndemo done in {time.perf_counter() - t0:.0f} s; outputs in {args.out}/")
    return 0


def run() -> int:
    """``main`` with qloom's own errors and an interrupt (Ctrl-C; SIGTERM or SIGHUP during
    the build) reported in one line instead of a traceback. Every step writes its folder
    whole or not at all, so what ``out/demo`` holds after an interrupt is complete."""
    from qloom.errors import QloomError
    try:
        return main()
    except QloomError as e:
        print(f"demo: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("demo: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(run())
