"""Dense layers (and 1x1 per-pixel dense layers) on the matrix-vector unit, with the
following activation's thresholds fused into its output."""

from __future__ import annotations

import functools

from qloom.hw.mvu_datapath import Datapath, select_datapath
from qloom.nn.dtypes import DataType
from qloom.nn.ir import Dense, MultiThreshold
from qloom.flows.compile.cost import Family
from qloom.flows.compile.engines.base import BuildOptions, Engine, Fold, divisors, pixels

__all__ = ["DenseEngine", "WEIGHT_PLACES", "datapath_of", "dsp_primitive", "mvu_config",
           "memory_styles", "fused_threshold_bits"]

# The engine names' suffix per datapath.
_SUFFIX = {Datapath.XNOR_POPCOUNT: "xnor", Datapath.ADD_SUB: "addsub", Datapath.MAC: "mac"}

# Where a fold may put a matrix unit's weights (``Fold.weights``).
WEIGHT_PLACES = ("block", "logic")


def datapath_of(w_type: DataType, in_type: DataType) -> str:
    """The MVU datapath for these datatypes, as the template chooses it
    (``qloom.hw.mvu_datapath.select_datapath``), by its short name."""
    return _SUFFIX[select_datapath(w_type, in_type)]


def mvu_config(*, weights, w_type: DataType, in_type: DataType, fold: Fold,
               threshold: MultiThreshold | None, options: BuildOptions, dsps: int,
               memories):
    """The MVU configuration an engine builds ``weights`` (``[MH, MW]``, as the unit gets
    them) with at ``fold``: ``dsps`` lanes on DSP blocks, the memories where ``memories``
    (``memory_styles``) puts them, the register stages ``options`` asks for by the
    template's rules (``qloom.hw.mvu.MVURegisters.for_target``)."""
    from qloom.hw.mvu import MVUConfig, MVURegisters
    registers = MVURegisters.for_target(
        pipeline=options.pipeline, family=options.family,
        datapath=select_datapath(w_type, in_type),
        thresholds=threshold.num_thresholds if threshold is not None else 0)
    return MVUConfig(weights=weights, w_type=w_type, in_type=in_type, pe=fold.pe,
                     simd=fold.simd, threshold=threshold_spec(threshold), dsp_budget=dsps,
                     memories=memories, registers=registers,
                     dsp_primitive=dsp_primitive(options, w_type, in_type))


class DenseEngine(Engine):
    kind = "mvu"
    fold_keys = ("pe", "simd")
    weight_places = WEIGHT_PLACES
    fuses_thresholds = True

    def __init__(self, dense: Dense, threshold: MultiThreshold | None, vectors: int):
        output = threshold.output if threshold is not None else dense.output
        layers = (dense.name,) + ((threshold.name,) if threshold is not None else ())
        super().__init__(dense.name, layers, dense.inputs, output)
        self.dense, self.threshold, self.vectors = dense, threshold, vectors

    @classmethod
    def from_layer(cls, layer, net, threshold=None):
        return cls(layer, threshold, pixels(net.shape_of(layer.inputs[0])))

    @property
    def engine_name(self) -> str:
        return f"mvu_{datapath_of(self.dense.w_type, self.dense.in_type)}"

    def folds(self):
        return [Fold(pe, simd) for pe in divisors(self.dense.mh) for simd in divisors(self.dense.mw)]

    def cycles(self, fold):
        return self.vectors * (self.dense.mh // fold.pe) * (self.dense.mw // fold.simd)

    def multipliers(self, fold):
        path = datapath_of(self.dense.w_type, self.dense.in_type)
        return fold.pe * fold.simd if path == "mac" else 0

    def multiplier_bits(self):
        return self.dense.in_type.bits * self.dense.w_type.bits

    def config(self, fold, options, dsps=0):
        """The configuration of the MVU this engine builds at ``fold``."""
        d = self.dense
        return mvu_config(weights=d.weights, w_type=d.w_type, in_type=d.in_type, fold=fold,
                          threshold=self.threshold, options=options, dsps=dsps,
                          memories=self.styles(fold, options))

    def features(self, fold, options, dsps=0):
        from qloom.hw import mvu
        return [("", mvu.estimate(self.config(fold, options, dsps), options.family))]

    @functools.cached_property
    def threshold_bits(self) -> int:
        """Bits per lane of the fused thresholds' memory as the MVU builds it (0 without
        thresholds)."""
        d = self.dense
        return fused_threshold_bits(d.weights, d.w_type, d.in_type, self.threshold)

    @property
    def in_bits(self) -> int:
        return self.dense.in_type.bits

    @property
    def out_bits(self) -> int:
        t = self.threshold
        return t.out_type.bits if t is not None else self.dense.acc_type.bits

    def in_lanes(self, fold):
        return fold.simd

    def out_lanes(self, fold):
        return fold.pe

    def buffered_elements(self) -> int:
        # The unit takes a whole vector during its first neuron fold.
        return self.dense.mw

    def latency(self, fold):
        return self.cycles(fold) / self.vectors + self._units_latency(fold)

    def input_needed(self):
        # Every output of a vector needs the whole input vector.
        import numpy as np
        d = self.dense
        return (np.repeat(np.arange(1, self.vectors + 1, dtype=np.int64) * d.mw, d.mh),)

    def styles(self, fold, options):
        """Where the MVU's memories go (``memory_styles``), the fused thresholds counted
        as the unit narrows them (``threshold_bits``)."""
        d = self.dense
        return memory_styles(d.mh, d.mw, fold, d.w_type, d.in_type, self.threshold_bits,
                             options)

    def nodes(self, fold, options, dsps=0):
        from qloom.hw.mvu import MVU
        from qloom.hw.top import Node
        unit = MVU(self.config(fold, options, dsps))
        return [Node(self.name, unit, self.inputs, self.output)]


def memory_styles(mh: int, mw: int, fold: Fold, w_type: DataType, in_type: DataType,
                  threshold_lane_bits: int, options: BuildOptions):
    """Where each memory of a matrix unit of ``[mh, mw]`` weights goes at ``fold``
    (``qloom.hw.mvu.MVUMemories.place``), with ``threshold_lane_bits`` bits per PE of
    fused thresholds (0: none), the weights where ``fold.weights`` ("block" or "logic")
    says when it is given."""
    from qloom.hw.mvu import MVUMemories
    pe, simd = fold.pe, fold.simd
    return MVUMemories.place(words=(mh // pe) * (mw // simd), width=pe * simd * w_type.bits,
                             buffer_words=mw // simd, buffer_width=simd * in_type.bits,
                             threshold_words=mh // pe, threshold_width=pe * threshold_lane_bits,
                             family=options.family, sprams=options.sprams,
                             weights=fold.weights)


def fused_threshold_bits(weights, w_type: DataType, in_type: DataType,
                         threshold: MultiThreshold | None) -> int:
    """Bits per PE lane of the memory of ``threshold`` fused into an MVU over ``weights``,
    as the unit narrows them (``qloom.hw.mvu.threshold_lane_bits``); 0 without one."""
    if threshold is None:
        return 0
    from qloom.hw.mvu import threshold_lane_bits
    return threshold_lane_bits(weights, w_type, in_type, threshold_spec(threshold))


def threshold_spec(layer: MultiThreshold | None):
    if layer is None:
        return None
    from qloom.hw.threshold import ThresholdSpec
    return ThresholdSpec.from_layer(layer)


def dsp_primitive(options: BuildOptions, w_type: DataType, in_type: DataType) -> str | None:
    """'ecp5' when the MVU's DSP lanes should be MULT18X18D blocks with their own
    registers (see ``qloom.hw.dsp``): for ECP5 targets with pipelining, operands fitting."""
    from qloom.hw.dsp import fits_dsp
    from qloom.hw.types import shape_of
    if options.family is not Family.ECP5 or not options.pipeline:
        return None
    return "ecp5" if fits_dsp(shape_of(w_type)) and fits_dsp(shape_of(in_type)) else None


def threshold_compare_register(threshold: MultiThreshold, options: BuildOptions) -> bool:
    """Whether thresholds (fused or standalone) register their compares on this family."""
    from qloom.hw.threshold import compare_register
    return compare_register(threshold.num_thresholds, options.family)
