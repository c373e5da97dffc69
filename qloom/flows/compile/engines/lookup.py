"""A lookup table per lane (``qloom.nn.ir.Lookup``): a non-monotone activation over a
narrow input."""

from __future__ import annotations

from qloom.nn.ir import Lookup
from qloom.flows.compile.engines.base import (LaneEngine, TypedLayer, pixels,
                                              refused_as_unsupported)

__all__ = ["LookupEngine"]


class LookupEngine(TypedLayer, LaneEngine):
    kind = "lookup"

    def __init__(self, layer: Lookup, shape):
        super().__init__(layer.name, (layer.name,), layer.inputs, layer.output)
        self.layer, self.channels, self.pixels = layer, shape[-1], pixels(shape)
        from qloom.hw.estimate import unelaborated
        with refused_as_unsupported(layer.name):
            unelaborated(self.unit(1))

    @classmethod
    def from_layer(cls, layer, net, threshold=None):
        return cls(layer, net.shape_of(layer.inputs[0]))

    def unit(self, lanes: int, block=False):
        """The template for ``lanes`` lanes, its tables in block RAM or not (or, given a
        family, where the template's rule puts them)."""
        from qloom.hw.lookup import LookupTable
        layer = self.layer
        return LookupTable(table=layer.table, lo=layer.lo, channels=self.channels,
                           in_type=layer.in_type, out_type=layer.out_type, lanes=lanes,
                           block=block)

    def cycles(self, fold):
        return self.pixels * (self.channels // fold.pe)

    def template(self, fold, options):
        return self.unit(fold.pe, options.family)
