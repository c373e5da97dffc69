"""The deepest register-to-register logic of a synthesized netlist, before place and route.

nextpnr needs tens of minutes to route a large ECP5 design and only then names its
critical path; its estimate after placement names none. Yosys' netlist already shows
where the logic is deep: this walks it from every register, block RAM and I/O output to
every register and memory input, adding each cell's own delay and a fixed delay per
routed connection (``hop_ns``: a carry chain's own links cost none). The figures are not
nextpnr's, but the order of the paths is what a routed design's critical paths follow
when the placement is not congested (CNV-w1a1: the sliding windows' control, found here
in seconds, was seven LUT levels where every other path had at most six).

The widest fan-outs from registers are the other half of what routing makes slow: one
register whose loads sit all over the die (CNV-w1a1: a weight memory's bank select, read
by 512 LUTs beside block RAMs in every row, routed 11.7 ns) is a critical path of one
logic level. ``widest_fanouts`` lists them.

    python -m qloom.flows.toolchain.logic_depth NETLIST.json [--hop 0.9] [--top 20] [--fanout]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LogicPath", "deepest_paths", "widest_fanouts"]

# Cells whose outputs start a path and whose inputs end one, by name prefix.
_SEQUENTIAL = ("TRELLIS_FF", "DP16KD", "TRELLIS_IO", "EHXPLLL", "DCCA", "MULT18X18D",
               "ALU54B", "SB_DFF", "SB_RAM40_4K", "SB_SPRAM256KA", "SB_MAC16", "SB_IO",
               "SB_PLL40", "SB_GB", "$_DFF", "$_SDFF", "$_DFFE", "$dff", "$mem")
# Clock inputs: global networks, not routed through the fabric.
_CLOCK_PORTS = {"CLK", "C", "CLKA", "CLKB", "CLKW", "CLKR", "RCLK", "WCLK", "CLOCK"}
# Carry links: dedicated wires, no routing.
_CARRY_PORTS = {"CIN", "CI", "COUT", "CO"}
# Cell delays (ns, ECP5 speed 6 and iCE40UP5K, rounded from the families' timing data):
# a look-up table, a wide-function mux, a carry cell from a LUT input and along its
# chain, a register's clock to output and a block RAM's (with and without its output
# register), and a distributed RAM's read.
_DELAY = {"lut": 0.45, "mux": 0.3, "carry_in": 0.6, "carry_link": 0.07, "carry_sum": 0.35,
          "ff": 0.45, "bram_outreg": 1.2, "bram": 4.3, "lutram": 0.6, "other": 0.5}
_SETUP_NS = 0.1


@dataclass(frozen=True)
class LogicPath:
    """A path ending at ``end`` (the net into a register or memory input), ``ns`` long
    with ``levels`` cells; ``nets`` from its end back to its start."""

    ns: float
    levels: int
    end: str
    nets: tuple


def _cell_delay(cell: dict, inp: str, out: str) -> float:
    t = cell["type"]
    if t in ("LUT4", "SB_LUT4"):
        return _DELAY["lut"]
    if t in ("PFUMX", "L6MUX21"):
        return _DELAY["mux"]
    if t in ("CCU2C", "SB_CARRY"):
        if inp in _CARRY_PORTS:
            return _DELAY["carry_link"] if out in _CARRY_PORTS else _DELAY["carry_sum"]
        return _DELAY["carry_in"]
    if t == "TRELLIS_DPR16X4":
        return _DELAY["lutram"]
    return _DELAY["other"]


def _source_delay(cell: dict) -> float:
    t = cell["type"]
    if t == "DP16KD":
        outreg = cell.get("parameters", {}).get("REGMODE_A", "NOREG") == "OUTREG"
        return _DELAY["bram_outreg"] if outreg else _DELAY["bram"]
    if t.startswith(("SB_RAM", "SB_SPRAM", "MULT", "SB_MAC")):
        return _DELAY["bram"]
    return _DELAY["ff"]


def _endpoint_ports(cell: dict) -> list:
    """The input ports of a sequential cell (every one, except its clocks)."""
    return [p for p, d in cell["port_directions"].items()
            if d == "input" and "CLK" not in p.upper() and p not in ("C", "CK")]


def _top_module(netlist: dict, module: str | None) -> dict:
    modules = netlist["modules"]
    if module is not None:
        if module not in modules:
            raise KeyError(f"module {module!r} is not in the netlist: {sorted(modules)}")
        return modules[module]
    tops = [m for m in modules.values() if m.get("attributes", {}).get("top")]
    if len(tops) != 1:
        raise KeyError("the netlist has no single top module; name one")
    return tops[0]


def _net_names(mod: dict) -> dict:
    """bit -> the most readable name of a net holding it (user names before $-names)."""
    best = {}
    for name, net in mod["netnames"].items():
        for i, bit in enumerate(net["bits"]):
            if isinstance(bit, int):
                score = (name.startswith("$"), name.count("$"), len(name))
                if bit not in best or score < best[bit][0]:
                    best[bit] = (score, f"{name}[{i}]" if len(net["bits"]) > 1 else name)
    return {bit: v[1] for bit, v in best.items()}


def _drivers(cells: dict) -> dict:
    """bit -> (cell name, output port) driving it."""
    driver = {}
    for cname, cell in cells.items():
        for port, bits in cell["connections"].items():
            if cell["port_directions"].get(port) == "output":
                for bit in bits:
                    if isinstance(bit, int):
                        driver[bit] = (cname, port)
    return driver


def _sequential(cell: dict) -> bool:
    return cell["type"].startswith(_SEQUENTIAL)


def _arrive(bit, cells: dict, driver: dict, arrival: dict, hop_ns: float):
    """Fill ``arrival[b] = (ns, levels, previous bit)`` for ``bit`` and the cone behind it,
    depth first without recursion (carry chains are thousands of cells long)."""
    stack = [bit]
    while stack:
        b = stack[-1]
        if b in arrival:
            stack.pop()
            continue
        if b not in driver:
            arrival[b] = (0.0, 0, None)
            stack.pop()
            continue
        cname, port = driver[b]
        cell = cells[cname]
        if _sequential(cell):
            arrival[b] = (_source_delay(cell), 0, None)
            stack.pop()
            continue
        inputs = [(p, x) for p, xs in cell["connections"].items()
                  if cell["port_directions"].get(p) == "input"
                  for x in xs if isinstance(x, int)]
        if cell["type"] == "TRELLIS_DPR16X4":      # its read: the address only
            inputs = [(p, x) for p, x in inputs if p.startswith("RAD")]
        waiting = [x for _, x in inputs if x not in arrival]
        if waiting:
            stack.extend(waiting)
            continue
        best = (0.0, 0, None)
        for p, x in inputs:
            ns = arrival[x][0] + (0.0 if p in _CARRY_PORTS else hop_ns) \
                + _cell_delay(cell, p, port)
            if ns > best[0]:
                best = (ns, arrival[x][1] + 1, x)
        arrival[b] = best
        stack.pop()


def deepest_paths(netlist, *, hop_ns: float = 0.9, top: int = 20,
                  module: str | None = None) -> list[LogicPath]:
    """The ``top`` longest paths (one per endpoint net name) of the Yosys JSON netlist
    ``netlist`` (a path or its parsed dict), longest first."""
    if not isinstance(netlist, dict):
        netlist = json.loads(Path(netlist).read_text())
    mod = _top_module(netlist, module)
    cells, names = mod["cells"], _net_names(mod)
    driver, arrival, ends = _drivers(cells), {}, []
    for cell in cells.values():
        if not _sequential(cell) or cell["type"].startswith(("TRELLIS_IO", "SB_IO")):
            continue
        for port in _endpoint_ports(cell):
            for bit in cell["connections"].get(port, []):
                if isinstance(bit, int):
                    _arrive(bit, cells, driver, arrival, hop_ns)
                    ns, levels, _ = arrival[bit]
                    ends.append((ns + hop_ns + _SETUP_NS, levels, bit))
    ends.sort(key=lambda e: -e[0])
    paths, seen = [], set()
    for ns, levels, bit in ends:
        end = names.get(bit, str(bit))
        if end in seen:
            continue
        seen.add(end)
        nets, b = [], bit
        while b is not None:
            nets.append(names.get(b, str(b)))
            b = arrival[b][2]
        paths.append(LogicPath(round(ns, 2), levels, end, tuple(nets)))
        if len(paths) == top:
            break
    return paths


def widest_fanouts(netlist, *, top: int = 20,
                   module: str | None = None) -> list[tuple[int, str]]:
    """The ``top`` nets driven by a register (or a block RAM) with the most loads (cell
    input pins other than clocks), as ``(loads, net name)``, most first."""
    if not isinstance(netlist, dict):
        netlist = json.loads(Path(netlist).read_text())
    mod = _top_module(netlist, module)
    cells, names = mod["cells"], _net_names(mod)
    loads = {}
    for cell in cells.values():
        for port, bits in cell["connections"].items():
            if cell["port_directions"].get(port) == "input" and port not in _CLOCK_PORTS:
                for bit in bits:
                    if isinstance(bit, int):
                        loads[bit] = loads.get(bit, 0) + 1
    driven = [(n, names.get(bit, str(bit))) for bit, (cname, _) in _drivers(cells).items()
              if _sequential(cells[cname]) and not cells[cname]["type"].startswith(
                  ("TRELLIS_IO", "SB_IO", "EHXPLLL", "SB_PLL40", "DCCA", "SB_GB"))
              and (n := loads.get(bit, 0))]
    return sorted(driven, key=lambda x: (-x[0], x[1]))[:top]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m qloom.flows.toolchain.logic_depth",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("netlist", help="Yosys JSON netlist (write_json)")
    parser.add_argument("--hop", type=float, default=0.9,
                        help="ns per routed connection (default 0.9)")
    parser.add_argument("--top", type=int, default=20, help="paths to print (default 20)")
    parser.add_argument("--module", help="module to walk (default: the top)")
    parser.add_argument("--fanout", action="store_true",
                        help="list the registers with the most loads instead")
    args = parser.parse_args(argv)
    if args.fanout:
        for loads, name in widest_fanouts(args.netlist, top=args.top, module=args.module):
            print(f"{loads:6d} loads  {name}")
        return 0
    for p in deepest_paths(args.netlist, hop_ns=args.hop, top=args.top, module=args.module):
        print(f"{p.ns:6.2f} ns  {p.levels:2d} levels  {p.end}")
        print("        <- " + " <- ".join(p.nets[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
