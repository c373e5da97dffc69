"""The quantized (and float) models shipped in qonnx's wheel: each is refused with a
QloomError naming the node and the unsupported op (none of them is a fully quantized
network qloom can map today)."""

from pathlib import Path

import pytest
import qonnx

from qloom.errors import UnsupportedModelError
from qloom.nn.load import load

DATA = Path(qonnx.__file__).parent / "data" / "onnx"

REFUSED = [
    ("bsd300x3-espcn/nn_resize/quant_model.onnx", r"node 'Resize_42': op Resize is not supported"),
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
    assert shipped == {path for path, _ in REFUSED}


@pytest.mark.parametrize("path, message", REFUSED)
def test_shipped_model_refused(path, message):
    with pytest.raises(UnsupportedModelError, match=message):
        load(DATA / path)
