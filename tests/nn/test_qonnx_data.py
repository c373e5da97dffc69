"""The quantized (and float) models shipped in qonnx's wheel: ESPCN with its nearest
Resize is exact against qonnx; each of the others is refused with a QloomError naming the
node and the unsupported op."""

from pathlib import Path

import numpy as np
import pytest
import qonnx

from qloom.errors import UnsupportedModelError
from qloom.nn.check import compare_with_qonnx
from qloom.nn.ir import Upsample
from qloom.nn.load import load

DATA = Path(qonnx.__file__).parent / "data" / "onnx"

LOADED = ["bsd300x3-espcn/nn_resize/quant_model.onnx"]

REFUSED = [
    ("bsd300x3-espcn/subpixel/quant_model.onnx",
     r"node 'DepthToSpace_42': op DepthToSpace is not supported"),
    ("bsd300x3-espcn/nn_resize/float_model.onnx",
     r"node '/conv1/Conv': Conv reads the float graph input without an input quantizer "
     r"through Relu '/Relu'"),
    ("bsd300x3-espcn/subpixel/float_model.onnx", r"node 'Conv_0': unquantized float weights"),
    ("floatquant_exec/qonnx_act_weight_fp8.onnx",
     r"node '/input_quant/export_handler/FloatQuant': op FloatQuant is not supported"),
    ("mnist-conv/model.onnx", r"node 'Convolution28': unquantized float weights 'Parameter5'"),
    ("residual_block_clean.onnx", r"node 'Conv_0': unquantized float weights"),
    ("eltwise_chanlast_testcase.onnx", r"node 'Conv_0': unquantized float weights"),
    ("matmul_update/sdp.onnx", r"the model has 3 graph inputs"),
]


def test_every_shipped_model_is_listed():
    shipped = {str(p.relative_to(DATA)) for p in DATA.rglob("*.onnx")}
    assert shipped == {path for path, _ in REFUSED} | set(LOADED)


@pytest.mark.parametrize("path", LOADED)
def test_shipped_model_exact(path):
    net = load(DATA / path)
    assert any(isinstance(layer, Upsample) for layer in net.layers)
    x = np.random.default_rng(0).uniform(0, 1, (1, *net.input_shape[1:])).astype(np.float32)
    report = compare_with_qonnx(DATA / path, net, x)
    # qonnx's float32 sums with scales that are not powers of two: ties are reported, not
    # hidden (see DESIGN.md), and nothing else differs
    assert report.ok, report.summary()


@pytest.mark.parametrize("path, message", REFUSED)
def test_shipped_model_refused(path, message):
    with pytest.raises(UnsupportedModelError, match=message):
        load(DATA / path)
