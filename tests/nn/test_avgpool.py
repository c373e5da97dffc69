"""AveragePool, GlobalAveragePool and brevitas' truncated average pooling through the
frontend: each loads as an exact window sum (``AvgPool``) whose 1/(KH*KW) the next
quantizer's thresholds (or shift) absorb, and ``Network.execute`` equals qonnx's
``execute_onnx``; what has no exact integer form is refused naming the node."""

import numpy as np
import onnx
import pytest
from onnx import helper

from qloom.errors import UnsupportedModelError
from qloom.nn.check import compare_with_qonnx
from qloom.nn.dtypes import uint_type
from qloom.nn.load import load

from brevitas_pool import brevitas_pool_model

from .conftest import QONNX_DOMAIN, GraphBuilder


def inputs(shape, n=200, seed=1):
    return np.random.default_rng(seed).uniform(-0.5, 2.5, (n, *shape[1:])).astype(np.float32)


def assert_exact(model, net, shape, n=200):
    report = compare_with_qonnx(model, net, inputs(shape, n))
    assert report.ok, report.summary()
    return report


def pool_model(pool_attrs, *, in_scale=0.25, out_scale=0.25, out_bits=4, op="AveragePool",
               shape=(1, 3, 6, 6), bits=4):
    g = GraphBuilder()
    x = g.quant(g.input(list(shape)), in_scale, bits, signed=False)
    x = g.node(op, [x], **pool_attrs)
    return g.model(g.quant(x, out_scale, out_bits, signed=False)), g


@pytest.mark.parametrize("attrs, shape", [
    (dict(kernel_shape=[2, 2], strides=[2, 2]), (1, 3, 6, 6)),
    (dict(kernel_shape=[3, 3], strides=[1, 1]), (1, 3, 5, 5)),                  # k*k = 9
    (dict(kernel_shape=[3, 2], strides=[1, 2]), (1, 2, 5, 6)),                  # non-square
    (dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
          count_include_pad=1), (1, 2, 6, 6)),                                 # zero padding
    (dict(kernel_shape=[2, 2], strides=[2, 2]), (1, 1, 4, 4)),                  # 1 channel
])
def test_average_pool_before_quant_equals_qonnx(attrs, shape):
    model, _ = pool_model(attrs, shape=shape)
    net = load(model)
    assert [l.op for l in net.layers][:1] == ["AvgPool"]
    pool = net.layers[0]
    assert pool.kernel == tuple(attrs["kernel_shape"])
    assert pool.stride == tuple(attrs["strides"])
    assert net.tensors[pool.output].dtype == pool.sum_type(uint_type(4))
    assert_exact(model, net, shape)


def test_average_pool_with_non_power_of_two_scales():
    model, _ = pool_model(dict(kernel_shape=[3, 3], strides=[1, 1]), in_scale=0.3,
                          out_scale=0.17, out_bits=3, shape=(1, 2, 5, 5))
    assert_exact(model, load(model), (1, 2, 5, 5))


def test_global_average_pool_into_dense_equals_qonnx():
    g, rng = GraphBuilder(), np.random.default_rng(0)
    x = g.quant(g.input([1, 2, 6, 6]), 1 / 8, 4, signed=False)
    w = rng.normal(0, 1, (4, 2, 3, 3)).astype(np.float32)
    x = g.node("Conv", [x, g.quant(g.const(w), 0.25, 4, signed=True, narrow=True)],
               kernel_shape=[3, 3], pads=[1] * 4)
    x = g.quant(g.node("Relu", [x]), 0.25, 4, signed=False)
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x])], axis=1)
    wd = g.quant(g.const(rng.normal(0, 0.3, (4, 3)).astype(np.float32)), 0.125, 4)
    model = g.model(g.node("MatMul", [x, wd]))
    net = load(model)
    assert [l.op for l in net.layers] == ["Conv", "Requant", "AvgPool", "Flatten", "Dense"]
    pool = net.layers[2]
    assert pool.kernel == (6, 6) and pool.is_global((6, 6, 4))
    assert net.layers[-1].in_type == uint_type(10)          # 36 sums of UINT4
    assert_exact(model, net, (1, 2, 6, 6))


def test_average_pool_at_the_output_is_the_float_tail():
    g = GraphBuilder()
    x = g.quant(g.input([1, 2, 4, 4]), 0.25, 4, signed=False)
    model = g.model(g.node("GlobalAveragePool", [x]))
    net = load(model)
    assert [l.op for l in net.layers] == ["AvgPool"]
    assert_exact(model, net, (1, 2, 4, 4))


def _with_trunc_v1(model):
    model.opset_import.append(helper.make_opsetid(QONNX_DOMAIN, 1))
    return model


@pytest.mark.parametrize("kernel, rounding", [(2, "FLOOR"), (3, "ROUND"), (4, "ROUND")])
def test_truncated_average_pool_trunc_v2_equals_qonnx(kernel, rounding):
    """As brevitas 0.13 exports TruncAvgPool2d: AveragePool, then Trunc (v2) from the sum's
    scale ``s / k**2`` and width to ``out_bits``; k**2 = 9 divides by 16, not 9."""
    size, in_bits, out_bits = 2 * kernel, 4, 4
    g = GraphBuilder()
    x = g.quant(g.input([1, 3, size, size]), 0.25, in_bits, signed=False)
    x = g.node("AveragePool", [x], kernel_shape=[kernel] * 2, strides=[kernel] * 2)
    sum_bits = in_bits + int(np.ceil(np.log2(kernel * kernel)))
    sum_scale = np.float32(0.25 / kernel ** 2)
    out_scale = sum_scale * np.float32(2 ** (sum_bits - out_bits))
    x = g.node("Trunc", [x, g.const(sum_scale), g.const(0.0), g.const(float(sum_bits)),
                         g.const(out_scale), g.const(float(out_bits))],
               domain=QONNX_DOMAIN, signed=0, narrow=0, rounding_mode=rounding)
    model = g.model(x)
    net = load(model)
    assert [l.op for l in net.layers][0] == "AvgPool"
    assert net.layers[1].op in ("MultiThreshold", "Requant")
    assert_exact(model, net, (1, 3, size, size))


def test_truncated_sum_trunc_v1_equals_qonnx():
    """The older export: the average times k**2 (the sum), then Trunc (v1) of the sum."""
    g = GraphBuilder()
    x = g.quant(g.input([1, 2, 4, 4]), 0.5, 4, signed=False)
    x = g.node("GlobalAveragePool", [x])
    x = g.node("Mul", [x, g.const(16.0)])
    x = g.node("Trunc", [x, g.const(0.5), g.const(0.0), g.const(8.0), g.const(4.0)],
               domain=QONNX_DOMAIN, signed=0, rounding_mode="FLOOR")
    model = _with_trunc_v1(g.model(x))
    net = load(model)
    assert [l.op for l in net.layers] == ["AvgPool", "Requant"]   # proven: sum >> 4
    assert net.layers[1].shift == 4
    assert_exact(model, net, (1, 2, 4, 4))


def test_brevitas_trunc_avg_pool_equals_qonnx(tmp_path):
    path = brevitas_pool_model(tmp_path)
    assert {"AveragePool", "Trunc"} <= {n.op_type for n in onnx.load(path).graph.node}
    net = load(path)
    ops = [l.op for l in net.layers]
    assert ops.count("AvgPool") == 2
    report = compare_with_qonnx(path, net,
                                np.random.default_rng(2).normal(0, 1.5, (200, 2, 8, 8))
                                .astype(np.float32))
    assert report.ok and report.tie_frames == 0, report.summary()


@pytest.mark.parametrize("attrs, message", [
    (dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], count_include_pad=0),
     r"count_include_pad 0 divides the border windows"),
    (dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1), r"ceil_mode 1 is not supported"),
    (dict(kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_UPPER"),
     r"auto_pad SAME_UPPER is not supported"),
])
def test_average_pool_without_exact_form_is_refused(attrs, message):
    model, g = pool_model(attrs, shape=(1, 2, 5, 5))
    pool = next(n.name for n in model.graph.node if n.op_type == "AveragePool")
    with pytest.raises(UnsupportedModelError, match=message) as info:
        load(model)
    assert pool in str(info.value)


def test_average_pool_of_float_arithmetic_is_refused():
    g = GraphBuilder()
    x = g.quant(g.input([1, 2, 4, 4]), 0.25, 4, signed=False)
    w = g.quant(g.const(np.ones((2, 2, 1, 1), np.float32)), 1.0, 3)
    x = g.node("Relu", [g.node("Conv", [x, w], kernel_shape=[1, 1])])
    pooled = g.node("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
    model = g.model(g.quant(pooled, 0.5, 4, signed=False))
    pool = next(n.name for n in model.graph.node if n.op_type == "AveragePool")
    with pytest.raises(UnsupportedModelError,
                       match=r"AveragePool of float arithmetic .* has no exact integer form"
                             r".*put a quantizer before the pool") as info:
        load(model)
    assert pool in str(info.value)
