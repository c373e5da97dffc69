"""A multi-threshold activation that has no matrix unit in front to fuse into (after a
residual add, a max pool or the input)."""

from __future__ import annotations

import numpy as np

from ...nn.ir import MultiThreshold
from ..cost import Resources, adder_tree_luts, comparator_luts, memory_cost
from .base import ChannelEngine
from .dense import threshold_spec

__all__ = ["ThresholdEngine", "SEARCH_FROM"]

# From this many thresholds per channel on, the pipelined binary search (one comparator
# and a small memory per step) is smaller than comparing against all of them at once.
SEARCH_FROM = 31


class ThresholdEngine(ChannelEngine):
    """Both variants take one word per cycle (the binary search is pipelined)."""

    kind = "threshold"
    layer: MultiThreshold

    @property
    def search(self) -> bool:
        return self.layer.num_thresholds >= SEARCH_FROM

    def resources(self, fold, options, dsps=0):
        k, bits = self.layer.num_thresholds, self.layer.in_type.bits
        folds = self.layer.channels // fold.pe
        if self.search:
            # Stage s keeps, per lane, a memory of 2**s thresholds per channel fold.
            steps = int(np.ceil(np.log2(k + 1)))
            total = Resources(lut=fold.pe * steps * (comparator_luts(bits) + steps) + 30,
                              ff=fold.pe * steps * (2 * bits + steps) + 10)
            for s in range(steps):
                for _ in range(fold.pe):
                    total += memory_cost(folds * 2 ** s, bits, options.family)
            return total
        return Resources(lut=fold.pe * (k * comparator_luts(bits) + adder_tree_luts(k, 1)) + 20,
                         ff=fold.pe * (bits + self.layer.out_type.bits) + 10) + \
            memory_cost(folds, fold.pe * k * bits, options.family)

    @property
    def in_bits(self) -> int:
        return self.layer.in_type.bits

    def nodes(self, fold, options, dsps=0):
        from ...hw.threshold import ThresholdMode, Thresholding
        from ...hw.top import Node
        mode = ThresholdMode.BINARY_SEARCH if self.search else ThresholdMode.PARALLEL
        unit = Thresholding(spec=threshold_spec(self.layer), in_type=self.layer.in_type,
                            pe=fold.pe, mode=mode)
        return [Node(self.name, unit, self.inputs, self.output)]
