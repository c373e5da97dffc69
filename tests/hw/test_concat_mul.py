# amaranth: UnusedElaboratable=no
"""ChannelConcat and ConstMul against the IR's Concat and IntMul, with random input gaps
and output stalls (nothing lost or duplicated), and their parameter checks."""

import numpy as np
import pytest

from qloom.hw.concat import ChannelConcat
from qloom.hw.int_mul import ConstMul
from qloom.nn.dtypes import BIPOLAR, TERNARY, int_type, smallest_type, uint_type
from qloom.nn.ir import Concat, IntMul

from stream_bench import run, values


@pytest.mark.parametrize("a_type, b_type, ca, cb, lanes", [
    (uint_type(4), uint_type(4), 4, 2, 2),
    (uint_type(3), int_type(5), 3, 6, 3),
    (BIPOLAR, BIPOLAR, 2, 2, 1),
    (TERNARY, uint_type(2), 1, 3, 1),
])
@pytest.mark.parametrize("stall", [0.0, 0.3])
def test_concat_matches_reference(a_type, b_type, ca, cb, lanes, stall):
    rng, pixels = np.random.default_rng(ca * 7 + cb), 10
    a = values(a_type, pixels * ca, rng).reshape(1, pixels, ca)
    b = values(b_type, pixels * cb, rng).reshape(1, pixels, cb)
    out_type = a_type if a_type == b_type else smallest_type(min(a_type.min, b_type.min),
                                                            max(a_type.max, b_type.max))
    dut = ChannelConcat(a_type=a_type, b_type=b_type, out_type=out_type, a_channels=ca,
                        b_channels=cb, lanes=lanes)
    words = lambda t, v: t.encode(v).reshape(-1, lanes).tolist()
    expect = Concat("cat", ("a", "b"), "y").execute(a, b)
    out, cycles = run(dut, [(dut.i_a, words(a_type, a)), (dut.i_b, words(b_type, b))],
                      pixels * (ca + cb) // lanes, lanes, stall=stall)
    assert np.array_equal(np.array(out).reshape(-1), out_type.encode(expect).reshape(-1))
    if not stall:       # one word per cycle
        assert cycles[-1] - cycles[0] == len(out) - 1


@pytest.mark.parametrize("in_type, factor, lanes", [
    (int_type(6), 2, 1), (uint_type(4), 4, 3), (int_type(5), 3, 2), (BIPOLAR, 8, 2),
    (uint_type(1), 1, 1)])
@pytest.mark.parametrize("stall", [0.0, 0.3])
def test_const_mul_matches_reference(in_type, factor, lanes, stall):
    rng, n = np.random.default_rng(factor), 12
    x = values(in_type, n * lanes, rng)
    dut = ConstMul(in_type=in_type, factor=factor, lanes=lanes)
    expect = IntMul("m", ("x",), "y", factor=factor).execute(x)
    assert dut.out_type.allows(expect)
    out, cycles = run(dut, [(dut.i, in_type.encode(x).reshape(n, lanes).tolist())], n, lanes,
                      stall=stall)
    assert np.array_equal(np.array(out).reshape(-1), dut.out_type.encode(expect))
    if not stall:
        assert cycles[-1] - cycles[0] == n - 1


def test_bad_parameters():
    with pytest.raises(TypeError, match=r"Factor must be a positive integer, not 0"):
        ConstMul(in_type=int_type(4), factor=0, lanes=1)
    with pytest.raises(TypeError, match=r"in_type must be a qloom DataType, not 'INT4'"):
        ConstMul(in_type="INT4", factor=2, lanes=1)
    with pytest.raises(ValueError, match=r"b_channels \(3\) must be divisible by lanes \(2\)"):
        ChannelConcat(a_type=uint_type(2), b_type=uint_type(2), out_type=uint_type(2),
                      a_channels=2, b_channels=3, lanes=2)
    with pytest.raises(ValueError, match=r"b_type INT5 does not fit out_type UINT4"):
        ChannelConcat(a_type=uint_type(4), b_type=int_type(5), out_type=uint_type(4),
                      a_channels=2, b_channels=2, lanes=1)
