"""A 4-D or 3-D tensor flattened into a dense layer, as other tools write it: the input of
the QONNX model zoo's keyword-spotting MLP ([1, 1, 10, 49] reshaped into a 490-input
MatMul), NCHW and NHWC inputs and convolution outputs, with and without a Transpose before
the Flatten/Reshape, and the flatten before or after the input quantizer. Each is exact
against qonnx's ``execute_onnx`` frame for frame."""

import numpy as np
import pytest

from qloom.errors import UnsupportedModelError
from qloom.nn.check import compare_with_qonnx
from qloom.nn.load import load

from foreign_models import flatten, kws_mlp, mlp_head, quant_weights
from graph_builder import GraphBuilder

FRAMES = 50


def assert_exact(model, shape, frames=FRAMES):
    net = load(model)
    x = np.random.default_rng(7).uniform(-4, 4, (frames, *shape[1:])).astype(np.float32)
    report = compare_with_qonnx(model, net, x)
    assert report.ok and report.tie_frames == 0 and not report.mismatches, report.summary()
    assert report.frames == frames
    return net


@pytest.mark.parametrize("how", ["reshape", "reshape-1", "flatten"])
def test_kws_input_reshaped_into_a_490_input_matmul(how):
    net = assert_exact(kws_mlp(how=how), (1, 1, 10, 49))
    assert net.layers[0].op == "Flatten" and net.shape_of(net.layers[0].output) == (490,)
    assert net.layers[1].op == "Dense" and net.layers[1].mw == 490


@pytest.mark.parametrize("shape, transpose", [
    ((1, 3, 5, 6), None),             # NCHW input flattened
    ((1, 5, 6, 3), None),             # NHWC input flattened as it is (Keras Flatten)
    ((1, 5, 6, 3), (0, 3, 1, 2)),     # NHWC input transposed to NCHW, then flattened
    ((1, 3, 5, 6), (0, 2, 3, 1)),     # NCHW input transposed to NHWC, then flattened
    ((1, 10, 49), None),              # 3-D input
    ((1, 10, 49), (0, 2, 1)),         # 3-D input transposed, then flattened
    ((1, 10, 49, 1), None),
])
@pytest.mark.parametrize("how", ["reshape", "flatten"])
def test_input_flattened_into_a_dense_layer(shape, transpose, how):
    assert_exact(kws_mlp(shape, how, transpose), shape)


@pytest.mark.parametrize("shape", [(1, 1, 10, 49), (1, 5, 6, 3)])
def test_flatten_before_the_input_quantizer(shape):
    net = assert_exact(kws_mlp(shape, "flatten", before_quant=True), shape)
    assert net.prefix_ops == ("Flatten", "Quant")


def _conv_then_flatten(layout, how):
    """A convolution (NCHW), optionally transposed to NHWC, flattened into a dense layer."""
    g, shape = GraphBuilder(), (1, 2, 6, 5)
    x = g.quant(g.input(list(shape)), 0.25, 4, signed=False)
    w = np.random.default_rng(3).normal(0, 1, (3, 2, 3, 3)).astype(np.float32)
    x = g.node("Conv", [x, g.quant(g.const(w), 0.25, 4, narrow=True)], kernel_shape=[3, 3])
    x = g.quant(g.node("Relu", [x]), 0.5, 4, signed=False)        # [1, 3, 4, 3]
    if layout == "nhwc":
        x = g.node("Transpose", [x], perm=[0, 2, 3, 1])
    return g.model(mlp_head(g, flatten(g, x, how, (1, 3, 4, 3)), 36)), shape


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("how", ["reshape", "flatten"])
def test_convolution_output_flattened_into_a_dense_layer(layout, how):
    model, shape = _conv_then_flatten(layout, how)
    assert_exact(model, shape)


def test_transposed_activation_flattened_out_of_order_is_refused():
    """Inside the network (not the input, which the host lays out), a Transpose of a 3-D
    activation then flattened moves elements: refused naming the node, never executed
    wrongly."""
    g = GraphBuilder()
    x = g.quant(g.input([1, 10, 49]), 0.25, 8)
    x = g.quant(g.node("MatMul", [x, quant_weights(g, 49, 6, 5)]), 1.0, 4)     # [1, 10, 6]
    x = g.node("Transpose", [x], perm=[0, 2, 1])
    model = g.model(mlp_head(g, flatten(g, x, "flatten", (1, 6, 10)), 60))
    with pytest.raises(UnsupportedModelError, match=r"node 'Transpose\d+': Transpose of an "
                       r"activation from \[1, 10, 6\] to \[1, 6, 10\] reorders its elements"):
        load(model)
