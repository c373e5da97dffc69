"""The real networks in this folder (made by make_nets.py) against qonnx's execute_onnx:
every quantized tensor identical on the saved digits frames, no float ties."""

import warnings
from pathlib import Path

import numpy as np
import pytest

from qloom.nn.check import compare_with_qonnx
from qloom.nn.ir import Conv, Dense

HERE = Path(__file__).resolve().parent

# name: (input shape, convolutions, dense layers)
NETS = {
    "cnv_w1a1": ((1, 3, 32, 32), 6, 3),
    "cnv_w2a2": ((1, 3, 32, 32), 6, 3),
    "lfc_w1a1": ((1, 1, 28, 28), 0, 4),
}


def _load(name):
    from qloom import load
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load(HERE / f"{name}.onnx")


def _check(name, frames):
    net = _load(name)
    shape, convs, denses = NETS[name]
    assert tuple(net.input_shape) == shape
    assert sum(isinstance(l, Conv) for l in net.layers) == convs
    assert sum(isinstance(l, Dense) for l in net.layers) == denses
    x = np.load(HERE / f"{name}_inputs.npy")
    assert x.dtype == np.float32 and x.shape == (200, *shape[1:])
    report = compare_with_qonnx(HERE / f"{name}.onnx", net, x[:frames])
    assert report.ok, report.summary()
    assert report.tie_frames == 0, report.summary()
    assert report.frames == len(x[:frames]) and report.max_output_rel_error == 0.0
    return report


@pytest.mark.parametrize("name", sorted(NETS))
def test_net_matches_qonnx(name):
    """A few frames of each network: loads, and is exact."""
    _check(name, 8)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(NETS))
def test_net_matches_qonnx_200(name):
    """All 200 saved frames (CNV: about a minute each on one core)."""
    print(_check(name, None).summary())
