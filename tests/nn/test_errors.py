"""Every refusal is a QloomError naming the node and what is supported."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnx
from onnx import numpy_helper

from qloom.errors import QloomError, ResourceLimitError, UnsupportedModelError
from qloom.nn.load import LoadWarning, load

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


def test_activation_zero_point_per_channel(graph):
    x = graph.quant(graph.input([1, 8]), 1.0, 4, signed=False, zero=np.arange(8.0))
    with pytest.raises(UnsupportedModelError, match=r"node 'Quant\d+': activation quantizer "
                       r"with per-channel zero points .*one integer zero point per tensor"):
        load(graph.model(_dense(graph, x, 8, 4)))


def test_activation_zero_point_not_integer(graph):
    x = graph.quant(graph.input([1, 8]), 1.0, 4, signed=False, zero=2.5)
    with pytest.raises(UnsupportedModelError, match=r"node 'Quant\d+': activation quantizer "
                       r"with zero point 2.5: qloom supports an integer zero point inside "
                       r"the UINT4 range \[0, 15\]"):
        load(graph.model(_dense(graph, x, 8, 4)))


def test_non_monotone_chain(graph):
    """Abs of a 13-bit accumulator: too wide for a lookup table (a narrow one becomes one,
    tests/nn/test_activations.py)."""
    x = graph.quant(graph.input([1, 600]), 1.0, 4)
    y = graph.quant(graph.node("Abs", [_dense(graph, x, 600, 4)]), 1.0, 4)
    with pytest.raises(UnsupportedModelError, match=r"node 'Abs\d+': Abs is not monotone "
                       r"here, so the float arithmetic before the next quantizer cannot "
                       r"become thresholds; a lookup table takes an input of at most 12 bits"):
        load(graph.model(y))


def test_different_scales_in_residual_add(graph):
    x = graph.quant(graph.input([1, 8]), 1.0, 4)
    a = graph.quant(_dense(graph, x, 8, 4), 0.5, 4)
    b = graph.quant(_dense(graph, x, 8, 4, seed=1), 0.3, 4)
    with pytest.raises(UnsupportedModelError, match=r"node 'Add\d+': Add of tensors with "
                       r"scales \[0.5\] and \[0.3\d*\] \(ratio 1.66667\): no exact integer "
                       r"alignment exists"):
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
    with pytest.raises(QloomError, match=r"^cannot read ONNX model .*broken.onnx: (the file "
                                         r"is empty|the file is truncated|it holds no graph)"):
        load(path)


def test_two_inputs():
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 4])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 4])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    model = helper.make_model(helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])],
                                                "g", [a, b], [out]))
    with pytest.raises(UnsupportedModelError, match=r"2 graph inputs \(a, b\)"):
        load(model)


# ---- found by the mutation fuzzer (tests/nn/test_fuzz.py), each refused with one message ----

def _example(name="jettagging_w6a6"):
    return onnx.load(MODELS / f"{name}.onnx")


def _node(model, name):
    return next(n for n in model.graph.node if n.name == name)


def _set(node, name, value):
    for a in list(node.attribute):
        if a.name == name:
            node.attribute.remove(a)
    node.attribute.append(helper.make_attribute(name, value))


@pytest.mark.parametrize("attr, value, shown", [
    ("signed", "yes", r"attribute signed of Quant must be INT 0/1, not STRING 'yes' \(qonnx "
                      r"would read it as 0\)"),
    ("signed", -1, r"attribute signed of Quant is -1; allowed: 0, 1"),
    ("narrow", [0, 1], r"attribute narrow of Quant must be INT 0/1, not INTS \[0, 1\]"),
    ("rounding_mode", "BANANA", r"attribute rounding_mode of Quant is 'BANANA'; allowed: ROUND"),
    ("rounding_mode", 1.5, r"attribute rounding_mode of Quant must be STRING"),
    ("banana", 1, r"Quant has no attribute 'banana' \(qonnx defines narrow, rounding_mode, "
                  r"signed\)"),
])
def test_quantizer_attribute_types(attr, value, shown):
    """qonnx reads attr.i whatever the attribute holds: qloom must not read it differently."""
    model = _example()
    _set(_node(model, "Quant_9"), attr, value)
    with pytest.raises(UnsupportedModelError, match=rf"^node 'Quant_9': {shown}"):
        load(model)


@pytest.mark.parametrize("attr, value, shown", [
    ("banana", 1, r"BatchNormalization has no attribute 'banana' \(it has epsilon, momentum"),
    ("momentum", [1, 2], r"attribute momentum of BatchNormalization must be FLOAT, not INTS"),
])
def test_standard_attribute_types(attr, value, shown):
    model = _example("tfc_w1a1")
    _set(_node(model, "BatchNormalization_17"), attr, value)
    with pytest.raises(UnsupportedModelError, match=rf"^node 'BatchNormalization_17': {shown}"):
        load(model)


@pytest.mark.parametrize("domain, version, shown", [
    ("", 99999, r"ONNX opset 99999; qloom supports opsets 7 to \d+"),
    ("", 6, r"ONNX opset 6; qloom supports opsets 7 to"),
    ("finn.custom_op.general", 99999, r"opset 99999 of the custom-op domain "
                                      r"'finn.custom_op.general'; qonnx defines versions 1, 2"),
])
def test_opsets(domain, version, shown):
    model = _example()
    model.opset_import.append(helper.make_opsetid(domain, version)) if domain else None
    for o in model.opset_import:
        if o.domain == domain:
            o.version = version
    with pytest.raises(UnsupportedModelError, match=shown):
        load(model)


def test_quant_turned_into_trunc():
    model = _example()
    _node(model, "Quant_9").op_type = "Trunc"
    with pytest.raises(UnsupportedModelError, match=r"^node 'Quant_9': Trunc takes 5 or 6 "
                                                    r"inputs, not 4"):
        load(model)


def test_bipolar_quant_missing_scale():
    model = _example("tfc_w1a1")
    del model.graph.node[7].input[1]
    with pytest.raises(UnsupportedModelError, match=r"^node 'BipolarQuant_11': BipolarQuant "
                                                    r"takes 2 inputs, not 1"):
        load(model)


def test_nodes_out_of_order():
    model = _example()
    nodes = list(model.graph.node)
    del model.graph.node[:]
    model.graph.node.extend(reversed(nodes))
    with pytest.raises(UnsupportedModelError, match=r"not in topological order"):
        load(model)


def test_node_duplicated():
    model = _example()
    copy = model.graph.node.add()
    copy.CopyFrom(_node(model, "Quant_0"))
    with pytest.raises(UnsupportedModelError, match=r"tensor '.*' is computed by two nodes "
                                                    r"\('Quant_0' and 'Quant_0'\)"):
        load(model)


def test_dangling_input():
    model = _example()
    model.graph.node[12].input[0] = "no_such_tensor"
    with pytest.raises(UnsupportedModelError, match=r"reads 'no_such_tensor', which no node, "
                                                    r"initializer or graph input provides"):
        load(model)


def test_layer_shapes_do_not_fit():
    """A wider input: qonnx's shape inference leaves the MatMul shapeless (was IndexError)."""
    model = _example("tfc_w1a1")
    model.graph.input[0].type.CopyFrom(helper.make_tensor_type_proto(1, [1, 1, 28, 57]))
    with pytest.raises(UnsupportedModelError, match=r"^node 'MatMul_16': MatMul of an input "
                                                    r"\[1, 1596\] by weights \[784, 64\]: the "
                                                    r"shapes do not fit"):
        load(model)


def test_huge_input_refused_before_allocation():
    import resource
    model = _example("tfc_w1a1")
    model.graph.input[0].type.CopyFrom(helper.make_tensor_type_proto(1, [1, 1, 28, 10 ** 9]))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ResourceLimitError, match=r"graph input '.*' has shape \[1, 1, 28, "
                                                 r"1000000000\] \(28,000,000,000 elements\); "
                                                 r"qloom handles tensors of at most "
                                                 r"16,777,216 elements"):
        load(model)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000   # KB


def test_annotation_contradicted_by_values():
    """qonnx refuses to execute a constant that breaks its datatype annotation."""
    model = _example()
    scale = _node(model, "Quant_9").input[1]
    note = next((a for a in model.graph.quantization_annotation if a.tensor_name == scale),
                None) or model.graph.quantization_annotation.add(tensor_name=scale)
    del note.quant_parameter_tensor_names[:]
    note.quant_parameter_tensor_names.add(key="finn_datatype", value="INT8")
    with pytest.raises(UnsupportedModelError, match=rf"^node '{scale}': tensor '{scale}' is "
                                                    rf"annotated INT8 but holds 0.0"):
        load(model)


def test_errors_name_nodes_as_the_file_does():
    """qonnx's cleanup renames BipolarQuant_11 to BipolarQuant_0: the message must not."""
    model = _example("tfc_w1a1")
    node = model.graph.node[7]
    for init in model.graph.initializer:
        if init.name == node.input[1]:
            init.CopyFrom(numpy_helper.from_array(np.float32(-1.0), init.name))
    with pytest.raises(UnsupportedModelError, match=r"^node 'BipolarQuant_11': quantizer "
                                                    r"scales must be positive") as err:
        load(model)
    assert err.value.node == "BipolarQuant_11"


def test_warnings_collected_into_one_line(recwarn):
    model = _example()
    quant = model.graph.node[1]
    for init in model.graph.initializer:
        if init.name == quant.input[1]:
            init.CopyFrom(numpy_helper.from_array(np.float32(0.0), init.name))
    try:
        load(model, warn=False)
    except QloomError:
        pass
    collected = [w for w in recwarn if not issubclass(w.category, LoadWarning)]
    assert collected == []
    assert len([w for w in recwarn if issubclass(w.category, LoadWarning)]) <= 1


def test_input_without_data_dimension(tmp_path):
    """Found by the fuzzer (jet tagger, seed 20102: the input's feature dimension dropped):
    an IndexError deep in the lowering, now a refusal naming the tensor."""
    model = onnx.load(str(MODELS / "jettagging_w6a6.onnx"))
    shape = model.graph.input[0].type.tensor_type.shape
    del shape.dim[1:]
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    with pytest.raises(QloomError, match=r"no dimension besides the batch"):
        load(path, warn=False)
