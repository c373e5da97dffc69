# amaranth: UnusedElaboratable=no
"""The per-lane lookup table against the IR's Lookup reference, in Amaranth simulation
with random stalls on both sides, for shared and per-channel tables."""

import numpy as np
import pytest

from qloom.hw.estimate import Family
from qloom.hw.lookup import LookupTable
from qloom.nn.dtypes import BIPOLAR, int_type, uint_type
from qloom.nn.ir import Lookup
from qloom.sim.pysim import run_stream


@pytest.mark.parametrize("block", [False, True], ids=["logic", "block"])
@pytest.mark.parametrize("channels, lanes, rows, in_type, lo, span, out_type", [
    (6, 2, 6, int_type(6), -20, 40, int_type(4)),      # per-channel rows, three folds
    (4, 4, 1, uint_type(5), 0, 32, uint_type(3)),      # one shared row, all lanes
    (3, 1, 3, int_type(9), -200, 450, int_type(5)),    # one lane, wide span
    (2, 1, 1, int_type(4), -8, 16, BIPOLAR),           # bipolar codes
    (1, 1, 1, uint_type(2), 0, 4, uint_type(2)),       # the smallest
])
def test_lookup_bit_exact_under_stalls(channels, lanes, rows, in_type, lo, span, out_type,
                                       block):
    rng = np.random.default_rng(channels * 7 + span)
    values = [-1, 1] if out_type.bipolar else np.arange(out_type.min, out_type.max + 1)
    table = rng.choice(values, size=(rows, span)).astype(np.int64)
    layer = Lookup("t", ("x",), "y", table=table, lo=lo, in_type=in_type, out_type=out_type)
    pixels = 7
    x = rng.integers(lo, lo + span, size=(pixels, channels))
    dut = LookupTable(table=table, lo=lo, channels=channels, in_type=in_type,
                      out_type=out_type, lanes=lanes, block=block)
    words = [list(map(int, w)) for w in x.reshape(-1, lanes)]
    run = run_stream(dut, words, len(words), in_stall=0.3, out_stall=0.3, seed=2)
    got = out_type.decode(np.array(run.outputs).reshape(pixels, channels))
    np.testing.assert_array_equal(got, layer.execute(x))


def test_lookup_full_rate_and_latency():
    table = np.arange(16, dtype=np.int64)[None, ::-1] - 8
    dut = LookupTable(table=table, lo=0, channels=2, in_type=uint_type(4),
                      out_type=int_type(4), lanes=2)
    run = run_stream(dut, [[k % 16, (3 * k) % 16] for k in range(20)], 20)
    assert np.all(np.diff(run.out_cycles) == 1)
    assert run.out_cycles[0] - run.in_cycles[0] == LookupTable.latency


def test_lookup_memory_place_follows_the_family_rule():
    big = LookupTable(table=np.zeros((1, 4096), np.int64), lo=-2048, channels=1,
                      in_type=int_type(12), out_type=int_type(8), lanes=1, block=Family.ECP5)
    small = LookupTable(table=np.zeros((1, 8), np.int64), lo=0, channels=1,
                        in_type=uint_type(3), out_type=int_type(8), lanes=1, block=Family.ECP5)
    assert big.block and not small.block
    assert big.estimate(Family.ECP5).bram > 0 and small.estimate(Family.ECP5).bram == 0


@pytest.mark.parametrize("kwargs, error, message", [
    ({"lanes": 0}, TypeError, r"Lane count must be a positive integer, not 0"),
    ({"lanes": 3}, ValueError, r"Channel count \(4\) must be divisible by lanes \(3\)"),
    ({"table": np.zeros((2, 8), np.int64)}, ValueError,
     r"Table rows \(2\) must be 1 or the channel count \(4\)"),
    ({"lo": -9}, ValueError, r"Table inputs \[-9, -2\] must lie within INT4 \[-8, 7\]"),
    ({"table": np.full((1, 8), 9, np.int64)}, ValueError, r"Table values must be UINT3 "
                                                          r"values"),
    ({"in_type": BIPOLAR}, ValueError, r"A lookup table takes integer inputs"),
    ({"table": np.zeros(8)}, TypeError, r"Table must be a 2-D integer array"),
])
def test_lookup_rejects_bad_parameters(kwargs, error, message):
    args = {"table": np.zeros((1, 8), np.int64), "lo": -8, "channels": 4,
            "in_type": int_type(4), "out_type": uint_type(3), "lanes": 2, **kwargs}
    with pytest.raises(error, match=message):
        LookupTable(**args)
