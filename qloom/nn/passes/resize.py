"""Lowering of ONNX Resize (opsets 10-19, the ``scales`` and ``sizes`` forms) and Upsample
(opsets 7-9) in nearest mode by integer factors to the exact ``Upsample`` layer.

Nearest-neighbour resizing copies elements, so on a quantized tensor (or an accumulator)
the result is the same integer tensor with every pixel repeated: the scale and offset
carry over unchanged. Which input pixel each output pixel copies depends on the node's
``coordinate_transformation_mode`` and ``nearest_mode``; rather than re-deriving ONNX's
formulas, the node itself is executed (as qonnx executes it) on a tensor of pixel indices,
and it is lowered only when output pixel ``(r, c)`` reads input pixel ``(r // SH, c // SW)``
exactly, which is what the hardware builds (``qloom.hw.upsample``).

Refused, naming the node: modes other than nearest, factors that are not integers or that
scale the batch or the channels, index maps that are not that repetition, and resizing of
float arithmetic (put a quantizer before it).
"""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedModelError
from .. import ir
from ..thresholds import FloatFunction
from .attrs import node_attr
from .lowering import Lowering
from .values import Int

__all__ = ["LOWERINGS", "lower_resize"]


def _float_reason(node) -> str:
    return (f"{node.op_type} of float arithmetic (BatchNorm, ReLU, a bias or a scale after a "
            f"layer, not a quantizer output); qloom resizes quantized tensors: put a "
            f"quantizer before the {node.op_type}")


def _factors(state, node, src: Int) -> tuple[int, int]:
    """(SH, SW): the integer factors of the image axes, from the shapes shape inference
    gave (whichever of scales or sizes the node has)."""
    in_shape, out_shape = state.shape_of(node.input[0]), state.shape_of(node.output[0])
    if len(in_shape) != 4 or src.layout.kind != "image":
        raise UnsupportedModelError(
            f"{node.op_type} of a tensor of shape {list(in_shape)}: qloom resizes images "
            f"([N, C, H, W] or channels-last [N, H, W, C])", node.name)
    h_axis, w_axis, c_axis = (p + 1 for p in src.layout.perm)
    ratios = []
    for axis in range(4):
        a, b = in_shape[axis], out_shape[axis]
        ratios.append(b // a if b % a == 0 else b / a)
    if ratios[0] != 1 or ratios[c_axis] != 1 or any(
            not isinstance(r, int) for r in ratios):
        raise UnsupportedModelError(
            f"{node.op_type} from {list(in_shape)} to {list(out_shape)}: qloom resizes the "
            f"image axes by integer factors (the batch and channels unchanged)", node.name)
    return ratios[h_axis], ratios[w_axis]


def _check_index_map(state, node, src: Int, factors) -> None:
    """Execute the node on pixel indices and require output pixel (r, c) to read input
    pixel (r // SH, c // SW)."""
    in_shape = state.shape_of(node.input[0])
    h_axis, w_axis, c_axis = (p + 1 for p in src.layout.perm)
    h, w = in_shape[h_axis], in_shape[w_axis]
    index = np.arange(h * w, dtype=np.float32).reshape(h, w)
    shape = [1, 1, 1, 1]
    shape[h_axis], shape[w_axis] = h, w
    x = np.broadcast_to(np.moveaxis(index[None, None], (2, 3), (h_axis, w_axis))
                        .reshape(shape), in_shape).astype(np.float32)
    fn = FloatFunction([node], state.consts, node.input[0], node.output[0], state.shape_of,
                       state.opsets)
    y = np.moveaxis(fn(x), (h_axis, w_axis, c_axis), (1, 2, 3))
    sh, sw = factors
    rows = np.arange(h * sh) // sh
    cols = np.arange(w * sw) // sw
    want = (rows[:, None] * w + cols[None, :]).astype(np.float32)
    wrong = np.argwhere(y[0] != want[:, :, None])
    if wrong.size:
        r, c, _ = (int(v) for v in wrong[0])
        got = int(y[0, r, c, 0])
        raise UnsupportedModelError(
            f"{node.op_type} with coordinate_transformation_mode "
            f"{node_attr(node, 'coordinate_transformation_mode', 'half_pixel')!r} and "
            f"nearest_mode {node_attr(node, 'nearest_mode', 'round_prefer_floor')!r} maps "
            f"output pixel ({r}, {c}) to input pixel ({got // w}, {got % w}), not "
            f"({r // sh}, {c // sw}); qloom upsamples by repeating each pixel (e.g. "
            f"'asymmetric' with 'floor', or the default 'half_pixel' with "
            f"'round_prefer_floor')", node.name)


def lower_resize(state, node, src: Int) -> Int:
    """The ``Upsample`` layer of ``node`` reading the integer tensor ``src``; ``state`` is
    the lowering's ``LayerBuilders``."""
    mode = node_attr(node, "mode", "nearest")
    if mode != "nearest":
        raise UnsupportedModelError(
            f"{node.op_type} in mode {mode!r}: interpolation makes values between the "
            f"quantized levels; qloom resizes in mode 'nearest' (integer factors)", node.name)
    factors = _factors(state, node, src)
    _check_index_map(state, node, src, factors)
    layer = ir.Upsample(name=node.name, inputs=(src.ir,), output=node.output[0],
                        scale=factors)
    info = state.tensors[src.ir]
    state.new_tensor(layer.output, state.ir_shape(node.output[0], src.layout), info.dtype,
                     info.scale, *state.ranges[src.ir], info.zero_point)
    state.layers.append(layer)
    if src.ir in state.onnx_names:
        state.onnx_names[layer.output] = node.output[0]
        state.onnx_layouts[layer.output] = src.layout.to_onnx
    return Int(layer.output, node.output[0], src.layout, src.offset, src.quantized)


def _lower(state, node, data) -> bool:
    if not isinstance(data[0], Int):
        return False
    state.env[node.output[0]] = lower_resize(state, node, data[0])
    return True


LOWERINGS = {op: Lowering(_lower, "nearest Resize/Upsample by integer factors",
                          _float_reason) for op in ("Resize", "Upsample")}
