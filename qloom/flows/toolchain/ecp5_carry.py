"""Start and end ECP5 carry chains without nextpnr's feed-in and feed-out cells.

nextpnr-ecp5 (0.11, ``ecp5/pack.cc``, ``split_carry_chain``) puts a whole extra CCU2C
(two TRELLIS_COMB) at each end of a carry chain:

- a *feed-in* before the first CCU2C whenever its ``CIN`` is connected, and Yosys' adders
  (``arith_map_ccu2c.v``) always connect it, to the adder's constant carry-in;
- a *feed-out* after the last CCU2C whenever its ``COUT`` is connected, and Yosys leaves it
  connected to a net nothing reads.

So every adder cost four TRELLIS_COMB more in the placed design than Yosys counts: measured
on 100 registered adders of 5 to 16 bits, +398 to +402 whatever the width; the jet tagger at
II 1 (3,188 chains, 42,331 LUT4 in Yosys' count) packed into 55,173 TRELLIS_COMB. This
pass, run on Yosys' JSON netlist before nextpnr, removes what is not needed (the jet
tagger: 43,400):

- a last ``COUT`` that nothing reads is disconnected (``"x"``), so no feed-out is built;
- a chain whose ``CIN`` is a constant ``c`` gets a first half that does not read its
  carry-in: its LUT4 is 0, so the carry passes its LUT2 only (as in nextpnr's own feed-in),
  and that LUT2 gives the carry out of bit 0 for ``c``. Where the chain's first sum bit is
  unread, that is all. Otherwise, where the chain's last half is free (an odd width: its
  sum and carry out unread), every half moves one up and the new first half's LUT2 is
  ``c``; else the first sum bit, ``P ^ c``, moves to a LUT4 of its own. So nothing or one
  LUT4 instead of two feed-in cells;
- a chain whose ``CIN`` comes from logic (the binary compressor's ``a + b + r``) and whose
  last half is free moves up a half behind a first half that takes that bit in on A0
  (LUT4 0, LUT2 A0: nextpnr's feed-in, in the chain's own cell). Without a free half
  nextpnr's feed-in costs the same as a new cell, so such a chain is left to it.

All of it is exact: a connection nothing reads is removed, and the same carries and sums
are computed for the same constant (``tests/flows/toolchain/test_ecp5_carry.py`` proves it with
Yosys' SAT solver on synthesized adders, both ways). A first half whose LUT4 reads a
signal on ``C0`` or ``D0``, or ``C0`` and ``D0`` both 0 (the LUT4 would then read the
LUT2's part of ``INIT0``), or a sum through ``INJECT1_0`` is only moved up, or else left
as it is.
"""

from __future__ import annotations

from qloom.flows.toolchain.yosys_json import int_parameter, readers

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
    init = int_parameter(params.get("INIT0", "0"))
    high = int(c0) << 2 | int(d0) << 3
    return (lambda a, b: init >> (high | b << 1 | a) & 1,
            lambda a, b: init >> (b << 1 | a) & 1)


def _half(cell, j: int) -> dict:
    """Half ``j`` of a CCU2C: its four LUT inputs, its sum output and its parameters."""
    conn, params = cell["connections"], cell["parameters"]
    return {"pins": [conn.get(f"{p}{j}", ["0"]) for p in "ABCD"], "sum": conn.get(f"S{j}", ["x"]),
            "init": params.get(f"INIT{j}", "0"), "inject": params.get(f"INJECT1_{j}", "YES")}


def _set_half(cell, j: int, half: dict):
    conn, params = cell["connections"], cell["parameters"]
    for p, bits in zip("ABCD", half["pins"]):
        conn[f"{p}{j}"] = bits
    conn[f"S{j}"] = half["sum"]
    params[f"INIT{j}"], params[f"INJECT1_{j}"] = half["init"], half["inject"]


def _read(bits, sinks) -> bool:
    return isinstance(bits[0], int) and bool(sinks.get(bits[0]))


def _chain(cells: dict, first: str, by_cin: dict) -> list[str]:
    """The CCU2Cs of the chain that starts at ``first``, in carry order."""
    chain = [first]
    while True:
        cout = cells[chain[-1]]["connections"].get("COUT", ["x"])[0]
        if cout not in by_cin:
            return chain
        chain.append(by_cin[cout])


def _shift(cells: dict, chain: list[str], carry_in):
    """Move every half of ``chain`` one half up (its last half is free) and put a first
    half in front that carries ``carry_in`` out whatever comes in: LUT4 0 (inputs C0 and
    D0 tied high: it reads the all-zero top of INIT0), LUT2 ``carry_in``, a constant 0 or
    1 or a net's bit (then on A0, and the LUT2 is A0, as in nextpnr's feed-in)."""
    halves = [_half(cells[name], j) for name in chain for j in (0, 1)]
    if isinstance(carry_in, list):
        first = {"pins": [carry_in, ["0"], ["1"], ["1"]], "init": _init(lambda i: i in (1, 3))}
    else:
        first = {"pins": [["0"], ["0"], ["1"], ["1"]],
                 "init": _init(lambda i: i < 4 and carry_in)}
    halves = [first | {"sum": ["x"], "inject": "NO"}] + halves[:-1]
    for k, half in enumerate(halves):
        _set_half(cells[chain[k // 2]], k % 2, half)
    cells[chain[0]]["connections"]["CIN"] = ["x"]


def _absorb_carry_in(cells: dict, name: str, half, carry_in: int, sinks):
    """Give the first half of CCU2C ``name`` a carry out that does not read its carry in
    (``carry_in`` is constant): LUT4 0 for the constant C0/D0 (their block of INIT0 is all
    zero), LUT2 its carry for that carry in; its sum bit, when read, from a LUT4 of its
    own."""
    cell = cells[name]
    conn = cell["connections"]
    propagate, generate = half
    carry = {(a, b): carry_in if propagate(a, b) else generate(a, b)
             for a in (0, 1) for b in (0, 1)}
    sum0 = {(a, b): propagate(a, b) ^ carry_in for a in (0, 1) for b in (0, 1)}
    cell["parameters"]["INIT0"] = _init(lambda i: i < 4 and carry[(i & 1, i >> 1 & 1)])
    conn["CIN"] = ["x"]
    s0 = conn.get("S0", ["x"])
    if _read(s0, sinks):
        conn["S0"] = ["x"]
        cells[f"{name}$qloom_s0"] = {
            "hide_name": 1, "type": "LUT4", "attributes": {},
            "parameters": {"INIT": _init(lambda i: i < 4 and sum0[(i & 1, i >> 1 & 1)])},
            "port_directions": {"A": "input", "B": "input", "C": "input", "D": "input",
                                "Z": "output"},
            "connections": {"A": conn.get("A0", ["0"]), "B": conn.get("B0", ["0"]),
                            "C": ["0"], "D": ["0"], "Z": s0}}


def trim_carry_chains(netlist: dict) -> tuple[int, int]:
    """Apply the pass to a Yosys JSON netlist in place; returns (feed-ins, feed-outs)
    removed."""
    feed_ins = feed_outs = 0
    for module in netlist.get("modules", {}).values():
        cells = module.get("cells", {})
        sinks = readers(module)
        carries = [name for name, cell in cells.items() if cell["type"] == "CCU2C"]
        by_cin = {cells[name]["connections"]["CIN"][0]: name for name in carries
                  if isinstance(cells[name]["connections"].get("CIN", ["x"])[0], int)}
        for name in carries:
            conn = cells[name]["connections"]
            cout = conn.get("COUT", ["x"])[0]
            if isinstance(cout, int) and not sinks.get(cout):
                conn["COUT"] = ["x"]
                feed_outs += 1
        couts = {cells[name]["connections"].get("COUT", ["x"])[0] for name in carries}
        for name in carries:
            cell = cells[name]
            cin = cell["connections"].get("CIN", ["x"])[0]
            if cin in couts or not (isinstance(cin, int) or cin in ("0", "1")):
                continue                    # inside a chain, or no carry in
            chain = _chain(cells, name, by_cin)
            last = cells[chain[-1]]
            free = last["connections"].get("COUT", ["x"]) == ["x"] \
                and not _read(last["connections"].get("S1", ["x"]), sinks)
            if isinstance(cin, int):
                # A carry in from logic: moved up behind a half that takes it in, where
                # that costs no cell (else nextpnr's feed-in does the same).
                if free:
                    _shift(cells, chain, [cin])
                    feed_ins += 1
                continue
            half = _half0(cell)
            # Moving up is free where the chain's first sum is read; absorbing the carry
            # in costs a LUT4 there, none where it is unread.
            if free and (half is None or _read(cell["connections"].get("S0", ["x"]), sinks)):
                _shift(cells, chain, int(cin))
            elif half is not None:
                _absorb_carry_in(cells, name, half, int(cin), sinks)
            else:
                continue
            feed_ins += 1
    return feed_ins, feed_outs
