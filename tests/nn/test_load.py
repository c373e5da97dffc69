"""Loading the four example models: structure, options, and the fixed-point input."""

import warnings

import numpy as np
import onnx
import pytest

from qloom.errors import QloomError
from qloom.nn.dtypes import BINARY, BIPOLAR, TERNARY, int_type, uint_type
from qloom.nn.load import FixedPointInputWarning, load

from .conftest import MODELS


@pytest.mark.parametrize("name, w_type, out_type, prefix, tail", [
    ("tfc_w1a1", BIPOLAR, BIPOLAR, ("Reshape", "Mul", "Sub", "BipolarQuant"),
     ("Sub", "Div", "Mul", "Add")),
    ("tfc_w2a2", TERNARY, TERNARY, ("Reshape", "Mul", "Sub", "Quant"),
     ("Sub", "Div", "Mul", "Add")),
    ("jettagging_w6a6", int_type(6), uint_type(6), (), ("Add", "Softmax")),
    ("unsw_nb15_w2a2", TERNARY, BIPOLAR, ("Add", "Div"), ()),
])
def test_example_structure(load_example, name, w_type, out_type, prefix, tail):
    net = load_example(name)
    ops = [layer.op for layer in net.layers]
    # many-level activations with power-of-two scales become shift-and-round requantizers
    assert ops[0] == "Dense" and ops[1] in ("MultiThreshold", "Requant")
    assert ops.count("Dense") == 4
    assert net.layers[0].w_type == w_type
    assert net.prefix_ops == prefix and net.tail_ops == tail
    acts = [l for l in net.layers if l.op in ("MultiThreshold", "Requant")]
    assert acts[-1].out_type == out_type or acts[0].out_type == out_type
    for layer in (l for l in acts if l.op == "MultiThreshold"):
        assert np.all(np.diff(layer.thresholds, axis=1) >= 0)
        lo, hi = layer.in_type.min, layer.in_type.max
        assert lo <= layer.thresholds.min() and layer.thresholds.max() <= hi


def test_tfc_input_and_weights(load_example):
    net = load_example("tfc_w1a1")
    assert net.tensors[net.input].dtype == BIPOLAR
    assert net.tensors[net.input].shape == (784,)
    # pixels >= 0.5 map to +1 (2x - 1 >= 0), the rest to -1
    x = np.array([0.0, 0.49, 0.5, 1.0] * 196, dtype=np.float32).reshape(1, 1, 28, 28)
    assert net.quantize(x)[0, :4].tolist() == [-1, -1, 1, 1]
    dense = net.layers[0]
    assert dense.weights.shape == (64, 784) and set(np.unique(dense.weights)) == {-1, 1}


def test_jet_default_input_warns_and_is_int16():
    with pytest.warns(FixedPointInputWarning, match="INT16 with scale 0.000976562"):
        net = load(MODELS / "jettagging_w6a6.onnx")
    info = net.tensors[net.input]
    assert info.dtype == int_type(16) and info.scale.tolist() == [2.0 ** -10]
    # rounding onto the grid and clipping at the type's range
    x = np.array([[1.0, 2 ** -11 * 3, -40.0, 40.0] + [0.0] * 12])
    assert net.quantize(x)[0, :4].tolist() == [1024, 2, -32768, 32767]


def test_jet_input_options(load_example):
    net = load_example("jettagging_w6a6", input_type=int_type(8), input_scale=0.125)
    info = net.tensors[net.input]
    assert info.dtype == int_type(8) and info.scale.tolist() == [0.125]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load(MODELS / "jettagging_w6a6.onnx", input_type=int_type(8), input_scale=0.125)


def test_unsw_annotation_and_binary_override(load_example):
    assert load_example("unsw_nb15_w2a2").tensors["global_in"].dtype == BIPOLAR
    net = load_example("unsw_nb15_w2a2", input_type=BINARY)
    assert net.tensors[net.input].dtype == BINARY
    assert net.quantize(np.array([[0.0, 1.0] * 300]))[0, :2].tolist() == [0, 1]


def test_model_proto_and_qloom_load(load_example):
    import qloom
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = qloom.load(onnx.load(MODELS / "tfc_w2a2.onnx"))
    ref = load_example("tfc_w2a2")
    assert np.array_equal(net.layers[0].weights, ref.layers[0].weights)


@pytest.mark.parametrize("options, error, message", [
    ({"input_type": "INT8"}, TypeError, r"^Input type must be a DataType, not 'INT8'$"),
    ({"input_scale": "1"}, TypeError, r"^Input scale must be a number, not '1'$"),
    ({"input_scale": True}, TypeError, r"^Input scale must be a number, not True$"),
    ({"input_scale": -0.5}, ValueError, r"^Input scale must be positive and finite, not -0.5$"),
    ({"input_scale": float("inf")}, ValueError,
     r"^Input scale must be positive and finite, not inf$"),
])
def test_option_validation(options, error, message):
    with pytest.raises(error, match=message):
        load(MODELS / "jettagging_w6a6.onnx", **options)


def test_model_argument_type():
    with pytest.raises(TypeError, match=r"^Model must be a path or an onnx.ModelProto, not 42$"):
        load(42)
    assert not issubclass(TypeError, QloomError)
