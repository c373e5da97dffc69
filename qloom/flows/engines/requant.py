"""Shift-and-round requantization of a many-level activation (see
``qloom.nn.passes.thresholds_to_requant``)."""

from __future__ import annotations

from ...nn.ir import Requant
from .base import ChannelEngine

__all__ = ["RequantEngine"]


class RequantEngine(ChannelEngine):
    kind = "requant"
    layer: Requant

    def features(self, fold, options, dsps=0):
        from ...hw import requant
        return [("", requant.estimate(channels=self.layer.channels, lanes=fold.pe,
                                      in_bits=self.layer.in_type.bits,
                                      out_bits=self.layer.out_type.bits,
                                      family=options.family))]

    @property
    def in_bits(self) -> int:
        return self.layer.in_type.bits

    @property
    def out_bits(self) -> int:
        return self.layer.out_type.bits

    def nodes(self, fold, options, dsps=0):
        from ...hw.requant import Requantizer, table_in_block_ram
        from ...hw.top import Node
        layer = self.layer
        block = table_in_block_ram(channels=layer.channels, lanes=fold.pe,
                                   in_bits=layer.in_type.bits, family=options.family)
        unit = Requantizer(bias=layer.bias, shift=layer.shift, rounding=layer.rounding,
                           lo=layer.lo, hi=layer.hi, in_type=layer.in_type,
                           out_type=layer.out_type, lanes=fold.pe, block_table=block)
        return [Node(self.name, unit, self.inputs, self.output)]
