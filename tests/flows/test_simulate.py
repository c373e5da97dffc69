"""``qloom simulate`` end to end on the hand-made toy top of tests/sim (saturating +1),
whose integer network is one MultiThreshold layer built by hand (until the compiler
lands, no ONNX model is involved)."""

import argparse
import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from qloom.errors import QloomError
from qloom.flows import simulate as simulate_flow
from qloom.flows.simulate import simulate
from qloom.nn.dtypes import int_type
from qloom.nn.ir import MultiThreshold, Network, TensorInfo

_spec = importlib.util.spec_from_file_location(
    "qloom_tests_toy_top", Path(__file__).parents[1] / "sim" / "toy_top.py")
toy = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(toy)

pytestmark = pytest.mark.skipif(shutil.which("iverilog") is None,
                                reason="Icarus Verilog is not installed (apt-get install iverilog)")

DTYPE, LANES, ELEMENTS = int_type(4), 3, 10
SCALE = 0.5


def plus_one_network(dtype=DTYPE, elements=ELEMENTS) -> Network:
    """``min(x + 1, max)`` as thresholds: #{t in [min, max) : x >= t} + min."""
    levels = np.arange(dtype.min, dtype.max, dtype=np.int64)
    layer = MultiThreshold(name="plus_one", inputs=("x_int",), output="y_int",
                           thresholds=np.tile(levels, (elements, 1)),
                           bias=np.full(elements, dtype.min, dtype=np.int64),
                           sign=np.ones(elements, dtype=np.int64), in_type=dtype, out_type=dtype)
    scale = np.array([SCALE])
    return Network(
        name="plus_one", input_name="x", input_shape=(1, elements), input="x_int",
        output="y_int", layers=[layer],
        tensors={"x_int": TensorInfo("x_int", (elements,), dtype, scale),
                 "y_int": TensorInfo("y_int", (elements,), dtype, scale)},
        quantize=lambda x: np.clip(np.round(x / SCALE), dtype.min, dtype.max).astype(np.int64),
        tail=lambda y: y + 100.0)


@pytest.fixture
def design(tmp_path):
    def make(**options):
        return toy.write_toy_out(tmp_path / "out", DTYPE, LANES, ELEMENTS, **options)
    return make


def test_random_frames_are_bit_exact(design):
    out = design(stages=2)
    net = plus_one_network()
    results = simulate(out, random=8, seed=3, progress=False, network=net)
    assert results["frames"] == 8 and results["mismatches"] == 0
    assert results["first_mismatch"] is None
    assert results["latency_cycles"] == 3 + 2
    assert results["ii_cycles"] == 4 and results["ideal_ii_cycles"] == 4
    assert results["simulator"] == "icarus" and results["backpressure"] == 0.0
    assert json.loads((out / "sim" / "results.json").read_text()) == results
    outputs = np.load(out / "sim" / "outputs.npy")
    values = np.random.default_rng(3).integers(DTYPE.min, DTYPE.max, size=(8, ELEMENTS),
                                               endpoint=True)
    np.testing.assert_array_equal(outputs, np.minimum(values + 1, DTYPE.max) * SCALE + 100.0)


def test_float_inputs_with_backpressure(design):
    x = np.linspace(-4.0, 3.5, 5 * ELEMENTS, dtype=np.float32).reshape(5, ELEMENTS)
    results = simulate(design(stages=3), inputs=x, backpressure=0.3, progress=False,
                       network=plus_one_network())
    assert results["mismatches"] == 0 and results["frames"] == 5
    assert results["ii_cycles"] > 4 and results["backpressure"] == 0.3


def test_wrong_output_is_reported(design):
    x = np.zeros((3, ELEMENTS), dtype=np.float32)     # the toy adds 2 to frame 1, element 0
    results = simulate(design(broken="corrupt"), inputs=x, progress=False,
                       network=plus_one_network())
    assert results["mismatches"] == 1
    assert results["first_mismatch"] == {"frame": 1, "index": 0, "expected": 1, "got": 2}


def test_non_zero_padding_is_a_mismatch(design):
    # 10 elements on 3 lanes: lanes 1 and 2 of the final word must stay zero
    results = simulate(design(broken="pad"), inputs=np.zeros((2, ELEMENTS)), progress=False,
                       network=plus_one_network())
    assert results["mismatches"] == 2
    assert results["first_mismatch"] == {"frame": 0, "index": 10, "expected": 0, "got": 1}


def _cli(argv):
    parser = argparse.ArgumentParser()
    simulate_flow.add_parser(parser.add_subparsers())
    return parser.parse_args(argv)


@pytest.mark.parametrize("broken, code", [(None, 0), ("corrupt", 1)])
def test_cli_exit_code_and_summary(design, monkeypatch, capsys, broken, code):
    out = design(broken=broken)
    monkeypatch.setattr(simulate_flow, "load_network", lambda *a: plus_one_network())
    args = _cli(["simulate", str(out), "--random", "3", "--seed", "1"])
    assert args.func(args) == code
    text = capsys.readouterr().out
    assert f"Simulated 3 frames of {out} on icarus" in text
    assert ("3 bit-exact, 0 mismatching" in text) if code == 0 else \
        ("First mismatch: frame 1, output element 0" in text)
    assert "frames/s at 100 MHz" in text


def test_cli_inputs_file(design, monkeypatch, tmp_path, capsys):
    out = design()
    np.save(tmp_path / "x.npy", np.ones((2, ELEMENTS), dtype=np.float32))
    monkeypatch.setattr(simulate_flow, "load_network", lambda *a: plus_one_network())
    args = _cli(["simulate", str(out), "--inputs", str(tmp_path / "x.npy")])
    assert args.func(args) == 0
    assert "2 bit-exact" in capsys.readouterr().out


@pytest.mark.parametrize("kwargs, message", [
    ({}, r"give either float inputs or a number of random frames, not neither"),
    ({"random": 2, "inputs": np.zeros((1, ELEMENTS))}, r"not both"),
    ({"random": 0}, r"the number of random frames must be a positive integer, not 0"),
    ({"inputs": np.zeros((2, 3))}, r"inputs must have shape \[N, 10\] \(the model input 'x' "
                                   r"with a batch of N >= 1\), not \[2, 3\]"),
    ({"random": 1, "simulator": "modelsim"}, r"unknown simulator 'modelsim'; choose one of "
                                             r"icarus, verilator"),
    ({"random": 1, "backpressure": -0.1}, r"backpressure must be a probability in \[0, 1\), "
                                          r"not -0.1"),
])
def test_argument_errors(design, kwargs, message):
    with pytest.raises(QloomError, match=message):
        simulate(design(), progress=False, network=plus_one_network(), **kwargs)


def test_manifest_and_network_must_agree(design):
    with pytest.raises(QloomError, match=r"the manifest's input \(INT4, 10 elements\) does "
                                         r"not match the network's tensor 'x_int' \(INT4, 12 "
                                         r"elements\): recompile the design"):
        simulate(design(), random=1, progress=False, network=plus_one_network(elements=12))


def test_design_without_model_file_needs_the_network(design):
    out = design()
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps(dict(manifest, model_file=None)))
    with pytest.raises(QloomError, match=r"keeps no model file .* pass that network"):
        simulate(out, random=1, progress=False)
