"""ECP5 carry-chain bench: how many TRELLIS_COMB nextpnr packs a built design into with
and without the carry-chain pass (``qloom.flows.toolchain.ecp5_carry``), beside Yosys' LUT4 count.

Reads the Yosys netlist an ECP5 ``qloom build`` keeps (``OUT/build/board_top.json``) and
runs ``nextpnr-ecp5 --pack-only`` on it twice (a minute or two each for a design of 40k
LUT4s); nothing in OUT changes.

    python bench/carry_chains.py OUT [OUT ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from qloom.boards.catalog import get_board
from qloom.flows.toolchain.ecp5_carry import trim_carry_chains
from qloom.flows.toolchain.ecp5_pack import packed_cells


def row(out: Path) -> dict:
    report = json.loads((out / "build" / "report.json").read_text())
    board = get_board(report["board"])
    if board.family.value != "ecp5":
        raise SystemExit(f"{out}: built for {board.name} ({board.family.value}), not an ECP5")
    netlist = json.loads((out / "build" / "board_top.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        before = packed_cells(netlist, board.device, board.package, work, "without")
        feed_ins, feed_outs = trim_carry_chains(netlist)
        after = packed_cells(netlist, board.device, board.package, work, "with")
    return {"design": str(out), "yosys_lut4": report["measured"]["lut"],
            "feed_ins": feed_ins, "feed_outs": feed_outs,
            "comb_without": before, "comb_with": after}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outs", nargs="+", type=Path, help="output folders built for an ECP5")
    args = parser.parse_args(argv)
    print(f"{'design':30} {'LUT4':>7} {'feed-in':>7} {'without':>8} {'with':>8} "
          f"{'ratio':>6} {'over LUT4':>10}")
    for out in args.outs:
        r = row(out)
        print(f"{Path(r['design']).name:30} {r['yosys_lut4']:7d} {r['feed_ins']:7d} "
              f"{r['comb_without']:8d} {r['comb_with']:8d} "
              f"{r['comb_with'] / r['comb_without']:6.3f} "
              f"{r['comb_with'] / r['yosys_lut4'] - 1:+10.1%}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
