"""Property tests: random QONNX graphs (dense and conv stacks, 1-8 bit weights and
activations, signed/unsigned/narrow, per-tensor and per-channel scales, BatchNorm, biases,
residual adds with shared scales) load and match execute_onnx exactly."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from qloom.errors import UnsupportedModelError
from qloom.nn.check import compare_with_qonnx
from qloom.nn.load import load

from .conftest import GraphBuilder

FAST = settings(max_examples=20, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _scale(draw, rng, shape=()):
    if draw(st.booleans()):
        return np.full(shape, 2.0 ** draw(st.integers(-6, 2)), np.float32)
    return rng.uniform(0.02, 2.0, shape).astype(np.float32)


def _act(draw, g, rng, x, channels, shape_c):
    """Bias / BatchNorm / ReLU then an activation quantizer."""
    if draw(st.booleans()):
        x = g.node("Add", [x, g.const(rng.normal(0, 2, shape_c))])
    if draw(st.booleans()):
        bn = [rng.uniform(-2, 2, channels), rng.normal(0, 1, channels),
              rng.normal(0, 3, channels), rng.uniform(0.1, 4, channels)]
        x = g.node("BatchNormalization", [x] + [g.const(p) for p in bn], epsilon=1e-5)
    if draw(st.booleans()):
        x = g.node("Relu", [x])
    if draw(st.integers(0, 5)) == 0:
        return g.bipolar(x, float(_scale(draw, rng))), 1
    bits = draw(st.integers(1, 8))
    signed = draw(st.booleans())
    return g.quant(x, float(_scale(draw, rng)), bits, signed,
                   signed and bits > 1 and draw(st.booleans())), bits


def _weights(draw, g, rng, shape, per_channel_shape):
    bits = draw(st.integers(1, 8))
    w = rng.normal(0, 1, shape).astype(np.float32)
    scale = _scale(draw, rng, per_channel_shape if draw(st.booleans()) else ())
    if bits == 1 and draw(st.booleans()):
        return g.bipolar(g.const(w), scale)
    return g.quant(g.const(w * float(np.max(scale)) * 2 ** (bits - 1) / 2), scale, bits,
                   signed=True, narrow=bits > 1 and draw(st.booleans()))


@st.composite
def dense_models(draw):
    g, rng = GraphBuilder(), np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    n = draw(st.integers(1, 12))
    x, _ = g.quant(g.input([1, n]), float(_scale(draw, rng)), draw(st.integers(1, 8)),
                   draw(st.booleans())), None
    for _ in range(draw(st.integers(1, 3))):
        m = draw(st.integers(1, 12))
        y = g.node("MatMul", [x, _weights(draw, g, rng, (n, m), (1, m))])
        x, n = _act(draw, g, rng, y, m, (m,))[0], m
        if draw(st.integers(0, 3)) == 0:     # residual: a second branch with a shared scale
            s = float(_scale(draw, rng))
            a = g.quant(x, s, 4, True)
            b = g.quant(g.node("MatMul", [a, _weights(draw, g, rng, (n, n), (1, n))]), s, 4)
            x = g.quant(g.node("Add", [a, b]), s, 5, True)
    return g.model(x), (1, g.inputs[0].type.tensor_type.shape.dim[1].dim_value)


@st.composite
def conv_models(draw):
    g, rng = GraphBuilder(), np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    c, h = draw(st.integers(1, 3)), draw(st.integers(4, 7))
    x = g.quant(g.input([1, c, h, h]), float(_scale(draw, rng)), draw(st.integers(1, 8)),
                draw(st.booleans()))
    for _ in range(draw(st.integers(1, 2))):
        oc, k = draw(st.integers(1, 4)), draw(st.integers(1, min(3, h)))
        pad = draw(st.integers(0, k // 2))
        y = g.node("Conv", [x, _weights(draw, g, rng, (oc, c, k, k), (oc, 1, 1, 1))],
                   kernel_shape=[k, k], pads=[pad] * 4, strides=[1, 1])
        h = h + 2 * pad - k + 1
        pool = h >= 2 and draw(st.booleans())
        if pool and draw(st.booleans()):     # MaxPool on the float accumulator chain
            y = g.node("Relu", [y])
            y = g.node("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])
            x, _ = _act(draw, g, rng, y, oc, (oc, 1, 1))
            h //= 2
        else:
            x, _ = _act(draw, g, rng, y, oc, (oc, 1, 1))
            if pool:
                x = g.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
                h //= 2
        c = oc
    flat = g.node("Flatten", [x], axis=1)
    m = draw(st.integers(1, 5))
    out = g.node("MatMul", [flat, _weights(draw, g, rng, (c * h * h, m), (1, m))])
    return g.model(out), (1, g.inputs[0].type.tensor_type.shape.dim[1].dim_value)


def _check(model):
    model, _ = model
    try:
        net = load(model)
    except UnsupportedModelError as e:   # the one legitimate refusal the generator can hit
        if "MaxPool before a decreasing activation" in str(e):
            reject()
        raise
    shape = net.input_shape
    x = np.random.default_rng(0).normal(0, 2, (6, *shape[1:])).astype(np.float32)
    report = compare_with_qonnx(model, net, x)
    assert report.ok, report.summary()


@FAST
@given(dense_models())
def test_random_dense(model):
    _check(model)


@FAST
@given(conv_models())
def test_random_conv(model):
    _check(model)


@pytest.mark.slow
@SLOW
@given(dense_models())
def test_random_dense_many(model):
    _check(model)


@pytest.mark.slow
@SLOW
@given(conv_models())
def test_random_conv_many(model):
    _check(model)
