"""qonnx's channels-last domain (``qonnx.custom_op.channels_last``): Conv, MaxPool and
BatchNormalization on ``[N, H, W, C]`` tensors with ``[OC, KH, KW, IC/group]`` weights, as
``ConvertToChannelsLastAndClean`` writes them. The brevitas exports in tests/nets (made by
``make_channels_last.py``) and onnx.helper graphs are exact against ``execute_onnx``, keep
their input layout, and compile to RTL that is bit exact under backpressure."""

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from qloom.errors import UnsupportedModelError
from qloom.nn.check import compare_with_qonnx
from qloom.nn.ir import Conv, MaxPool
from qloom.nn.load import load
from qloom.nn.passes.channels_last import DOMAIN

from .conftest import GraphBuilder

NETS = Path(__file__).resolve().parents[1] / "nets"


def frames(shape, n, seed=1):
    return np.random.default_rng(seed).normal(0, 1, (n, *shape[1:])).astype(np.float32)


@pytest.mark.parametrize("name, shape", [("channels_last_cnn", (1, 16, 16, 3)),
                                         ("channels_last_cnn_nchw", (1, 3, 16, 16))])
def test_brevitas_channels_last_exports_are_exact(name, shape):
    path = NETS / f"{name}.onnx"
    model = onnx.load(path)
    assert {(n.op_type, n.domain) for n in model.graph.node} >= {
        ("Conv", DOMAIN), ("MaxPool", DOMAIN), ("BatchNormalization", DOMAIN)}
    net = load(path)
    assert tuple(net.input_shape) == shape          # the input keeps the model's layout
    convs = [l for l in net.layers if isinstance(l, Conv)]
    assert [c.kernel for c in convs] == [(3, 3), (3, 3), (1, 1)]
    assert convs[1].depthwise and convs[1].stride == (2, 2)
    assert any(isinstance(l, MaxPool) for l in net.layers)
    report = compare_with_qonnx(path, net, frames(shape, 40))
    assert report.ok and report.tie_frames == 0, report.summary()
    assert len(report.tensors) >= 4     # every activation quantizer compared exactly


def _cl_model(g, output, opset=13):
    model = g.model(output, opset=opset)
    model.opset_import.append(helper.make_opsetid(DOMAIN, opset))
    return model


def conv(g, x, cin, cout, k=3, group=1, seed=0, **attrs):
    w = np.random.default_rng(seed).normal(0, 1, (cout, cin // group, k, k))
    wq = g.quant(g.const(w.astype(np.float32)), 0.25, 4, signed=True, narrow=True)
    attrs = {"strides": [1, 1], "dilations": [1, 1], "pads": [0, 0, 0, 0], **attrs}
    return g.node("Conv", [x, wq], kernel_shape=[k, k], group=group, **attrs)


def _cl_conv(g, x, cin, cout, k=3, group=1, seed=0, **attrs):
    w = np.random.default_rng(seed).normal(0, 1, (cout, k, k, cin // group))
    wq = g.quant(g.const(w.astype(np.float32)), 0.25, 4, signed=True, narrow=True)
    attrs = {"kernel_shape": [k, k], "strides": [1, 1], "dilations": [1, 1],
             "pads": [0, 0, 0, 0], "group": group, **attrs}
    return g.node("Conv", [x, wq], domain=DOMAIN, **attrs)


def _batchnorm(g, x, channels, seed=2):
    rng = np.random.default_rng(seed)
    params = [rng.uniform(0.5, 1.5, channels), rng.uniform(-0.5, 0.5, channels),
              rng.uniform(-1, 1, channels), rng.uniform(0.5, 2, channels)]
    return g.node("BatchNormalization", [x] + [g.const(p.astype(np.float32)) for p in params],
                  epsilon=1e-5, momentum=0.9)


def _to_channels_last(model):
    """An NCHW model as qonnx's ConvertToChannelsLastAndClean writes it (NHWC input)."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean
    from qonnx.transformation.infer_shapes import InferShapes
    from qonnx.util.cleanup import cleanup_model
    wrapper = cleanup_model(ModelWrapper(model)).transform(InferShapes())
    return wrapper.transform(ConvertToChannelsLastAndClean(make_input_channels_last=True)).model


def test_pool_before_the_quantizer_and_asymmetric_padding():
    """Conv (pads [0, 0, 1, 1], stride 2) -> BN -> MaxPool -> Relu -> Quant -> depthwise
    Conv, written channels-last by qonnx: the MaxPool moves after the thresholds, the
    pads keep their order."""
    g, shape = GraphBuilder(), [1, 2, 9, 9]
    x = g.quant(g.input(shape), 0.125, 6, signed=True)
    x = conv(g, x, 2, 4, pads=[0, 0, 1, 1], strides=[2, 2])
    x = g.node("MaxPool", [_batchnorm(g, x, 4)], kernel_shape=[2, 2], strides=[2, 2],
               pads=[0, 0, 0, 0])
    x = g.quant(g.node("Relu", [x]), 0.5, 3, signed=False)
    x = conv(g, x, 4, 4, k=2, group=4, seed=3)
    model = _to_channels_last(g.model(g.quant(x, 0.25, 4)))
    assert sum(n.domain == DOMAIN for n in model.graph.node) == 4
    net = load(model)
    assert tuple(net.input_shape) == (1, 9, 9, 2)
    first = next(l for l in net.layers if isinstance(l, Conv))
    assert first.pads == (0, 0, 1, 1) and first.stride == (2, 2)
    report = compare_with_qonnx(model, net, frames(net.input_shape, 100))
    assert report.ok and report.tie_frames == 0, report.summary()


def test_channels_last_ops_need_no_shapes_in_the_file():
    """qonnx infers a channels-last op's output shape from its inputs' shapes, given
    beforehand; qloom's shape inference (``passes/infer_shapes.py``) needs none where the
    op's kernel or an earlier channels-last op tells the rank: the model without its
    value_info loads to the same network."""
    g = GraphBuilder()
    x = g.quant(g.input([1, 2, 7, 7]), 0.25, 4, signed=False)
    x = g.quant(g.node("Relu", [_batchnorm(g, conv(g, x, 2, 4, pads=[1] * 4), 4)]), 0.5, 4)
    model = _to_channels_last(g.model(g.quant(conv(g, x, 4, 3, k=1, seed=1), 0.5, 4)))
    bare = onnx.ModelProto()
    bare.CopyFrom(model)
    del bare.graph.value_info[:]
    net, net_bare = load(model), load(bare)
    x = frames(net.input_shape, 50)
    np.testing.assert_array_equal(net.execute(x), net_bare.execute(x))
    report = compare_with_qonnx(model, net_bare, x)
    assert report.ok and report.tie_frames == 0, report.summary()


def test_unknown_input_shapes_of_channels_last_ops_are_named():
    """A channels-last BatchNormalization (no kernel to tell its rank) of a tensor whose
    shape nothing gives."""
    g = GraphBuilder()
    x = g.node("Relu", [g.quant(g.input([1, 6, 6, 2]), 0.25, 4, signed=False)])
    x = g.nodes[-1].output[0]
    bn = _batchnorm(g, x, 2)
    g.nodes[-1].domain = DOMAIN
    with pytest.raises(UnsupportedModelError, match=r"BatchNormalization\d+': the rank of "
                       r"this channels-last BatchNormalization's input 'relu_\d+' is "
                       r"unknown: the model gives no shape for it"):
        load(_cl_model(g, g.quant(bn, 0.5, 4)))


def test_channels_last_conv_of_an_nchw_tensor_is_refused():
    """A channels-last Conv reading an activation laid out NCHW (a transpose away)."""
    g = GraphBuilder()
    x = g.quant(g.input([1, 4, 6, 6]), 0.25, 4, signed=False)
    x = g.quant(g.node("Conv", [x, g.quant(g.const(np.ones((4, 4, 1, 1), np.float32)),
                                          0.25, 4)], kernel_shape=[1, 1]), 0.5, 4)
    x = g.node("Transpose", [x], perm=[0, 1, 3, 2])
    y = _cl_conv(g, x, 6, 2, k=1)
    model = _cl_model(g, y)
    weights = g.nodes[-1].input[1]
    model.graph.value_info.extend([          # qonnx's shape inference needs them
        helper.make_tensor_value_info(x, onnx.TensorProto.FLOAT, [1, 4, 6, 6]),
        helper.make_tensor_value_info(weights, onnx.TensorProto.FLOAT, [2, 1, 1, 6])])
    with pytest.raises(UnsupportedModelError, match=r"Conv\d+': the input of this Conv is "
                       r"transposed \(its channels-last order is not \[H, W, C\] of "
                       r"\[N, H, W, C\]\)"):
        load(model)


@pytest.mark.parametrize("change, message", [
    (lambda n: n.attribute.append(helper.make_attribute("auto_pad", "SAME_UPPER")),
     r"channels-last Conv with auto_pad SAME_UPPER: qonnx's channels-last ops read "
     r"explicit pads only"),
    (lambda n: setattr(n, "op_type", "AveragePool"),
     r"op AveragePool does not exist in qonnx's domain 'qonnx.custom_op.channels_last' "
     r"\(it defines BatchNormalization, Conv, MaxPool\)"),
    (lambda n: n.attribute.append(helper.make_attribute("colour", 3)),
     r"Conv has no attribute 'colour'"),
    (lambda n: n.attribute.remove(next(a for a in n.attribute if a.name == "dilations")),
     r"channels-last Conv without the attribute dilations: qonnx requires dilations, group, "
     r"kernel_shape, pads, strides on this op"),
])
def test_bad_channels_last_nodes_are_refused(change, message):
    g = GraphBuilder()
    x = g.quant(g.input([1, 2, 6, 6]), 0.25, 4, signed=False)
    model = _to_channels_last(g.model(g.quant(conv(g, x, 2, 2), 0.5, 4)))
    change(next(n for n in model.graph.node if n.domain == DOMAIN))
    with pytest.raises(UnsupportedModelError, match=message):
        load(model)


def test_channels_last_domain_opset_must_be_an_onnx_opset():
    g = GraphBuilder()
    x = g.quant(g.input([1, 2, 6, 6]), 0.25, 4, signed=False)
    model = _to_channels_last(g.model(g.quant(conv(g, x, 2, 2), 0.5, 4)))
    next(o for o in model.opset_import if o.domain == DOMAIN).version = 99
    with pytest.raises(UnsupportedModelError, match=r"opset 99 of the domain "
                       r"'qonnx.custom_op.channels_last'; its ops wrap the standard ones"):
        load(model)
