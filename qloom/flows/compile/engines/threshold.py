"""A multi-threshold activation that has no matrix unit in front to fuse into (after a
residual add, a max pool or the input)."""

from __future__ import annotations

from qloom.hw.threshold import SEARCH_FROM, ThresholdMode, mode_for, search_read_registers
from qloom.nn.ir import MultiThreshold
from qloom.flows.compile.engines.base import ChannelEngine, TypedLayer
from qloom.flows.compile.engines.dense import threshold_compare_register, threshold_spec

__all__ = ["ThresholdEngine", "SEARCH_FROM", "thresholding"]


def thresholding(layer: MultiThreshold, in_type, pe: int, options,
                 mode: ThresholdMode = ThresholdMode.PARALLEL):
    """The threshold unit of ``layer`` on its own (not fused into a matrix unit) over
    ``in_type`` codes, ``pe`` lanes, for the build's family: its memories placed by the
    family's rule, which its estimate counts."""
    from qloom.hw.threshold import Thresholding
    return Thresholding(spec=threshold_spec(layer), in_type=in_type, pe=pe, mode=mode,
                        compare_register=threshold_compare_register(layer, options),
                        read_registers=search_read_registers(options.family),
                        family=options.family)


class ThresholdEngine(TypedLayer, ChannelEngine):
    """Both variants take one word per cycle (the binary search is pipelined)."""

    kind = "threshold"
    layer: MultiThreshold

    @property
    def mode(self):
        return mode_for(self.layer.num_thresholds)

    def template(self, fold, options):
        return thresholding(self.layer, self.layer.in_type, fold.pe, options, self.mode)
