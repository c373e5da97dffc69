"""What keeps ``qloom.load`` fast on big images, each checked against what it replaces:
qloom's shape inference gives qonnx's shapes (without qonnx's output-sized constants for
channels-last ops) and runs once per load; the one-sweep tensor renaming gives qonnx's
names; thresholds read from one exhaustive evaluation equal those found by bisection;
and (slow) the 40-layer 512x512x3 channels-last model of bench/load.py loads in under
10 CPU seconds."""

import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

from qloom.nn.dtypes import int_type, uint_type
from qloom.nn.load import load
from qloom.nn.passes import infer_shapes
from qloom.nn.thresholds import derive_thresholds

ROOT = Path(__file__).resolve().parents[2]
NETS = ROOT / "tests" / "nets"


def _bench():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import load as bench_load
    finally:
        sys.path.pop(0)
    return bench_load


def _shapes(wrapper):
    g = wrapper.graph
    return {v.name: wrapper.get_tensor_shape(v.name)
            for v in list(g.value_info) + list(g.output)}


@pytest.mark.parametrize("name", ["channels_last_cnn", "channels_last_cnn_nchw",
                                  "qkeras_cnn", "mobilenet_w4a4"])
def test_shapes_are_qonnx_shapes(name):
    """From a model stripped of its intermediate shapes: qonnx's InferShapes' result, or
    for the channels-last exports (which qonnx cannot infer without them) the shapes
    qonnx's ConvertToChannelsLastAndClean wrote."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.infer_shapes import InferShapes as QonnxInferShapes
    model = onnx.load(NETS / f"{name}.onnx")
    bare = onnx.ModelProto()
    bare.CopyFrom(model)
    del bare.graph.value_info[:]
    if name.startswith("channels_last"):
        theirs = _shapes(ModelWrapper(model))
    else:
        theirs = _shapes(ModelWrapper(bare).transform(QonnxInferShapes()))
    ours = _shapes(ModelWrapper(bare).transform(infer_shapes.InferShapes()))
    assert ours == theirs and len(ours) > 20


def test_shapes_are_inferred_once_per_load(monkeypatch):
    """On the whole model (the threshold derivation infers its small sub-graphs' shapes
    too); the channels-last export has a Gemm (GemmToMatMul shapes its own tensors)."""
    calls = []
    real = infer_shapes.InferShapes.apply

    def counted(self, model):
        if model.graph.name != "qloom_subgraph":
            calls.append(model.graph.name)
        return real(self, model)
    monkeypatch.setattr(infer_shapes.InferShapes, "apply", counted)
    net = load(NETS / "channels_last_cnn.onnx")
    assert len(calls) == 1 and net.layers[-1].op == "Dense"


def test_readable_names_are_qonnx_names():
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.general import GiveReadableTensorNames, GiveUniqueNodeNames
    from qloom.nn.passes.readable_names import GiveReadableTensorNames as OneSweep
    for name in ("channels_last_cnn", "resnet8_w4a4", "qkeras_cnn"):
        model = ModelWrapper(onnx.load(NETS / f"{name}.onnx"))
        model = model.transform(GiveUniqueNodeNames())
        theirs = model.transform(GiveReadableTensorNames()).model.SerializeToString()
        assert model.transform(OneSweep()).model.SerializeToString() == theirs


@pytest.mark.parametrize("seed", range(6))
def test_thresholds_from_one_evaluation_equal_bisection(seed):
    """Monotone step functions per channel (increasing, decreasing, constant, saturating),
    exhaustively evaluated once against bisection."""
    rng = np.random.default_rng(seed)
    channels = 7
    lo = rng.integers(-300, 0, channels)
    hi = lo + rng.integers(0, 600, channels)
    slope = rng.choice([-1.0, 0.0, 0.3, 1.0, 2.5], channels)
    shift = rng.normal(0, 40, channels)
    out = int_type(4) if seed % 2 else uint_type(3)

    def code_fn(a):
        return np.clip(np.floor((a * slope + shift) / 17), out.min, out.max).astype(np.int64)

    table = derive_thresholds(code_fn, lo, hi, out, node="n")
    bisected = derive_thresholds(code_fn, lo, hi, out, node="n", exhaustive_limit=0)
    for field in ("thresholds", "bias", "sign"):
        np.testing.assert_array_equal(getattr(table, field), getattr(bisected, field))
    assert table.in_type == bisected.in_type


@pytest.mark.slow
def test_512x512_channels_last_model_loads_in_under_10_cpu_seconds(tmp_path):
    """CPU seconds of this process (the machine is shared; wall seconds are in
    bench/load.py's table)."""
    path = tmp_path / "separable512.onnx"
    onnx.save(_bench().separable_model(512), path)
    cpu = time.process_time()
    net = load(path)
    assert time.process_time() - cpu <= 10
    assert sum(l.op in ("Conv", "Dense") for l in net.layers) == 40
    assert tuple(net.input_shape) == (1, 512, 512, 3)
