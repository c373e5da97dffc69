"""Block RAM packing against Yosys, and the bit efficiency of a compiled design.

    python bench/memory.py shapes [--family ecp5|ice40] [--shapes DxW ...] [--json FILE]
    python bench/memory.py design OUT

``shapes`` builds a read-only memory of each shape (random contents, placed in block RAM
the way the matrix unit places its weights: ``qloom.hw.weight_mem.rom``), synthesizes it
with Yosys for the family and prints the blocks Yosys used beside the packing the cost
model counts (``qloom.hw.mem_pack.pack``) and its bit efficiency. The default shapes are
the narrow, deep, shallow and wide corners where one aspect ratio alone wastes blocks.

``design`` prints, per engine of a compiled design (``qloom compile``), the weight and
threshold memories' stored bits, blocks and bit efficiency from its report.json, and the
block RAMs Yosys used when the design has been built (``qloom build``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_SHAPES = {
    "ecp5": ["512x36", "512x22", "1024x18", "2048x13", "16384x49", "8192x98", "4096x5",
             "700x40", "256x100", "3000x20"],
    "ice40": ["256x16", "300x13", "2048x13", "512x24", "1024x7", "4096x3", "200x40",
              "8192x1", "6000x3"],
}


def rom_component(depth: int, width: int, seed: int = 1):
    """A component reading one word a cycle from a ``depth`` x ``width`` block ROM."""
    from amaranth.hdl import Module
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    from qloom.hw.weight_mem import RamStyle, rom

    class Rom(wiring.Component):
        def __init__(self):
            super().__init__({"addr": In(range(depth)), "data": Out(width)})

        def elaborate(self, platform):
            m = Module()
            rng = random.Random(seed)
            m.submodules.mem = mem = rom(width, [rng.getrandbits(width) for _ in range(depth)],
                                         RamStyle.BLOCK)
            port = mem.read_port()
            m.d.comb += [port.addr.eq(self.addr), self.data.eq(port.data)]
            return m
    return Rom()


def bench_shapes(family: str, shapes: list[str], keep: Path | None) -> list[dict]:
    from qloom.flows.toolchain.synth import synthesize
    from qloom.hw.mem_pack import pack
    rows = []
    print(f"{'shape':>10} {'family':>6} {'yosys':>6} {'packed':>6} {'efficiency':>10}  "
          f"packing", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for spec in shapes:
            depth, width = (int(v) for v in spec.lower().split("x"))
            start = time.monotonic()
            build = (keep or Path(tmp)) / f"{family}_{depth}x{width}"
            report = synthesize(rom_component(depth, width), family=family, build_dir=build,
                                progress=False)
            packing = pack(depth, width, family)
            row = {"depth": depth, "width": width, "family": family, "yosys": report.bram,
                   "packed": packing.blocks, "efficiency": round(packing.efficiency, 4),
                   "packing": str(packing), "seconds": round(time.monotonic() - start, 1)}
            rows.append(row)
            mark = "" if row["yosys"] == row["packed"] else "  <- differs"
            print(f"{spec:>10} {family:>6} {row['yosys']:>6} {row['packed']:>6} "
                  f"{100 * row['efficiency']:>9.1f}%  {packing}{mark}", flush=True)
    return rows


def bench_design(out: Path) -> dict:
    report = json.loads((out / "report.json").read_text())
    print(f"{'engine':>16} {'fold':>22} {'BRAM':>5} {'param bits':>11} {'blocks':>6} "
          f"{'efficiency':>10}")
    for row in report["layers"]:
        mem = row.get("bram_memories") or {}
        fold = ",".join(f"{k}={v}" for k, v in row["fold"].items())
        eff = f"{100 * mem['efficiency']:.1f}%" if mem else "-"
        print(f"{row['name']:>16} {fold:>22} {row['resources']['bram']:>5} "
              f"{mem.get('bits', 0):>11,} {mem.get('blocks', 0):>6} {eff:>10}")
    total = report.get("bram_bit_efficiency")
    print(f"estimated block RAMs {report['resources']['bram']}, weight/threshold bit "
          f"efficiency {'-' if total is None else f'{100 * total:.1f}%'}")
    result = {"estimate_bram": report["resources"]["bram"], "bram_bit_efficiency": total}
    build = out / "build" / "report.json"
    if build.is_file():
        built = json.loads(build.read_text())
        util = built.get("utilization", {})
        result["built"] = util
        print(f"built: {json.dumps(util)}")
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("shapes", help="block ROM shapes: Yosys against the packing")
    p.add_argument("--family", choices=("ecp5", "ice40"), default="ecp5")
    p.add_argument("--shapes", nargs="+", metavar="DxW")
    p.add_argument("--json", type=Path, help="write the rows here")
    p.add_argument("--keep", type=Path, help="keep the Yosys runs in this folder")
    d = sub.add_parser("design", help="bit efficiency of a compiled (and built) design")
    d.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "design":
        bench_design(args.out)
        return 0
    rows = bench_shapes(args.family, args.shapes or DEFAULT_SHAPES[args.family], args.keep)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(r["yosys"] == r["packed"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
