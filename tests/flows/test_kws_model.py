"""The keyword-spotting MLP's layout (a [1, 1, 10, 49] input reshaped into a 490-input
MatMul, as in the QONNX model zoo) compiled and simulated in Icarus under random
backpressure, bit for bit against ``Network.execute``; and ``Network.execute`` itself
against qonnx."""

import shutil

import numpy as np
import pytest

import qloom
from qloom.nn.check import compare_with_qonnx

from foreign_models import kws_mlp

SHAPE = (1, 1, 10, 49)


def _inputs(n, seed=5):
    return np.random.default_rng(seed).uniform(-4, 4, (n, *SHAPE[1:])).astype(np.float32)


def test_kws_reference_matches_qonnx():
    model = kws_mlp()
    report = compare_with_qonnx(model, qloom.load(model), _inputs(40))
    assert report.ok and not report.mismatches and report.frames == 40, report.summary()


@pytest.mark.skipif(shutil.which("iverilog") is None,
                    reason="Icarus Verilog is not installed (apt-get install iverilog)")
def test_kws_rtl_bit_exact_under_backpressure(tmp_path):
    model = kws_mlp()
    design = qloom.compile(model, tmp_path / "out")
    x = _inputs(20)
    res = design.simulate(x, backpressure=0.3, progress=False)
    assert res["frames"] == 20 and res["mismatches"] == 0, res["first_mismatch"]
    outputs = np.load(tmp_path / "out" / "sim" / "outputs.npy")
    np.testing.assert_array_equal(outputs, qloom.load(model).execute(x))
