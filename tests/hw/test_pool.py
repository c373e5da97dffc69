# amaranth: UnusedElaboratable=no
import numpy as np
import pytest

from qloom.hw.pool import MaxPool
from qloom.nn.dtypes import BIPOLAR, int_type, uint_type
from qloom.nn.ir import MaxPool as MaxPoolLayer
from qloom.sim.pysim import run_stream


def random_values(dtype, shape, rng):
    if dtype.bipolar:
        return rng.choice([-1, 1], size=shape)
    return rng.integers(dtype.min, dtype.max + 1, size=shape)


def _pair(v):
    return v if isinstance(v, tuple) else (v, v)


def ref_pool(x, kernel, stride, pads=(0, 0, 0, 0)):
    return MaxPoolLayer("pool", ("x",), "y", kernel=_pair(kernel), stride=_pair(stride),
                        pads=pads).execute(x)


def check(*, h, w, c, kernel, stride, dtype, lanes, pads=(0, 0, 0, 0), frames=2, stall=0.3,
          seed=0):
    """``kernel`` and ``stride``: one number for a square window, or a (KH, KW) pair."""
    rng = np.random.default_rng(seed)
    x = random_values(dtype, (frames, h, w, c), rng)
    dut = MaxPool(in_h=h, in_w=w, channels=c, kernel=_pair(kernel), stride=_pair(stride),
                  pads=pads, dtype=dtype, lanes=lanes)
    words = dtype.encode(x).reshape(-1, lanes).tolist()
    expect = dtype.encode(ref_pool(x, kernel, stride, pads)).reshape(-1, lanes).tolist()
    run = run_stream(dut, words, len(expect), in_stall=stall, out_stall=stall, seed=seed)
    assert run.outputs == expect
    return dut, run


@pytest.mark.parametrize("h,w,c,kernel,stride,dtype,lanes", [
    (4, 4, 2, 2, 2, int_type(8), 1),        # the common 2x2/2, signed
    (5, 7, 3, 2, 2, uint_type(8), 3),       # odd sizes floor, lanes = C
    (5, 5, 2, 3, 2, int_type(3), 2),        # overlapping windows
    (4, 3, 4, 1, 1, BIPOLAR, 2),            # 1x1: identity
    (3, 3, 1, 3, 1, BIPOLAR, 1),            # K = H, bipolar compares like values
    (6, 4, 2, 2, 3, uint_type(1), 1),       # stride > kernel skips pixels
    (4, 4, 6, 2, 1, int_type(4), 3),        # stride 1, non-power-of-two lanes
])
def test_maxpool_matches_reference(h, w, c, kernel, stride, dtype, lanes):
    check(h=h, w=w, c=c, kernel=kernel, stride=stride, dtype=dtype, lanes=lanes)


@pytest.mark.parametrize("h,w,c,kernel,stride,pads,dtype,lanes", [
    (1, 8, 2, (1, 2), (1, 2), (0, 0, 0, 0), int_type(8), 1),    # a lifted 1D pool
    (1, 7, 3, (1, 3), (1, 2), (0, 1, 0, 1), int_type(4), 3),    # 1D, padded ("same")
    (5, 4, 2, (3, 2), (2, 1), (0, 0, 0, 0), uint_type(5), 2),   # rectangular 2D
    (5, 5, 2, (3, 3), (2, 2), (1, 1, 1, 1), int_type(3), 1),    # ResNet's 3x3/2 pad 1
    (3, 4, 2, (2, 2), (2, 2), (0, 0, 1, 0), BIPOLAR, 2),        # pad is -1 for bipolar
    (4, 5, 2, (2, 2), (2, 2), (0, 0, 0, 1), uint_type(3), 1),   # Keras "same", odd width
])
def test_maxpool_rectangular_and_padded(h, w, c, kernel, stride, pads, dtype, lanes):
    check(h=h, w=w, c=c, kernel=kernel, stride=stride, pads=pads, dtype=dtype, lanes=lanes)


def test_maxpool_throughput():
    dut, run = check(h=8, w=8, c=2, kernel=2, stride=2, dtype=int_type(8), lanes=2, frames=3,
                     stall=0.0)
    n = dut.out_words_per_frame
    measured = run.out_cycles[3 * n - 1] - run.out_cycles[2 * n - 1]
    assert dut.cycles_per_frame == 64
    assert dut.cycles_per_frame <= measured <= 1.1 * dut.cycles_per_frame + 4


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(60))
def test_maxpool_random_sweep(seed):
    rng = np.random.default_rng(seed)
    kernel = int(rng.integers(1, 4))
    lanes = int(rng.choice([1, 2, 3]))
    dtype = [int_type(8), uint_type(1), BIPOLAR, int_type(2), uint_type(5)][seed % 5]
    check(h=int(rng.integers(kernel, 10)), w=int(rng.integers(kernel, 10)),
          c=lanes * int(rng.integers(1, 3)), kernel=kernel, stride=int(rng.integers(1, 4)),
          dtype=dtype, lanes=lanes, frames=3, seed=seed)


def test_maxpool_rejects_bad_parameters():
    ok = dict(in_h=4, in_w=6, channels=4, kernel=(2, 2), stride=(2, 2), dtype=int_type(8),
              lanes=2)
    cases = [
        (TypeError, r"kernel must be a tuple of 2 positive integers, not 2", dict(kernel=2)),
        (TypeError, r"stride must be a tuple of 2 positive integers, not \(2, 0\)",
         dict(stride=(2, 0))),
        (TypeError, r"pads must be a tuple of 4 non-negative integers, not \(1, 1\)",
         dict(pads=(1, 1))),
        (ValueError, r"pads \(0, 2, 0, 0\) must be smaller than the kernel \(2, 2\)",
         dict(pads=(0, 2, 0, 0))),
        (TypeError, r"lanes must be a positive integer, not True", dict(lanes=True)),
        (TypeError, r"in_w must be a positive integer, not -3", dict(in_w=-3)),
        (TypeError, r"dtype must be a qloom DataType, not 8", dict(dtype=8)),
        (ValueError, r"channels \(10\) must be divisible by lanes \(4\)",
         dict(channels=10, lanes=4)),
        (ValueError, r"kernel \(5, 5\) must not exceed the input \(4 x 6\)",
         dict(kernel=(5, 5))),
    ]
    for exc, message, change in cases:
        with pytest.raises(exc, match=message):
            MaxPool(**{**ok, **change})
