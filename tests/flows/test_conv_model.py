"""A convolutional QONNX network (built with onnx.helper, as Brevitas exports them: input
quantizer, Conv with per-channel weight scales, BatchNorm, ReLU, activation quantizer,
MaxPool, a second conv, Flatten and a dense classifier) compiled to a sliding window plus
systolic array pipeline and simulated bit for bit against the reference."""

import numpy as np
import pytest

import qloom
from qloom.nn.check import compare_with_qonnx

from graph_builder import GraphBuilder


def conv_model(seed=0):
    g, rng = GraphBuilder(), np.random.default_rng(seed)

    def weights(shape, bits):
        scale = rng.uniform(0.05, 0.2, (shape[0],) + (1,) * (len(shape) - 1)).astype(np.float32)
        w = rng.normal(0, 1, shape).astype(np.float32) * scale * 2 ** (bits - 2)
        return g.quant(g.const(w), scale, bits, signed=True, narrow=True)

    def act(x, channels, bits):
        bn = [rng.uniform(0.5, 2, channels), rng.normal(0, 1, channels),
              rng.normal(0, 2, channels), rng.uniform(0.5, 4, channels)]
        x = g.node("BatchNormalization", [x] + [g.const(p) for p in bn], epsilon=1e-5)
        return g.quant(g.node("Relu", [x]), 0.25, bits, signed=False)

    x = g.quant(g.input([1, 2, 8, 8]), 1 / 8, 4, signed=False)
    x = g.node("Conv", [x, weights((4, 2, 3, 3), 4)], kernel_shape=[3, 3], pads=[1] * 4,
               strides=[1, 1])
    x = g.node("MaxPool", [act(x, 4, 3)], kernel_shape=[2, 2], strides=[2, 2])
    x = g.node("Conv", [x, weights((6, 4, 3, 3), 3)], kernel_shape=[3, 3], pads=[0] * 4,
               strides=[1, 1])
    x = g.node("Flatten", [act(x, 6, 2)], axis=1)
    w = g.quant(g.const(rng.normal(0, 0.3, (24, 5)).astype(np.float32)), 0.125, 4, signed=True)
    out = g.node("MatMul", [x, w])
    return g.model(out)


def inputs(n, seed=3):
    return (np.random.default_rng(seed).uniform(0, 2, (n, 2, 8, 8))).astype(np.float32)


def test_conv_model_reference_matches_qonnx():
    model = conv_model()
    report = compare_with_qonnx(model, qloom.load(model), inputs(50))
    assert report.ok, report.summary()


@pytest.mark.parametrize("backpressure", [0.0, 0.3])
def test_conv_model_rtl_bit_exact(tmp_path, backpressure):
    design = qloom.compile(conv_model(), tmp_path / "out")
    engines = [row["engine"] for row in design.report["layers"]]
    assert engines[0] == "swg+systolic" and "maxpool" in engines
    res = design.simulate(inputs(40), backpressure=backpressure, progress=False)
    assert res["mismatches"] == 0, res["first_mismatch"]
    if not backpressure:
        ideal = design.report["ideal_ii_cycles"]
        assert ideal <= res["ii_cycles"] <= 1.1 * ideal, (res["ii_cycles"], ideal)
