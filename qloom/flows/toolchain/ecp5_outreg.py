"""Move the register after an ECP5 block RAM read into the block (DP16KD ``OUTREG``).

An ECP5 block RAM in its default mode (``NOREG``) gives its read data 5.83 ns after the clock
on a -6 device: a block RAM read into a flip-flop alone was the critical path of TFC-w1a1 at
150 MHz (6.9 ns against 6.67). The block has an output register of its own (``REGMODE =
"OUTREG"``) after which the data leave well under a nanosecond after the clock (a ROM feeding
a register measured 152.6 MHz with the fabric register, 385.4 MHz with the block's).

Yosys' ECP5 memory mapping (``brams_16kd.txt``) never uses that register, and instantiating
DP16KD blocks in the templates would put vendor primitives into the RTL that the cocotb tests
simulate. The templates instead register every block RAM read they need fast (the RTL and
its simulation keep the cycle), and this pass, run on Yosys' JSON netlist before nextpnr,
moves such a register into the block when that is exactly equivalent:

- every used data output of the read port drives one flip-flop and nothing else,
- each flip-flop is clocked by the port's clock (not inverted), has no set/reset (``LSR``
  tied low, reset value 0, as the block's output register starts) and either no enable or
  the same enable for the whole port (which becomes the block's output clock enable).

A 36-bit read (pseudo-dual-port mode, data on both DOA and DOB) is one read port here.

Ports that do not qualify (a mux or logic between block and register, a cascade of blocks in
depth) keep ``NOREG`` and their timing; the pass never changes what the design computes.
"""

from __future__ import annotations

import json
from pathlib import Path

from qloom.flows.toolchain.yosys_json import int_parameter, readers

__all__ = ["absorb_output_registers", "absorb_in_netlist"]

# A DP16KD's read ports as Yosys' ECP5 mapping uses them: (data output prefixes, clock,
# output clock enable, register mode parameter) for each port, or in pseudo-dual-port mode
# (``DATA_WIDTH_A`` 36, as nextpnr decides it) one 36-bit read port on clock B whose data
# leave on both DOA and DOB.
_TRUE_DUAL = [(("DOA",), "CLKA", ("OCEA",), ("REGMODE_A",)),
              (("DOB",), "CLKB", ("OCEB",), ("REGMODE_B",))]
_PSEUDO_DUAL = [(("DOA", "DOB"), "CLKB", ("OCEA", "OCEB"), ("REGMODE_A", "REGMODE_B"))]


def _enable(ff: dict):
    """A TRELLIS_FF's clock enable: ``"1"`` when it has none, its net bit, or None when it
    is one this pass does not move (inverted)."""
    mux = ff["parameters"].get("CEMUX", "1").strip()
    if mux == "1":
        return "1"
    if mux == "CE":
        return ff["connections"].get("CE", ["1"])[0]
    return None


def _plain_register(ff: dict, clock) -> bool:
    """Whether a flip-flop is one the block's output register can replace: same clock, not
    inverted, no set or reset, reset value 0."""
    p, c = ff["parameters"], ff["connections"]
    return (ff["type"] == "TRELLIS_FF" and c.get("CLK") == clock
            and p.get("CLKMUX", "CLK").strip() == "CLK"
            and p.get("LSRMUX", "LSR").strip() == "LSR" and c.get("LSR", ["0"]) == ["0"]
            and p.get("REGSET", "RESET").strip() == "RESET")


def absorb_in_netlist(netlist: dict) -> int:
    """Apply the pass to a Yosys JSON netlist in place; returns the read ports changed."""
    changed = 0
    for module in netlist.get("modules", {}).values():
        cells = module.get("cells", {})
        sinks = readers(module)
        for cell in list(cells.values()):
            if cell["type"] != "DP16KD":
                continue
            conn, params = cell["connections"], cell["parameters"]
            pseudo = int_parameter(params.get("DATA_WIDTH_A", 18)) == 36
            for data, clock, oces, regmodes in _PSEUDO_DUAL if pseudo else _TRUE_DUAL:
                # Without the output register the output clock enable does nothing, and
                # Yosys ties it either way.
                if any(params.get(r, "NOREG").strip() != "NOREG" for r in regmodes) \
                        or any(conn.get(oce, ["1"]) not in (["0"], ["1"]) for oce in oces):
                    continue
                if pseudo and not _write_clock_free(conn):
                    continue
                registers = _registers(cells, sinks, conn, data, conn.get(clock))
                if not registers:
                    continue
                enables = {_enable(cells[ff]) for ff in registers.values()}
                if len(enables) != 1 or None in enables:
                    continue
                for port, ff in registers.items():
                    conn[port] = cells.pop(ff)["connections"]["Q"]
                enable = enables.pop()
                for oce, regmode in zip(oces, regmodes):
                    conn[oce] = [enable]
                    params[regmode] = "OUTREG"
                if pseudo:
                    # Which side's output register holds DOA in this mode is not documented
                    # for the open tools: both are set, and side A's is clocked like B's
                    # (its write port is either on that clock already or never enabled),
                    # so the data are registered once on the read clock either way.
                    conn["CLKA"] = conn["CLKB"]
                changed += 1
    return changed


def _write_clock_free(conn) -> bool:
    """Whether a pseudo-dual-port block's clock A may be the read clock: it already is,
    or it is tied off with its write port never enabled (a ROM)."""
    return conn.get("CLKA") == conn.get("CLKB") or (
        conn.get("CLKA") in (["0"], ["1"]) and conn.get("CEA") == ["0"])


def _registers(cells, sinks, conn, prefixes, clock) -> dict | None:
    """The flip-flop each used data output of a read port feeds, or None when any used
    output feeds anything else."""
    registers = {}
    for port, bits in conn.items():
        if not any(port.startswith(p) and port[len(p):].isdigit() for p in prefixes):
            continue
        users = sinks.get(bits[0], []) if isinstance(bits[0], int) else []
        if not users:
            continue
        if len(users) != 1:
            return None
        name, pin = users[0]
        if name is None or pin != "DI" or not _plain_register(cells[name], clock):
            return None
        registers[port] = name
    return registers or None


def absorb_output_registers(src: Path, dst: Path) -> int:
    """Read Yosys' JSON netlist ``src``, apply the pass, write ``dst``; returns the read
    ports that now use the block's output register."""
    netlist = json.loads(Path(src).read_text())
    changed = absorb_in_netlist(netlist)
    Path(dst).write_text(json.dumps(netlist))
    return changed
