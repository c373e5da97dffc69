"""Dense layers (and 1x1 per-pixel dense layers) on the matrix-vector unit, with the
following activation's thresholds fused into its output."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ...hw.mvu_datapath import Datapath, select_datapath
from ...nn.dtypes import DataType
from ...nn.ir import Dense, MultiThreshold
from ...hw.estimate import bram_count
from ...hw.mem_pack import bank_depth
from ..cost import Family, has_lutram, use_block_ram
from .base import BuildOptions, Engine, Fold, divisors, pixels

__all__ = ["DenseEngine", "WEIGHT_PLACES", "datapath_of", "dsp_primitive", "mvu_registers",
           "mvu_features"]

# The engine names' suffix per datapath.
_SUFFIX = {Datapath.XNOR_POPCOUNT: "xnor", Datapath.ADD_SUB: "addsub", Datapath.MAC: "mac"}

# Where a fold may put a matrix unit's weights (``Fold.weights``).
WEIGHT_PLACES = ("block", "logic")


def datapath_of(w_type: DataType, in_type: DataType) -> str:
    """The MVU datapath for these datatypes, as the template chooses it
    (``qloom.hw.mvu_datapath.select_datapath``), by its short name."""
    return _SUFFIX[select_datapath(w_type, in_type)]


def mvu_features(*, weights, pe: int, simd: int, w_type: DataType,
                 in_type: DataType, acc_bits: int, threshold: MultiThreshold | None,
                 options: BuildOptions, dsps: int, styles: "MemoryStyles",
                 threshold_bits: int | None = None):
    """The MVU's estimate features for one folding of ``weights`` (``[MH, MW]``, as the
    unit gets them), with the memory placement ``styles`` and the register stages this
    engine builds it with (``threshold_bits``: the thresholds' bits per lane as built,
    when known)."""
    from ...hw import mvu
    mh, mw = weights.shape
    return mvu.estimate(
        mh=mh, mw=mw, pe=pe, simd=simd, w_type=w_type, in_type=in_type, acc_bits=acc_bits,
        thresholds=threshold.num_thresholds if threshold is not None else 0,
        out_bits=threshold.out_type.bits if threshold is not None else 0, dsps=dsps,
        pipeline=options.pipeline,
        dsp_blocks=dsp_primitive(options, w_type, in_type) is not None,
        weights_block=styles.weights, thresholds_block=styles.thresholds,
        buffer_block=styles.buffer, family=options.family,
        weights_spram=styles.weights_spram, threshold_bits=threshold_bits,
        weight_bank_depth=styles.weight_bank_depth,
        weight_columns=functools.partial(mvu.weight_columns, weights, w_type, pe, simd))


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

    def features(self, fold, options, dsps=0):
        return [("", mvu_features(weights=self.dense.weights, pe=fold.pe,
                                  simd=fold.simd, w_type=self.dense.w_type,
                                  in_type=self.dense.in_type,
                                  acc_bits=self.dense.acc_type.bits, threshold=self.threshold,
                                  options=options, dsps=dsps,
                                  styles=self.styles(fold, options),
                                  threshold_bits=self.threshold_bits))]

    @functools.cached_property
    def threshold_bits(self) -> int | None:
        """Bits per lane of the fused thresholds' memory as the MVU builds it."""
        if self.threshold is None:
            return None
        from ...hw.mvu import threshold_lane_bits
        d = self.dense
        return threshold_lane_bits(d.weights, d.w_type, d.in_type,
                                   threshold_spec(self.threshold))

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

    def styles(self, fold, options) -> "MemoryStyles":
        d = self.dense
        return memory_styles(d.mh, d.mw, fold.pe, fold.simd, d.w_type, d.in_type,
                             d.acc_type.bits, self.threshold, options.family, options.sprams,
                             self.threshold_bits, fold.weights)

    def nodes(self, fold, options, dsps=0):
        from ...hw.mvu import MVU
        from ...hw.top import Node
        unit = MVU(weights=self.dense.weights, w_type=self.dense.w_type,
                   in_type=self.dense.in_type, pe=fold.pe, simd=fold.simd,
                   threshold=threshold_spec(self.threshold), dsp_budget=dsps,
                   **self.styles(fold, options).ram_styles(),
                   **mvu_registers(options, self.multipliers(fold) > 0, self.threshold),
                   dsp_primitive=dsp_primitive(options, self.dense.w_type, self.dense.in_type))
        return [Node(self.name, unit, self.inputs, self.output)]


@dataclass(frozen=True)
class MemoryStyles:
    """Block RAM (True) or logic (False) for each memory of one matrix-vector unit, and
    SPRAM for its weights (``weights_spram``, iCE40UP5K)."""

    weights: bool
    thresholds: bool
    buffer: bool
    lutram: bool = False     # the family has distributed RAM cells for the buffer
    weights_spram: bool = False
    weight_bank_depth: int | None = None    # block RAM weights in banks (mem_pack.bank_depth)

    def ram_styles(self) -> dict:
        """The MVU keyword arguments placing its memories accordingly: read-only ones in
        logic or block RAM, the writable input buffer in block RAM, distributed RAM cells
        or flip-flops (as ``qloom.hw.estimate.ram_cost`` counts it)."""
        from ...hw.weight_mem import RamStyle

        def style(block):
            return RamStyle.BLOCK if block else RamStyle.DISTRIBUTED
        buffer = (RamStyle.BLOCK if self.buffer else
                  RamStyle.LUTRAM if self.lutram else RamStyle.DISTRIBUTED)
        return {"ram_style": RamStyle.SPRAM if self.weights_spram else style(self.weights),
                "threshold_ram_style": style(self.thresholds),
                "buffer_ram_style": buffer, "weight_bank_depth": self.weight_bank_depth}


# A weight memory goes to SPRAM (when the device has them) from this many block RAMs on:
# a quarter of the UP5K's 30, so that the memories that would exhaust block RAM go there
# and small ones stay in block RAM, which needs no load from the flash.
SPRAM_FROM_BRAMS = 8


def weights_in_spram(words: int, width: int, family: Family, sprams: int) -> bool:
    """Whether a weight memory of ``words`` x ``width`` bits goes to SPRAM: the device has
    ``sprams`` (iCE40UP5K), the memory fits side by side SPRAMs (at most 16K words, at
    most ``sprams`` of them) and would take ``SPRAM_FROM_BRAMS`` block RAMs or more."""
    from ...hw.spram import SPRAM_DEPTH, spram_blocks
    return (family is Family.ICE40 and sprams > 0 and words <= SPRAM_DEPTH
            and spram_blocks(width) <= sprams
            and bram_count(words, width, family) >= SPRAM_FROM_BRAMS)


def memory_styles(mh, mw, pe, simd, w_type: DataType, in_type: DataType, acc_bits: int,
                  threshold: MultiThreshold | None, family: Family,
                  sprams: int = 0, threshold_bits: int | None = None,
                  weights: str = "") -> MemoryStyles:
    """Where each memory of a matrix unit goes: by the rules of ``use_block_ram`` and
    ``weights_in_spram``, the weights where ``weights`` ("block" or "logic") says when
    it is given."""
    k = threshold.num_thresholds if threshold is not None else 0
    lane = k * acc_bits if threshold_bits is None else threshold_bits
    words, width = (mh // pe) * (mw // simd), pe * simd * w_type.bits
    spram = not weights and weights_in_spram(words, width, family, sprams)
    block = weights == "block" if weights else use_block_ram(words, width, family)
    return MemoryStyles(
        weights_spram=spram, weights=block,
        weight_bank_depth=bank_depth(words, width, family) if block and not spram else None,
        thresholds=k > 0 and use_block_ram(mh // pe, pe * lane, family),
        buffer=use_block_ram(mw // simd, simd * in_type.bits, family, writable=True),
        lutram=has_lutram(family))


def threshold_spec(layer: MultiThreshold | None):
    if layer is None:
        return None
    from ...hw.threshold import ThresholdSpec
    return ThresholdSpec.from_layer(layer)


def dsp_primitive(options: BuildOptions, w_type: DataType, in_type: DataType) -> str | None:
    """'ecp5' when the MVU's DSP lanes should be MULT18X18D blocks with their own
    registers (see ``qloom.hw.dsp``): for ECP5 targets with pipelining, operands fitting."""
    from ...hw.dsp import fits_dsp
    from ...hw.types import shape_of
    if options.family is not Family.ECP5 or not options.pipeline:
        return None
    return "ecp5" if fits_dsp(shape_of(w_type)) and fits_dsp(shape_of(in_type)) else None


def mvu_registers(options: BuildOptions, multipliers: bool,
                  threshold: MultiThreshold | None = None) -> dict:
    """The MVU's register-stage arguments: all set from ``options``, the operand register
    and the fused thresholds' compare register as the templates' rules say
    (``qloom.hw.mvu.operand_register``, ``qloom.hw.threshold.compare_register``)."""
    from ...hw.mvu import MVU, fetches_thresholds, operand_copies, operand_register
    registers = pipeline_options(MVU, options)
    registers["register_operands"] &= operand_register(multipliers, options.family)
    registers["register_operand_copies"] &= operand_copies(options.family)
    registers["register_thresholds_fetch"] &= fetches_thresholds(options.family)
    # In the block RAM's own output register (free) on the ECP5 only.
    registers["register_threshold_read"] &= options.family is Family.ECP5
    if threshold is not None:
        registers["compare_register"] = threshold_compare_register(threshold, options)
    return registers


def threshold_compare_register(threshold: MultiThreshold, options: BuildOptions) -> bool:
    """Whether thresholds (fused or standalone) register their compares on this family."""
    from ...hw.threshold import compare_register
    return compare_register(threshold.num_thresholds, options.family)


def pipeline_options(component_class, options: BuildOptions) -> dict:
    """The register-stage keyword arguments ``component_class`` accepts, set from options."""
    import inspect
    params = inspect.signature(component_class.__init__).parameters
    return {name: options.pipeline for name in params
            if name.startswith("register_") and params[name].kind == params[name].KEYWORD_ONLY}
