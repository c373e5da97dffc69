"""Sustained read bandwidth of the SDRAM controller against the SDRAM model, as a fraction
of the peak (one 16-bit word per clock), for a stream of sequential read bursts.

    python bench/sdram.py [--clocks 143 133 100] [--bursts 8 4] [--intervals 6] [--json FILE]

(``bench/results/sdram.json`` holds the last recorded run.)

Per clock and burst length: the ULX3S chip's timing at that clock (``ULX3S_SDRAM.cycles``,
the power-up pause cut to 40 cycles: it comes before the measurement), ``--intervals``
refresh intervals of back-to-back reads of consecutive bursts (crossing rows and banks),
the reader always ready. Printed: the words per cycle between the first and the last word
(measured), the controller's own estimate (``sequential_read_efficiency``, what the
planner uses), and the sustained MB/s against the peak.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def measure(mhz: float, burst_length: int, intervals: int) -> dict:
    from qloom.hw.sdram import ULX3S_SDRAM, SdramController, sequential_read_efficiency
    from qloom.sim.sdram_run import Read, run_sdram

    cycles = dataclasses.replace(ULX3S_SDRAM.cycles(mhz), power_up=40)
    geometry = ULX3S_SDRAM.geometry
    dut = SdramController(geometry=geometry, cycles=cycles, burst_length=burst_length)
    n = intervals * cycles.t_refi // burst_length
    start = time.monotonic()
    run = run_sdram(dut, [Read(b) for b in range(n)])
    seconds = time.monotonic() - start
    span = run.read_cycles[-1] - run.read_cycles[0] + 1
    fraction = len(run.read_cycles) / span
    peak = mhz * geometry.data_bits / 8
    return {"clock_mhz": mhz, "burst_length": burst_length, "cas_latency": cycles.cas_latency,
            "words": len(run.read_cycles), "cycles": span, "fraction": round(fraction, 5),
            "estimate": round(sequential_read_efficiency(cycles, burst_length,
                                                         geometry.columns), 5),
            "refreshes": run.model.commands["REFRESH"] - cycles.init_refreshes,
            "activates": run.model.commands["ACTIVATE"],
            "sustained_mb_s": round(fraction * peak, 1), "peak_mb_s": round(peak, 1),
            "sim_seconds": round(seconds, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clocks", type=float, nargs="+", default=[143.0, 133.0, 100.0])
    ap.add_argument("--bursts", type=int, nargs="+", default=[8, 4])
    ap.add_argument("--intervals", type=int, default=6,
                    help="refresh intervals of reads per measurement (default 6)")
    ap.add_argument("--json", type=Path, help="also write the rows to this file")
    args = ap.parse_args(argv)
    rows = []
    print(f"{'MHz':>5} {'BL':>2} {'CL':>2} {'words':>6} {'cycles':>6} {'measured':>8} "
          f"{'estimate':>8} {'refresh':>7} {'MB/s':>6} {'peak':>6} {'sim s':>5}")
    for mhz in args.clocks:
        for bl in args.bursts:
            r = measure(mhz, bl, args.intervals)
            rows.append(r)
            print(f"{mhz:5g} {bl:2d} {r['cas_latency']:2d} {r['words']:6d} {r['cycles']:6d} "
                  f"{r['fraction']:8.4f} {r['estimate']:8.4f} {r['refreshes']:7d} "
                  f"{r['sustained_mb_s']:6.1f} {r['peak_mb_s']:6.1f} {r['sim_seconds']:5.1f}",
                  flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
