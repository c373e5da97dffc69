"""Max pooling on channels-last pixel streams."""

from __future__ import annotations

from qloom.flows.compile.engines.base import PixelEngine, window_needed

__all__ = ["PoolEngine"]


class PoolEngine(PixelEngine):
    kind = "maxpool"

    def unit(self, lanes: int):
        """The template for ``lanes`` lanes."""
        from qloom.hw.pool import MaxPool as PoolUnit
        return PoolUnit(in_h=self.in_h, in_w=self.in_w, channels=self.channels,
                        kernel=tuple(self.layer.kernel), stride=tuple(self.layer.stride),
                        pads=tuple(self.layer.pads),
                        dtype=self.dtype, lanes=lanes)

    def input_needed(self):
        layer = self.layer
        (kh, kw), (sh, sw), (t, l, b, r) = layer.kernel, layer.stride, layer.pads
        out = ((self.in_h + t + b - kh) // sh + 1, (self.in_w + l + r - kw) // sw + 1,
               self.channels)
        return (window_needed((self.in_h, self.in_w, self.channels), out, layer.kernel,
                              layer.stride, layer.pads),)

    def cycles(self, fold):
        return self._asked(fold.pe).cycles_per_frame
