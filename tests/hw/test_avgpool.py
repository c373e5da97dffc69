# amaranth: UnusedElaboratable=no
"""Average pooling templates (window sums) against the IR's ``AvgPool`` in pysim, under
random stalls on both sides: windowed and global, 1 channel, lanes = channels, non-square
windows and strides, padding, bipolar and signed inputs."""

import numpy as np
import pytest

from qloom.hw.avgpool import AvgPool, GlobalAvgPool
from qloom.nn.dtypes import BIPOLAR, int_type, uint_type
from qloom.nn.ir import AvgPool as AvgPoolLayer
from qloom.nn.ir import window_sum_type
from qloom.sim.pysim import run_stream


def random_values(dtype, shape, rng):
    if dtype.bipolar:
        return rng.choice([-1, 1], size=shape)
    return rng.integers(dtype.min, dtype.max + 1, size=shape)


def ref_avgpool(x, kernel, stride, pads=(0, 0, 0, 0)):
    return AvgPoolLayer("pool", ("x",), "y", kernel=kernel, stride=stride, pads=pads).execute(x)


def run(dut, dtype, x, expect, lanes, stall, seed):
    words = dtype.encode(x).reshape(-1, lanes).tolist()
    want = expect.reshape(-1, lanes).tolist()
    result = run_stream(dut, words, len(want), in_stall=stall, out_stall=stall, seed=seed)
    assert result.outputs == want
    return result


def check(*, h, w, c, kernel, stride, dtype, lanes, pads=(0, 0, 0, 0), frames=2, stall=0.3,
          seed=0):
    rng = np.random.default_rng(seed)
    x = random_values(dtype, (frames, h, w, c), rng)
    dut = AvgPool(in_h=h, in_w=w, channels=c, kernel=kernel, stride=stride, pads=pads,
                  dtype=dtype, lanes=lanes)
    expect = ref_avgpool(x, kernel, stride, pads)
    assert dut.acc_type == window_sum_type(dtype, kernel[0] * kernel[1])
    assert dut.acc_type.allows(expect)
    return dut, run(dut, dtype, x, expect, lanes, stall, seed)


def check_global(*, h, w, c, dtype, lanes, frames=3, stall=0.3, seed=0):
    rng = np.random.default_rng(seed)
    x = random_values(dtype, (frames, h, w, c), rng)
    dut = GlobalAvgPool(in_h=h, in_w=w, channels=c, dtype=dtype, lanes=lanes)
    expect = ref_avgpool(x, (h, w), (1, 1))
    assert expect.shape == (frames, 1, 1, c)
    assert dut.acc_type.allows(expect)
    return dut, run(dut, dtype, x, expect, lanes, stall, seed)


@pytest.mark.parametrize("h,w,c,kernel,stride,pads,dtype,lanes", [
    (4, 4, 2, (2, 2), (2, 2), (0, 0, 0, 0), uint_type(4), 1),     # the common 2x2/2
    (5, 7, 3, (2, 2), (2, 2), (0, 0, 0, 0), int_type(8), 3),      # odd sizes floor, lanes = C
    (5, 5, 1, (3, 3), (2, 2), (0, 0, 0, 0), int_type(3), 1),      # 1 channel, overlapping
    (6, 5, 4, (3, 2), (1, 2), (0, 0, 0, 0), uint_type(2), 2),     # non-square window, stride
    (4, 4, 2, (3, 3), (1, 1), (1, 1, 1, 1), int_type(4), 2),      # zero padding (count_include_pad)
    (5, 4, 2, (2, 3), (2, 1), (0, 1, 1, 0), uint_type(3), 1),     # asymmetric padding
    (4, 3, 4, (1, 1), (1, 1), (0, 0, 0, 0), BIPOLAR, 2),          # 1x1: identity on values
    (3, 3, 2, (2, 2), (1, 1), (0, 0, 0, 0), BIPOLAR, 1),          # bipolar sums values
])
def test_avgpool_matches_reference(h, w, c, kernel, stride, pads, dtype, lanes):
    check(h=h, w=w, c=c, kernel=kernel, stride=stride, pads=pads, dtype=dtype, lanes=lanes)


@pytest.mark.parametrize("h,w,c,dtype,lanes", [
    (4, 4, 3, uint_type(4), 1),      # several channel words in the ring
    (3, 5, 4, int_type(8), 4),       # lanes = channels: one word, non-square image
    (2, 2, 1, uint_type(1), 1),      # 1 channel
    (1, 1, 6, int_type(3), 2),       # a 1x1 image: the sum is the pixel
    (5, 5, 4, BIPOLAR, 2),           # bipolar values
])
def test_global_avgpool_matches_reference(h, w, c, dtype, lanes):
    check_global(h=h, w=w, c=c, dtype=dtype, lanes=lanes)


def test_avgpool_throughput():
    dut, result = check(h=8, w=8, c=2, kernel=(2, 2), stride=(2, 2), dtype=int_type(8),
                        lanes=2, frames=3, stall=0.0)
    n = dut.out_words_per_frame
    measured = result.out_cycles[3 * n - 1] - result.out_cycles[2 * n - 1]
    assert dut.cycles_per_frame == 64
    assert dut.cycles_per_frame <= measured <= 1.1 * dut.cycles_per_frame + 4


def test_global_avgpool_throughput():
    dut, result = check_global(h=6, w=6, c=4, dtype=uint_type(4), lanes=2, frames=3,
                               stall=0.0)
    n = dut.out_words_per_frame
    measured = result.out_cycles[3 * n - 1] - result.out_cycles[2 * n - 1]
    assert dut.cycles_per_frame == 72
    assert dut.cycles_per_frame <= measured <= dut.cycles_per_frame + 2


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(40))
def test_avgpool_random_sweep(seed):
    rng = np.random.default_rng(seed)
    kernel = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    lanes = int(rng.choice([1, 2, 3]))
    dtype = [int_type(8), uint_type(1), BIPOLAR, int_type(2), uint_type(5)][seed % 5]
    pads = (0, 0, 0, 0) if dtype.bipolar else tuple(int(p) for p in rng.integers(0, 2, 4))
    check(h=int(rng.integers(kernel[0], 8)), w=int(rng.integers(kernel[1], 8)),
          c=lanes * int(rng.integers(1, 3)), kernel=kernel,
          stride=(int(rng.integers(1, 4)), int(rng.integers(1, 4))), pads=pads,
          dtype=dtype, lanes=lanes, frames=3, seed=seed)


def test_avgpool_rejects_bad_parameters():
    ok = dict(in_h=4, in_w=6, channels=4, kernel=(2, 2), stride=(2, 2), dtype=int_type(8),
              lanes=2)
    cases = [
        (TypeError, r"kernel must be a tuple of 2 positive integers, not 2", dict(kernel=2)),
        (TypeError, r"lanes must be a positive integer, not True", dict(lanes=True)),
        (TypeError, r"in_w must be a positive integer, not -3", dict(in_w=-3)),
        (TypeError, r"dtype must be a qloom DataType, not 8", dict(dtype=8)),
        (ValueError, r"channels \(10\) must be divisible by lanes \(4\)",
         dict(channels=10, lanes=4)),
        (ValueError, r"kernel \(5, 2\) does not fit the padded input \(4, 6\)",
         dict(kernel=(5, 2))),
        (ValueError, r"a bipolar input cannot be zero padded",
         dict(dtype=BIPOLAR, pads=(1, 0, 0, 0))),
    ]
    for exc, message, change in cases:
        with pytest.raises(exc, match=message):
            AvgPool(**{**ok, **change})
    with pytest.raises(ValueError, match=r"channels \(6\) must be divisible by lanes \(4\)"):
        GlobalAvgPool(in_h=2, in_w=2, channels=6, dtype=int_type(4), lanes=4)
    with pytest.raises(TypeError, match=r"in_h must be a positive integer, not 0"):
        GlobalAvgPool(in_h=0, in_w=2, channels=6, dtype=int_type(4), lanes=2)
