"""Shift-and-round requantization of a many-level activation (see
``qloom.nn.passes.thresholds_to_requant``)."""

from __future__ import annotations

from qloom.nn.ir import Requant
from qloom.flows.compile.engines.base import ChannelEngine, TypedLayer, refused_as_unsupported

__all__ = ["RequantEngine"]


class RequantEngine(TypedLayer, ChannelEngine):
    kind = "requant"
    layer: Requant

    def __init__(self, layer: Requant, pixels: int):
        super().__init__(layer, pixels)
        from qloom.hw.estimate import unelaborated
        with refused_as_unsupported(layer.name):    # e.g. a bipolar input
            unelaborated(self.unit(1))

    def unit(self, lanes: int, block_table=False):
        """The template for ``lanes`` lanes, its offset table in block RAM or not (or, given
        a family, where the template's rule puts it there)."""
        from qloom.hw.requant import Requantizer
        layer = self.layer
        return Requantizer(bias=layer.bias, shift=layer.shift, rounding=layer.rounding,
                           lo=layer.lo, hi=layer.hi, in_type=layer.in_type,
                           out_type=layer.out_type, lanes=lanes, block_table=block_table)

    def template(self, fold, options):
        return self.unit(fold.pe, options.family)
