# amaranth: UnusedElaboratable=no
import numpy as np
import pytest

from qloom.hw.swg import SlidingWindow, WindowConfig, WindowOrder
from qloom.nn.dtypes import BIPOLAR, int_type, uint_type
from qloom.nn.ir import im2col
from qloom.sim.pysim import run_stream


def random_codes(dtype, shape, rng):
    return rng.integers(dtype.encode(dtype.min), dtype.encode(dtype.max) + 1, size=shape)


def to_words(pixels, simd):
    """``[..., C]`` codes -> list of words of ``simd`` lanes, channels-last order."""
    return pixels.reshape(-1, simd).tolist()


def ref_windows(frames, kernel, stride, pads, pad_code, simd, order=WindowOrder.KH_KW_C):
    """The expected output words for ``frames`` ``[N, H, W, C]`` of codes."""
    cols = im2col(frames, kernel, stride, pads, pad_value=pad_code)
    if order is WindowOrder.C_KH_KW:
        n, oh, ow, _ = cols.shape
        c = frames.shape[-1]
        cols = cols.reshape(n, oh, ow, kernel[0], kernel[1], c // simd, simd)
        cols = cols.transpose(0, 1, 2, 5, 3, 4, 6)
    return to_words(cols, simd)


def rtl_windows(dut, frames, *, stall=0.0, seed=0):
    expect_n = len(frames) * dut.out_words_per_frame
    return run_stream(dut, to_words(frames, dut.simd), expect_n,
                      in_stall=stall, out_stall=stall, seed=seed)


def check(*, h, w, c, kernel, stride=(1, 1), pads=(0, 0, 0, 0), dtype=uint_type(4), simd=1,
          pad_code=0, frames=2, stall=0.3, order=WindowOrder.KH_KW_C, seed=0):
    rng = np.random.default_rng(seed)
    x = random_codes(dtype, (frames, h, w, c), rng)
    dut = SlidingWindow(WindowConfig(in_h=h, in_w=w, channels=c, kernel=kernel, stride=stride,
                                     pads=pads, dtype=dtype, simd=simd, pad_code=pad_code,
                                     order=order))
    run = rtl_windows(dut, x, stall=stall, seed=seed)
    assert run.outputs == ref_windows(x, kernel, stride, pads, pad_code, simd, order)
    return dut, run


CORNERS = [
    # h, w, c, kernel, stride, pads, dtype, simd
    (4, 4, 1, (3, 3), (1, 1), (0, 0, 0, 0), uint_type(4), 1),
    (5, 4, 3, (3, 3), (1, 1), (1, 1, 1, 1), int_type(8), 3),       # simd = C, padding
    (4, 3, 10, (3, 3), (1, 1), (1, 1, 1, 1), int_type(8), 5),      # 40-bit words, padding
    (5, 5, 4, (3, 3), (2, 2), (1, 1, 1, 1), int_type(3), 2),       # stride 2
    (3, 5, 2, (1, 1), (1, 1), (0, 0, 0, 0), BIPOLAR, 1),           # 1x1, 1 bit
    (6, 5, 2, (1, 1), (2, 2), (0, 0, 0, 0), uint_type(1), 2),      # 1x1 stride 2 skips rows
    (3, 4, 2, (3, 4), (1, 1), (0, 0, 0, 0), uint_type(2), 1),      # K = H and K = W
    (4, 3, 1, (2, 3), (2, 1), (0, 2, 1, 0), int_type(4), 1),       # asymmetric everything
    (2, 2, 1, (3, 3), (1, 1), (2, 2, 2, 2), uint_type(3), 1),      # pads as large as kernel
]


@pytest.mark.parametrize("h,w,c,kernel,stride,pads,dtype,simd", CORNERS)
def test_swg_matches_im2col_under_stalls(h, w, c, kernel, stride, pads, dtype, simd):
    check(h=h, w=w, c=c, kernel=kernel, stride=stride, pads=pads, dtype=dtype, simd=simd)


def test_swg_pad_code():
    check(h=3, w=3, c=2, kernel=(3, 3), pads=(1, 1, 1, 1), dtype=int_type(4), simd=2,
          pad_code=-3, frames=1)
    check(h=2, w=3, c=1, kernel=(2, 2), pads=(1, 0, 0, 1), dtype=BIPOLAR, pad_code=1, frames=1)


def test_swg_channel_major_order():
    check(h=4, w=4, c=4, kernel=(2, 2), stride=(2, 2), simd=2, order=WindowOrder.C_KH_KW)


@pytest.mark.parametrize("h,w,c,kernel,stride,pads,simd", [
    (6, 6, 2, (3, 3), (1, 1), (1, 1, 1, 1), 1),
    (6, 6, 2, (3, 3), (1, 1), (0, 0, 0, 0), 2),
    (6, 6, 1, (2, 2), (2, 2), (0, 0, 0, 0), 1),
    (5, 5, 2, (1, 1), (1, 1), (0, 0, 0, 0), 1),
])
def test_swg_keeps_up(h, w, c, kernel, stride, pads, simd):
    frames = 3
    dut, run = check(h=h, w=w, c=c, kernel=kernel, stride=stride, pads=pads, simd=simd,
                     frames=frames, stall=0.0)
    n = dut.out_words_per_frame
    # steady state: the last frame, started right behind the previous one
    measured = run.out_cycles[frames * n - 1] - run.out_cycles[(frames - 1) * n - 1]
    assert dut.cycles_per_frame <= measured <= 1.1 * dut.cycles_per_frame + 4


@pytest.mark.parametrize("h,w,kernel,stride,pads", [
    (6, 6, (3, 3), (1, 1), (0, 0, 0, 0)),
    (6, 5, (3, 3), (1, 1), (1, 1, 1, 1)),
    (7, 7, (3, 3), (2, 2), (0, 0, 0, 0)),
    (3, 3, (3, 3), (1, 1), (0, 0, 0, 0)),       # the window is the image
])
def test_swg_frames_back_to_back_behind_a_slow_producer(h, w, kernel, stride, pads):
    """Output-bound (a consumer taking a word every 5th cycle) behind a producer slow
    enough to need most of a frame's time: the next frame's first window is taken in
    while the last output row is read, so frames follow at the consumer's pace. With a
    line buffer of KH + SH rows the first window waited for rows at each frame's start
    (CNV-w1a1: +9.9% over its plan)."""
    frames, out_period = 4, 5
    dut = SlidingWindow(WindowConfig(in_h=h, in_w=w, channels=1, kernel=kernel, stride=stride,
                                     pads=pads, dtype=uint_type(4), simd=1))
    n = dut.out_words_per_frame
    in_period = (out_period * n) // (2 * dut.in_words_per_frame)  # half the frame time
    assert in_period >= 2
    x = random_codes(uint_type(4), (frames, h, w, 1), np.random.default_rng(1))
    run = run_stream(dut, to_words(x, 1), frames * n, in_period=in_period,
                     out_period=out_period)
    assert run.outputs == ref_windows(x, kernel, stride, pads, 0, 1)
    measured = run.out_cycles[frames * n - 1] - run.out_cycles[(frames - 1) * n - 1]
    assert measured == out_period * n


def test_swg_buffer_rows():
    # KH + SH within a frame; at a frame's end the last output row's rows and the next
    # frame's first window
    assert [SlidingWindow(WindowConfig(in_h=h, in_w=4, channels=1, kernel=k, stride=s, pads=p,
                                       dtype=uint_type(4), simd=1)).buffer_rows
            for h, k, s, p in [(6, (3, 3), (1, 1), (0, 0, 0, 0)),
                               (6, (3, 3), (1, 1), (1, 1, 1, 1)),
                               (7, (3, 3), (2, 2), (0, 0, 0, 0)),
                               (8, (2, 2), (2, 2), (0, 0, 0, 0)),
                               (5, (1, 1), (1, 1), (0, 0, 0, 0))]] == [6, 4, 6, 4, 2]


def random_case(seed, max_size):
    rng = np.random.default_rng(100 + seed)
    kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    pads = tuple(int(p) for p in rng.integers(0, 3, size=4))
    h = int(rng.integers(max(1, kh - pads[0] - pads[2]), max_size + 1))
    w = int(rng.integers(max(1, kw - pads[1] - pads[3]), max_size + 1))
    simd = int(rng.choice([1, 2, 3]))
    c = simd * int(rng.integers(1, 3))
    stride = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    dtype = [uint_type(1), BIPOLAR, int_type(8), uint_type(5)][seed % 4]
    order = list(WindowOrder)[seed % 2]
    return dict(h=h, w=w, c=c, kernel=(kh, kw), stride=stride, pads=pads, dtype=dtype,
                simd=simd, frames=3, order=order, seed=seed)


@pytest.mark.parametrize("seed", range(12))
def test_swg_random_small(seed):
    check(**random_case(seed, 6))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12, 150))
def test_swg_random_sweep(seed):
    check(**random_case(seed, 12))


def test_swg_rejects_bad_parameters():
    ok = dict(in_h=4, in_w=4, channels=4, kernel=(3, 3), dtype=uint_type(4), simd=2)
    cases = [
        (TypeError, r"in_h must be a positive integer, not 0", dict(in_h=0)),
        (TypeError, r"channels must be a positive integer, not 2\.0", dict(channels=2.0)),
        (TypeError, r"simd must be a positive integer, not -1", dict(simd=-1)),
        (TypeError, r"kernel must be a tuple of 2 positive integers, not \(0, 3\)",
         dict(kernel=(0, 3))),
        (TypeError, r"kernel must be a tuple of 2 positive integers, not 3", dict(kernel=3)),
        (TypeError, r"stride must be a tuple of 2 positive integers, not \(1,\)",
         dict(stride=(1,))),
        (TypeError, r"pads must be a tuple of 4 non-negative integers, not \(0, 0, -1, 0\)",
         dict(pads=(0, 0, -1, 0))),
        (TypeError, r"dtype must be a qloom DataType, not 'UINT4'", dict(dtype="UINT4")),
        (TypeError, r"order must be a WindowOrder, not 'kh_kw_c'", dict(order="kh_kw_c")),
        (TypeError, r"pad_code must be an integer, not None", dict(pad_code=None)),
        (ValueError, r"channels \(10\) must be divisible by simd \(4\)",
         dict(channels=10, simd=4)),
        (ValueError, r"kernel \(5, 3\) does not fit the padded input \(4, 4\)",
         dict(kernel=(5, 3))),
        (ValueError, r"pad_code \(16\) must be a code of UINT4, in \[0, 15\]",
         dict(pad_code=16)),
        (ValueError, r"pad_code \(-1\) must be a code of BIPOLAR, in \[0, 1\]",
         dict(pad_code=-1, dtype=BIPOLAR)),
    ]
    for exc, message, change in cases:
        with pytest.raises(exc, match=message):
            SlidingWindow(WindowConfig(**{**ok, **change}))


def test_swg_geometry():
    dut = SlidingWindow(WindowConfig(in_h=7, in_w=6, channels=4, kernel=(3, 2), stride=(2, 1),
                                     pads=(1, 0, 1, 1), dtype=int_type(8), simd=2))
    assert (dut.out_h, dut.out_w) == (4, 6)
    assert dut.window == 24
    assert dut.in_words_per_frame == 7 * 6 * 2
    assert dut.out_words_per_frame == 4 * 6 * 12
    assert dut.cycles_per_frame == 4 * 6 * 12
    assert dut.buffer_words == 5 * 6 * 2


def test_swg_address_arithmetic_uses_no_multipliers():
    # a multiplier here would take one of the board's few DSP blocks
    from amaranth.back import rtlil
    dut = SlidingWindow(WindowConfig(in_h=7, in_w=6, channels=6, kernel=(3, 3),
                                     pads=(1, 1, 1, 1), dtype=int_type(8), simd=2))
    assert "cell $mul" not in rtlil.convert(dut)
