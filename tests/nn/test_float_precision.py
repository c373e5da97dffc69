"""Float models at a fixed-point precision (``qloom.nn.quantize``): the precision strings
and files, the quantized model (exact against the reference), and what the precision costs
against the float model (onnxruntime)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

import qloom
from qloom.errors import QloomError, UnsupportedModelError
from qloom.flows.compile.precision_cost import calibration_inputs, measure
from qloom.nn.check import compare_with_qonnx
from qloom.nn.precision import (Overflow, Precision, PrecisionConfig, PrecisionError,
                                Rounding)
from qloom.nn.quantize import float_reference, quantize_float

import float_models

FIXED_16_6 = PrecisionConfig.make("fixed<16,6>")


# ---- precision strings ----------------------------------------------------------------
@pytest.mark.parametrize("text, width, integer, signed, scale", [
    ("fixed<16,6>", 16, 6, True, 2.0 ** -10), ("ap_fixed<8, 3>", 8, 3, True, 2.0 ** -5),
    ("ufixed<8,0>", 8, 0, False, 2.0 ** -8), ("int<8>", 8, 8, True, 1.0),
    ("uint<4>", 4, 4, False, 1.0), ("fixed<6,8>", 6, 8, True, 4.0)])
def test_precision_parse(text, width, integer, signed, scale):
    p = Precision.parse(text)
    assert (p.width, p.integer, p.signed, p.scale) == (width, integer, signed, scale)
    assert Precision.parse(str(p)) == p


def test_precision_range_is_ap_fixed():
    p = Precision.parse("fixed<16,6>")
    assert (p.min, p.max) == (-32.0, 32.0 - 2.0 ** -10)
    u = Precision.parse("ufixed<8,3>")
    assert (u.min, u.max) == (0.0, 8.0 - 2.0 ** -5)


@pytest.mark.parametrize("text, message", [
    ("fixed<16>", "needs the integer bits"), ("int<8,2>", "takes one number"),
    ("float<16,6>", "not understood"), ("fixed<40,6>", "2 to 16 bits"),
    ("fixed<1,1>", "2 to 16 bits"), ("", "not understood"), (16, "must be a string")])
def test_precision_bad_strings(text, message):
    with pytest.raises(PrecisionError, match=message):
        Precision.parse(text)


def test_rounding_and_overflow_modes():
    assert Rounding.parse("truncate") is Rounding.TRUNCATE
    assert Rounding.parse("AP_TRN").value == "FLOOR"
    assert Rounding.parse("round").value == "HALF_EVEN"
    assert PrecisionConfig.make("int<8>").rounding is Rounding.ROUND      # the default
    with pytest.raises(PrecisionError, match="'round' .*'truncate'"):
        Rounding.parse("stochastic")
    with pytest.raises(PrecisionError, match="Quant always saturates"):
        Overflow.parse("wrap")
    with pytest.raises(PrecisionError, match="Quant always saturates"):
        PrecisionConfig.make("fixed<16,6>", overflow="AP_WRAP")


# ---- precision files ------------------------------------------------------------------
def test_precision_file_toml_and_json(tmp_path):
    toml = tmp_path / "p.toml"
    toml.write_text('[model]\nprecision = "fixed<12,4>"\nrounding = "truncate"\n\n'
                    '[layers.dense_1]\nweight = "fixed<8,2>"\nresult = "fixed<8,4>"\n')
    cfg = PrecisionConfig.make(precision_file=toml)
    assert cfg.default == Precision(12, 4) and cfg.rounding is Rounding.TRUNCATE
    assert cfg.layer("dense_1").weight == Precision(8, 2)
    assert cfg.layer("dense_1").bias == Precision(12, 4)         # not overridden
    assert cfg.layer("other").result == Precision(12, 4)
    js = tmp_path / "p.json"
    js.write_text(json.dumps({"layers": {"dense_1": {"accumulator": "fixed<16,8>"}}}))
    cfg = PrecisionConfig.make("fixed<16,6>", js)
    assert cfg.layer("dense_1").accumulator == Precision(16, 8)


@pytest.mark.parametrize("text, message", [
    ('[layers.d]\nweigth = "int<8>"\n', "unknown key 'weigth'"),
    ('[model]\nprecison = "int<8>"\n', "unknown key model.precison"),
    ('[layers.d]\nweight = "fixed<8>"\n', "layers.d.weight: .*integer bits"),
    ('[model]\noverflow = "wrap"\n', "saturates"),
    ('[layers.d\n', "cannot read precision file")])
def test_precision_file_errors(tmp_path, text, message):
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(PrecisionError, match=message):
        PrecisionConfig.make("fixed<16,6>", path)


def test_precision_file_names_a_missing_layer(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"layers": {"dense_9": {"weight": "int<4>"}}}))
    with pytest.raises(PrecisionError, match="layer 'dense_9', which is no node"):
        qloom.load(float_models.mlp(), precision="fixed<16,6>", precision_file=path)


# ---- the quantized model --------------------------------------------------------------
MODELS = ["mlp", "mlp_batchnorm", "keras_conv2d", "pool_and_shapes", "global_pool_squeeze",
          "old_opset_mlp", "fixed_batch_mlp", "activations_mlp", "keras_conv1d"]


@pytest.fixture(scope="module")
def compiled():
    cache = {}

    def get(name):
        if name not in cache:
            model = getattr(float_models, name)()
            quantized = quantize_float(model, FIXED_16_6)
            cache[name] = model, quantized, qloom.load(quantized)
        return cache[name]
    return get


@pytest.mark.parametrize("name", MODELS)
def test_quantized_model_is_exact_and_close_to_float(compiled, name):
    model, quantized, net = compiled(name)
    x, what = calibration_inputs(None, net.input_shape, frames=300)
    report = compare_with_qonnx(quantized, net, x[:30])
    assert report.mismatches == () and report.max_output_rel_error == 0.0
    cost = measure(float_reference(model), net, x, what)
    assert cost.frames == 300 and cost.argmax_agreement >= 0.99, cost
    assert cost.max_abs_error < 0.02, cost


def test_quantizers_where_hls4ml_puts_its_types(compiled):
    _, quantized, _ = compiled("mlp_batchnorm")
    ops = [n.op_type for n in quantized.graph.node]
    assert "BatchNormalization" not in ops                  # both folded into weights
    quants = {n.name: n for n in quantized.graph.node if n.op_type == "Quant"}
    assert {"input_quant", "dense_1_weight_quant", "dense_1_bias_quant",
            "dense_1_result_quant", "dense_2_weight_quant", "dense_2_bias_quant",
            "dense_2_result_quant"} <= set(quants)
    # the ReLU after dense_1 takes its result quantizer (relu(q(x)) == q(relu(x)))
    producer = {o: n for n in quantized.graph.node for o in n.output}
    assert producer[quants["dense_1_result_quant"].input[0]].op_type == "Relu"
    q = quants["dense_1_weight_quant"]
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in quantized.graph.initializer}
    assert float(inits[q.input[1]]) == 2.0 ** -10 and float(inits[q.input[3]]) == 16
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in q.attribute}
    assert attrs == {"signed": 1, "narrow": 0, "rounding_mode": b"HALF_EVEN"}


def test_nonlinear_activations_are_tables(compiled):
    _, quantized, net = compiled("activations_mlp")
    names = {n.name for n in quantized.graph.node}
    for op in ("sigmoid_0", "tanh_1", "elu_2", "selu_3", "leakyrelu_4"):
        assert {f"{op}_table_quant", f"{op}_result_quant"} <= names
    lookups = [l for l in net.layers if l.op == "Lookup"]
    assert len(lookups) == 5 and all(l.in_type.bits <= 12 for l in lookups)


def test_old_opset_is_upgraded_and_fixed_batch_is_the_batch(compiled):
    _, quantized, net = compiled("old_opset_mlp")
    assert quantized.opset_import[0].version >= 11
    _, _, net = compiled("fixed_batch_mlp")
    assert net.input_shape == (1, 16)


def test_per_layer_precision_changes_that_layer_only(tmp_path, compiled):
    model, base_q, base = compiled("mlp")
    path = tmp_path / "p.toml"
    path.write_text('[layers.dense_1]\nweight = "fixed<8,2>"\nbias = "fixed<8,2>"\n'
                    'result = "fixed<8,4>"\n')
    cfg = PrecisionConfig.make("fixed<16,6>", path)
    quantized = quantize_float(model, cfg)
    net = qloom.load(quantized)

    def bits(q):
        inits = {i.name: onnx.numpy_helper.to_array(i) for i in q.graph.initializer}
        return {n.name: (float(inits[n.input[1]]), float(inits[n.input[3]]))
                for n in q.graph.node if n.op_type == "Quant"}
    before, after = bits(base_q), bits(quantized)
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {"dense_1_weight_quant", "dense_1_bias_quant", "dense_1_result_quant"}
    assert after["dense_1_weight_quant"] == (2.0 ** -6, 8.0)
    assert after["dense_1_result_quant"] == (2.0 ** -4, 8.0)
    # in the integer network only dense_1's weights and its result type change (the next
    # layer's accumulator follows from its narrower input)
    dense = [l for l in net.layers if l.op == "Dense"]
    base_dense = [l for l in base.layers if l.op == "Dense"]
    same = [np.array_equal(a.weights, b.weights) and a.w_type == b.w_type
            for a, b in zip(dense, base_dense)]
    assert same == [True, False, True, True] and dense[1].w_type.bits == 8
    outs = [net.tensors[l.output].dtype.bits for l in net.layers if l.op == "Requant"]
    assert outs == [16, 8, 16, 16]
    x, _ = calibration_inputs(None, net.input_shape, frames=20)
    assert compare_with_qonnx(quantized, net, x).mismatches == ()


def test_truncate_is_floor_and_costs_accuracy(compiled):
    model, _, rounded = compiled("mlp")
    net = qloom.load(model, precision="fixed<16,6>", rounding="truncate")
    x, what = calibration_inputs(None, net.input_shape)
    trunc = measure(float_reference(model), net, x, what)
    nearest = measure(float_reference(model), rounded, x, what)
    assert trunc.max_abs_error > nearest.max_abs_error


def test_already_quantized_model_refuses_a_precision():
    from graph_builder import GraphBuilder
    b = GraphBuilder()
    x = b.quant(b.input([1, 4]), 0.5, 4)
    y = b.node("MatMul", [x, b.quant(b.const(np.ones((4, 2))), 1.0, 4)])
    with pytest.raises(UnsupportedModelError, match="already quantized"):
        qloom.load(b.model(y), precision="fixed<16,6>")


def test_unseen_float_model_from_qonnx_data():
    """mnist-conv from qonnx's data folder (an opset-8 CNTK export: Conv, bias Add,
    MaxPool, Reshape, MatMul), never built for these tests."""
    from pathlib import Path

    import qonnx
    path = Path(qonnx.__file__).parent / "data" / "onnx" / "mnist-conv" / "model.onnx"
    quantized = quantize_float(path, FIXED_16_6)
    net = qloom.load(quantized)
    x, what = calibration_inputs(None, net.input_shape, frames=300)
    assert compare_with_qonnx(quantized, net, x[:10]).mismatches == ()
    cost = measure(float_reference(path), net, x, what)
    assert cost.argmax_agreement >= 0.99, cost


@pytest.mark.parametrize("opset", [9, 11, 13])
# the PyTorch exports need torch (the train extra, which the slow tier installs)
@pytest.mark.parametrize("kind", [pytest.param("torch_cnn_pools", marks=pytest.mark.slow),
                                  pytest.param("torch_cnn1d", marks=pytest.mark.slow),
                                  "keras_conv1d_maxpool"])
def test_float_exports_at_old_and_new_opsets(tmp_path, kind, opset):
    """Exports written for this test, not tuned to it: PyTorch's 2-D CNN (BatchNorm,
    LeakyReLU, a padded MaxPool, Tanh, AvgPool, Softmax) and 1-D CNN (MaxPool1d, ELU,
    AvgPool1d, SELU, Sigmoid), a Keras Conv1D + MaxPooling1D + Dense + Softmax graph; at
    opsets 9, 11 and 13."""
    if kind == "keras_conv1d_maxpool":
        model = float_models.keras_conv1d_maxpool(opset=opset)
    else:
        model = getattr(float_models, kind)(tmp_path / "m.onnx", opset)
        if model is None:
            pytest.skip("torch is not installed (the train extra)")
    assert model.opset_import[0].version == opset
    quantized = quantize_float(model, FIXED_16_6)
    net = qloom.load(quantized)
    assert quantized.opset_import[0].version >= 11 and net.input_shape[0] == 1
    x, what = calibration_inputs(None, net.input_shape, frames=300)
    report = compare_with_qonnx(quantized, net, x[:20])
    assert report.mismatches == () and report.identical_outputs == 20, report.summary()
    cost = measure(float_reference(model), net, x, what)
    assert cost.argmax_agreement >= 0.99 and cost.max_abs_error < 0.01, cost


@pytest.mark.parametrize("size, pads", [(5, (0, 0, 1, 1)), (6, (0, 0, 0, 0))])
def test_keras_maxpool_same_pads_bottom_right(size, pads):
    model = float_models.keras_maxpool_same(size)
    quantized = quantize_float(model, FIXED_16_6)
    net = qloom.load(quantized)
    assert [l.pads for l in net.layers if l.op == "MaxPool"] == [pads]
    x, what = calibration_inputs(None, net.input_shape, frames=300)
    assert compare_with_qonnx(quantized, net, x[:20]).mismatches == ()
    assert measure(float_reference(model), net, x, what).argmax_agreement >= 0.99


@pytest.mark.parametrize("kind, keepdims, opset", [
    ("keras", 0, 11), ("keras", 0, 13), ("keras", 1, 13), ("keras", 0, 18), ("keras", 1, 18),
    pytest.param("torch", 1, 11, marks=pytest.mark.slow),
    pytest.param("torch", 1, 13, marks=pytest.mark.slow)])
def test_spatial_reduce_mean_is_a_global_average_pool(tmp_path, kind, keepdims, opset):
    """Keras GlobalAveragePooling2D (ReduceMean over NHWC axes 1, 2 after the closing
    Transpose) and PyTorch's ``x.mean((2, 3))``: a GlobalAveragePool in the network."""
    if kind == "keras":
        model = float_models.keras_global_average(keepdims, opset)
    else:
        model = float_models.torch_mean_head(tmp_path / "m.onnx", opset)
        if model is None:
            pytest.skip("torch is not installed (the train extra)")
    quantized = quantize_float(model, FIXED_16_6)
    assert "ReduceMean" not in [n.op_type for n in quantized.graph.node]
    assert "GlobalAveragePool" in [n.op_type for n in quantized.graph.node]
    net = qloom.load(quantized)
    assert [l.op for l in net.layers].count("AvgPool") == 1
    x, what = calibration_inputs(None, net.input_shape, frames=300)
    report = compare_with_qonnx(quantized, net, x[:20])
    assert report.mismatches == () and report.identical_outputs == 20, report.summary()
    assert measure(float_reference(model), net, x, what).argmax_agreement >= 0.99


@pytest.mark.parametrize("opset, training", [(9, None), (11, None), (13, None), (13, False)])
def test_inference_dropout_of_any_ratio_is_removed(opset, training):
    model = float_models.keras_dropout_mlp(opset, training)
    quantized = quantize_float(model, FIXED_16_6)
    assert "Dropout" not in [n.op_type for n in quantized.graph.node]
    net = qloom.load(quantized)
    x, what = calibration_inputs(None, net.input_shape, frames=300)
    assert compare_with_qonnx(quantized, net, x[:20]).mismatches == ()
    assert measure(float_reference(model), net, x, what).argmax_agreement >= 0.99


def test_training_dropout_is_refused_naming_the_node():
    with pytest.raises(UnsupportedModelError, match="'dropout'.*Dropout is not supported"):
        qloom.load(float_models.keras_dropout_mlp(13, training=True), precision="fixed<16,6>")


def test_channel_reduce_mean_is_refused_naming_the_node():
    b = float_models.FloatBuilder(0)
    h = b.input([1, 3, 6, 6])
    h = b.conv(h, 3, 4, (3, 3), name="conv_1")
    h = b.node("ReduceMean", [h], name="channel_mean", axes=[1], keepdims=0)
    h = b.node("Flatten", [h], name="flatten")
    h = b.gemm(h, 16, 2, name="dense")
    with pytest.raises(UnsupportedModelError, match="channel_mean.*ReduceMean is not supported"):
        qloom.load(b.model(h, [1, 2]), precision="fixed<16,6>")


@pytest.mark.parametrize("attrs, message", [
    ({"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}, "ceil_mode 1"),
    ({"kernel_shape": [2, 2], "dilations": [2, 2]}, "dilations"),
    ({"kernel_shape": [2, 2], "pads": [2, 0, 0, 0]}, "not smaller than its kernel"),
])
def test_unsupported_maxpool_is_refused_naming_the_node(attrs, message):
    b = float_models.FloatBuilder(0)
    h = b.input([1, 3, 6, 6])
    h = b.conv(h, 3, 4, (3, 3), name="conv_1")
    h = b.node("MaxPool", [h], name="pool_odd", **attrs)
    h = b.node("Flatten", [h], name="flatten")
    model = b.model(h, None)
    with pytest.raises(UnsupportedModelError, match=f"pool_odd.*{message}"):
        qloom.load(model, precision="fixed<16,6>")


def test_quantized_qonnx_of_an_old_opset_is_refused_as_quantized():
    from pathlib import Path

    import qonnx
    path = Path(qonnx.__file__).parent / "data" / "onnx" / "eltwise_chanlast_testcase.onnx"
    with pytest.raises(UnsupportedModelError, match="already quantized"):
        qloom.load(path, precision="fixed<16,6>")


def test_rounding_without_precision_is_refused():
    with pytest.raises(QloomError, match="needs a precision"):
        qloom.load(float_models.mlp(), rounding="truncate")


def test_accumulator_precision_after_the_bias(tmp_path, compiled):
    model, _, base = compiled("mlp")
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"layers": {"dense_1": {"accumulator": "fixed<16,4>"}}}))
    quantized = quantize_float(model, PrecisionConfig.make("fixed<16,6>", path))
    producer = {o: n for n in quantized.graph.node for o in n.output}
    acc = next(n for n in quantized.graph.node if n.name == "dense_1_accumulator_quant")
    assert producer[acc.input[0]].op_type == "Add"          # the bias is in the accumulator
    net = qloom.load(quantized)
    assert len(net.layers) == len(base.layers) + 1
    x, _ = calibration_inputs(None, net.input_shape, frames=20)
    assert compare_with_qonnx(quantized, net, x).mismatches == ()


def test_accumulator_coarser_than_the_result_is_refused(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"layers": {"dense_1": {"accumulator": "fixed<16,8>"}}}))
    with pytest.raises(PrecisionError, match="layer 'dense_1': accumulator fixed<16,8> has a "
                                             "coarser step"):
        qloom.load(float_models.mlp(), precision="fixed<16,6>", precision_file=path)


def test_load_refuses_auto_with_a_pointer_to_compile():
    with pytest.raises(QloomError, match="qloom compile --precision auto"):
        qloom.load(float_models.mlp(), precision="auto")
