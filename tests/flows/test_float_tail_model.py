"""The QKeras-shaped jet tagger with a float bias and a Softmax after its last MatMul,
compiled and simulated in Icarus under random backpressure: the RTL is bit exact against
``Network.execute`` and ``OUT/sim/outputs.npy`` (the host tail applied) is qonnx's
``execute_onnx`` output frame for frame; with power-of-two scales the tail starts from the
hardware's accumulator, otherwise the last MatMul runs on the host (the report says which)."""

import shutil
import warnings

import numpy as np
import pytest

import qloom
from qloom.nn.check import qonnx_reference

from foreign_models import jet_inputs, jet_tagger

pytestmark = pytest.mark.skipif(shutil.which("iverilog") is None,
                                reason="Icarus Verilog is not installed (apt-get install iverilog)")


@pytest.mark.parametrize("w_scale, a_scale, host_ops", [
    (2.0 ** -5, 2.0 ** -6, ["Add", "Softmax"]),
    (0.03, 0.07, ["MatMul", "Add", "Softmax"]),
])
def test_jet_tagger_outputs_are_qonnx_frame_for_frame(tmp_path, w_scale, a_scale, host_ops):
    from qonnx.core.onnx_exec import execute_onnx
    model = jet_tagger(w_scale=w_scale, a_scale=a_scale)
    x = jet_inputs(20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        design = qloom.compile(model, tmp_path / "out")
        res = design.simulate(x, backpressure=0.3, progress=False)
    assert res["frames"] == 20 and res["mismatches"] == 0, res["first_mismatch"]
    assert design.report["tail"]["ops"] == host_ops and design.report["tail"]["exact"]
    assert "float tail after the hardware's output" in (tmp_path / "out" / "report.md").read_text()
    ref = qonnx_reference(model)
    name = ref.graph.output[0].name
    theirs = np.concatenate([execute_onnx(ref, {"global_in": x[i:i + 1]})[name]
                             for i in range(len(x))])
    outputs = np.load(tmp_path / "out" / "sim" / "outputs.npy")
    assert np.all(outputs == theirs, axis=1).sum() == 20
