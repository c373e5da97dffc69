"""Nearest-neighbour upsampling of channels-last pixel streams."""

from __future__ import annotations

from qloom.nn.dtypes import DataType
from qloom.nn.ir import Upsample
from qloom.flows.compile.engines.base import LaneEngine

__all__ = ["UpsampleEngine"]


class UpsampleEngine(LaneEngine):
    kind = "upsample"

    def __init__(self, layer: Upsample, in_shape, dtype: DataType):
        super().__init__(layer.name, (layer.name,), layer.inputs, layer.output)
        self.layer, self.dtype = layer, dtype
        self.in_h, self.in_w, self.channels = in_shape

    @classmethod
    def from_layer(cls, layer, net, threshold=None):
        return cls(layer, net.shape_of(layer.inputs[0]), net.tensors[layer.inputs[0]].dtype)

    def unit(self, lanes: int):
        """The template for ``lanes`` lanes."""
        from qloom.hw.upsample import Upsample as UpsampleUnit
        return UpsampleUnit(in_h=self.in_h, in_w=self.in_w, channels=self.channels,
                            scale=tuple(self.layer.scale), dtype=self.dtype, lanes=lanes)

    def input_needed(self):
        from qloom.hw.upsample import input_words_needed
        return (input_words_needed(in_h=self.in_h, in_w=self.in_w, words=self.channels,
                                   scale=tuple(self.layer.scale)),)

    def cycles(self, fold):
        return self._asked(fold.pe).cycles_per_frame

    @property
    def in_bits(self) -> int:
        return self.dtype.bits

    @property
    def out_bits(self) -> int:
        return self.dtype.bits
