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
    """Floor-shift and clamp of ``v = sum + bias + offset``; with half-even rounding its
    value is both candidates and the tie flag (``packed``), which :class:`TieSelectOp`
    chooses between a level later, so that a register bank may close between them."""

    def __init__(self, spec: RequantSpec, in_node: Node, in_shift: int):
        self.shift, self.rounding, self.lo, self.hi = spec.shift, spec.rounding, spec.lo, spec.hi
        self.half_even = spec.rounding is Rounding.HALF_EVEN and spec.shift > 0
        self.levels = 1
        q_lo = (in_node.lo << in_shift) >> spec.shift
        q_hi = (in_node.hi << in_shift) >> spec.shift
        self.q_bits = _shape(q_lo - 1, q_hi).bits
        self.clamp_lo, self.clamp_hi = q_lo - 1 < spec.lo, q_hi > spec.hi
        self.out_shape = node_shape(_shape(spec.lo, spec.hi))
        # The tie fix's subtraction, the clamp's compares and the candidates' selects (with
        # the tie fix the compares are made twice, on q and on q - 1, see build; measured,
        # the jet tagger's chain took 4% fewer LUT4s than with the fix in series, so this
        # count is kept, the final select's LUT4s now counted by TieSelectOp).
        self.luts = self.q_bits * (self.half_even + self.clamp_lo + self.clamp_hi)
        if not self.half_even:
            self.luts += self.out_shape.width

    @property
    def range(self) -> tuple[int, int]:
        """The node's value range: the clamp's, or the packed candidates' and flag's."""
        if self.half_even:
            return 0, (1 << (2 * self.out_shape.width + 1)) - 1
        return self.lo, self.hi

    def evaluate(self, v):
        q = v >> self.shift
        if not self.half_even:
            return np.clip(q, self.lo, self.hi)
        width = self.out_shape.width
        mask = (1 << width) - 1
        tie = ((v & ((1 << self.shift) - 1)) == 0) & (q & 1 == 1)
        return ((np.clip(q, self.lo, self.hi) & mask)
                | ((np.clip(q - 1, self.lo, self.hi) & mask) << width)
                | (tie.astype(np.int64) << 2 * width))

    def build(self, v: Value) -> Value:
        q = v >> self.shift

        def clamped(x, adjust):
            # The clamp of ``x = q - adjust``, its compares on ``q`` against constants
            # moved by ``adjust``: every compare reads ``q`` (not one the other's result,
            # nor the tie fix's subtraction), so they run beside each other.
            out = x
            if self.clamp_hi:
                out = Mux(q > self.hi + adjust, self.hi, out)
            if self.clamp_lo:
                out = Mux(q < self.lo + adjust, self.lo, out)
            return out

        if not self.half_even:
            return clamped(q, 0)
        # The tie fix (q - 1 on a tie at an odd q) chooses last between both clamps: the
        # jet tagger's first layer had the tie's LUT tree, the subtraction, a compare and
        # the select in series (14 cells, the deepest logic of its unrolled chain).
        width = self.out_shape.width
        tie = (v.as_unsigned()[:self.shift] == 0) & q[0]
        return Cat(_resized(clamped(q, 0), width), _resized(clamped(q - 1, 1), width), tie)


class TieSelectOp:
    """The half-even requantization's last level: the candidate its tie flag chooses
    (the value of :meth:`RequantOp.build` with ``half_even``)."""

    levels = 1

    def __init__(self, requant: RequantOp):
        self.shape = requant.out_shape
        self.luts = self.shape.width

    def evaluate(self, packed):
        width = self.shape.width
        mask = (1 << width) - 1
        v = np.where((packed >> 2 * width) & 1 == 1, (packed >> width) & mask, packed & mask)
        if self.shape.signed:
            v = v - (((v >> (width - 1)) & 1) << width)
        return v

    def build(self, packed: Value) -> Value:
        width = self.shape.width
        # The bits of the chosen candidate: the node's signal gives them its shape.
        return Mux(packed[2 * width], packed[width:2 * width], packed[:width])


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
