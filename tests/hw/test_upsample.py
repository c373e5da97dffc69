# amaranth: UnusedElaboratable=no
import numpy as np
import pytest

from qloom.hw.upsample import Upsample
from qloom.nn.dtypes import BIPOLAR, int_type, uint_type
from qloom.nn.ir import Upsample as UpsampleLayer
from qloom.sim.pysim import run_stream

from .test_pool import random_values


def ref_upsample(x, scale):
    return UpsampleLayer("up", ("x",), "y", scale=scale).execute(x)


def check(*, h, w, c, scale, dtype, lanes, frames=2, stall=0.3, seed=0):
    rng = np.random.default_rng(seed)
    x = random_values(dtype, (frames, h, w, c), rng)
    dut = Upsample(in_h=h, in_w=w, channels=c, scale=scale, dtype=dtype, lanes=lanes)
    words = dtype.encode(x).reshape(-1, lanes).tolist()
    expect = dtype.encode(ref_upsample(x, scale)).reshape(-1, lanes).tolist()
    run = run_stream(dut, words, len(expect), in_stall=stall, out_stall=stall, seed=seed)
    assert run.outputs == expect
    return dut, run


@pytest.mark.parametrize("h,w,c,scale,dtype,lanes", [
    (3, 4, 2, (2, 2), uint_type(4), 2),     # the U-Net case: one word per pixel
    (3, 5, 4, (2, 2), int_type(4), 1),      # several words per pixel
    (2, 3, 6, (3, 2), int_type(3), 2),      # unequal factors, 3 words per pixel
    (2, 2, 2, (1, 3), BIPOLAR, 1),          # no vertical repetition: a pixel buffer
    (4, 1, 1, (2, 1), uint_type(1), 1),     # one pixel per row
    (2, 3, 3, (1, 1), uint_type(8), 3),     # identity
])
def test_upsample_matches_reference(h, w, c, scale, dtype, lanes):
    check(h=h, w=w, c=c, scale=scale, dtype=dtype, lanes=lanes)


def test_upsample_throughput():
    """One output word per cycle: the planner's cycles per frame."""
    dut, run = check(h=4, w=4, c=4, scale=(2, 2), dtype=int_type(4), lanes=2, frames=3,
                     stall=0.0)
    n = dut.out_words_per_frame
    measured = run.out_cycles[3 * n - 1] - run.out_cycles[2 * n - 1]
    assert dut.cycles_per_frame == n == 128
    assert measured == dut.cycles_per_frame


def test_input_words_needed_is_the_reference_index_map():
    dut = Upsample(in_h=3, in_w=2, channels=4, scale=(2, 3), dtype=int_type(4), lanes=2)
    index = np.arange(3 * 2 * 4).reshape(1, 3, 2, 4)
    # the output word's input word (the last of its elements) plus one
    want = ref_upsample(index, (2, 3)).reshape(-1, 2)[:, -1] // 2 + 1
    assert dut.input_words_needed().tolist() == want.tolist()


def test_upsample_rejects_bad_parameters():
    ok = dict(in_h=4, in_w=6, channels=4, scale=(2, 2), dtype=int_type(8), lanes=2)
    cases = [
        (TypeError, r"scale must be a tuple of 2 positive integers, not 2", dict(scale=2)),
        (TypeError, r"scale must be a tuple of 2 positive integers, not \(2, 0\)",
         dict(scale=(2, 0))),
        (TypeError, r"lanes must be a positive integer, not True", dict(lanes=True)),
        (TypeError, r"in_w must be a positive integer, not -3", dict(in_w=-3)),
        (TypeError, r"dtype must be a qloom DataType, not 8", dict(dtype=8)),
        (ValueError, r"channels \(10\) must be divisible by lanes \(4\)",
         dict(channels=10, lanes=4)),
    ]
    for exc, message, change in cases:
        with pytest.raises(exc, match=message):
            Upsample(**{**ok, **change})
