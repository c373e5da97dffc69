# amaranth: UnusedElaboratable=no
import random

import pytest
from amaranth.hdl import ClockDomain, Elaboratable, Module, signed, unsigned

from qloom.hw.width import WidthConverter
from qloom.sim.pysim import run_stream


class Clocked(Elaboratable):
    """Gives a purely combinational converter (equal lane counts) a clock to simulate with."""

    def __init__(self, dut):
        self.dut, self.i, self.o = dut, dut.i, dut.o

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = ClockDomain()
        m.submodules.dut = self.dut
        return m


def ref_relane(words, out_lanes):
    flat = [e for word in words for e in word]
    return [flat[k:k + out_lanes] for k in range(0, len(flat), out_lanes)]


@pytest.mark.parametrize("in_lanes,out_lanes", [
    (1, 1), (3, 3), (1, 4), (2, 6), (4, 1), (6, 2), (6, 3), (1, 5), (5, 1),
])
@pytest.mark.parametrize("stall", [0.0, 0.3])
def test_width_converter_preserves_order(in_lanes, out_lanes, stall):
    rng = random.Random(in_lanes * 10 + out_lanes)
    n_elems = 3 * in_lanes * out_lanes
    elems = [rng.randrange(-8, 8) for _ in range(n_elems)]
    words = ref_relane([elems], in_lanes)
    dut = WidthConverter(elem_shape=signed(4), in_lanes=in_lanes, out_lanes=out_lanes)
    expect = ref_relane(words, out_lanes)
    run = run_stream(Clocked(dut), words, len(expect), in_stall=stall, out_stall=stall, seed=7)
    assert run.outputs == expect


@pytest.mark.parametrize("in_lanes,out_lanes", [(4, 1), (1, 4), (2, 2)])
def test_width_converter_keeps_wide_side_busy(in_lanes, out_lanes):
    n_elems = 16 * max(in_lanes, out_lanes)
    words = ref_relane([[e % 2 for e in range(n_elems)]], in_lanes)
    dut = WidthConverter(elem_shape=unsigned(1), in_lanes=in_lanes, out_lanes=out_lanes)
    expect = ref_relane(words, out_lanes)
    run = run_stream(Clocked(dut), words, len(expect))
    assert run.outputs == expect
    # the narrow side moves one word per cycle
    narrow = run.out_cycles if out_lanes <= in_lanes else run.in_cycles
    assert narrow[-1] - narrow[0] == len(narrow) - 1


def test_width_converter_rejects_bad_parameters():
    with pytest.raises(TypeError, match=r"in_lanes must be a positive integer, not 0"):
        WidthConverter(elem_shape=unsigned(2), in_lanes=0, out_lanes=1)
    with pytest.raises(TypeError, match=r"out_lanes must be a positive integer, not '2'"):
        WidthConverter(elem_shape=unsigned(2), in_lanes=1, out_lanes="2")
    with pytest.raises(ValueError, match=r"One of in_lanes \(4\) and out_lanes \(6\) must "
                                         r"divide the other"):
        WidthConverter(elem_shape=unsigned(2), in_lanes=4, out_lanes=6)
    with pytest.raises(TypeError, match=r"Element shape must be a shape-like object, not -1"):
        WidthConverter(elem_shape=-1, in_lanes=1, out_lanes=1)
