"""The operations an unrolled chain (``qloom.hw.unrolled``) builds after a neuron's sum,
as extern nodes of its adder graph (``qloom.hw.csd``): requantization (shift, round,
clamp), thresholds against constants, and the lookup tables that sum groups of one-bit
inputs. Each gives its value range, its logic levels and LUT4s for the schedule and the
estimate, a Python model (``evaluate``) and its hardware (``build`` or ``build_in``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Array, Cat, Const, Mux, Value, signed, unsigned

from ..nn.dtypes import DataType
from ..nn.ir import Rounding
from .compressor import ge_constant, ge_constant_luts
from .csd import Node
from .threshold import ThresholdSpec
from .types import shape_of

__all__ = ["RequantSpec", "RequantOp", "TieSelectOp", "ThresholdOp", "GroupSumOp", "node_shape"]


@dataclass(frozen=True, eq=False)
class RequantSpec:
    """``clip(round((x + bias[c]) / 2**shift), lo, hi)`` per channel, as
    :class:`qloom.nn.ir.Requant` computes it."""

    bias: np.ndarray
    shift: int
    rounding: Rounding
    lo: int
    hi: int
    out_type: DataType

    def __post_init__(self):
        bias = np.asarray(self.bias)
        if bias.ndim != 1 or not np.issubdtype(bias.dtype, np.integer):
            raise TypeError(f"Bias must be a 1-D integer array, not {self.bias!r}")
        if not isinstance(self.shift, int) or isinstance(self.shift, bool) or self.shift < 0:
            raise TypeError(f"Shift must be a non-negative integer, not {self.shift!r}")
        if not isinstance(self.rounding, Rounding):
            raise TypeError(f"Rounding must be a Rounding, not {self.rounding!r}")
        if not isinstance(self.out_type, DataType) or self.out_type.bipolar:
            raise TypeError(f"Requantization output type must be an integer DataType, not "
                            f"{self.out_type!r}")
        if not (self.out_type.min <= self.lo <= self.hi <= self.out_type.max):
            raise ValueError(f"Clamp range [{self.lo}, {self.hi}] must lie within "
                             f"{self.out_type} [{self.out_type.min}, {self.out_type.max}]")
        object.__setattr__(self, "bias", bias.astype(np.int64))

    @classmethod
    def from_layer(cls, layer) -> "RequantSpec":
        return cls(bias=layer.bias, shift=layer.shift, rounding=layer.rounding, lo=layer.lo,
                   hi=layer.hi, out_type=layer.out_type)

    @property
    def channels(self) -> int:
        return self.bias.size

    @property
    def offset(self) -> int:
        """The constant added before the floor shift that makes it this rounding
        (half-even also undoes ties that rounded up to an odd value)."""
        if self.shift == 0 or self.rounding is Rounding.FLOOR:
            return 0
        if self.rounding is Rounding.CEIL:
            return (1 << self.shift) - 1
        return 1 << (self.shift - 1)


# --- The operations after a neuron's sum (extern nodes of the adder graph) -----------------

def node_shape(node: Node):
    """The Amaranth shape of a graph node's value."""
    return signed(node.bits) if node.signed else unsigned(node.bits)


def _shape(lo: int, hi: int):
    return Node("x", lo, hi)


def _resized(v: Value, width: int) -> Value:
    """The low ``width`` bits of ``v``, sign- or zero-extended when it is narrower."""
    v = Value.cast(v)
    if len(v) >= width:
        return v[:width]
    fill = v[-1] if v.shape().signed else Const(0, 1)
    return Cat(v, fill.replicate(width - len(v)))


class RequantOp:
    """Floor-shift and clamp of ``v = sum + bias + offset``. With half-even rounding its
    value is ``packed``: the low bits of ``q = v >> shift``, the tie flag and the clamp's
    compares, from which :class:`TieSelectOp` makes the result a level later, so that a
    register bank may close between them."""

    def __init__(self, spec: RequantSpec, in_node: Node, in_shift: int):
        self.shift, self.rounding, self.lo, self.hi = spec.shift, spec.rounding, spec.lo, spec.hi
        self.half_even = spec.rounding is Rounding.HALF_EVEN and spec.shift > 0
        self.levels = 1
        q_lo = (in_node.lo << in_shift) >> spec.shift
        q_hi = (in_node.hi << in_shift) >> spec.shift
        self.q_bits = _shape(q_lo - 1, q_hi).bits
        self.clamp_lo, self.clamp_hi = q_lo - 1 < spec.lo, q_hi > spec.hi
        self.out_shape = node_shape(_shape(spec.lo, spec.hi))
        # Half-even: after the low bits of q, the tie flag, then q > hi and q <= lo where
        # the clamp needs them.
        self.flags = ("tie",) + ("over",) * self.clamp_hi + ("under",) * self.clamp_lo
        # The clamp's compares and the tie's LUT tree (counted as measured on the jet
        # tagger's chain when it made the compares twice, on q and on q - 1), then the
        # selects (half-even: TieSelectOp's).
        self.luts = self.q_bits * (self.half_even + self.clamp_lo + self.clamp_hi)
        if not self.half_even:
            self.luts += self.out_shape.width

    @property
    def range(self) -> tuple[int, int]:
        """The node's value range: the clamp's, or ``packed``'s."""
        if self.half_even:
            return 0, (1 << (self.out_shape.width + len(self.flags))) - 1
        return self.lo, self.hi

    def _fields(self, q, tie) -> dict:
        """``packed``'s flags from q and the tie (numpy arrays or Amaranth values)."""
        return {"tie": tie, "over": q > self.hi, "under": q <= self.lo}

    def evaluate(self, v):
        q = v >> self.shift
        if not self.half_even:
            return np.clip(q, self.lo, self.hi)
        width = self.out_shape.width
        fields = self._fields(q, (v & ((1 << self.shift) - 1)) == 0)
        packed = q & ((1 << width) - 1)
        for k, name in enumerate(self.flags):
            packed = packed | (np.asarray(fields[name], dtype=np.int64) << (width + k))
        return packed

    def build(self, v: Value) -> Value:
        q = v >> self.shift
        if not self.half_even:
            out = q
            if self.clamp_hi:
                out = Mux(q > self.hi, self.hi, out)
            if self.clamp_lo:
                out = Mux(q < self.lo, self.lo, out)
            return out
        # The compares read q, not the tie fix's q - 1 (the jet tagger's first layer had
        # the tie's LUT tree, the subtraction, a compare and the select in series, 14
        # cells, the deepest logic of its unrolled chain): see TieSelectOp.
        fields = self._fields(q, v.as_unsigned()[:self.shift] == 0)
        return Cat(_resized(q, self.out_shape.width), *(fields[name] for name in self.flags))


class TieSelectOp:
    """The half-even requantization's last level, from :class:`RequantOp`'s ``packed``:
    ``clip(q - fix, lo, hi)`` with ``fix`` a tie at an odd q. Then ``q - fix`` is q with
    its low bit cleared, and the clamp needs no compare of ``q - 1``: clamping when
    ``q > hi`` gives ``hi`` also where ``q - fix = hi``, and clamping when ``q <= lo``
    gives ``lo`` also where ``q - fix = q = lo``. One LUT4 per output bit."""

    levels = 1

    def __init__(self, requant: RequantOp):
        self.shape, self.flags = requant.out_shape, requant.flags
        self.lo, self.hi = requant.lo, requant.hi
        self.luts = self.shape.width

    def evaluate(self, packed):
        width = self.shape.width
        packed = np.asarray(packed, dtype=np.int64)
        flag = {name: (packed >> (width + k)) & 1 for k, name in enumerate(self.flags)}
        out = packed & ((1 << width) - 1)
        out = out & ~flag["tie"]                                # clears an odd q's low bit
        if self.shape.signed:
            out = out - (((out >> (width - 1)) & 1) << width)
        if "over" in flag:
            out = np.where(flag["over"] == 1, self.hi, out)
        if "under" in flag:
            out = np.where(flag["under"] == 1, self.lo, out)
        return out

    def build(self, packed: Value) -> Value:
        width = self.shape.width
        flag = {name: packed[width + k] for k, name in enumerate(self.flags)}
        # The bits of q - fix (the node's signal gives them its shape).
        out = Cat(packed[0] & ~flag["tie"], packed[1:width])
        if "over" in flag:
            out = Mux(flag["over"], self.hi, out)
        if "under" in flag:
            out = Mux(flag["under"], self.lo, out)
        return out


class ThresholdOp:
    """``bias + sign * #{k : v >= T_k}`` of one channel, compared on the sum's node (its
    shift and a constant ``offset`` of the sum folded into the thresholds)."""

    def __init__(self, spec: ThresholdSpec, channel: int, in_node: Node, in_shift: int,
                 offset: int = 0):
        t = spec.thresholds[channel] - offset
        # v = (node << shift) + offset >= T  <=>  node >= ceil((T - offset) / 2**shift);
        # clipped to the node's range, where the same comparisons decide the same way with
        # narrower constants.
        self.thresholds = np.clip(-(-t // (1 << in_shift)), in_node.lo, in_node.hi + 1)
        self.in_shift = in_shift
        self.bias, self.sign = int(spec.bias[channel]), int(spec.sign[channel])
        k = len(t)
        self.plain = self.bias == 0 and self.sign == 1
        out_bits = shape_of(spec.out_type).width
        # One threshold (a binary activation): a ripple of LUT4s, three bits each
        # (compressor.ge_constant); a LUT and its route are about half an adder level.
        self.lut_compare = k == 1
        if self.lut_compare:
            compare = ge_constant_luts(in_node.bits)
            self.levels = -(-compare // 2) + (0 if self.plain else 1)
            self.luts = compare + (0 if self.plain else out_bits)
        else:
            self.levels = 1 + math.ceil(math.log2(k)) + (0 if self.plain else 1)
            self.luts = k * in_node.bits + (k - 1) * max(1, k.bit_length()) + \
                (0 if self.plain else out_bits)

    def evaluate(self, v):
        node = v >> self.in_shift
        count = (node[..., None] >= self.thresholds).sum(-1)
        return self.bias + self.sign * count

    def build_in(self, m, name: str, v: Value) -> Value:
        node = v >> self.in_shift
        if self.lut_compare:
            count = ge_constant(m, node, int(self.thresholds[0]), name)
        else:
            count = _tree([node >= int(t) for t in self.thresholds])
        if self.plain:
            return count
        return self.bias + (count if self.sign > 0 else -count)


class GroupSumOp:
    """``sum(w_j * x_j)`` over a group of up to four one-bit inputs as a lookup table: one
    LUT4 per result bit (distributed arithmetic), shared by every neuron whose weights on
    the group are the same up to sign and a power of two."""

    GROUP = 4

    def __init__(self, weights: tuple, inputs: list):
        self.weights = weights
        # The value a lane carries for its bit b: lo + b (codes 0/1, or 0/-1 for INT1).
        self.lows = [node.lo for node in inputs]
        self.steps = [node.hi - node.lo for node in inputs]
        self.table = []
        for index in range(1 << len(weights)):
            bits = [(index >> k) & 1 for k in range(len(weights))]
            self.table.append(sum(w * (lo + step * b) for w, lo, step, b
                                  in zip(weights, self.lows, self.steps, bits)))
        self.lo, self.hi = min(self.table), max(self.table)
        self.levels = 1
        self.luts = _shape(self.lo, self.hi).bits * (1 << max(0, len(weights) - 4))

    def evaluate(self, *values):
        return sum(w * v for w, v in zip(self.weights, values))

    def build(self, *values) -> Value:
        index = Cat(*[Value.cast(v).as_unsigned()[0] for v in values])
        shape = node_shape(_shape(self.lo, self.hi))
        return Array([Const(v, shape) for v in self.table])[index]


def _tree(values):
    values = list(values)
    while len(values) > 1:
        values = [values[k] + values[k + 1] if k + 1 < len(values) else values[k]
                  for k in range(0, len(values), 2)]
    return values[0]
