"""Average pooling (window sums, ``qloom.nn.ir.AvgPool``) on channels-last pixel streams:
the windowed template over a sliding window, or the global one (one accumulator per
channel, no line buffer) when the window is the whole image. Cycles, accumulator widths
and buffer sizes come from the template, built (not elaborated) for the folding."""

from __future__ import annotations

from qloom.nn.dtypes import DataType
from qloom.nn.ir import AvgPool
from qloom.flows.compile.engines.base import LaneEngine, refused_as_unsupported, window_needed

__all__ = ["AvgPoolEngine"]


class AvgPoolEngine(LaneEngine):
    def __init__(self, layer: AvgPool, in_shape, dtype: DataType):
        super().__init__(layer.name, (layer.name,), layer.inputs, layer.output)
        self.layer, self.dtype = layer, dtype
        self.in_h, self.in_w, self.channels = in_shape
        self.is_global = layer.is_global(in_shape)
        with refused_as_unsupported(layer.name):    # e.g. padding a bipolar input
            self._asked(1)

    @classmethod
    def from_layer(cls, layer, net, threshold=None):
        return cls(layer, net.shape_of(layer.inputs[0]), net.tensors[layer.inputs[0]].dtype)

    @property
    def kind(self):
        return "global_avgpool" if self.is_global else "avgpool"

    def unit(self, lanes: int):
        """The template for ``lanes`` lanes."""
        if self.is_global:
            from qloom.hw.avgpool import GlobalAvgPool
            return GlobalAvgPool(in_h=self.in_h, in_w=self.in_w, channels=self.channels,
                                 dtype=self.dtype, lanes=lanes)
        from qloom.hw.avgpool import AvgPool as PoolUnit
        layer = self.layer
        return PoolUnit(in_h=self.in_h, in_w=self.in_w, channels=self.channels,
                        kernel=tuple(layer.kernel), stride=tuple(layer.stride),
                        pads=tuple(layer.pads), dtype=self.dtype, lanes=lanes)

    def input_needed(self):
        import numpy as np
        shape = (self.in_h, self.in_w, self.channels)
        if self.is_global:      # the frame's sums leave after its last word
            return (np.full(self.channels, self.in_h * self.in_w * self.channels, np.int64),)
        layer = self.layer
        (kh, kw), (sh, sw), (t, l, b, r) = layer.kernel, layer.stride, layer.pads
        out = ((self.in_h + t + b - kh) // sh + 1, (self.in_w + l + r - kw) // sw + 1,
               self.channels)
        return (window_needed(shape, out, layer.kernel, layer.stride, layer.pads),)

    def cycles(self, fold):
        return self._asked(fold.pe).cycles_per_frame

    @property
    def in_bits(self) -> int:
        return self.dtype.bits
