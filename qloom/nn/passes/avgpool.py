"""Lowering of ONNX AveragePool and GlobalAveragePool to the exact ``AvgPool`` (window sum).

An average of quantized values ``v * s`` is ``sum(v) * s / (KH*KW)``: an exact integer sum
with the scale ``s / (KH*KW)``. The integer network keeps the sum; the division stays in the
tensor's scale, where the next quantizer absorbs it (``derive_thresholds`` evaluates that
quantizer, Quant or brevitas' Trunc, on ``sum * scale`` exactly as qonnx does, and
``ThresholdsToRequant`` turns the thresholds into a shift where that is provably equal), or
a following linear layer multiplies it into its accumulator scale.

Refused, naming the node, where no exact integer form exists: pooling float arithmetic that
is not a quantizer output (after BatchNorm, ReLU, a bias), ``count_include_pad=0`` with
padding (the divisor then varies per position), ``ceil_mode``, dilations, ``auto_pad``,
padding around an accumulator with a bias, and padding of a bipolar tensor (0 is no
bipolar value the hardware can carry).
"""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedModelError
from .. import ir
from .attrs import node_attr
from .lowering import Lowering
from .values import Int

__all__ = ["LOWERINGS", "lower_avgpool"]


def float_avgpool_reason(node) -> str:
    return (f"{node.op_type} of float arithmetic (BatchNorm, ReLU, a bias or a scale after a "
            f"layer, not a quantizer output) has no exact integer form; qloom pools "
            f"quantized tensors: put a quantizer before the pool")


def _window(node, in_shape):
    """(kernel, stride, pads) of the node on an input ``[N, C, H, W]``."""
    h, w = in_shape[2], in_shape[3]
    if node.op_type == "GlobalAveragePool":
        return (h, w), (1, 1), (0, 0, 0, 0)
    kernel = tuple(node_attr(node, "kernel_shape", []))
    strides = tuple(node_attr(node, "strides", [1] * len(kernel)))
    pads = tuple(node_attr(node, "pads", [0] * 2 * len(kernel)))
    problems = []
    if len(kernel) != 2:
        problems.append(f"a {len(kernel)}-D kernel")
    if node_attr(node, "auto_pad", "NOTSET") != "NOTSET":
        problems.append(f"auto_pad {node_attr(node, 'auto_pad', '')}")
    if node_attr(node, "ceil_mode", 0):
        problems.append("ceil_mode 1")
    if any(d != 1 for d in node_attr(node, "dilations", [1, 1])):
        problems.append(f"dilations {list(node_attr(node, 'dilations', []))}")
    if problems:
        raise UnsupportedModelError(
            f"AveragePool with {', '.join(problems)} is not supported; qloom pools 2-D "
            f"windows with explicit pads, ceil_mode 0 and no dilation", node.name)
    if any(pads) and not node_attr(node, "count_include_pad", 0):
        raise UnsupportedModelError(
            f"AveragePool with pads {list(pads)} and count_include_pad 0 divides the border "
            f"windows by fewer elements than the others; no per-channel integer form is "
            f"exact (export with count_include_pad=1, or without padding)", node.name)
    return kernel, strides, (pads[0], pads[1], pads[2], pads[3])


def lower_avgpool(state, node, src: Int) -> Int:
    """The ``AvgPool`` layer of ``node`` reading the integer tensor ``src``; ``state`` is the
    lowering's ``LayerBuilders`` (tensors, ranges, layers, shapes)."""
    in_shape = state.shape_of(node.input[0])
    if not src.layout.is_nchw or len(in_shape) != 4:
        raise UnsupportedModelError(
            f"{node.op_type} on a tensor of shape {list(in_shape)}: only [N, C, H, W] "
            f"tensors are pooled", node.name)
    kernel, stride, pads = _window(node, in_shape)
    info = state.tensors[src.ir]
    if any(pads) and np.any(np.asarray(src.offset) != 0):
        raise UnsupportedModelError(
            "AveragePool with padding of an accumulator with a bias: the padded zeros would "
            "dilute the bias per position, which no per-channel integer form reproduces",
            node.name)
    if any(pads) and info.dtype.bipolar:
        raise UnsupportedModelError(
            "AveragePool with padding of a bipolar tensor: the padded 0 is no bipolar value",
            node.name)
    layer = ir.AvgPool(name=node.name, inputs=(src.ir,), output=node.output[0],
                       kernel=kernel, stride=stride, pads=pads)
    count = layer.divisor
    lo, hi = state.ranges[src.ir]
    if any(pads):       # a window may hold padded zeros in place of any of its values
        lo, hi = np.minimum(count * lo, 0), np.maximum(count * hi, 0)
    else:
        lo, hi = count * lo, count * hi
    scale = info.scale / count
    state.new_tensor(layer.output, state.ir_shape(node.output[0]), layer.sum_type(info.dtype),
                     scale, lo, hi)
    state.layers.append(layer)
    # Not registered in onnx_names: qonnx's float average is not exactly sum * scale.
    return Int(layer.output, node.output[0], src.layout, src.offset, src.quantized)


def _lower(state, node, data) -> bool:
    if not isinstance(data[0], Int):
        return False
    state.env[node.output[0]] = lower_avgpool(state, node, data[0])
    return True


LOWERINGS = {op: Lowering(_lower, "average pooling of quantized tensors", float_avgpool_reason)
             for op in ("AveragePool", "GlobalAveragePool")}
