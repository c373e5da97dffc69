"""Concat along the channel axis of integer tensors: the channels one after the other, each
keeping its scale (the result has per-channel scales where they differ, which a quantizer
or a depthwise convolution reading it keeps exact) and its offset. Other axes, and mixes
of bipolar and other tensors, are refused naming the node."""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedModelError
from .. import ir
from ..dtypes import smallest_type
from .attrs import node_attr
from .lowering import Lowering
from .values import Int

__all__ = ["LOWERINGS", "lower_concat"]


def lower_concat(state, node, data) -> Int:
    """Concat along the channel axis: the channels one after the other, each keeping
    its scale (a per-channel scale when they differ) and offset."""
    if not all(isinstance(d, Int) for d in data) or len(data) != len(node.input):
        raise UnsupportedModelError(
            "Concat of tensors that are not all quantized tensors or accumulators (a "
            "constant or float arithmetic among them)", node.name)
    rank = len(state.shape_of(node.output[0]))
    axis = node_attr(node, "axis", 1)
    axis = axis + rank if axis < 0 else axis
    layout = data[0].layout
    if any(d.layout != layout for d in data) or layout.kind == "flat" or \
            axis != layout.channel_axis(rank):
        raise UnsupportedModelError(
            f"Concat along axis {axis} of tensors of shapes "
            f"{[state.shape_of(t) for t in node.input]}: qloom concatenates along the "
            f"channel axis (1 of [N, C, H, W], the last of [N, K])", node.name)
    infos = [state.tensors[d.ir] for d in data]
    types = [i.dtype for i in infos]
    if any(t.bipolar for t in types) and not all(t.bipolar for t in types):
        raise UnsupportedModelError(
            f"Concat of bipolar and non-bipolar tensors ({', '.join(map(str, types))})",
            node.name)
    if all(t == types[0] for t in types):
        dtype = types[0]
    else:
        dtype = smallest_type(min(t.min for t in types), max(t.max for t in types))
    scale = np.concatenate([np.broadcast_to(i.scale, (i.shape[-1],)) for i in infos])
    if np.all(scale == scale[0]):
        scale = scale[:1]
    offset = np.concatenate([np.broadcast_to(np.asarray(d.offset, np.float64),
                                             (i.shape[-1],)) for d, i in zip(data, infos)])
    zps = {i.zero_point for i in infos}
    zero_point = zps.pop() if len(zps) == 1 else 0
    layer = ir.Concat(name=node.name, inputs=tuple(d.ir for d in data),
                      output=node.output[0])
    lo = np.concatenate([state.ranges[d.ir][0] for d in data])
    hi = np.concatenate([state.ranges[d.ir][1] for d in data])
    state.new_tensor(layer.output, state.ir_shape(node.output[0], layout), dtype, scale,
                    lo, hi, zero_point)
    state.layers.append(layer)
    quantized = all(d.quantized for d in data)
    if all(d.ir in state.onnx_names for d in data) and len({i.zero_point for i in infos}) == 1:
        state.onnx_names[layer.output] = node.output[0]
        state.onnx_layouts[layer.output] = layout.to_onnx
    return Int(layer.output, node.output[0], layout, offset, quantized)



def _lower(state, node, data) -> bool:
    if not all(isinstance(d, Int) for d in data):
        return False
    state.env[node.output[0]] = lower_concat(state, node, data)
    return True


LOWERINGS = {"Concat": Lowering(_lower, "Concat along channels")}
