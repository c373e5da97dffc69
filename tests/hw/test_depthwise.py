# amaranth: UnusedElaboratable=no
"""DepthwiseMAC against the IR's depthwise Conv: windows fed in (channel word, kh, kw)
order, with and without stalls, over the three datapaths and several lane counts."""

import numpy as np
import pytest

from qloom.hw.depthwise import DepthwiseMAC
from qloom.nn.dtypes import BIPOLAR, TERNARY, int_type, uint_type
from qloom.nn.ir import Conv, im2col

from stream_bench import run, values




@pytest.mark.parametrize("w_type, in_type, channels, lanes, kernel", [
    (int_type(4), uint_type(4), 6, 3, (3, 3)),
    (int_type(4), int_type(8), 4, 4, (3, 2)),
    (BIPOLAR, BIPOLAR, 4, 2, (3, 3)),
    (TERNARY, uint_type(3), 3, 1, (2, 2)),
    (int_type(3), BIPOLAR, 2, 1, (1, 1)),
])
@pytest.mark.parametrize("stall", [0.0, 0.3])
def test_depthwise_matches_ir(w_type, in_type, channels, lanes, kernel, stall):
    rng = np.random.default_rng(channels * 10 + lanes)
    kh, kw = kernel
    weights = values(w_type, channels * kh * kw, rng).reshape(channels, kh, kw, 1)
    x = values(in_type, 4 * 5 * channels, rng).reshape(1, 4, 5, channels)
    if in_type.bipolar:
        pads = (0, 0, 0, 0)      # a bipolar tensor is never zero-padded
    else:
        pads = (1, 1, 1, 1)
    layer = Conv("dw", ("x",), "y", weights=weights, w_type=w_type, in_type=in_type,
                 pads=pads, groups=channels)
    expect = layer.execute(x)                                # [1, OH, OW, C]
    cols = im2col(x, kernel, (1, 1), pads).reshape(-1, kh * kw, channels)
    words = [in_type.encode(pixel[pos, cw * lanes:(cw + 1) * lanes]).tolist()
             for pixel in cols for cw in range(channels // lanes) for pos in range(kh * kw)]
    dut = DepthwiseMAC(weights=weights.reshape(channels, kh * kw), w_type=w_type,
                       in_type=in_type, lanes=lanes)
    n_out = expect.size // lanes
    out, cycles = run(dut, [(dut.i, words)], n_out, lanes, stall=stall)
    assert dut.acc_type.allows(expect)
    assert np.array_equal(np.array(out).reshape(-1), expect.reshape(-1))
    if not stall:       # one input word per cycle: K cycles per output word
        assert cycles[-1] - cycles[0] == (n_out - 1) * kh * kw


def test_depthwise_rejects_bad_parameters():
    w = np.zeros((4, 9), dtype=np.int64)
    with pytest.raises(ValueError, match=r"channels \(4\) must be divisible by lanes \(3\)"):
        DepthwiseMAC(weights=w, w_type=int_type(4), in_type=uint_type(4), lanes=3)
    with pytest.raises(TypeError, match=r"weights must be a 2-D integer numpy array"):
        DepthwiseMAC(weights=w.reshape(4, 3, 3), w_type=int_type(4), in_type=uint_type(4),
                     lanes=1)
    with pytest.raises(ValueError, match=r"weights hold values outside INT2"):
        DepthwiseMAC(weights=w + 5, w_type=int_type(2), in_type=uint_type(4), lanes=1)
