"""What real convolutional networks are made of, through the frontend: depthwise
convolutions with per-channel input scales, residual Adds of scales differing by an integer
factor, Concat along channels, asymmetric activation quantizers (zero points, padding with
them), "same" padding, and Transpose/Reshape around convolutions. Each is exact against
qonnx's ``execute_onnx``; what has no exact integer form is refused naming the node."""

import numpy as np
import pytest

from qloom.errors import UnsupportedModelError
from qloom.nn.check import compare_with_qonnx
from qloom.nn.ir import Concat, Conv, IntMul
from qloom.nn.load import load

from .conftest import GraphBuilder


def inputs(shape, n=200, seed=1):
    return np.random.default_rng(seed).uniform(-0.5, 2.5, (n, *shape[1:])).astype(np.float32)


def assert_exact(model, shape, n=200):
    net = load(model)
    report = compare_with_qonnx(model, net, inputs(shape, n))
    assert report.ok and report.tie_frames == 0, report.summary()
    return net


def conv(g, x, cin, cout, k=3, seed=0, group=1, bits=4, **attrs):
    w = np.random.default_rng(seed).normal(0, 1, (cout, cin // group, k, k))
    wq = g.quant(g.const(w.astype(np.float32)), 0.25, bits, signed=True, narrow=True)
    return g.node("Conv", [x, wq], kernel_shape=[k, k], group=group, **attrs)


def test_depthwise_keeps_per_channel_input_scales():
    g, shape = GraphBuilder(), (1, 4, 6, 6)
    x = g.quant(g.input(list(shape)), 0.25, 4, signed=False)
    # power-of-two scales: qonnx's float sums are then exact (no float ties to report)
    x = g.quant(g.node("Relu", [conv(g, x, 4, 4)]),
                np.array([0.5, 0.25, 0.125, 1.0], np.float32).reshape(1, 4, 1, 1), 4,
                signed=False)
    x = conv(g, x, 4, 4, group=4, seed=1, pads=[1, 1, 1, 1])
    net = assert_exact(g.model(g.quant(x, 0.5, 4)), shape)
    dw = [l for l in net.layers if isinstance(l, Conv) and l.depthwise]
    assert len(dw) == 1 and np.unique(net.tensors[dw[0].output].scale).size == 4


def test_per_channel_scales_into_a_full_convolution_are_refused():
    g = GraphBuilder()
    x = g.quant(g.input([1, 4, 6, 6]), 0.25, 4, signed=False)
    x = g.quant(conv(g, x, 4, 4), np.array([0.5, 0.25, 0.3, 0.7], np.float32)
                .reshape(1, 4, 1, 1), 4, signed=False)
    with pytest.raises(UnsupportedModelError, match=r"node 'Conv\d+': the input of this Conv "
                       r"has one scale per channel \(4 different\) and the layer sums across "
                       r"channels: no integer form is exact"):
        load(g.model(conv(g, x, 4, 2, seed=1)))


@pytest.mark.parametrize("sa, sb, factor", [(0.5, 0.125, 4), (0.25, 0.75, 3), (0.5, 0.5, None)])
def test_residual_add_aligned_by_an_integer_factor(sa, sb, factor):
    g, shape = GraphBuilder(), (1, 3, 5, 5)
    x = g.quant(g.input(list(shape)), 0.25, 4, signed=False)
    a = g.quant(conv(g, x, 3, 3, pads=[1] * 4), sa, 4)
    b = g.quant(conv(g, x, 3, 3, seed=1, pads=[1] * 4), sb, 5)
    y = g.quant(g.node("Relu", [g.node("Add", [a, b])]), 0.5, 4, signed=False)
    net = assert_exact(g.model(y), shape)
    muls = [l.factor for l in net.layers if isinstance(l, IntMul)]
    assert muls == ([factor] if factor else [])


def test_residual_add_without_exact_alignment_is_refused():
    g = GraphBuilder()
    x = g.quant(g.input([1, 3, 5, 5]), 0.25, 4, signed=False)
    a = g.quant(conv(g, x, 3, 3), 0.5, 4)
    b = g.quant(conv(g, x, 3, 3, seed=1), 0.2, 4)
    with pytest.raises(UnsupportedModelError, match=r"node 'Add\d+': Add of tensors with "
                       r"scales \[0.5\] and \[0.2\d*\] \(ratio 2.5\): no exact integer alignment"):
        load(g.model(g.node("Add", [a, b])))


def test_concat_along_channels():
    g, shape = GraphBuilder(), (1, 2, 6, 6)
    x = g.quant(g.input(list(shape)), 0.25, 4, signed=False)
    a = g.quant(g.node("Relu", [conv(g, x, 2, 3, k=1)]), 0.25, 4, signed=False)
    b = g.quant(g.node("Relu", [conv(g, x, 2, 2, seed=1, pads=[1] * 4)]), 0.5, 3,
                signed=False)
    y = g.node("Concat", [a, b], axis=1)
    y = conv(g, y, 5, 5, group=5, seed=2, pads=[1] * 4)    # depthwise: scales per channel
    net = assert_exact(g.model(g.quant(y, 1.0, 5)), shape)
    cat = next(l for l in net.layers if isinstance(l, Concat))
    assert net.tensors[cat.output].shape == (6, 6, 5)


def test_concat_along_space_is_refused():
    g = GraphBuilder()
    x = g.quant(g.input([1, 2, 4, 4]), 0.25, 4, signed=False)
    a = g.quant(conv(g, x, 2, 2, k=1), 0.25, 4)
    b = g.quant(conv(g, x, 2, 2, k=1, seed=1), 0.25, 4)
    with pytest.raises(UnsupportedModelError, match=r"node 'Concat\d+': Concat along axis 2 "
                       r".*qloom concatenates along the channel axis"):
        load(g.model(g.node("Concat", [a, b], axis=2)))


def test_asymmetric_quantizer_pads_with_its_zero_point():
    g, shape = GraphBuilder(), (1, 2, 6, 6)
    x = g.quant(g.input(list(shape)), 1 / 16, 8, signed=False, zero=32.0)
    x = g.quant(conv(g, x, 2, 4, pads=[1] * 4), 0.5, 4, signed=False, zero=5.0)
    y = conv(g, x, 4, 3, seed=1, pads=[1, 0, 1, 2])
    net = assert_exact(g.model(g.quant(y, 0.5, 6)), shape)
    convs = [l for l in net.layers if isinstance(l, Conv)]
    assert [c.pad_value for c in convs] == [32, 5]
    assert net.tensors[net.input].zero_point == 32


@pytest.mark.parametrize("auto_pad, pads", [("SAME_UPPER", (1, 1, 2, 2)),
                                            ("SAME_LOWER", (2, 2, 1, 1)),
                                            ("VALID", (0, 0, 0, 0))])
def test_auto_pad(auto_pad, pads):
    g, shape = GraphBuilder(), (1, 2, 7, 7)
    x = g.quant(g.input(list(shape)), 0.25, 4, signed=False)
    y = conv(g, x, 2, 3, k=4, strides=[2, 2], auto_pad=auto_pad)
    net = assert_exact(g.model(g.quant(y, 0.5, 5)), shape)
    assert net.layers[0].pads == pads


def test_nhwc_transposes_around_convolutions():
    """A Keras export: NHWC input transposed to NCHW, a convolution, back to NHWC, then
    flattened into a dense layer; and a per-pixel MatMul on an NHWC tensor."""
    g, shape = GraphBuilder(), (1, 5, 6, 3)
    x = g.quant(g.input(list(shape)), 0.25, 4, signed=False)
    x = g.node("Transpose", [x], perm=[0, 3, 1, 2])
    x = g.quant(g.node("Relu", [conv(g, x, 3, 4, pads=[1] * 4)]), 0.5, 4, signed=False)
    x = g.node("Transpose", [x], perm=[0, 2, 3, 1])
    w1 = g.quant(g.const(np.random.default_rng(3).normal(0, 1, (4, 6)).astype(np.float32)),
                 0.25, 4, narrow=True)
    x = g.quant(g.node("MatMul", [x, w1]), 1.0, 4)          # [1, 5, 6, 6] per pixel
    x = g.node("Reshape", [x, g.const(np.array([1, 180]), np.int64)])
    w2 = g.quant(g.const(np.random.default_rng(4).normal(0, 1, (180, 3)).astype(np.float32)),
                 0.25, 4, narrow=True)
    net = assert_exact(g.model(g.node("MatMul", [x, w2])), shape)
    assert [l.op for l in net.layers][:1] == ["Conv"]


def test_transpose_that_moves_elements_is_refused():
    g = GraphBuilder()
    x = g.quant(g.input([1, 2, 4, 6]), 0.25, 4, signed=False)
    x = g.quant(conv(g, x, 2, 2, k=1), 0.25, 4)
    x = g.node("Transpose", [x], perm=[0, 1, 3, 2])      # swaps H and W
    with pytest.raises(UnsupportedModelError, match=r"node 'Conv\d+': the input of this Conv "
                       r"is transposed \(its channels-last order is not \[H, W, C\] of "
                       r"\[N, C, H, W\]\)"):
        load(g.model(conv(g, x, 2, 2, k=1, seed=1)))
    g = GraphBuilder()
    x = g.quant(g.input([1, 2, 4, 6]), 0.25, 4, signed=False)
    x = g.quant(conv(g, x, 2, 2, k=1), 0.25, 4)
    x = g.node("Reshape", [x, g.const(np.array([1, 4, 2, 6]), np.int64)])
    with pytest.raises(UnsupportedModelError, match=r"node 'Reshape\d+': Reshape of an "
                       r"activation from \[1, 2, 4, 6\] to \[1, 4, 2, 6\] reorders its "
                       r"elements"):
        load(g.model(conv(g, x, 4, 2, k=1, seed=1)))
