"""The example models against qonnx's execute_onnx: every quantized tensor identical."""

import numpy as np
import pytest

from qloom.nn.check import compare_with_qonnx
from qloom.nn.dtypes import BINARY

from .conftest import MODELS


def _inputs(name, n, seed=0):
    rng = np.random.default_rng(seed)
    if name.startswith("tfc"):    # pixels k/255 and uniform in [0, 1]
        half = n // 2
        return np.concatenate([rng.integers(0, 256, (half, 1, 28, 28)) / 255,
                               rng.random((n - half, 1, 28, 28))]).astype(np.float32)
    if name.startswith("jet"):    # realistic features, on the INT16 / 2**-10 input grid
        return (np.round(rng.normal(0, 1.5, (n, 16)) * 1024) / 1024).astype(np.float32)
    return rng.choice([-1.0, 1.0], (n, 600)).astype(np.float32)   # UNSW: bipolar features


CASES = [("tfc_w1a1", {}), ("tfc_w2a2", {}), ("jettagging_w6a6", {}),
         ("unsw_nb15_w2a2", {}), ("unsw_nb15_w2a2", {"input_type": BINARY})]


def _check(load_example, name, options, n, seed):
    net = load_example(name, **options)
    x = _inputs(name, n, seed)
    if options.get("input_type") == BINARY:
        x = (x > 0).astype(np.float32)    # UNSW with 0/1 features on a BINARY input
    report = compare_with_qonnx(MODELS / f"{name}.onnx", net, x)
    assert report.ok, report.summary()
    assert report.frames == n and len(report.tensors) >= 3
    return report


@pytest.mark.parametrize("name, options", CASES)
def test_examples_match_qonnx(load_example, name, options):
    report = _check(load_example, name, options, 24, seed=1)
    assert report.tie_frames == 0, report.summary()


@pytest.mark.slow
@pytest.mark.parametrize("name, options", CASES)
def test_examples_match_qonnx_1000(load_example, name, options):
    report = _check(load_example, name, options, 1000, seed=2)
    print(report.summary())


def test_corrupted_network_is_reported(load_example):
    """A wrong threshold must show up as an unexplained mismatch at that tensor."""
    import dataclasses
    net = load_example("tfc_w2a2")
    layer = net.layers[1]
    bad = dataclasses.replace(layer, thresholds=layer.thresholds + 40)
    broken = dataclasses.replace(net, layers=[net.layers[0], bad, *net.layers[2:]])
    report = compare_with_qonnx(MODELS / "tfc_w2a2.onnx", broken, _inputs("tfc_w2a2", 4))
    assert not report.ok
    assert report.unexplained[0].tensor == net.onnx_names[layer.output]
    assert "MISMATCH" in report.summary()


def test_wrong_input_shape(load_example):
    from qloom.errors import QloomError
    with pytest.raises(QloomError, match=r"inputs must have shape \[N, 16\]"):
        compare_with_qonnx(MODELS / "jettagging_w6a6.onnx", load_example("jettagging_w6a6"),
                           np.zeros((2, 15)))
