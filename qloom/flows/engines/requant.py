"""Shift-and-round requantization of a many-level activation (see
``qloom.nn.passes.thresholds_to_requant``)."""

from __future__ import annotations

from ...nn.ir import Requant
from ..cost import Resources, memory_cost
from .base import ChannelEngine

__all__ = ["RequantEngine"]


class RequantEngine(ChannelEngine):
    kind = "requant"
    layer: Requant

    def resources(self, fold, options, dsps=0):
        bits = self.layer.in_type.bits + 2
        folds = self.layer.channels // fold.pe
        # Per lane: the offset adder, the rounding increment, the clamp, the offset table
        # over the channel folds (a ROM in LUTs) and the registers between them.
        table = memory_cost(folds, bits, options.family, block=False)
        per_lane = Resources(lut=3 * bits + self.layer.out_type.bits,
                             ff=3 * bits + self.layer.out_type.bits) + table
        return Resources(lut=fold.pe * per_lane.lut + 10, ff=fold.pe * per_lane.ff + 8)

    @property
    def in_bits(self) -> int:
        return self.layer.in_type.bits

    def nodes(self, fold, options, dsps=0):
        from ...hw.requant import Requantizer
        from ...hw.top import Node
        layer = self.layer
        unit = Requantizer(bias=layer.bias, shift=layer.shift, rounding=layer.rounding,
                           lo=layer.lo, hi=layer.hi, in_type=layer.in_type,
                           out_type=layer.out_type, lanes=fold.pe)
        return [Node(self.name, unit, self.inputs, self.output)]
