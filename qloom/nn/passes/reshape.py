"""Flatten, Reshape, Transpose, Squeeze and Unsqueeze of integer tensors: followed as
layouts (see ``values.Layout``), never executed. The hardware streams channels-last pixels
and moves no element, so a shape op is free exactly when the IR keeps its element order
(NCHW <-> NHWC transposes, flattening, adding or dropping axes of size 1); the result is
the same stream under a new layout, with an IR ``Flatten`` where its shape changes. The
network input, before any layer reads it, is instead laid out by the host as the op's
result needs (a Keras NHWC input transposed to NCHW before its first convolution).
Anything that would move elements is refused naming the node."""

from __future__ import annotations

import itertools

import numpy as np

from ...errors import UnsupportedModelError
from .. import ir
from .attrs import node_attr
from .values import NCHW, PLAIN, Int, Layout, flat_layout, image_layout

__all__ = ["lower_reshape"]


def _find_layout(onnx_shape, order, dims, *, host=False) -> Layout | None:
    """The layout of a tensor of ``onnx_shape`` whose IR holds the ONNX elements ``order``
    (None if no layout does): an image layout for 4-D tensors, plain or a flattened image
    (of ONNX image ``dims``) for 2-D ones, plain otherwise. ``host``: the tensor is the
    network input, which the host lays out in any axis order (a 3-D one too)."""
    rank = len(onnx_shape)
    candidates = [PLAIN] if rank != 4 else []
    if rank == 4 or (host and rank == 3):
        candidates += [image_layout(p) for p in itertools.permutations(range(rank - 1))]
    if rank == 2 and dims and int(np.prod(dims)) == onnx_shape[1]:
        candidates += [flat_layout(p, dims) for p in itertools.permutations(range(3))]
    for layout in candidates:
        if np.array_equal(layout.order(onnx_shape), order):
            return layout
    return None


def _regroup(values, old_shape, new_shape):
    """Per-channel ``values`` of a tensor of IR shape ``old_shape`` as per-channel values of
    the same elements in ``new_shape``; None when one new channel would mix values."""
    values = np.asarray(values)
    if values.size == 1:
        return values.reshape(1)
    full = np.broadcast_to(values, tuple(old_shape)).reshape(-1, new_shape[-1])
    return full[0].copy() if np.all(full == full[:1]) else None


def lower_reshape(state, node, src: Int) -> Int:
    """Flatten, Reshape, Transpose, Squeeze or Unsqueeze of an integer tensor. Free when
    the IR keeps its element order (NCHW <-> NHWC transposes, flattening, adding or
    dropping axes of size 1): the result is the same stream under a new layout, with an
    IR ``Flatten`` where its shape changes. The network input, before any layer reads
    it, is instead laid out by the host as this op's result needs."""
    in_shape, out_shape = state.shape_of(node.input[0]), state.shape_of(node.output[0])
    index = np.arange(int(np.prod(in_shape[1:])), dtype=np.int64).reshape(1, *in_shape[1:])
    if node.op_type == "Transpose":
        perm = list(node_attr(node, "perm", list(range(len(in_shape)))[::-1]))
        if perm[0] != 0:
            raise UnsupportedModelError(
                f"Transpose with perm {perm} moves the batch axis of an activation",
                node.name)
        index = np.transpose(index, perm)
    moved = index.ravel()       # ONNX-out element j is ONNX-in element moved[j]
    if _input_untouched(state, src):
        return _relayout_input(state, node, src, moved, in_shape, out_shape)
    want = np.argsort(moved)[src.layout.order(in_shape)]
    dims = tuple(in_shape[1:]) if len(in_shape) == 4 else src.layout.dims
    layout = _find_layout(out_shape, want, dims)
    if layout is None:
        raise UnsupportedModelError(
            f"{node.op_type} of an activation from {list(in_shape)} to "
            f"{list(out_shape)} reorders its elements: the hardware streams channels-last "
            f"pixels and moves no elements; qloom follows transposes between NCHW and "
            f"NHWC and reshapes that keep that order", node.name)
    return _reshaped(state, node, src.ir, layout, out_shape, src.offset, src.quantized)


def _reshaped(state, node, ir_name, layout, out_shape, offset, quantized) -> Int:
    """The IR tensor ``ir_name`` as the shape op's result under ``layout``: the same
    tensor when its IR shape does not change, else an IR ``Flatten`` to the new shape
    (per-channel scales, offsets and ranges regrouped, refused when they would mix)."""
    info = state.tensors[ir_name]
    shape = layout.ir_shape(out_shape)
    if tuple(shape) == tuple(info.shape):
        return Int(ir_name, node.output[0], layout, offset, quantized)
    in_shape = state.shape_of(node.input[0])
    regroup = {what: _regroup(values, info.shape, shape)
               for what, values in (("scales", info.scale), ("offsets", offset),
                                    ("ranges", state.ranges[ir_name][0]),
                                    ("ranges ", state.ranges[ir_name][1]))}
    mixed = [what.strip() for what, v in regroup.items() if v is None]
    if mixed:
        raise UnsupportedModelError(
            f"{node.op_type} from {list(in_shape)} to {list(out_shape)} puts elements of "
            f"different {mixed[0]} into one channel", node.name)
    layer = ir.Flatten(name=node.name, inputs=(ir_name,), output=node.output[0],
                       shape=None if len(shape) == 1 else tuple(shape))
    state.new_tensor(layer.output, shape, info.dtype, regroup["scales"],
                    regroup["ranges"], regroup["ranges "], info.zero_point)
    state.layers.append(layer)
    if ir_name in state.onnx_names:      # exactly value * scale in qonnx too
        state.onnx_names[layer.output] = node.output[0]
        state.onnx_layouts[layer.output] = layout.to_onnx
    return Int(layer.output, node.output[0], layout, regroup["offsets"], quantized)


def _input_untouched(state, src: Int) -> bool:
    """Whether ``src`` is the network input, read by nothing yet but this one op."""
    if src.ir != state.input or state.input_layout is None:
        return False
    readers = [n for n in state.model.graph.node if src.onnx in n.input]
    return len(readers) == 1 and not any(src.ir in l.inputs for l in state.layers)

def _relayout_input(state, node, src: Int, moved, in_shape, out_shape) -> Int:
    """The input laid out so that this shape op's result is in the canonical layout
    (NCHW images, plain otherwise) with nothing moved in hardware; an IR ``Flatten``
    follows where the result's IR shape differs (a [1, 1, 10, 49] input flattened into a
    490-input dense layer). ``state.input_elements`` says, for each ONNX tensor that is
    the input under a chain of shape ops, which element of the input quantizer's output
    each of its elements is, so that chains (Transpose, then Flatten) compose."""
    quantized = state.onnx_names.get(src.ir)
    if quantized is None:
        raise UnsupportedModelError(
            f"{node.op_type} of the fixed-point input: qloom folds only a Reshape or "
            f"Flatten before the first layer's float input", node.name)
    base_shape = state.shape_of(quantized)
    base = state.input_elements.get(src.onnx)
    if base is None:
        base = np.arange(int(np.prod(base_shape[1:])), dtype=np.int64)
    target = NCHW if len(out_shape) == 4 else PLAIN
    elements = base[moved]          # ONNX-out element j is input element elements[j]
    want = elements[target.order(out_shape)]
    layout = _find_layout(base_shape, want, (), host=True)
    info = state.tensors[src.ir]
    if layout is None or (info.scale.size > 1 and layout != state.input_layout):
        raise UnsupportedModelError(
            f"{node.op_type} of the input from {list(in_shape)} to {list(out_shape)}: "
            f"no channels-last layout of the input gives it (or the input quantizer "
            f"has per-channel scales along another axis)", node.name)
    state.input_layout = layout
    shape = layout.ir_shape(base_shape)
    lo, hi = info.dtype.min, info.dtype.max
    state.new_tensor(src.ir, shape, info.dtype, info.scale, lo, hi, info.zero_point)
    state.onnx_layouts[src.ir] = layout.to_onnx
    state.input_elements[node.output[0]] = elements
    return _reshaped(state, node, src.ir, target, out_shape, src.offset, src.quantized)
