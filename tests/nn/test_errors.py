"""Every refusal is a QloomError naming the node and what is supported."""

import numpy as np
import pytest
from onnx import TensorProto, helper

from qloom.errors import QloomError, UnsupportedModelError
from qloom.nn.load import load

from .conftest import MODELS


def _dense(graph, x, n_in, n_out, bits=2, seed=0):
    w = np.random.default_rng(seed).integers(-1, 2, (n_in, n_out)).astype(np.float32)
    return graph.node("MatMul", [x, graph.quant(graph.const(w), 1.0, bits)])


def test_unsupported_op(graph):
    x = graph.quant(graph.input([1, 8]), 1.0, 4)
    y = graph.node("Sin", [_dense(graph, x, 8, 4)])
    z = graph.quant(y, 0.5, 4)
    with pytest.raises(UnsupportedModelError, match=r"node 'Sin\d+': op Sin is not supported"
                       r".*Quant/BipolarQuant") as err:
        load(graph.model(z))
    assert err.value.node.startswith("Sin")


def test_unquantized_float_layer(graph):
    x = graph.quant(graph.input([1, 8]), 1.0, 4)
    h = graph.node("Relu", [_dense(graph, x, 8, 4)])
    y = _dense(graph, h, 4, 2)
    with pytest.raises(UnsupportedModelError,
                       match=r"node 'MatMul\d+': unquantized float layer: the input of this "
                             r"MatMul is not quantized"):
        load(graph.model(y))


def test_unquantized_float_weights(graph):
    x = graph.quant(graph.input([1, 8]), 1.0, 4)
    y = graph.node("MatMul", [x, graph.const(np.ones((8, 2)))])
    with pytest.raises(UnsupportedModelError, match=r"node 'MatMul\d+': unquantized float "
                                                    r"weights"):
        load(graph.model(y))


def test_dynamic_shape(graph):
    x = graph.quant(graph.input([1, "features"]), 1.0, 4)
    with pytest.raises(UnsupportedModelError, match=r"node 'x': dynamic shape: input "
                                                    r"dimension 1 is features"):
        load(graph.model(_dense(graph, x, 8, 2)))


def test_symbolic_batch_is_accepted(graph):
    x = graph.quant(graph.input(["N", 8]), 1.0, 4)
    net = load(graph.model(_dense(graph, x, 8, 2)))
    assert net.input_shape == (1, 8)


@pytest.mark.parametrize("bits, shown", [(17, "bit width 17"), (2.5, r"bit width \[2.5\]"),
                                         (0, "bit width 0")])
def test_unsupported_bit_width(graph, bits, shown):
    x = graph.quant(graph.input([1, 8]), 1.0, 4)
    y = graph.quant(_dense(graph, x, 8, 4), 1.0, bits)
    with pytest.raises(UnsupportedModelError, match=rf"node 'Quant\d+': {shown} is not "
                                                    rf"supported: .* from 1 to 16"):
        load(graph.model(y))


def test_weight_bit_width(graph):
    x = graph.quant(graph.input([1, 8]), 1.0, 4)
    with pytest.raises(UnsupportedModelError, match=r"bit width 20 is not supported"):
        load(graph.model(_dense(graph, x, 8, 4, bits=20)))


def test_activation_zero_point(graph):
    x = graph.quant(graph.input([1, 8]), 1.0, 4, zero=1.0)
    with pytest.raises(UnsupportedModelError, match=r"nonzero zero point"):
        load(graph.model(_dense(graph, x, 8, 4)))


def test_non_monotone_chain(graph):
    x = graph.quant(graph.input([1, 8]), 1.0, 4)
    y = graph.quant(graph.node("Abs", [_dense(graph, x, 8, 4)]), 1.0, 4)
    with pytest.raises(UnsupportedModelError, match=r"node 'Quant\d+': the float arithmetic "
                                                    r"before this quantizer is not monotone"):
        load(graph.model(y))


def test_different_scales_in_residual_add(graph):
    x = graph.quant(graph.input([1, 8]), 1.0, 4)
    a = graph.quant(_dense(graph, x, 8, 4), 0.5, 4)
    b = graph.quant(_dense(graph, x, 8, 4, seed=1), 0.25, 4)
    with pytest.raises(UnsupportedModelError, match=r"Add of tensors with different scales"):
        load(graph.model(graph.node("Add", [a, b])))


def test_gemm_trans_a(graph):
    x = graph.quant(graph.input([8, 1]), 1.0, 4)
    w = graph.quant(graph.const(np.ones((8, 2))), 1.0, 2)
    with pytest.raises(UnsupportedModelError, match=r"node 'Gemm_\d+': Gemm with transA=1"):
        load(graph.model(graph.node("Gemm", [x, w], transA=1)))


def test_missing_file(tmp_path):
    with pytest.raises(QloomError, match=r"^model file not found: .*nothing.onnx$"):
        load(tmp_path / "nothing.onnx")


@pytest.mark.parametrize("content", [b"", b"\x08\x07garbage\xff\xff\xff",
                                     (MODELS / "tfc_w1a1.onnx").read_bytes()[:5000]])
def test_truncated_or_corrupt_file(tmp_path, content):
    path = tmp_path / "broken.onnx"
    path.write_bytes(content)
    with pytest.raises(QloomError, match=r"(cannot read ONNX model .*broken.onnx|"
                                         r"has 0 graph inputs|qonnx could not)"):
        load(path)


def test_two_inputs():
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 4])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 4])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    model = helper.make_model(helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])],
                                                "g", [a, b], [out]))
    with pytest.raises(UnsupportedModelError, match=r"2 graph inputs \(a, b\)"):
        load(model)
