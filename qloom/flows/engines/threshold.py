"""A multi-threshold activation that has no matrix unit in front to fuse into (after a
residual add, a max pool or the input)."""

from __future__ import annotations

from ...hw.threshold import SEARCH_FROM, mode_for, search_read_registers
from ...nn.ir import MultiThreshold
from .base import ChannelEngine
from .dense import threshold_compare_register, threshold_spec

__all__ = ["ThresholdEngine", "SEARCH_FROM"]


class ThresholdEngine(ChannelEngine):
    """Both variants take one word per cycle (the binary search is pipelined)."""

    kind = "threshold"
    layer: MultiThreshold

    @property
    def mode(self):
        return mode_for(self.layer.num_thresholds)

    def features(self, fold, options, dsps=0):
        from ...hw import threshold
        return [("", threshold.estimate(channels=self.layer.channels,
                                        thresholds=self.layer.num_thresholds, lanes=fold.pe,
                                        in_bits=self.layer.in_type.bits,
                                        out_bits=self.layer.out_type.bits, mode=self.mode,
                                        family=options.family))]

    @property
    def in_bits(self) -> int:
        return self.layer.in_type.bits

    @property
    def out_bits(self) -> int:
        return self.layer.out_type.bits

    def nodes(self, fold, options, dsps=0):
        from ...hw.threshold import Thresholding
        from ...hw.top import Node
        unit = Thresholding(spec=threshold_spec(self.layer), in_type=self.layer.in_type,
                            pe=fold.pe, mode=self.mode,
                            compare_register=threshold_compare_register(self.layer, options),
                            read_registers=search_read_registers(options.family))
        return [Node(self.name, unit, self.inputs, self.output)]
