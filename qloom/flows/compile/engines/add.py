"""Residual additions of two streams of one shape."""

from __future__ import annotations

from qloom.nn.dtypes import DataType
from qloom.nn.ir import Add
from qloom.flows.compile.engines.base import LaneEngine, identity_needed

__all__ = ["AddEngine"]


class AddEngine(LaneEngine):
    kind = "add"

    def __init__(self, layer: Add, shape, a_type: DataType, b_type: DataType):
        super().__init__(layer.name, (layer.name,), layer.inputs, layer.output)
        self.layer, self.a_type, self.b_type = layer, a_type, b_type
        self.channels = shape[-1]
        self.elements = 1
        for d in shape:
            self.elements *= d

    @classmethod
    def from_layer(cls, layer, net, threshold=None):
        a, b = (net.tensors[t].dtype for t in layer.inputs)
        return cls(layer, net.shape_of(layer.inputs[0]), a, b)

    def input_needed(self):
        # Both inputs element by element: what the skip path holds comes from the
        # schedule of the branches (qloom.flows.compile.schedule).
        return (identity_needed(self.elements), identity_needed(self.elements))

    def cycles(self, fold):
        return self.elements // fold.pe

    def unit(self, lanes: int):
        """The template for ``lanes`` lanes."""
        from qloom.hw.add import ElementwiseAdd
        return ElementwiseAdd(a_type=self.a_type, b_type=self.b_type, lanes=lanes)

    @property
    def in_bits(self) -> int:
        return max(self.a_type.bits, self.b_type.bits)
