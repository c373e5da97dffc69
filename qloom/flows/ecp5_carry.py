"""Start and end ECP5 carry chains without nextpnr's feed-in and feed-out cells.

nextpnr-ecp5 (0.11, ``ecp5/pack.cc``, ``split_carry_chain``) puts a whole extra CCU2C
(two TRELLIS_COMB) at each end of a carry chain:

- a *feed-in* before the first CCU2C whenever its ``CIN`` is connected, and Yosys' adders
  (``arith_map_ccu2c.v``) always connect it, to the adder's constant carry-in;
- a *feed-out* after the last CCU2C whenever its ``COUT`` is connected, and Yosys leaves it
  connected to a net nothing reads.

So every adder cost four TRELLIS_COMB more in the placed design than Yosys counts: measured
on 100 registered adders of 5 to 16 bits, +398 to +402 whatever the width, about 15,000 on
the jet tagger at II 1 (20-30% of the design). This pass, run on Yosys' JSON netlist before
nextpnr, removes what is not needed:

- a last ``COUT`` that nothing reads is disconnected (``"x"``), so no feed-out is built;
- a first CCU2C whose ``CIN`` is a constant ``c`` gets a first half that does not read its
  carry-in: its LUT4 is 0 (so the carry passes the LUT2 only, as in nextpnr's own feed-in)
  and its LUT2 gives the carry out of bit 0 for that ``c``; the sum bit of that half,
  ``P ^ c``, moves to a LUT4 of its own. One LUT4 instead of two feed-in cells.

Both are exact: the first removes a connection nothing reads; the second computes the same
carry and sum bit for the same constant (``tests/flows/test_ecp5_carry.py`` proves it with
Yosys' SAT solver on synthesized adders). A first half whose LUT4 reads a signal on ``C0``
or ``D0``, or ``C0`` and ``D0`` both 0 (the LUT4 would then read the LUT2's half of
``INIT0``), or a sum through ``INJECT1_0`` is left as it is.
"""

from __future__ import annotations

from qloom.flows.ecp5_outreg import _number, _sinks

__all__ = ["trim_carry_chains"]


def _init(bits_of_index) -> str:
    """A 16-bit INIT parameter as Yosys writes it (binary, MSB first)."""
    return "".join("1" if bits_of_index(i) else "0" for i in reversed(range(16)))


def _half0(cell) -> tuple | None:
    """The first half of a CCU2C as two functions of (A0, B0): its LUT4 ``P`` (with C0 and
    D0 at their constant values) and its LUT2 ``G``; None when it is not one this pass may
    change."""
    conn, params = cell["connections"], cell["parameters"]
    c0, d0 = conn.get("C0", ["0"])[0], conn.get("D0", ["0"])[0]
    if params.get("INJECT1_0", "YES").strip() != "NO" or c0 not in ("0", "1") \
            or d0 not in ("0", "1") or (c0, d0) == ("0", "0"):
        return None
    init = _number(params.get("INIT0", "0"))
    high = int(c0) << 2 | int(d0) << 3
    return (lambda a, b: init >> (high | b << 1 | a) & 1,
            lambda a, b: init >> (b << 1 | a) & 1)


def trim_carry_chains(netlist: dict) -> tuple[int, int]:
    """Apply the pass to a Yosys JSON netlist in place; returns (feed-ins, feed-outs)
    removed."""
    feed_ins = feed_outs = 0
    for module in netlist.get("modules", {}).values():
        cells = module.get("cells", {})
        sinks = _sinks(module)
        for name, cell in list(cells.items()):
            if cell["type"] != "CCU2C":
                continue
            conn = cell["connections"]
            cout = conn.get("COUT", ["x"])[0]
            if isinstance(cout, int) and not sinks.get(cout):
                conn["COUT"] = ["x"]
                feed_outs += 1
            cin = conn.get("CIN", ["x"])[0]
            half = _half0(cell) if cin in ("0", "1") else None
            if half is None:
                continue
            carry_in = int(cin)
            propagate, generate = half
            carry = {(a, b): carry_in if propagate(a, b) else generate(a, b)
                     for a in (0, 1) for b in (0, 1)}
            sum0 = {(a, b): propagate(a, b) ^ carry_in for a in (0, 1) for b in (0, 1)}
            # LUT4 = 0 for the constant C0/D0 (their index block of INIT0 is all zero),
            # LUT2 = the carry; the other bits are never read.
            cell["parameters"]["INIT0"] = _init(lambda i: i < 4 and carry[(i & 1, i >> 1 & 1)])
            conn["CIN"] = ["x"]
            s0 = conn.get("S0", ["x"])
            if isinstance(s0[0], int) and sinks.get(s0[0]):
                conn["S0"] = ["x"]
                cells[f"{name}$qloom_s0"] = {
                    "hide_name": 1, "type": "LUT4", "attributes": {},
                    "parameters": {"INIT": _init(lambda i: i < 4 and sum0[(i & 1, i >> 1 & 1)])},
                    "port_directions": {"A": "input", "B": "input", "C": "input",
                                        "D": "input", "Z": "output"},
                    "connections": {"A": conn.get("A0", ["0"]), "B": conn.get("B0", ["0"]),
                                    "C": ["0"], "D": ["0"], "Z": s0}}
            feed_ins += 1
    return feed_ins, feed_outs
