"""Elementwise activations between quantizers, each exact against qonnx's execute_onnx on
onnx.helper graphs (Quant -> dense or conv -> bias -> activation -> Quant -> dense): the
monotone ones as thresholds (decreasing ones flipped), the others as a lookup table over
a narrow input, and refused naming the node over a wide one."""

import numpy as np
import pytest

from qloom.errors import UnsupportedModelError
from qloom.nn.check import compare_with_qonnx
from qloom.nn.ir import Lookup, MultiThreshold, Requant
from qloom.nn.load import load

from .conftest import GraphBuilder

SLOPES = np.array([0.5, -0.25, 0.0, 2.0, 0.125, -1.0], np.float32)

# (op, attributes, constant inputs, opset): every monotone activation
MONOTONE = [
    ("Relu", {}, [], 13),
    ("LeakyRelu", {"alpha": 0.1}, [], 13),
    ("LeakyRelu", {"alpha": 3.0}, [], 13),
    ("PRelu", {}, [np.abs(SLOPES)], 13),
    ("Clip", {}, [np.float32(-0.75), np.float32(1.25)], 13),
    ("Clip", {}, [np.float32(-1.0), np.float32(1.0)], 13),       # HardTanh
    ("HardSigmoid", {"alpha": 0.4, "beta": 0.3}, [], 13),
    ("HardSigmoid", {"alpha": -0.7, "beta": 0.5}, [], 13),        # decreasing
    ("Sigmoid", {}, [], 13),
    ("Tanh", {}, [], 13),
    ("Elu", {"alpha": 0.7}, [], 13),
    ("Selu", {}, [], 13),
    ("Selu", {"alpha": 1.2, "gamma": -0.9}, [], 13),              # decreasing
    ("Celu", {"alpha": 0.5}, [], 13),
    ("Softplus", {}, [], 13),
    ("Softsign", {}, [], 13),
    ("ThresholdedRelu", {"alpha": 0.3}, [], 13),
    ("Erf", {}, [], 13),
    ("Neg", {}, [], 13),
]

# not monotone: a lookup table over a narrow input
NON_MONOTONE = [
    ("HardSwish", {}, [], 14),
    ("Gelu", {}, [], 20),
    ("Gelu", {"approximate": "tanh"}, [], 20),
    ("Mish", {}, [], 18),
    ("Abs", {}, [], 13),
    ("LeakyRelu", {"alpha": -0.5}, [], 13),
    ("PRelu", {}, [SLOPES], 13),
    ("Elu", {"alpha": -0.5}, [], 13),
]


def _id(case):
    op, attrs, consts, _ = case
    return op + "".join(f"-{k}{v}" for k, v in attrs.items()) + ("-c" if consts else "")


def dense_model(op, attrs, consts, opset, *, conv=False, in_bits=4, seed=0):
    """Quant -> MatMul (or a 3x3 Conv) -> Add bias -> op -> Quant -> MatMul."""
    g, rng = GraphBuilder(), np.random.default_rng(seed)
    shape = [1, 3, 6, 6] if conv else [1, 8]
    x = g.quant(g.input(shape), 0.125, in_bits, signed=True)
    if conv:
        w = g.quant(g.const(rng.normal(0, 0.3, (6, 3, 3, 3)).astype(np.float32)), 0.0625, 4,
                    narrow=True)
        x = g.node("Conv", [x, w], kernel_shape=[3, 3])
        bias = rng.normal(0, 0.2, (1, 6, 1, 1))
    else:
        w = g.quant(g.const(rng.normal(0, 0.3, (8, 6)).astype(np.float32)), 0.0625, 4,
                    narrow=True)
        x = g.node("MatMul", [x, w])
        bias = rng.normal(0, 0.2, (6,))
    x = g.node("Add", [x, g.const(bias.astype(np.float32))])
    if consts and conv and np.ndim(consts[0]) == 1:     # per-channel slopes on axis 1
        consts = [consts[0].reshape(6, 1, 1)] + consts[1:]
    x = g.node(op, [x] + [g.const(c) for c in consts], **attrs)
    x = g.quant(x, 0.0625, 5, signed=True)
    if conv:
        x = g.node("Flatten", [x], axis=1)
    w2 = g.quant(g.const(rng.normal(0, 0.3, (96 if conv else 6, 4)).astype(np.float32)),
                 0.125, 4, narrow=True)
    return g.model(g.node("MatMul", [x, w2]), opset=opset), shape


def assert_exact(model, shape, n=100):
    net = load(model)
    x = np.random.default_rng(7).normal(0, 0.6, (n, *shape[1:])).astype(np.float32)
    report = compare_with_qonnx(model, net, x)
    assert report.ok and report.tie_frames == 0, report.summary()
    return net


# every op after a dense layer; a few (per-channel constants on axis 1 of NCHW, a
# decreasing one) after a convolution too
CONV_CASES = {"PRelu-c", "HardSigmoid-alpha-0.7-beta0.5", "LeakyRelu-alpha0.1", "Sigmoid"}
MONOTONE_RUNS = [pytest.param(c, False, id=_id(c) + "-dense") for c in MONOTONE] + \
    [pytest.param(c, True, id=_id(c) + "-conv") for c in MONOTONE if _id(c) in CONV_CASES]


@pytest.mark.parametrize("case, conv", MONOTONE_RUNS)
def test_monotone_activation_becomes_thresholds(case, conv):
    op, attrs, consts, opset = case
    net = assert_exact(*dense_model(op, attrs, consts, opset, conv=conv))
    assert not any(isinstance(l, Lookup) for l in net.layers)
    assert any(isinstance(l, (MultiThreshold, Requant)) for l in net.layers)


@pytest.mark.parametrize("conv", [False, True], ids=["dense", "conv"])
@pytest.mark.parametrize("case", NON_MONOTONE, ids=[_id(c) for c in NON_MONOTONE])
def test_non_monotone_activation_becomes_a_lookup_table(case, conv):
    op, attrs, consts, opset = case
    net = assert_exact(*dense_model(op, attrs, consts, opset, conv=conv))
    lookups = [l for l in net.layers if isinstance(l, Lookup)]
    assert len(lookups) == 1 and not any(isinstance(l, MultiThreshold) for l in net.layers)
    # a table per channel where the channels' arithmetic differs (the per-channel bias)
    assert lookups[0].table.shape[0] == 6


def test_direct_lookup_between_two_quantizers_shares_one_table():
    """Quant -> HardSwish -> Quant: one table for every channel, over the 5-bit codes."""
    g = GraphBuilder()
    x = g.quant(g.input([1, 8]), 0.25, 5, signed=True)
    x = g.quant(g.node("HardSwish", [x]), 0.125, 4, signed=True)
    w = g.quant(g.const(np.random.default_rng(0).normal(0, 0.3, (8, 3)).astype(np.float32)),
                0.125, 4, narrow=True)
    net = assert_exact(g.model(g.node("MatMul", [x, w]), opset=14), [1, 8])
    table = next(l for l in net.layers if isinstance(l, Lookup))
    assert table.table.shape == (1, 32) and table.lo == -16


def test_non_monotone_activation_of_a_wide_input_is_refused():
    """A 16-input dense of 8-bit inputs and weights: a 19-bit accumulator."""
    g = GraphBuilder()
    x = g.quant(g.input([1, 16]), 0.125, 8, signed=True)
    w = g.quant(g.const(np.random.default_rng(0).normal(0, 0.3, (16, 4)).astype(np.float32)),
                0.0625, 8)
    x = g.node("Gelu", [g.node("MatMul", [x, w])])
    with pytest.raises(UnsupportedModelError, match=r"node 'Gelu\d+': Gelu is not monotone "
                       r"here, so the float arithmetic before the next quantizer cannot "
                       r"become thresholds; a lookup table takes an input of at most 12 "
                       r"bits, and its input 'matmul_\d+' spans \[-\d+, \d+\] \(\d\d bits\)"):
        load(g.model(g.quant(x, 0.0625, 4), opset=20))


def test_maxpool_before_a_non_monotone_activation_is_refused():
    g = GraphBuilder()
    x = g.quant(g.input([1, 2, 4, 4]), 0.25, 4, signed=True)
    w = g.quant(g.const(np.ones((2, 2, 1, 1), np.float32)), 0.25, 3)
    x = g.node("Mul", [g.node("Conv", [x, w], kernel_shape=[1, 1]), g.const(np.float32(0.7))])
    x = g.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    with pytest.raises(UnsupportedModelError, match=r"node 'MaxPool\d+': a MaxPool before "
                       r"HardSwish 'HardSwish\d+', which is not monotone"):
        load(g.model(g.quant(g.node("HardSwish", [x]), 0.25, 4), opset=14))
