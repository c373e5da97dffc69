"""A small CNN with average pooling (conv -> quant -> 2x2 AveragePool -> quant ->
GlobalAveragePool -> dense, built with onnx.helper) compiled and simulated on Icarus bit for
bit against the reference: the windowed and the global average pool templates in a whole
accelerator, with the pools' 1/(KH*KW) folded into the following thresholds and dense."""

import numpy as np
import pytest

import qloom
from qloom.nn.check import compare_with_qonnx

from graph_builder import GraphBuilder


def avgpool_model(seed=0):
    g, rng = GraphBuilder(), np.random.default_rng(seed)
    x = g.quant(g.input([1, 2, 8, 8]), 1 / 8, 4, signed=False)
    w = rng.normal(0, 1, (4, 2, 3, 3)).astype(np.float32)
    x = g.node("Conv", [x, g.quant(g.const(w), 0.25, 4, signed=True, narrow=True)],
               kernel_shape=[3, 3], pads=[1] * 4)
    x = g.quant(g.node("Relu", [x]), 0.25, 4, signed=False)
    x = g.node("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = g.quant(x, 0.3, 3, signed=False)
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x])], axis=1)
    wd = g.quant(g.const(rng.normal(0, 0.3, (4, 3)).astype(np.float32)), 0.125, 4)
    return g.model(g.node("MatMul", [x, wd]))


def inputs(n, seed=3):
    return np.random.default_rng(seed).uniform(0, 2, (n, 2, 8, 8)).astype(np.float32)


def test_avgpool_model_reference_matches_qonnx():
    model = avgpool_model()
    net = qloom.load(model)
    assert [l.op for l in net.layers] == ["Conv", "Requant", "AvgPool", "MultiThreshold",
                                          "AvgPool", "Flatten", "Dense"]
    report = compare_with_qonnx(model, net, inputs(100))
    assert report.ok, report.summary()


@pytest.mark.parametrize("backpressure", [0.0, 0.3])
def test_avgpool_model_rtl_bit_exact(tmp_path, backpressure):
    design = qloom.compile(avgpool_model(), tmp_path / "out")
    engines = [row["engine"] for row in design.report["layers"]]
    assert "avgpool" in engines and "global_avgpool" in engines
    res = design.simulate(inputs(24), backpressure=backpressure, progress=False)
    assert res["mismatches"] == 0, res["first_mismatch"]
    if not backpressure:
        ideal = design.report["ideal_ii_cycles"]
        assert ideal <= res["ii_cycles"] <= 1.1 * ideal, (res["ii_cycles"], ideal)


def test_brevitas_trunc_avgpool_rtl_bit_exact(tmp_path):
    from brevitas_pool import brevitas_pool_model
    design = qloom.compile(brevitas_pool_model(tmp_path), tmp_path / "out")
    engines = [row["engine"] for row in design.report["layers"]]
    assert engines.count("avgpool") == 1 and engines.count("global_avgpool") == 1
    x = np.random.default_rng(1).normal(0, 1.5, (16, 2, 8, 8)).astype(np.float32)
    res = design.simulate(x, progress=False)
    assert res["mismatches"] == 0, res["first_mismatch"]
