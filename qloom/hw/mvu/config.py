"""The MVU's configuration (:class:`MVUConfig`): its parameters, validated once, and what
follows from them (datapath, accumulator range, DSP lanes, resolved register stages) with
the unit's cycle model (folds, latency, output queue). The unit (``MVU``), its estimate
and the planner's engines all read this one object."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from ...nn.dtypes import DataType, smallest_type
from ...nn.ir import accumulator_range
from ..dsp import check_dsp_primitive
from ..mvu_datapath import (Datapath, product_parts, select_datapath, tree_levels,
                            tree_stages, tree_terms)
from ..spram import SPRAM_DEPTH, UP5K_SPRAMS, spram_blocks
from ..threshold import ThresholdSpec, ThresholdTable
from ..types import shape_of
from ..weight_mem import RamStyle
from .memories import MVUMemories
from .registers import (MVURegisters, fetch_register, group_slices, latency, operand_groups,
                        operand_hop, output_depth, thresholds_fetch)
from .weights import bank_stages, rom_slices, weight_address_copies

__all__ = ["MVUConfig", "threshold_table", "threshold_lane_bits"]


@dataclass(frozen=True, eq=False)
class MVUConfig:
    """A folded matrix-vector unit for integer ``weights[MH, MW]`` (bipolar as -1/+1) of
    ``w_type`` over inputs of ``in_type``, ``pe`` output channels and ``simd`` input lanes
    per cycle.

    ``threshold`` fuses a multi-threshold activation over the ``MH`` outputs.
    ``dsp_budget`` caps the multipliers written as ``*`` (mappable to DSP blocks); the rest
    are shift-and-add LUT multipliers (None: no cap; 0: all LUT). ``memories`` places the
    weights, thresholds and input buffer; ``registers`` chooses the pipeline stages
    (resolved here: no field of ``config.registers`` is None); ``dsp_primitive`` 'ecp5'
    puts the DSP lanes on MULT18X18D blocks with their own registers (``qloom.hw.dsp``;
    None once resolved when there are no DSP lanes).

    Resolved once when made: ``datapath`` (``qloom.hw.mvu_datapath.select_datapath``),
    the accumulator's extremes ``acc_lo``/``acc_hi`` over every input of ``in_type`` with
    these weights, and ``dsp_count``.
    """

    weights: np.ndarray = field(repr=False)
    w_type: DataType
    in_type: DataType
    pe: int
    simd: int
    threshold: ThresholdSpec | None = field(default=None, repr=False)
    dsp_budget: int | None = None
    memories: MVUMemories = MVUMemories()
    registers: MVURegisters = MVURegisters()
    dsp_primitive: str | None = None
    datapath: Datapath = field(init=False)
    acc_lo: int = field(init=False)
    acc_hi: int = field(init=False)
    dsp_count: int = field(init=False)

    def __post_init__(self):
        _check_matrix(self.weights, self.w_type, self.in_type, self.pe, self.simd,
                      self.threshold, self.dsp_budget)
        weights = self.weights.astype(np.int64)
        weights.flags.writeable = False
        if not isinstance(self.memories, MVUMemories):
            raise TypeError(f"Memories must be an MVUMemories, not {self.memories!r}")
        if not isinstance(self.registers, MVURegisters):
            raise TypeError(f"Registers must be an MVURegisters, not {self.registers!r}")
        mh, mw = weights.shape
        _check_memories(self.memories, (mh // self.pe) * (mw // self.simd),
                        self.pe * self.simd * self.w_type.bits)
        datapath = select_datapath(self.w_type, self.in_type)
        lo, hi = accumulator_range(weights, self.in_type)
        mults = self.pe * self.simd if datapath is Datapath.MAC else 0
        dsp_count = mults if self.dsp_budget is None else min(self.dsp_budget, mults)
        registers = self.registers.resolved(datapath, self.simd, self.thresholds)
        check_dsp_primitive(self.dsp_primitive)
        if self.dsp_primitive and dsp_count:
            if not (registers.operands and registers.products):
                raise ValueError("The 'ecp5' DSP primitive works in the operand and "
                                 "product register stages: it needs MVURegisters(operands=True, "
                                 "products=True)")
            check_dsp_primitive(self.dsp_primitive, [("Weight type", self.w_type),
                                                     ("Input type", self.in_type)])
        resolved = {"weights": weights, "registers": registers, "datapath": datapath,
                    "acc_lo": int(lo.min()), "acc_hi": int(hi.max()), "dsp_count": dsp_count,
                    "dsp_primitive": self.dsp_primitive if dsp_count else None}
        for name, value in resolved.items():
            object.__setattr__(self, name, value)

    mh = property(lambda self: self.weights.shape[0])
    mw = property(lambda self: self.weights.shape[1])

    @property
    def thresholds(self) -> int:
        """Fused thresholds per channel (0: none)."""
        return 0 if self.threshold is None else self.threshold.num_thresholds

    @property
    def acc_type(self) -> DataType:
        """The narrowest type holding every accumulator value exactly."""
        return smallest_type(self.acc_lo, self.acc_hi)

    @property
    def out_type(self) -> DataType:
        """The accumulator type, or the fused thresholds' output type."""
        return self.acc_type if self.threshold is None else self.threshold.out_type

    @property
    def neuron_folds(self) -> int:
        return self.mh // self.pe

    @property
    def synapse_folds(self) -> int:
        return self.mw // self.simd

    @property
    def cycles_per_vector(self) -> int:
        return self.neuron_folds * self.synapse_folds

    @functools.cached_property
    def table(self) -> ThresholdTable | None:
        """The fused thresholds' table as the unit builds it (None without)."""
        if self.threshold is None:
            return None
        return threshold_table(self.threshold, self.pe, datapath=self.datapath, mw=self.mw,
                               acc_lo=self.acc_lo, acc_hi=self.acc_hi,
                               register_compares=self.registers.compares)

    @property
    def threshold_lane_bits(self) -> int:
        """Bits per PE lane of the fused thresholds' memory word (0 without)."""
        return 0 if self.table is None else self.table.lane_bits

    @property
    def weights_block(self) -> bool:
        """Whether the weights are in block RAM or SPRAM (``MVUMemories.weights_block``)."""
        return self.memories.weights_block

    @property
    def buffer_copies(self) -> bool:
        """Whether the input buffer's word gets a register per group of PEs
        (``MVUMemories.buffer_copies``)."""
        return self.memories.buffer_copies

    @property
    def fetch_register(self) -> bool:
        """Whether the memories are addressed from a register of their own, a cycle after
        issue (``fetch_register``)."""
        return fetch_register(self.memories.weights is RamStyle.DISTRIBUTED,
                              self.registers.operands)

    @property
    def rom_slices(self) -> list[tuple[int, int]]:
        """The ROMs the weights in logic are cut into (``rom_slices``)."""
        return rom_slices(self.pe, self.simd * shape_of(self.w_type).width,
                          self.cycles_per_vector, self.registers.operand_copies,
                          self.fetch_register)

    @property
    def bank_stages(self) -> int:
        """Cycles the weights take beyond a read port's one when they are in banks."""
        return bank_stages(self.cycles_per_vector, self.memories.bank_depth)

    @property
    def weight_address_copies(self) -> int:
        """Registers that repeat the weight address for block RAM weights
        (``weight_address_copies``)."""
        if self.memories.weights is not RamStyle.BLOCK:
            return 0
        return weight_address_copies(self.pe * self.simd * shape_of(self.w_type).width,
                                     self.cycles_per_vector, self.memories.bank_depth)

    @property
    def operand_groups(self) -> int:
        """The register copies of the input word (``operand_groups``)."""
        return operand_groups(self.pe, self.registers.operand_copies, self.weights_block)

    @property
    def operand_hop(self) -> bool:
        """Whether the input word reaches its copies in two hops (``operand_hop``)."""
        return (self.registers.operands and self.registers.operand_copies
                and operand_hop(operand_groups(self.pe, True, self.weights_block),
                                self.weights_block))

    @property
    def thresholds_fetch(self) -> bool:
        """Whether fused thresholds in logic are read from a register of their fold
        counter (``MVURegisters.thresholds_fetch`` and ``thresholds_fetch``)."""
        return self.registers.thresholds_fetch and thresholds_fetch(
            self.threshold is not None, self.neuron_folds, self.synapse_folds,
            self.memories.thresholds is RamStyle.BLOCK)

    @property
    def threshold_groups(self) -> int:
        """The ROMs that fused thresholds read from registers of their fold counter
        (``thresholds_fetch``) are cut into, one per group of PEs, each addressed from a
        register of its own: as many as the input word's copies (``operand_groups``), so
        that each PE's thresholds sit near its compares; else one."""
        return self.operand_groups if self.thresholds_fetch else 1

    def threshold_slices(self, lane_bits: int) -> list[tuple[int, int]]:
        """``(lowest bit, width)`` of each ROM of the thresholds' word (``threshold_groups``)
        with ``lane_bits`` per PE."""
        return group_slices(self.pe, lane_bits, self.threshold_groups)

    @property
    def tree_levels(self) -> tuple:
        """Adder levels before the tree's first register and between later ones
        (``tree_levels``)."""
        return tree_levels(self.datapath, self.dsp_primitive is not None)

    @property
    def tree_terms(self) -> int:
        """Terms of the largest PE's adder tree (``tree_terms``)."""
        parts = 1
        if self.registers.products:
            parts = product_parts(shape_of(self.w_type).width, shape_of(self.in_type).width)
        return tree_terms(pe=self.pe, simd=self.simd, datapath=self.datapath,
                          dsps=self.dsp_count, parts=parts)

    @property
    def tree_stages(self) -> int:
        """Register stages inside the adder tree (``tree_stages`` of its terms when the
        tree is registered, else none)."""
        if not self.registers.adder_tree:
            return 0
        return tree_stages(self.tree_terms, self.tree_levels)

    @property
    def latency(self) -> int:
        """Cycles from a vector's first input word taken to its first output word taken,
        with no stalls (see ``qloom.hw.mvu``)."""
        r = self.registers
        return latency(self.synapse_folds, register_operands=r.operands,
                       fetch=self.fetch_register, bank_stages=self.bank_stages,
                       hop=self.operand_hop, register_products=r.products,
                       dsp_blocks=self.dsp_primitive is not None,
                       register_adder_tree=r.adder_tree, tree_stages=self.tree_stages,
                       thresholds=0 if self.threshold is None else 1 + r.compares)

    @property
    def output_depth(self) -> int:
        """Words of the output queue (``output_depth``)."""
        return output_depth(self.latency, self.synapse_folds)


def _positive(name: str, value) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise TypeError(f"{name} count must be a positive integer, not {value!r}")
    return value


def _check_matrix(weights, w_type, in_type, pe, simd, threshold, dsp_budget):
    """The checks of the matrix, datatypes, folding, thresholds and DSP budget."""
    if not isinstance(weights, np.ndarray) or not np.issubdtype(weights.dtype, np.integer):
        raise TypeError(f"Weights must be an integer numpy array, not {weights!r}")
    if weights.ndim != 2 or weights.size == 0:
        raise ValueError(f"Weights must be a non-empty [MH, MW] matrix, not shape "
                         f"{weights.shape}")
    for role, dtype in (("Weight", w_type), ("Input", in_type)):
        if not isinstance(dtype, DataType):
            raise TypeError(f"{role} type must be a qloom DataType, not {dtype!r}")
    pe, simd = _positive("PE", pe), _positive("SIMD", simd)
    mh, mw = weights.shape
    if mh % pe:
        raise ValueError(f"MH ({mh}) must be divisible by PE ({pe})")
    if mw % simd:
        raise ValueError(f"MW ({mw}) must be divisible by SIMD ({simd})")
    if not w_type.allows(weights):
        raise ValueError(f"Weights hold values outside {w_type} "
                         f"[{w_type.min}, {w_type.max}]"
                         + (" (bipolar weights must be -1 or +1)" if w_type.bipolar else ""))
    if threshold is not None:
        if not isinstance(threshold, ThresholdSpec):
            raise TypeError(f"Threshold must be a ThresholdSpec or None, not {threshold!r}")
        if threshold.channels != mh:
            raise ValueError(f"Threshold channels ({threshold.channels}) must equal "
                             f"MH ({mh})")
    if dsp_budget is not None and (not isinstance(dsp_budget, int)
                                   or isinstance(dsp_budget, bool) or dsp_budget < 0):
        raise TypeError(f"DSP budget must be a non-negative integer or None, "
                        f"not {dsp_budget!r}")


def _check_memories(memories: MVUMemories, words: int, width: int):
    """The checks of where the memories go, for ``words`` weight words of ``width`` bits."""
    if memories.weights is RamStyle.SPRAM and (words > SPRAM_DEPTH
                                               or spram_blocks(width) > UP5K_SPRAMS):
        raise ValueError(f"Weights of {words} words of {width} bits do not fit SPRAMs "
                         f"side by side (at most {SPRAM_DEPTH} words of "
                         f"{UP5K_SPRAMS * 16} bits)")
    bank = memories.bank_depth
    if bank is not None and (memories.weights is not RamStyle.BLOCK
                             or not isinstance(bank, int)
                             or bank < 1 or bank & (bank - 1) or bank >= words):
        raise ValueError(f"Weight banks need the weights in block RAM and a power-of-two "
                         f"depth below {words} words, not {bank!r} with {memories.weights}")


def threshold_table(spec: ThresholdSpec, pe: int, *, datapath: Datapath, mw: int,
                    acc_lo: int, acc_hi: int,
                    register_compares: bool | None = None) -> ThresholdTable:
    """The fused thresholds' table as the unit builds it over accumulators in
    ``[acc_lo, acc_hi]`` (on the XNOR datapath over the popcount: sum = 2 * popcount - MW)."""
    if datapath is Datapath.XNOR_POPCOUNT:
        return ThresholdTable(spec, pe, lo=0, hi=mw, scale=2, offset=-mw,
                              register_compares=register_compares)
    return ThresholdTable(spec, pe, lo=acc_lo, hi=acc_hi, register_compares=register_compares)


def threshold_lane_bits(weights, w_type: DataType, in_type: DataType,
                        spec: ThresholdSpec) -> int:
    """Bits per PE lane of the fused thresholds' memory word (thresholds narrowed to
    their codes, and the per-channel bias/sign when not uniform), before a unit is
    configured (the planner places the thresholds' memory by it)."""
    lo, hi = accumulator_range(np.asarray(weights, dtype=np.int64), in_type)
    return threshold_table(spec, 1, datapath=select_datapath(w_type, in_type),
                           mw=weights.shape[1], acc_lo=int(lo.min()),
                           acc_hi=int(hi.max())).lane_bits
