# amaranth: UnusedElaboratable=no
"""The ECP5 block RAM output register pass (qloom.flows.toolchain.ecp5_outreg): which registers it
moves into the block, which it leaves, and that a real Yosys netlist places faster with it
while computing the same thing."""

import copy
import json

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from qloom.flows.toolchain import synth
from qloom.flows.toolchain.ecp5_outreg import absorb_in_netlist, absorb_output_registers

CLK, OTHER_CLK, CE = 2, 3, 4


def _ff(d, q, *, clk=CLK, cemux="1 ", ce=None, lsr="0", regset="RESET", clkmux="CLK"):
    conn = {"CLK": [clk], "DI": [d], "LSR": [lsr], "Q": [q]}
    if ce is not None:
        conn["CE"] = [ce]
    return {"type": "TRELLIS_FF",
            "parameters": {"CEMUX": cemux, "CLKMUX": clkmux, "GSR": "DISABLED",
                           "LSRMUX": "LSR", "REGSET": regset},
            "port_directions": {"CLK": "input", "DI": "input", "LSR": "input", "CE": "input",
                                "Q": "output"},
            "connections": conn}


def _netlist(ffs=None, extra=None, ports=None):
    """A DP16KD reading on port B (outputs DOB0..2 on nets 10..12) into flip-flops with
    outputs on nets 20..22."""
    bram = {"type": "DP16KD",
            "parameters": {"REGMODE_A": "NOREG", "REGMODE_B": "NOREG"},
            "port_directions": {"CLKA": "input", "CLKB": "input", "OCEA": "input",
                                "OCEB": "input", "DOA0": "output", "DOB0": "output",
                                "DOB1": "output", "DOB2": "output"},
            "connections": {"CLKA": [CLK], "CLKB": [CLK], "OCEA": ["1"], "OCEB": ["1"],
                            "DOA0": [9], "DOB0": [10], "DOB1": [11], "DOB2": [12]}}
    cells = {"mem": bram}
    for k, ff in enumerate(ffs if ffs is not None else [_ff(10 + k, 20 + k) for k in range(3)]):
        cells[f"ff{k}"] = ff
    cells.update(extra or {})
    return {"modules": {"top": {"ports": ports or {}, "cells": cells}}}


def _lut(a, z):
    return {"type": "LUT4", "parameters": {}, "port_directions": {"A": "input", "Z": "output"},
            "connections": {"A": [a], "Z": [z]}}


def test_plain_registers_move_into_the_block():
    n = _netlist()
    assert absorb_in_netlist(n) == 1
    cells = n["modules"]["top"]["cells"]
    assert set(cells) == {"mem"}
    mem = cells["mem"]
    assert mem["parameters"]["REGMODE_B"] == "OUTREG"
    assert mem["parameters"]["REGMODE_A"] == "NOREG"        # port A's output is unused
    assert [mem["connections"][f"DOB{k}"] for k in range(3)] == [[20], [21], [22]]
    assert mem["connections"]["OCEB"] == ["1"]


def test_an_output_clock_enable_tied_low_is_set():
    """Unused without the register, Yosys ties it to 0 or 1; with it, it must be 1."""
    n = _netlist()
    n["modules"]["top"]["cells"]["mem"]["connections"]["OCEB"] = ["0"]
    assert absorb_in_netlist(n) == 1
    assert n["modules"]["top"]["cells"]["mem"]["connections"]["OCEB"] == ["1"]


def test_a_shared_enable_becomes_the_output_clock_enable():
    n = _netlist([_ff(10 + k, 20 + k, cemux="CE", ce=CE) for k in range(3)])
    assert absorb_in_netlist(n) == 1
    assert n["modules"]["top"]["cells"]["mem"]["connections"]["OCEB"] == [CE]


@pytest.mark.parametrize("why, ffs, extra, ports", [
    ("another clock", [_ff(10, 20, clk=OTHER_CLK), _ff(11, 21), _ff(12, 22)], None, None),
    ("inverted clock", [_ff(10, 20, clkmux="INV"), _ff(11, 21), _ff(12, 22)], None, None),
    ("a reset", [_ff(10, 20, lsr=7), _ff(11, 21), _ff(12, 22)], None, None),
    ("reset value 1", [_ff(10, 20, regset="SET"), _ff(11, 21), _ff(12, 22)], None, None),
    ("two enables", [_ff(10, 20, cemux="CE", ce=CE), _ff(11, 21), _ff(12, 22)], None, None),
    ("an inverted enable", [_ff(10 + k, 20 + k, cemux="INV", ce=CE) for k in range(3)],
     None, None),
    ("logic before the register", [_ff(30, 20), _ff(11, 21), _ff(12, 22)],
     {"lut": _lut(10, 30)}, None),
    ("a second reader", None, {"lut": _lut(11, 31)}, None),
    ("a module output", None, None, {"q": {"direction": "output", "bits": [12]}}),
])
def test_anything_else_is_left_as_it_is(why, ffs, extra, ports):
    n = _netlist(ffs, extra, ports)
    before = copy.deepcopy(n)
    assert absorb_in_netlist(n) == 0, why
    assert n == before


def _pseudo_dual(clka, cea):
    """A DP16KD in pseudo-dual-port mode (36-bit read on clock B, data on DOA and DOB)."""
    return {"modules": {"top": {"ports": {}, "cells": {
        "mem": {"type": "DP16KD",
                "parameters": {"DATA_WIDTH_A": "00000000000000000000000000100100",
                               "DATA_WIDTH_B": "00000000000000000000000000100100",
                               "REGMODE_A": "NOREG", "REGMODE_B": "NOREG"},
                "port_directions": {"CLKA": "input", "CLKB": "input", "CEA": "input",
                                    "OCEA": "input", "OCEB": "input", "DOA0": "output",
                                    "DOB17": "output"},
                "connections": {"CLKA": [clka], "CLKB": [CLK], "CEA": [cea], "OCEA": ["0"],
                                "OCEB": ["1"], "DOA0": [10], "DOB17": [11]}},
        "a": _ff(10, 20), "b": _ff(11, 21)}}}}


def test_pseudo_dual_port_rom(tmp_path):
    """Both halves of the 36-bit read are registered on the read clock: both sides'
    register modes set, clock A (tied off, its write port never enabled) made the read
    clock."""
    n = _pseudo_dual("0", "0")
    src, dst = tmp_path / "n.json", tmp_path / "n.outreg.json"
    src.write_text(json.dumps(n))
    assert absorb_output_registers(src, dst) == 1
    out = json.loads(dst.read_text())["modules"]["top"]["cells"]
    assert set(out) == {"mem"}
    mem = out["mem"]
    assert (mem["parameters"]["REGMODE_A"], mem["parameters"]["REGMODE_B"]) == ("OUTREG",) * 2
    assert mem["connections"]["CLKA"] == [CLK]
    assert mem["connections"]["OCEA"] == mem["connections"]["OCEB"] == ["1"]
    assert (mem["connections"]["DOA0"], mem["connections"]["DOB17"]) == ([20], [21])
    assert json.loads(src.read_text()) == n                # Yosys' own netlist is kept


def test_pseudo_dual_port_written_on_another_clock_is_left():
    n = _pseudo_dual(OTHER_CLK, "1")
    assert absorb_in_netlist(n) == 0


class RegisteredRom(wiring.Component):
    """Block RAM ROMs read into registers without reset (the pass's case), 18 bits wide
    (``a``) and 36 (``c``, pseudo-dual-port mode), beside one whose data pass logic first
    (``b``, left alone)."""

    def __init__(self):
        super().__init__({"addr": In(10), "sel": In(1), "a": Out(18), "b": Out(18),
                          "c": Out(36)})

    def elaborate(self, platform):
        m = Module()
        rng = np.random.default_rng(1)
        for name, width, depth in [("a", 18, 1024), ("b", 18, 1024), ("c", 36, 512)]:
            init = [int(v) for v in rng.integers(0, 1 << width, depth)]
            m.submodules[name] = mem = Memory(shape=width, depth=depth, init=init,
                                              attrs={"ram_style": "block"})
            port = mem.read_port()
            m.d.comb += port.addr.eq(self.addr[:(depth - 1).bit_length()])
            data = port.data ^ self.sel.replicate(width) if name == "b" else port.data
            reg = Signal(width, reset_less=True)  # as the templates' read registers
            m.d.sync += reg.eq(data)
            m.d.comb += getattr(self, name).eq(reg)
        return m


def test_real_netlist(tmp_path):
    """Yosys synth_ecp5 + nextpnr: the pass moves exactly the plain registers into their
    blocks, and the slowest path left starts at the other block (NOREG, then logic)."""
    r = synth.synthesize(RegisteredRom(), family="ecp5", device="LFE5U-85F",
                         package="CABGA381", build_dir=tmp_path, clock_mhz=150, pnr=True)
    netlist = json.loads((tmp_path / "top.outreg.json").read_text())
    modes = {name: (c["parameters"]["REGMODE_A"].strip(), c["parameters"]["REGMODE_B"].strip())
             for m in netlist["modules"].values() for name, c in m.get("cells", {}).items()
             if c["type"] == "DP16KD"}
    assert sorted((name[0], mode) for name, mode in modes.items()) == [
        ("a", ("OUTREG", "NOREG")), ("b", ("NOREG", "NOREG")), ("c", ("OUTREG", "OUTREG"))]
    assert r.critical_path[0]["start"].startswith("dut.b"), r.critical_path


@pytest.mark.parametrize("registered", [False, True])
def test_fifo_registered_read_moves_into_the_block(tmp_path, registered):
    """An edge FIFO in block RAM (qloom.hw.fifo): with its registered read the block's
    output register holds the read data (one port), without it the data leave the block
    unregistered, 5.83 ns after the clock (LFC-w1a1's critical path)."""
    from amaranth.hdl import unsigned

    from qloom.hw.fifo import StreamFIFO
    synth.synthesize(StreamFIFO(shape=unsigned(16), depth=1024, registered_read=registered),
                     family="ecp5", device="LFE5U-85F", package="CABGA381",
                     build_dir=tmp_path, pnr=False)
    netlist = tmp_path / "top.json"
    blocks = [c for m in json.loads(netlist.read_text())["modules"].values()
              for c in m.get("cells", {}).values() if c["type"] == "DP16KD"]
    assert len(blocks) == 1
    assert absorb_output_registers(netlist, tmp_path / "moved.json") == int(registered)


def test_line_buffer_read_moves_into_the_block(tmp_path):
    """A sliding window's line buffer in block RAM: its read register moves into the
    block (without no_rw_check every CNV-w1a1 line buffer kept NOREG: Yosys' read-before-
    write emulation put a mux between block and register)."""
    from qloom.hw.swg import SlidingWindow, WindowConfig
    from qloom.nn.dtypes import int_type
    swg = SlidingWindow(WindowConfig(in_h=8, in_w=32, channels=32, kernel=(3, 3),
                                     stride=(1, 1), pads=(0, 0, 0, 0), dtype=int_type(4),
                                     simd=4))
    synth.synthesize(swg, family="ecp5", device="LFE5U-85F", package="CABGA381",
                     build_dir=tmp_path, pnr=False)
    netlist = tmp_path / "top.json"
    blocks = [c for m in json.loads(netlist.read_text())["modules"].values()
              for c in m.get("cells", {}).values() if c["type"] in ("DP16KD", "PDPW16KD")]
    assert blocks
    assert absorb_output_registers(netlist, tmp_path / "moved.json") == len(blocks)
