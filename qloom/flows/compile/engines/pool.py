"""Max pooling on channels-last pixel streams."""

from __future__ import annotations

from qloom.nn.dtypes import DataType
from qloom.nn.ir import MaxPool
from qloom.flows.compile.engines.base import LaneEngine, window_needed

__all__ = ["PoolEngine"]


class PoolEngine(LaneEngine):
    kind = "maxpool"

    def __init__(self, layer: MaxPool, in_shape, dtype: DataType):
        super().__init__(layer.name, (layer.name,), layer.inputs, layer.output)
        self.layer, self.dtype = layer, dtype
        self.in_h, self.in_w, self.channels = in_shape

    @classmethod
    def from_layer(cls, layer, net, threshold=None):
        return cls(layer, net.shape_of(layer.inputs[0]), net.tensors[layer.inputs[0]].dtype)

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

    @property
    def in_bits(self) -> int:
        return self.dtype.bits
