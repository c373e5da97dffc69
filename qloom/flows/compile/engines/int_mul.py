"""Exact alignment of a residual branch: elements times a constant integer factor."""

from __future__ import annotations

from qloom.nn.dtypes import DataType
from qloom.nn.ir import IntMul
from qloom.flows.compile.engines.base import LaneEngine, identity_needed, pixels

__all__ = ["IntMulEngine"]


class IntMulEngine(LaneEngine):
    kind = "int_mul"

    def __init__(self, layer: IntMul, shape, in_type: DataType):
        super().__init__(layer.name, (layer.name,), layer.inputs, layer.output)
        self.layer, self.in_type = layer, in_type
        self.channels = shape[-1]
        self.elements = pixels(shape) * self.channels

    @classmethod
    def from_layer(cls, layer, net, threshold=None):
        return cls(layer, net.shape_of(layer.inputs[0]), net.tensors[layer.inputs[0]].dtype)

    def unit(self, lanes):
        """The template for ``lanes`` lanes."""
        from qloom.hw.int_mul import ConstMul
        return ConstMul(in_type=self.in_type, factor=self.layer.factor, lanes=lanes)

    def cycles(self, fold):
        return self.elements // fold.pe

    def input_needed(self):
        return (identity_needed(self.elements),)


    @property
    def in_bits(self) -> int:
        return self.in_type.bits

