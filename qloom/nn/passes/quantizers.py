"""QONNX quantizer nodes (Quant/IntQuant, BipolarQuant, Trunc, MultiThreshold) as typed
specs, and quantized constant weights as integers with a scale.

A quantizer output holds ``value * scale`` with an integer ``value`` of ``dtype``. The
integer is recovered from the float qonnx computes (``round(y / scale)``), which is exact
for every width qloom accepts (at most 16 bits), so no quantizer semantics are rewritten
here: qonnx's own functions produce the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import UnsupportedModelError
from ..dtypes import BIPOLAR, DataType, TERNARY, int_type, smallest_type, uint_type
from .attrs import node_attr

__all__ = ["QUANTIZERS", "QuantSpec", "quant_spec", "quantized_constant", "MAX_BITS"]

QUANTIZERS = ("Quant", "IntQuant", "BipolarQuant", "Trunc", "MultiThreshold")
MAX_BITS = 16
_SHAPE_OPS = ("Transpose", "Reshape", "Identity", "Squeeze", "Unsqueeze", "Flatten")




def _bits(value, node) -> int:
    b = np.asarray(value, dtype=np.float64)
    if b.size != 1 or not np.isfinite(b).all() or b.item() != round(b.item()):
        raise UnsupportedModelError(
            f"bit width {b.ravel().tolist()} is not supported: qloom needs one integer bit "
            f"width from 1 to {MAX_BITS} per quantizer", node.name)
    bits = int(round(b.item()))
    if not 1 <= bits <= MAX_BITS:
        raise UnsupportedModelError(
            f"bit width {bits} is not supported: qloom needs one integer bit width from 1 "
            f"to {MAX_BITS} per quantizer", node.name)
    return bits


def _quant_type(bits: int, signed: bool, narrow: bool) -> DataType:
    if bits == 1 and signed:
        return BIPOLAR          # qonnx maps 1-bit signed Quant to {-1, +1}
    if signed:
        return TERNARY if (bits == 2 and narrow) else int_type(bits, narrow=narrow)
    return uint_type(bits)


@dataclass(frozen=True)
class QuantSpec:
    """What a quantizer node produces: ``float = (value - zero_point) * scale`` with
    ``value`` in ``dtype``. ``scale`` is float64 holding the exact float32 scale (scalar or
    per channel); ``zero_point`` is one integer (asymmetric quantizers, 0 otherwise)."""

    node: str
    op: str
    dtype: DataType
    scale: np.ndarray
    rounding: str = "ROUND"
    zero_point: int = 0

    def values(self, y: np.ndarray, scale: np.ndarray | None = None) -> np.ndarray:
        """Integer values of a quantizer output ``y`` (float32, as qonnx computed it);
        ``scale`` overrides ``self.scale`` when ``y`` is laid out differently."""
        scale = self.scale if scale is None else scale
        v = np.round(np.asarray(y, dtype=np.float64) / scale).astype(np.int64) + \
            self.zero_point
        if self.dtype.bipolar:
            v = np.where(v >= 0, 1, -1)
        return v


def _const(consts, name, node, what):
    if name not in consts:
        raise UnsupportedModelError(f"the {what} of a quantizer must be a constant", node.name)
    return np.asarray(consts[name])


def _check_scale(scale, node):
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        raise UnsupportedModelError("quantizer scales must be positive and finite", node.name)


def _zero_point(zero, dtype: DataType, node) -> int:
    """An activation quantizer's zero point: one integer (per-tensor), a code of ``dtype``
    (qonnx clips the shifted value into the type's range, so the zero point is the code of
    float 0)."""
    z = np.unique(np.asarray(zero, dtype=np.float64))
    if z.size == 1 and z[0] == 0:
        return 0
    if z.size != 1:
        raise UnsupportedModelError(
            f"activation quantizer with per-channel zero points {z.tolist()[:8]}: qloom "
            f"supports one integer zero point per tensor", node.name)
    if dtype.bipolar or z[0] != round(z[0]) or not dtype.min <= z[0] <= dtype.max:
        raise UnsupportedModelError(
            f"activation quantizer with zero point {z[0]:g}: qloom supports an integer zero "
            f"point inside the {dtype} range [{dtype.min}, {dtype.max}]", node.name)
    return int(z[0])


def quant_spec(node, consts) -> QuantSpec:
    """The spec of an activation quantizer (its parameters must be constants)."""
    op = node.op_type
    if op in ("Quant", "IntQuant"):
        scale = _const(consts, node.input[1], node, "scale").astype(np.float64)
        zero = _const(consts, node.input[2], node, "zero point")
        bits = _bits(_const(consts, node.input[3], node, "bit width"), node)
        dtype = _quant_type(bits, bool(node_attr(node, "signed", 1)), bool(node_attr(node, "narrow", 0)))
        _check_scale(scale, node)
        return QuantSpec(node.name, op, dtype, scale, node_attr(node, "rounding_mode", "ROUND"),
                         _zero_point(zero, dtype, node))
    if op == "BipolarQuant":
        scale = _const(consts, node.input[1], node, "scale").astype(np.float64)
        _check_scale(scale, node)
        return QuantSpec(node.name, op, BIPOLAR, scale)
    if op == "Trunc":
        scale = _const(consts, node.input[1], node, "scale").astype(np.float64)
        zero = _const(consts, node.input[2], node, "zero point")
        in_bits = _bits(_const(consts, node.input[3], node, "input bit width"), node)
        if len(node.input) > 5:     # Trunc v2: explicit output scale and width
            out_scale = _const(consts, node.input[4], node, "output scale").astype(np.float64)
            out_bits = _bits(_const(consts, node.input[5], node, "output bit width"), node)
        else:   # Trunc v1: qonnx rescales the truncated integer by the input scale
            out_bits = _bits(_const(consts, node.input[4], node, "output bit width"), node)
            out_scale = scale
        if np.any(zero != 0):
            raise UnsupportedModelError("Trunc with a nonzero zero point is not supported",
                                        node.name)
        signed = bool(node_attr(node, "signed", 1))
        _check_scale(out_scale, node)
        return QuantSpec(node.name, op, _quant_type(out_bits, signed, False), out_scale,
                         node_attr(node, "rounding_mode", "FLOOR"))
    if op == "MultiThreshold":
        out_scale = float(node_attr(node, "out_scale", 1.0))
        out_bias = float(node_attr(node, "out_bias", 0.0))
        thr = _const(consts, node.input[1], node, "threshold tensor")
        name = node_attr(node, "out_dtype", "")
        levels = thr.shape[-1] + 1
        if out_scale != 1.0 or out_bias != round(out_bias):
            raise UnsupportedModelError(
                "MultiThreshold needs out_scale 1 and an integer out_bias", node.name)
        if name == "BIPOLAR":
            dtype = BIPOLAR
        else:
            dtype = smallest_type(int(out_bias), int(out_bias) + levels - 1)
        return QuantSpec(node.name, op, dtype, np.ones(1))
    raise UnsupportedModelError(f"{op} is not a quantizer", node.name)


def _apply_shape_op(node, arr, consts):
    op = node.op_type
    if op == "Transpose":
        perm = node_attr(node, "perm", None)
        return np.transpose(arr, perm)
    if op == "Reshape":
        return arr.reshape(np.asarray(consts[node.input[1]], dtype=np.int64))
    if op == "Flatten":
        axis = node_attr(node, "axis", 1)
        return arr.reshape(int(np.prod(arr.shape[:axis])), -1)
    if op == "Squeeze":
        axes = node.input[1] if len(node.input) > 1 else None
        return np.squeeze(arr, axis=tuple(consts[axes]) if axes else None)
    if op == "Unsqueeze":
        axes = node_attr(node, "axes", None)
        axes = consts[node.input[1]] if axes is None else axes
        return np.expand_dims(arr, tuple(int(a) for a in np.atleast_1d(axes)))
    return arr


def quantized_constant(tensor: str, producers: dict, consts: dict, annotations: dict,
                       consumer: str):
    """A constant weight tensor as ``(values int64, scale float64 of the same shape, dtype)``.

    Follows shape ops (Transpose, Reshape, ...) back to a Quant/BipolarQuant on constants;
    an unquantized float constant is refused unless annotated with an integer datatype.
    """
    node = producers.get(tensor)
    if node is None:
        values = np.asarray(consts[tensor])
        name = annotations.get(tensor, "")
        if (name.startswith(("INT", "UINT")) or name in ("BIPOLAR", "BINARY", "TERNARY")) \
                and np.all(values == np.round(values)):
            ints = values.astype(np.int64)
            dtype = BIPOLAR if name == "BIPOLAR" else smallest_type(ints.min(), ints.max())
            return ints, np.ones(values.shape), dtype
        raise UnsupportedModelError(
            f"unquantized float weights '{tensor}': qloom needs weights quantized by "
            f"Quant/BipolarQuant (or annotated with an integer datatype); a float model "
            f"compiles at a fixed-point precision: --precision 'fixed<16,6>'", consumer)
    if node.op_type in _SHAPE_OPS:
        ints, scale, dtype = quantized_constant(node.input[0], producers, consts,
                                                annotations, consumer)
        return (_apply_shape_op(node, ints, consts), _apply_shape_op(node, scale, consts),
                dtype)
    if node.op_type in ("Quant", "IntQuant", "BipolarQuant"):
        y = np.asarray(consts[node.output[0]], dtype=np.float64)
        scale = np.asarray(consts[node.input[1]], dtype=np.float64)
        _check_scale(scale, node)
        full_scale = np.broadcast_to(scale, y.shape).copy()
        ints = np.round(y / full_scale).astype(np.int64)
        if node.op_type == "BipolarQuant":
            return ints, full_scale, BIPOLAR
        bits = _bits(consts[node.input[3]], node)
        zero = np.asarray(consts[node.input[2]], dtype=np.float64)
        if np.any(zero != np.round(zero)):
            raise UnsupportedModelError(
                "weight quantizers need an integer zero point (it is folded into the "
                "integer weights)", node.name)
        if np.any(zero != 0):
            return ints, full_scale, smallest_type(ints.min(), ints.max())
        dtype = _quant_type(bits, bool(node_attr(node, "signed", 1)), bool(node_attr(node, "narrow", 0)))
        return ints, full_scale, dtype
    raise UnsupportedModelError(
        f"weights computed by {node.op_type} ('{node.name}') are not supported: weights must "
        f"be a quantized constant, optionally transposed or reshaped", consumer)
