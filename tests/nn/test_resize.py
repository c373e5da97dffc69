"""Nearest Resize (opsets 10-19, scales and sizes) and Upsample (opsets 7-9) of quantized
tensors through the frontend: exact against qonnx's ``execute_onnx``; other modes, factors
and index maps are refused naming the node."""

import numpy as np
import pytest

from qloom.errors import UnsupportedModelError
from qloom.nn.ir import Upsample
from qloom.nn.load import load

from .conftest import GraphBuilder
from .test_cnn_ops import assert_exact, conv

SHAPE = (1, 2, 5, 4)


def _resize(g, x, opset, factors=(2, 3), sizes=False, **attrs):
    """A Resize (or Upsample) node of ``x`` by ``factors`` in the form of ``opset``."""
    scales = np.array([1, 1, *factors], np.float32)
    if opset <= 9:
        if opset == 7:
            return g.node("Upsample", [x], mode="nearest", scales=scales.tolist(), **attrs)
        return g.node("Upsample", [x, g.const(scales)], mode="nearest", **attrs)
    if opset == 10:
        return g.node("Resize", [x, g.const(scales)], mode="nearest", **attrs)
    # roi (and scales, with sizes) may be left out from opset 13; before, they are empty
    roi = g.const(np.zeros(0, np.float32)) if opset < 13 else ""
    none = g.const(np.zeros(0, np.float32)) if opset < 13 else ""
    if sizes:
        out = np.array([SHAPE[0], 3, SHAPE[2] * factors[0], SHAPE[3] * factors[1]],
                       np.int64)
        return g.node("Resize", [x, roi, none, g.const(out, np.int64)], mode="nearest", **attrs)
    return g.node("Resize", [x, roi, g.const(scales)], mode="nearest", **attrs)


def _model(opset, **kw):
    g = GraphBuilder()
    x = g.quant(g.input(list(SHAPE)), 0.25, 4, signed=False)
    x = g.quant(g.node("Relu", [conv(g, x, 2, 3, pads=[1] * 4)]), 0.5, 4, signed=False)
    y = _resize(g, x, opset, **kw)
    y = conv(g, y, 3, 2, seed=1, pads=[1] * 4)
    return g.model(g.quant(y, 1.0, 6), opset=opset)


@pytest.mark.parametrize("opset, sizes", [(7, False), (9, False), (10, False), (11, False),
                                          (11, True),
                                          (13, True), (19, False), (19, True)])
def test_nearest_resize_is_exact(opset, sizes):
    net = assert_exact(_model(opset, sizes=sizes), SHAPE, n=40)
    up = [l for l in net.layers if isinstance(l, Upsample)]
    assert len(up) == 1 and up[0].scale == (2, 3)
    assert net.tensors[up[0].output].shape == (10, 12, 3)


def test_asymmetric_floor_is_the_same_repetition():
    assert_exact(_model(13, coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
                 SHAPE, n=20)


@pytest.mark.parametrize("attrs, message", [
    ({"coordinate_transformation_mode": "align_corners"},
     r"with .* maps output pixel \(\d+, \d+\) to input pixel \(\d+, \d+\), not \(\d+, \d+\)"),
    ({"nearest_mode": "floor"}, r"with coordinate_transformation_mode 'half_pixel' and "
                                r"nearest_mode 'floor' maps output pixel"),
    ({"mode": "linear"}, r"in mode 'linear': interpolation"),
])
def test_other_index_maps_are_refused(attrs, message):
    g = GraphBuilder()
    x = g.quant(g.input(list(SHAPE)), 0.25, 4, signed=False)
    # by 3: align_corners happens to repeat the pixels at factor 2 (5 -> 10, 4 -> 8)
    scales = g.const(np.array([1, 1, 3, 3], np.float32))
    y = g.node("Resize", [x, "", scales], **{"mode": "nearest", **attrs})
    with pytest.raises(UnsupportedModelError, match=r"node 'Resize\d+': Resize " + message):
        load(g.model(g.quant(conv(g, y, 2, 2), 1.0, 6)))


def test_fractional_factor_is_refused():
    g = GraphBuilder()
    x = g.quant(g.input([1, 2, 4, 4]), 0.25, 4, signed=False)
    y = g.node("Resize", [x, "", g.const(np.array([1, 1, 1.5, 2], np.float32))],
               mode="nearest")
    with pytest.raises(UnsupportedModelError, match=r"node 'Resize\d+': Resize from \[1, 2, "
                       r"4, 4\] to \[1, 2, 6, 8\]: qloom resizes the image axes by integer"):
        load(g.model(g.quant(conv(g, y, 2, 2), 1.0, 6)))


def test_resize_of_float_arithmetic_is_refused():
    g = GraphBuilder()
    x = g.quant(g.input([1, 2, 4, 4]), 0.25, 4, signed=False)
    y = g.node("Relu", [conv(g, x, 2, 2, pads=[1] * 4)])
    y = g.node("Resize", [y, "", g.const(np.array([1, 1, 2, 2], np.float32))], mode="nearest")
    with pytest.raises(UnsupportedModelError, match=r"node 'Resize\d+': Resize of float "
                       r"arithmetic .* put a quantizer before the Resize"):
        load(g.model(g.quant(y, 1.0, 6)))
