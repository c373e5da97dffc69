"""Concat along channels: pixels of two or more streams joined, channel groups in turn (a
chain of two-input ``ChannelConcat`` units for more inputs)."""

from __future__ import annotations

import math

from qloom.nn.dtypes import DataType
from qloom.nn.ir import Concat
from qloom.flows.compile.engines.base import (BuildOptions, Fold, LaneEngine, pixels,
                                              refused_as_unsupported)

__all__ = ["ConcatEngine"]


class ConcatEngine(LaneEngine):
    kind = "concat"

    def __init__(self, layer: Concat, shapes, types: list[DataType], out_type: DataType):
        super().__init__(layer.name, (layer.name,), layer.inputs, layer.output)
        self.layer, self.types, self.out_type = layer, list(types), out_type
        self.widths = [shape[-1] for shape in shapes]
        self.channels = math.gcd(*self.widths)       # lanes must divide every input
        self.pixels = pixels(shapes[0])
        from qloom.hw.estimate import unelaborated
        with refused_as_unsupported(layer.name):    # e.g. bipolar and integer inputs
            for node in self.nodes(Fold(1), BuildOptions()):
                unelaborated(node.component)

    @classmethod
    def from_layer(cls, layer, net, threshold=None):
        return cls(layer, [net.shape_of(t) for t in layer.inputs],
                   [net.tensors[t].dtype for t in layer.inputs],
                   net.tensors[layer.output].dtype)

    def cycles(self, fold):
        return self.pixels * sum(self.widths) // fold.pe

    def input_needed(self):
        # Per pixel the inputs' channels in turn: before its group, input i has given the
        # pixels before; within it, its channels so far; after it, the whole pixel. What
        # a skip path holds comes from the schedule of the branches (qloom.flows.compile.schedule).
        import numpy as np
        p = np.arange(self.pixels, dtype=np.int64)[:, None]
        needs = []
        for i, width in enumerate(self.widths):
            groups = [np.broadcast_to(p * width if j < i else (p + 1) * width,
                                      (self.pixels, w)) if j != i else
                      p * width + np.arange(1, width + 1)
                      for j, w in enumerate(self.widths)]
            needs.append(np.concatenate(groups, axis=1).ravel())
        return tuple(needs)

    def features(self, fold, options, dsps=0):
        from qloom.hw.estimate import unelaborated
        return [(node.name[len(self.name):], unelaborated(node.component).estimate(
            options.family)) for node in self.nodes(fold, options)]

    @property
    def in_bits(self) -> int:
        return max(t.bits for t in self.types)

    def inner_edges(self, fold):
        # Unit k joins the first k+1 inputs (part k) for unit k+1; the last is the engine.
        last = len(self.inputs) - 1
        return [(f"{self.name}_part{k}", self.name if k + 1 == last else f"{self.name}_{k + 1}",
                 fold.pe, self.out_type.bits) for k in range(1, last)]

    def nodes(self, fold, options, dsps=0):
        from qloom.hw.concat import ChannelConcat
        from qloom.hw.top import Node
        nodes = []
        current, a_type, a_channels = self.inputs[0], self.types[0], self.widths[0]
        for k in range(1, len(self.inputs)):
            last = k == len(self.inputs) - 1
            out_type = self.out_type
            unit = ChannelConcat(a_type=a_type, b_type=self.types[k], out_type=out_type,
                                 a_channels=a_channels, b_channels=self.widths[k],
                                 lanes=fold.pe)
            out = self.output if last else f"{self.name}_part{k}"
            nodes.append(Node(self.name if last else f"{self.name}_{k}", unit,
                              (current, self.inputs[k]), out))
            current, a_type, a_channels = out, out_type, a_channels + self.widths[k]
        return nodes
