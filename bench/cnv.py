"""CNV-w1a1 on the ULX3S-85F: frames per second against board resources at several
foldings (issue 13), with FINN's published figure for the same topology beside them.

Each folding is a real ``qloom compile`` of tests/nets/cnv_w1a1.onnx (the brevitas CNV
topology: six 3x3 convolutions of 64-256 channels on 32x32x3, three dense layers; binary
weights and activations) for the board: the folding's ideal cycles per frame (its
bottleneck engine), the frames per second that gives at the board's clock, and the
estimated LUT4 / FF / DP16KD / DSP with their share of the device. Designs that have been
built (``--built OUT``, a folder ``qloom build`` finished) add the measured resources and
Fmax from OUT/build/report.json.

    python bench/cnv.py [--board ulx3s-85f] [--foldings default,1000,3000,auto]
                        [--built OUT ...] [--json FILE]

A folding is ``default`` (one PE and SIMD per layer), a frame rate (``--target-fps``) or
``auto`` (the fastest folding whose estimate fits the board).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "nets" / "cnv_w1a1.onnx"

# FINN's own figure for CNV-w1a1, quoted for reference (not run here): finn-examples'
# cnv-w1a1 build on the Pynq-Z1 (Zynq-7020) measures 3,020 frames/s at 100 MHz.
FINN = {"design": "FINN cnv-w1a1 (finn-examples, Pynq-Z1)", "fps": 3020, "clock_mhz": 100}


def compile_folding(folding: str, board: str, out: Path) -> dict:
    import qloom
    options = {"board": board}
    if folding == "auto":
        options["fold"] = "auto"
    elif folding != "default":
        options["target_fps"] = float(folding)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        design = qloom.compile(str(MODEL), out, **options)
    r = design.report
    return {"folding": folding, "ii_cycles": r["ideal_ii_cycles"], "clock_mhz": r["clock_mhz"],
            "fps": r["fps_at_clock"], "bottleneck": r["bottleneck"],
            "estimate": r["resources"], "budget": r["board"]["budget"],
            "fits": r["board"]["fits"]}


def measured(out: Path) -> dict | None:
    """Resources and Fmax of a built design (OUT/build/report.json), or None."""
    path = Path(out) / "build" / "report.json"
    if not path.exists():
        return None
    b = json.loads(path.read_text())
    return {"resources": b.get("measured"), "fmax_mhz": b.get("fmax_mhz"),
            "target_mhz": b.get("target_mhz"), "timing_met": b.get("timing_met")}


def _share(used, total) -> str:
    return f"{used:,} ({100 * used / total:.0f}%)" if total else f"{used:,}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--board", default="ulx3s-85f")
    p.add_argument("--foldings", default="default,1000,3000,auto")
    p.add_argument("--built", type=Path, action="append", default=[],
                   help="a built OUT folder of this model: its measured resources and Fmax")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="qloom-cnv-") as tmp:
        for k, folding in enumerate(args.foldings.split(",")):
            print(f"[bench] compiling CNV-w1a1 for {args.board}, folding {folding} ...",
                  flush=True)
            rows.append(compile_folding(folding.strip(), args.board, Path(tmp) / str(k)))
    head = (f"{'folding':>9} {'cycles/frame':>12} {'frames/s':>9} {'LUT4':>14} {'FF':>14} "
            f"{'BRAM':>10} {'DSP':>5} fits")
    print(f"\nCNV-w1a1 on {args.board}, estimated (frames/s at {rows[0]['clock_mhz']:g} MHz)")
    print(head)
    for r in rows:
        e, b = r["estimate"], r["budget"]
        print(f"{r['folding']:>9} {r['ii_cycles']:>12,} {r['fps']:>9,.0f} "
              f"{_share(e['lut'], b['lut']):>14} {_share(e['ff'], b['ff']):>14} "
              f"{_share(e['bram'], b['bram']):>10} {e['dsp']:>5} {'yes' if r['fits'] else 'no'}")
    built = []
    for out in args.built:
        m = measured(out)
        if m is None:
            print(f"{out}: not built (no build/report.json)")
            continue
        report = json.loads((out / "report.json").read_text())
        m.update(out=str(out), ii_cycles=report["ideal_ii_cycles"])
        built.append(m)
        res = m["resources"] or {}
        fps = m["fmax_mhz"] * 1e6 / m["ii_cycles"] if m["fmax_mhz"] else None
        print(f"built {out}: II {m['ii_cycles']:,} cycles, measured "
              + ", ".join(f"{k} {v}" for k, v in res.items())
              + f"; Fmax {m['fmax_mhz']} MHz (built for {m['target_mhz']} MHz, timing "
              + ("met" if m["timing_met"] else "NOT met") + ")"
              + (f"; {fps:,.0f} frames/s at Fmax" if fps else ""))
    print(f"\nreference: {FINN['design']}: {FINN['fps']:,} frames/s at {FINN['clock_mhz']} MHz "
          f"(published; not run here)")
    for r in rows:
        print(f"  qloom {r['folding']:>8}: {r['fps'] / FINN['fps']:.2f}x FINN's frames/s")
    if args.json:
        args.json.write_text(json.dumps({"estimated": rows, "built": built, "finn": FINN},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
