# amaranth: UnusedElaboratable=no
"""The ECP5 carry-chain pass (qloom.flows.toolchain.ecp5_carry): Yosys' SAT solver proves that a
synthesized netlist of adders, subtractors, compares and sums with a carry-in bit computes
the same after the pass (with the chains' carry-ins left free), a changed carry table is
caught, and nextpnr packs the result into fewer cells by exactly the feed cells it no
longer builds."""

import copy
import json

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Module, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from qloom.errors import ToolError
from qloom.flows.toolchain import synth
from qloom.flows.toolchain.ecp5_carry import trim_carry_chains
from qloom.flows.toolchain.ecp5_pack import packed_cells


class Adders(wiring.Component):
    """Combinational sums, differences and compares of several widths and signednesses
    (Yosys maps those over 4 bits to CCU2C chains), a sum with a shifted operand, an
    increment, a negation, a compare against a constant, and two sums whose carry-in is a
    bit (as the binary compressor's), one with a free last half, one without."""

    CASES = [(5, 5, False, "+"), (6, 9, True, "+"), (7, 7, False, "-"), (8, 12, True, "-"),
             (10, 3, False, "+"), (16, 16, True, "+"), (15, 11, True, "-"),
             (9, 9, False, "<"), (12, 12, True, "<")]

    def __init__(self):
        ports = {"s": In(12), "ys": Out(14), "c": In(9), "inc": Out(10), "neg": Out(signed(10)),
                 "ge": Out(1), "p": In(8), "q": In(8), "r": In(1), "odd": Out(9),
                 "u": In(7), "v": In(7), "even": Out(8)}
        for k, (wa, wb, is_signed, op) in enumerate(self.CASES):
            shape = signed if is_signed else unsigned
            ports |= {f"a{k}": In(shape(wa)), f"b{k}": In(shape(wb)),
                      f"y{k}": Out(1 if op == "<" else shape(max(wa, wb) + 1))}
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        for k, (_wa, _wb, _signed, op) in enumerate(self.CASES):
            a, b = getattr(self, f"a{k}"), getattr(self, f"b{k}")
            m.d.comb += getattr(self, f"y{k}").eq(a + b if op == "+" else a - b if op == "-"
                                                   else a < b)
        m.d.comb += [self.ys.eq(self.s + (self.s << 1)), self.inc.eq(self.c + 1),
                     self.neg.eq(-self.c), self.ge.eq(self.c >= 300),
                     self.odd.eq(self.p + self.q + self.r), self.even.eq(self.u + self.v + self.r)]
        return m


@pytest.fixture(scope="module")
def netlist(tmp_path_factory):
    """Yosys' ECP5 netlist of Adders (its top module only) and the build directory."""
    build = tmp_path_factory.mktemp("carry")
    (build / "top.il").write_text(rtlil.convert(Adders(), name="top"))
    (build / "synth.ys").write_text(
        f"read_rtlil top.il\n{synth.synth_command('ecp5', 'top')}\nwrite_json top.json\n")
    synth.run_yosys(build / "synth.ys", build, build / "synth.log", step="yosys", quiet=True)
    parsed = json.loads((build / "top.json").read_text())
    return parsed, build


def _top_only(netlist: dict, free: int) -> tuple[dict, int]:
    """The top module alone for Yosys to read back: every unconnected cell pin (``"x"``)
    gets a net of its own, and an unconnected input (a chain's carry-in) a module input
    port ``free<k>`` of its own, so that the solver tries every value there; ``free``
    ports in all (unused ones drive nothing), as the miter needs the same ports on both."""
    netlist = copy.deepcopy(netlist)
    top = netlist["modules"]["top"]
    bits = [b for c in top["cells"].values() for v in c["connections"].values() for b in v]
    bits += [b for p in top["ports"].values() for b in p["bits"]]
    fresh = max(b for b in bits if isinstance(b, int)) + 1
    ports = []
    for cell in top["cells"].values():
        for port, value in cell["connections"].items():
            for i, bit in enumerate(value):
                if bit == "x":
                    value[i] = fresh
                    if cell["port_directions"][port] == "input":
                        ports.append(fresh)
                    fresh += 1
    ports += range(fresh, fresh + free - len(ports))
    for k, bit in enumerate(ports):
        top["ports"][f"free{k}"] = {"direction": "input", "bits": [bit]}
    return {"modules": {"top": top}}, len(ports)


def _equivalent(gold: dict, gate: dict, build) -> bool:
    """Whether Yosys' SAT solver proves the two netlists' outputs equal for all defined
    inputs, through the ECP5 cells' simulation models (``cells_sim_ecp5.v``)."""
    free = sum(1 for c in gate["modules"]["top"]["cells"].values()
               for b in c["connections"].get("CIN", []) if b == "x")
    for name, netlist in (("gold", gold), ("gate", gate)):
        (build / f"{name}.json").write_text(json.dumps(_top_only(netlist, free)[0]))
        (build / f"{name}.ys").write_text(
            f"read_json {name}.json\nread_verilog -D NO_INCLUDES +/lattice/cells_sim_ecp5.v\n"
            f"hierarchy -top top\nproc\nflatten\nopt_clean\nrename top {name}\n"
            f"write_rtlil {name}.il\n")
        synth.run_yosys(build / f"{name}.ys", build, build / f"{name}.log", quiet=True)
    (build / "miter.ys").write_text(
        "read_rtlil gold.il\nread_rtlil gate.il\n"
        "miter -equiv -flatten -make_assert gold gate miter\nhierarchy -top miter\n"
        "sat -verify -prove-asserts -enable_undef -set-def-inputs miter\n")
    try:
        synth.run_yosys(build / "miter.ys", build, build / "miter.log", quiet=True,
                        retries=False)
    except ToolError:
        return False
    return "SUCCESS" in (build / "miter.log").read_text()


def _moved_up(cell) -> str | None:
    """How the pass moved the chain that starts at this CCU2C up a half: behind a first
    half that makes a constant carry (``"constant"``) or takes the carry in from logic on
    A0 (``"logic"``); None when it did not."""
    conn = cell["connections"]
    if cell["type"] != "CCU2C" or conn["CIN"] != ["x"] or conn["C0"] != ["1"] \
            or conn["D0"] != ["1"] or conn["B0"] != ["0"]:
        return None
    if conn["A0"] == ["0"]:
        return "constant"
    return "logic" if cell["parameters"]["INIT0"] == "0000000000001010" else None


def test_the_pass_computes_the_same(netlist):
    gold, build = netlist
    gate = copy.deepcopy(gold)
    feed_ins, feed_outs = trim_carry_chains(gate)
    # 15 chains: all but two start on a constant carry-in, and of those two (a bit for
    # carry-in) the one with a free last half moves up; the three compares read their last
    # carry.
    chains = len(Adders.CASES) + 6
    assert feed_ins == chains - 1
    assert feed_outs == chains - 3
    # Both ways are taken (and so proved): chains moved a half up (their last half was
    # free) and first sum bits moved to a LUT4.
    cells = gate["modules"]["top"]["cells"]
    kinds = [_moved_up(c) for c in cells.values()]
    assert (kinds.count("constant"), kinds.count("logic")) == (4, 1)
    assert sum(1 for name in cells if name.endswith("$qloom_s0")) == 4
    assert _equivalent(gold, gate, build)


@pytest.mark.parametrize("kind", ["constant", "logic", "sum LUT4"])
def test_a_wrong_carry_table_is_caught(netlist, kind):
    """The proof can fail: one bit of the carry table of one chain's new first half
    flipped, the one read when both its inputs are 0 (a chain moved up behind a constant
    carry or a carry from logic, or an adder of two signals whose first sum bit went to a
    LUT4)."""
    gold, build = netlist
    gate = copy.deepcopy(gold)
    trim_carry_chains(gate)
    cell = next(c for c in gate["modules"]["top"]["cells"].values()
                if c["type"] == "CCU2C" and c["connections"]["CIN"] == ["x"]
                and (_moved_up(c) == kind if kind != "sum LUT4" else _moved_up(c) is None
                     and all(isinstance(c["connections"][p][0], int) for p in ("A0", "B0"))))
    init = cell["parameters"]["INIT0"]
    cell["parameters"]["INIT0"] = init[:-1] + "10"[int(init[-1])]
    assert not _equivalent(gold, gate, build)


def test_nextpnr_packs_fewer_cells(netlist):
    """Without the pass each chain costs a feed-in and, when its last carry is unread, a
    feed-out (a CCU2C, two TRELLIS_COMB, each); with it, one LUT4 per first sum bit."""
    gold, build = netlist
    gate = copy.deepcopy(gold)
    feed_ins, feed_outs = trim_carry_chains(gate)
    sum_luts = sum(1 for name in gate["modules"]["top"]["cells"] if name.endswith("$qloom_s0"))
    before = packed_cells(gold, "LFE5U-85F", "BG381", build, "gold")
    after = packed_cells(gate, "LFE5U-85F", "BG381", build, "gate")
    assert before - after == 2 * feed_ins + 2 * feed_outs - sum_luts


def _ccu2c(cin, cout, **changes):
    """A CCU2C as Yosys' adder map writes it, first half on nets 10 (A0) and 11 (B0)."""
    cell = {"type": "CCU2C",
            "parameters": {"INIT0": "1001011010101010", "INIT1": "1001011010101010",
                           "INJECT1_0": "NO", "INJECT1_1": "NO"},
            "port_directions": {p: "output" if p in ("S0", "S1", "COUT") else "input"
                                for p in ("CIN", "A0", "B0", "C0", "D0", "A1", "B1", "C1",
                                          "D1", "S0", "S1", "COUT")},
            "connections": {"CIN": [cin], "A0": [10], "B0": [11], "C0": ["0"], "D0": ["1"],
                            "A1": [12], "B1": [13], "C1": ["0"], "D1": ["1"],
                            "S0": [20], "S1": [21], "COUT": [cout]}}
    for key, value in changes.items():
        (cell["parameters"] if key in cell["parameters"] else cell["connections"])[key] = value
    return cell


def _module(*cells, outputs=(20, 21)):
    return {"modules": {"top": {
        "ports": {"y": {"direction": "output", "bits": list(outputs)}},
        "cells": {f"c{k}": cell for k, cell in enumerate(cells)}}}}


@pytest.mark.parametrize("why, cell, counts", [
    ("a carry-in from logic, no free half: nextpnr's feed-in", _ccu2c(5, 30), (0, 1)),
    ("a sum through INJECT1_0", _ccu2c("0", 30, INJECT1_0="YES"), (0, 1)),
    ("C0 and D0 both 0: the LUT4 would read the carry table", _ccu2c("0", 30, D0=["0"]),
     (0, 1)),
    ("a signal on D0", _ccu2c("0", 30, D0=[7]), (0, 1)),
])
def test_left_as_it_is(why, cell, counts):
    netlist = _module(cell)
    before = copy.deepcopy(netlist)
    assert trim_carry_chains(netlist) == counts, why
    after = netlist["modules"]["top"]["cells"]["c0"]
    assert after["connections"]["COUT"] == ["x"]
    after["connections"]["COUT"] = [30]
    assert netlist == before, why


def test_a_read_carry_out_stays():
    netlist = _module(_ccu2c("0", 30), outputs=(20, 21, 30))
    assert trim_carry_chains(netlist) == (1, 0)
    assert netlist["modules"]["top"]["cells"]["c0"]["connections"]["COUT"] == [30]


def test_an_unread_first_sum_needs_no_lut():
    netlist = _module(_ccu2c("1", 30), outputs=(21,))
    assert trim_carry_chains(netlist) == (1, 1)
    assert list(netlist["modules"]["top"]["cells"]) == ["c0"]
