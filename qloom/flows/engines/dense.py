"""Dense layers (and 1x1 per-pixel dense layers) on the matrix-vector unit, with the
following activation's thresholds fused into its output."""

from __future__ import annotations

import math

from ...nn.dtypes import BINARY, BIPOLAR, TERNARY, DataType
from ...nn.ir import Dense, MultiThreshold
from ..cost import Resources, adder_tree_luts, comparator_luts, memory_cost, use_block_ram
from .base import BuildOptions, Engine, Fold, divisors

__all__ = ["DenseEngine", "datapath_of", "mvu_resources"]

_CONTROL = Resources(lut=40, ff=30)


def datapath_of(w_type: DataType, in_type: DataType) -> str:
    """The MVU datapath the templates choose for these datatypes."""
    if w_type.bipolar and in_type.bipolar:
        return "xnor"
    if w_type in (BIPOLAR, BINARY, TERNARY) or in_type.bipolar:
        return "addsub"
    return "mac"


def mvu_resources(*, mh: int, mw: int, pe: int, simd: int, w_type: DataType,
                  in_type: DataType, acc_bits: int, threshold: MultiThreshold | None,
                  options: BuildOptions, dsps: int) -> Resources:
    """Estimated resources of one matrix-vector unit folded (pe, simd)."""
    path = datapath_of(w_type, in_type)
    ib, wb = in_type.bits, w_type.bits
    if path == "xnor":
        lane = Resources(lut=simd + adder_tree_luts(max(1, simd // 4), 3))
    elif path == "addsub":
        lane = Resources(lut=simd * (ib + 1) + adder_tree_luts(simd, ib + 1))
    else:
        mul_luts = ib * wb + (ib + wb)
        lane = Resources(lut=simd * mul_luts + adder_tree_luts(simd, ib + wb))
    compute = Resources(lut=pe * lane.lut)
    if path == "mac" and dsps:
        compute = Resources(lut=compute.lut - dsps * (ib * wb + ib + wb), dsp=dsps)
    acc = Resources(lut=pe * (acc_bits + 2), ff=pe * acc_bits * (2 if options.pipeline else 1))
    tree_regs = Resources(ff=pe * (acc_bits + 2) * (math.ceil(math.log2(max(2, simd))) // 2)
                          if options.pipeline else 0)
    depth, width = (mh // pe) * (mw // simd), pe * simd * wb
    block = use_block_ram(depth, width, options.family)
    weights = memory_cost(depth, width, options.family, block)
    inbuf = memory_cost(2 * (mw // simd), simd * ib, options.family) + Resources(ff=simd * ib)
    total = _CONTROL + compute + acc + tree_regs + weights + inbuf
    if threshold is not None:
        k = threshold.num_thresholds
        out_bits = threshold.out_type.bits
        total += Resources(lut=pe * (k * comparator_luts(acc_bits) + adder_tree_luts(k, 1)),
                           ff=pe * out_bits * 2)
        total += memory_cost(mh // pe, pe * k * acc_bits, options.family, block)
    return total


class DenseEngine(Engine):
    kind = "mvu"
    fold_keys = ("pe", "simd")

    def __init__(self, dense: Dense, threshold: MultiThreshold | None, vectors: int):
        output = threshold.output if threshold is not None else dense.output
        layers = (dense.name,) + ((threshold.name,) if threshold is not None else ())
        super().__init__(dense.name, layers, dense.inputs, output)
        self.dense, self.threshold, self.vectors = dense, threshold, vectors

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

    def resources(self, fold, options, dsps=0):
        return mvu_resources(mh=self.dense.mh, mw=self.dense.mw, pe=fold.pe, simd=fold.simd,
                             w_type=self.dense.w_type, in_type=self.dense.in_type,
                             acc_bits=self.dense.acc_type.bits, threshold=self.threshold,
                             options=options, dsps=dsps)

    def in_lanes(self, fold):
        return fold.simd

    def out_lanes(self, fold):
        return fold.pe

    def nodes(self, fold, options, dsps=0):
        from ...hw.mvu import MVU
        from ...hw.top import Node
        unit = MVU(weights=self.dense.weights, w_type=self.dense.w_type,
                   in_type=self.dense.in_type, pe=fold.pe, simd=fold.simd,
                   threshold=threshold_spec(self.threshold), dsp_budget=dsps,
                   ram_style=ram_style(self.dense.mh, self.dense.mw, fold, self.dense.w_type,
                                       options),
                   **pipeline_options(MVU, options))
        return [Node(self.name, unit, self.inputs, self.output)]


def ram_style(mh, mw, fold: Fold, w_type: DataType, options: BuildOptions):
    """Block RAM or logic for an MVU's weight memory, as the cost model chose it."""
    from ...hw.weight_mem import RamStyle
    depth, width = (mh // fold.pe) * (mw // fold.simd), fold.pe * fold.simd * w_type.bits
    return RamStyle.BLOCK if use_block_ram(depth, width, options.family) else RamStyle.DISTRIBUTED


def threshold_spec(layer: MultiThreshold | None):
    if layer is None:
        return None
    from ...hw.threshold import ThresholdSpec
    return ThresholdSpec(thresholds=layer.thresholds, bias=layer.bias, sign=layer.sign,
                         out_type=layer.out_type)


def pipeline_options(component_class, options: BuildOptions) -> dict:
    """The register-stage keyword arguments ``component_class`` accepts, set from options."""
    import inspect
    params = inspect.signature(component_class.__init__).parameters
    return {name: options.pipeline for name in params
            if name.startswith("register_") and params[name].kind == params[name].KEYWORD_ONLY}
