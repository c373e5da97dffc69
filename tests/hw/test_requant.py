# amaranth: UnusedElaboratable=no
"""The requantizer against the IR's Requant reference, in Amaranth simulation with stalls."""

import numpy as np
import pytest

from qloom.hw.requant import Requantizer
from qloom.nn.dtypes import int_type, uint_type
from qloom.nn.ir import Requant, Rounding
from qloom.sim.pysim import run_stream


def reference(bias, shift, rounding, lo, hi, in_type, out_type, x):
    layer = Requant("r", ("x",), "y", bias=bias, shift=shift, rounding=rounding, lo=lo, hi=hi,
                    in_type=in_type, out_type=out_type)
    return layer.execute(x)


@pytest.mark.parametrize("block_table", [False, True], ids=["lut_table", "block_table"])
@pytest.mark.parametrize("rounding", list(Rounding))
@pytest.mark.parametrize("channels, lanes, shift, in_type, out_type", [
    (6, 2, 3, int_type(9), uint_type(4)),
    (4, 4, 0, int_type(5), int_type(4)),
    (3, 1, 5, uint_type(10), uint_type(6)),
    (2, 1, 1, int_type(6), int_type(4)),        # two folds: the lookahead wraps every word
    (10, 2, 2, int_type(7), uint_type(3)),      # five folds
])
def test_requant_bit_exact_under_stalls(rounding, channels, lanes, shift, in_type, out_type,
                                        block_table):
    rng = np.random.default_rng(channels * 10 + shift)
    bias = rng.integers(-40, 40, size=channels)
    lo, hi = max(out_type.min, 0), out_type.max
    pixels = 5
    x = rng.integers(in_type.min, in_type.max + 1, size=(pixels, channels))
    dut = Requantizer(bias=bias, shift=shift, rounding=rounding, lo=lo, hi=hi,
                      in_type=in_type, out_type=out_type, lanes=lanes, block_table=block_table)
    words = [list(map(int, w)) for w in x.reshape(-1, lanes)]
    run = run_stream(dut, words, len(words), in_stall=0.3, out_stall=0.3, seed=1)
    got = np.array(run.outputs).reshape(pixels, channels)
    want = reference(bias, shift, rounding, lo, hi, in_type, out_type, x)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("block_table", [False, True], ids=["lut_table", "block_table"])
def test_requant_full_rate_and_latency(block_table):
    dut = Requantizer(bias=np.zeros(4, dtype=np.int64), shift=2, rounding=Rounding.HALF_EVEN,
                      lo=0, hi=15, in_type=int_type(8), out_type=uint_type(4), lanes=2,
                      block_table=block_table)
    run = run_stream(dut, [[k, -k] for k in range(20)], 20)
    assert np.all(np.diff(run.out_cycles) == 1)
    assert run.out_cycles[0] - run.in_cycles[0] == Requantizer.latency


@pytest.mark.parametrize("kwargs, error, message", [
    ({"lanes": 0}, TypeError, r"Lane count must be a positive integer, not 0"),
    ({"lanes": 3}, ValueError, r"Channel count \(4\) must be divisible by lanes \(3\)"),
    ({"shift": -1}, TypeError, r"Shift must be a non-negative integer, not -1"),
    ({"rounding": "half_even"}, TypeError, r"Rounding must be a Rounding"),
    ({"hi": 16}, ValueError, r"Clamp range \[0, 16\] must lie within UINT4"),
])
def test_requant_validation(kwargs, error, message):
    args = dict(bias=np.zeros(4, dtype=np.int64), shift=2, rounding=Rounding.HALF_EVEN, lo=0,
                hi=15, in_type=int_type(8), out_type=uint_type(4), lanes=2)
    args.update(kwargs)
    with pytest.raises(error, match=message):
        Requantizer(**args)


def test_requant_table_in_block_ram_by_the_memory_rule():
    """The jet tagger's first requantizer (64 channels, INT24 sums, one lane): its 64 x 26
    table in LUTs was the iCEBreaker's critical path; given the family, the unit puts it
    in block RAM there by the memory rule, and its estimate counts the blocks instead of
    the LUTs. The table's width is the unit's own (its sums' type and a bit)."""
    from qloom.hw.estimate import Family

    def unit(channels):
        bias = np.resize([1 << 23, -(1 << 23)], channels)     # sums need INT25
        return Requantizer(bias=bias, shift=18, rounding=Rounding.HALF_EVEN, lo=0, hi=63,
                           in_type=int_type(24), out_type=uint_type(6), lanes=1,
                           block_table=Family.ICE40)
    block, logic = unit(64), unit(8)
    assert block.width == logic.width == 26
    assert block.block_table and not logic.block_table
    block, logic = block.estimate(Family.ICE40), logic.estimate(Family.ICE40)
    assert (block.bram, logic.bram) == (2, 0)     # 26 bits: two 256 x 16 SB_RAM40_4K
    assert block.lut["table_lut"] == 0 and logic.lut["table_lut"] > 0