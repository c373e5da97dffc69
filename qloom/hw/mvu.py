"""The matrix-vector unit (MVU): a folded, fully pipelined ``y = W @ x`` over streams.

FINN-style folding: ``PE`` output channels and ``SIMD`` input elements per cycle. A vector of
``MW`` inputs arrives as ``SF = MW/SIMD`` words (word ``j`` lane ``s`` is element
``j*SIMD + s``); the ``MH`` outputs leave as ``NF = MH/PE`` words (word ``j`` lane ``p`` is
output ``j*PE + p``). The unit loops over ``NF`` neuron folds of ``SF`` synapse folds each:
during the first neuron fold it takes the input words from the stream and keeps them in a
buffer, later folds read the buffer, and the next vector's first fold follows the last fold
without a gap. So a vector takes exactly ``NF * SF`` cycles in steady state, and the input
is ready during ``SF`` of them.

Pipeline: issue (weight memory and buffer addresses) -> [fetch register: the weights
addressed a cycle later, when they are a ROM in logic] -> operands -> [operand register]
-> [products register] -> [adder tree register] -> accumulate -> output queue, plus a
compare stage when thresholds are fused. The stages have no enable: nothing stalls once
issued. Flow control is by credit instead of a global stall (whose fan-out to every
register's enable, every DSP block's clock enable among them, was the critical path): a
fold step that completes an output is issued only when the output queue
(``output_depth`` words, ``amaranth.lib.fifo.SyncFIFO``) has a word reserved for it, and
a register counts the words issued and not yet taken. So ``i.ready`` depends on
registers only, never on ``o.ready``. ``latency`` counts cycles from a vector's
first input word being taken to its first output word being taken, with no stalls on
either side: ``SF - 1 + 3 + fetch_register + bank_stages + operand_hop + register_operands +
register_products + register_adder_tree + tree_stages + (1 if thresholds are fused, 2 if
their compares are registered: ``qloom.hw.threshold.compare_register``) + (``DSP_FEED +
2`` with ECP5 DSP blocks, see qloom.hw.dsp)`` (the 3: issue, the accumulator, the sum
handed on from it); a registered adder tree has a register after every ``TREE_LEVELS``
adder levels, the first one level sooner for XNOR lanes, every level behind ECP5 DSP blocks (``tree_levels``;
``tree_stages`` of them inside it). The operand register holds the weight and input
buffer reads as they leave their memories (the stream/buffer select
follows it) and takes them off the path into the multipliers (on
the ECP5-85F that path was 22.9 ns into the jet tagger's DSP blocks; with the register,
19 ns of register -> DSP -> register remained, most of it routing to DSPs placed far
away, which the blocks' own registers remove: ``dsp_primitive="ecp5"``, see qloom.hw.dsp).

Weights live in a read-only :class:`amaranth.lib.memory.Memory` of ``NF*SF`` words of
``PE*SIMD`` lanes, read synchronously, placed by ``ram_style`` (the fused thresholds by
``threshold_ram_style``, the input vector buffer by ``buffer_ram_style``); in block RAM
deeper than one block, in banks of ``weight_bank_depth`` words
(``qloom.hw.weight_mem.BankedRom``, the rule in ``qloom.hw.mem_pack.bank_depth``; a cycle
or two more, ``bank_stages`` above). The accumulator is exactly
as wide as the worst case of the actual weights over every input of ``in_type``.
With ``ram_style=RamStyle.SPRAM`` (iCE40UP5K) the weights are in SPRAMs instead
(``qloom.hw.spram``), written through the ``load`` port at start-up: the unit takes no
input until ``load.done``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, Value, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..nn.dtypes import BINARY, DataType, smallest_type
from .dsp import Ecp5Multiplier, check_dsp_primitive
from .estimate import (ROM_ADDRESS_FANOUT, Features, Resources, adder_tree_luts,
                       comparator_luts, lut_multiplier_luts, memory_cost, ram_cost,
                       use_block_ram)
from .mvu_datapath import (Datapath, is_select_type, multiply, nibble_counts, partial_sum_bits,
                           partial_sums, product_parts, select_datapath, select_product,
                           tree_groups, tree_levels, tree_stages, tree_sum, value_of)
from .skid import GROUP_BITS
from .spram import (SPRAM_DEPTH, UP5K_SPRAMS, LoadSignature, SpramRom, spram_blocks,
                    spram_image)
from .threshold import ThresholdSpec, ThresholdTable, compare_register
from .types import shape_of
from .weight_mem import (BankedRom, RamStyle, address_groups, banked_latency, banks, bit_slice,
                         kept_register, pack_words, read_register, rom, word_slices)

__all__ = ["MVU", "Datapath", "RamStyle"]


def _positive(name: str, value) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise TypeError(f"{name} count must be a positive integer, not {value!r}")
    return value


def _optional_bool(name: str, value) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool or None, not {value!r}")
    return value


# Register stages between the operand register and an ECP5 DSP block's own input registers.
DSP_FEED = 2


def operand_register(multipliers: bool, family) -> bool:
    """Whether a pipelined MVU registers its operands (``register_operands``): always
    before multipliers; on the ECP5 for every datapath, because a block RAM's read data
    leaves 5.8 ns after the clock there (measured, nextpnr, LFE5U-85F), so at 150 MHz
    (6.7 ns) nothing but a register fits behind it (TFC-w1a1: block RAM -> XNOR -> product
    register, 7.5 ns)."""
    from .estimate import Family
    return multipliers or family is Family.ECP5


# PEs that read one register copy of the input word (``MVU._elaborate_operands``) when
# their weights are in logic; a PE whose weights are in block RAM gets a copy of its own.
OPERAND_PES = 4


def operand_copies(family) -> bool:
    """Whether a pipelined MVU copies its input word's operand register per group of PEs
    (``register_operand_copies``): on the ECP5, whose designs span a die of 85k LUT4s; the
    iCE40UP5K's are small, and short of flip-flops."""
    from .estimate import Family
    return family is Family.ECP5


def operand_groups(pe: int, copies: bool = True, weights_block: bool = False) -> int:
    """The register copies of a pipelined MVU's input word: one per ``OPERAND_PES`` PEs,
    or one per PE when the weights are in block RAM (``weights_block``), one without
    ``copies``.

    A PE with its weights in logic is placed beside its group's copy; a PE with its
    weights in block RAM sits by its block, and the blocks of a design that uses most of
    them are spread over the die: CNV-w1a1's Conv_3 (16 PEs, copies per 4) routed at
    86.25 MHz for 104, its critical path a group's choice of the stream's or the buffer's
    word to a PE 31 rows from the group's copy (8.51 ns of route)."""
    if not copies:
        return 1
    return pe if weights_block else -(-pe // OPERAND_PES)


def pe_groups(pe: int, groups: int) -> list[range]:
    """The PEs of each of ``groups`` groups (``operand_groups``, ``group_slices``): runs of
    ``ceil(pe / groups)`` PEs, the last one shorter."""
    per_group = -(-pe // groups)
    return [range(lo, min(pe, lo + per_group)) for lo in range(0, pe, per_group)]


def group_slices(pe: int, pe_bits: int, groups: int) -> list[tuple[int, int]]:
    """``(lowest bit, width)`` in a word of ``pe`` PEs' ``pe_bits`` each of every one of
    ``groups`` groups of PEs (``pe_groups``)."""
    return [(pes.start * pe_bits, len(pes) * pe_bits) for pes in pe_groups(pe, groups)]


# The LUTs per address bit a ROM slice is cut for (``rom_slices``): half the ECP5's
# ``ROM_ADDRESS_FANOUT``, because synthesis reads an address bit from more LUTs than one
# per 16 words and bit (CNV-w1a1's Conv_2 ROMs of 256 bits and 36 words: 1,156 loads
# where that count gives 768).
ROM_SLICE_LOADS = ROM_ADDRESS_FANOUT // 2


def rom_slices(pe: int, pe_bits: int, depth: int, copies: bool,
               fetch: bool) -> list[tuple[int, int]]:
    """The ROMs that weights in logic (``depth`` words of ``pe`` PEs' ``pe_bits``) are cut
    into, as ``(lowest bit, width)`` of the word, each read from a copy of its own of the
    fetch register (``fetch_register``): one per group of PEs (``pe_groups``) when the
    input word has copies (``operand_groups``), each cut further into equal slices of at
    most ``ROM_SLICE_LOADS`` LUTs counted one per 16 words and bit; else one ROM.

    Synthesis builds each distinct bit column of a ROM once (``weight_columns``): one ROM
    for a whole layer shares a column among PEs anywhere on the die. CNV-w1a1's Conv_1
    (64 PEs, 9 words of 4,096 bits) kept 512 columns, each read by 5 to 14 PEs, and its
    ECP5 critical path was one of them, 13 ns of route to a PE 32 columns and 28 rows
    away (71.75 MHz for 104). Its Conv_2 with the weights in logic (32 PEs of 64 bits, 36
    words) had a ROM per 4 PEs, and each ROM's address bit 1,156 loads."""
    if not fetch:
        return [(0, pe * pe_bits)]
    leaves = -(-depth // 16)
    slices = []
    for lo, width in group_slices(pe, pe_bits, operand_groups(pe, copies)):
        cuts = -(-width * leaves // ROM_SLICE_LOADS) if copies else 1
        step = -(-width // cuts)
        slices += [(bit, min(step, lo + width - bit)) for bit in range(lo, lo + width, step)]
    return slices


def operand_spread(groups: int, waits: int) -> int:
    """The registers of the stream's word (and of its stream/buffer choice) that the
    operand copies read when there are more than ``OPERAND_PES`` copies and no stage waits
    between the stream and the copies (``waits``: fetch and bank stages): one per
    ``OPERAND_PES`` copies, taken from the stream beside the word's own register (so no
    cycle is added); else none, and every copy reads that one register.

    CNV-w1a1's Conv_2 (16 PEs by their weights' blocks, a copy each) routed at 81.88 MHz
    for 104: its critical path was the one register's bit to PE 12's copy, 11.69 ns of
    route 25 rows down."""
    return -(-groups // OPERAND_PES) if groups > OPERAND_PES and not waits else 0


def operand_hop(groups: int, weights_block: bool) -> bool:
    """Whether the input word reaches its copies in two hops, a cycle more (the weights
    are registered once more to match): from its register to one register per
    ``OPERAND_PES`` copies, which the placer puts on the way, then to the copies. When the
    weights are in block RAM and there are more than ``OPERAND_PES`` copies: the PEs then
    sit by their weights' blocks over most of the die's height. In one hop, CNV-w1a1's
    Conv_3 routed at 83.79 MHz for 104: the stream's word to a spread register 35 rows
    away (``operand_spread``), 11.41 ns of route."""
    return weights_block and groups > OPERAND_PES


def operand_copy_registers(*, pe: int, word_bits: int, buffered: bool,
                           buffer_copies: bool, copies: bool = True,
                           weights_block: bool = False, waits: int = 0) -> int:
    """The flip-flops of the input word's operand registers: per copy
    (``operand_groups``) the stream's word and the choice (and, with ``buffer_copies``, the
    buffer's word); a block RAM buffer's word (``buffered`` and not ``buffer_copies``)
    once; the spread registers the copies read (``operand_spread``) or the hop registers
    (``operand_hop``)."""
    groups = operand_groups(pe, copies, weights_block)
    hop = copies and operand_hop(groups, weights_block)
    spread = operand_spread(groups, waits + hop) * (word_bits + buffered)
    if hop:        # a register per OPERAND_PES copies, and the buffer's word beside it
        spread = -(-groups // OPERAND_PES) * (word_bits + buffered
                                              + (word_bits if buffered and buffer_copies
                                                 else 0)) \
            + (word_bits if buffered and not buffer_copies else 0)
    if not buffered:
        return spread + groups * word_bits
    return spread + groups * (word_bits + 1) + word_bits * (groups if buffer_copies else 1)


def fetches_thresholds(family) -> bool:
    """Whether a pipelined MVU on ``family`` may read fused thresholds in logic from a
    register of their fold counter (``register_thresholds_fetch``): on the ECP5, where
    from the counter itself the ROM was built from the counter's increment (CNV-w1a1's
    Conv_4, the design's deepest logic). Not on the iCE40: the demo's TFC-w1a1 then routed
    at 48.6 MHz against 52.1 (its read register sat farther from the compares)."""
    from .estimate import Family
    return family is Family.ECP5


def thresholds_fetch(fused: bool, nf: int, sf: int, thresholds_block: bool) -> bool:
    """Whether fused thresholds outside block RAM can be read from a register of their
    fold counter: when there is more than one fold to read and sums come two or more
    cycles apart (SF >= 2), so that the register equals the counter when it is read."""
    return fused and nf > 1 and sf >= 2 and not thresholds_block


def fetch_register(weights_in_logic: bool, register_operands: bool) -> bool:
    """Whether a pipelined MVU addresses its memories from a register of its own, a cycle
    after issue: when its weights are a ROM in logic. Otherwise the synthesis tools build
    that ROM from the fold counter's next value (ABC reuses the counter's carry-chain sums:
    increment -> ROM -> register was the critical path of the jet tagger and of TFC-w1a1 at
    1 M frames/s on the ECP5-85F, 101.9 and 136.1 MHz)."""
    return register_operands and weights_in_logic


def tree_terms(*, pe: int, simd: int, datapath: Datapath, dsps: int, parts: int) -> int:
    """Terms of the largest PE's adder tree: a count per four lanes (XNOR), a term per
    lane, ``parts`` partial sums per registered LUT multiplier lane (MAC lanes from
    ``dsps`` on; the first ``dsps`` lanes are on DSP blocks)."""
    if datapath is Datapath.XNOR_POPCOUNT:
        return -(-simd // 4)
    if datapath is not Datapath.MAC:
        return simd
    lut_lanes = simd - max(0, min(simd, dsps - (pe - 1) * simd))   # the last PE's
    return (simd - lut_lanes) + lut_lanes * parts


class MVU(wiring.Component):
    """A folded matrix-vector unit for integer ``weights[MH, MW]`` (bipolar as -1/+1).

    ``threshold`` fuses a multi-threshold activation over the ``MH`` outputs.
    ``dsp_budget`` caps the multipliers written as ``*`` (mappable to DSP blocks); the rest
    are shift-and-add LUT multipliers (None: no cap; 0: all LUT). ``register_operands``,
    ``register_products`` and ``register_adder_tree`` add pipeline registers before and
    after the lane products and after the per-PE sum (None: operands and products
    registered for the MAC datapath only, the tree when ``SIMD > 1``); ``compare_register``
    registers the fused thresholds' compares before their count (None: the rule of
    ``qloom.hw.threshold.compare_register`` without a family). ``register_threshold_read``
    registers the fused thresholds as they leave their block RAM when a vector takes two
    cycles or more (``SF >= 2``: the thresholds' address then holds for two cycles, so the
    register costs no latency); on the ECP5 it is the block's own output register
    (qloom.flows.ecp5_outreg). Without it the block's clock-to-out (5.8 ns) began the
    compare's path into the output queue: LFC-w1a1's layers at 86 MHz.
    ``register_operand_copies`` registers the input word once per ``OPERAND_PES`` PEs
    (per PE with the weights in block RAM) when the operands are registered
    (``operand_groups``, ``operand_copies``);
    ``register_thresholds_fetch`` reads fused thresholds in logic from a register of their
    fold counter (``thresholds_fetch``, ``fetches_thresholds``).
    """

    def __init__(self, *, weights: np.ndarray, w_type: DataType, in_type: DataType,
                 pe: int, simd: int, threshold: ThresholdSpec | None = None,
                 dsp_budget: int | None = None, ram_style: RamStyle = RamStyle.AUTO,
                 threshold_ram_style: RamStyle = RamStyle.AUTO,
                 buffer_ram_style: RamStyle = RamStyle.AUTO,
                 register_operands: bool | None = None,
                 register_products: bool | None = None,
                 register_adder_tree: bool | None = None,
                 dsp_primitive: str | None = None, compare_register: bool | None = None,
                 weight_bank_depth: int | None = None, register_threshold_read: bool = False,
                 register_operand_copies: bool = False,
                 register_thresholds_fetch: bool = False):
        self._pe, self._simd = _check_matrix(weights, w_type, in_type, pe, simd, threshold,
                                             dsp_budget)
        mh, mw = weights.shape
        words, width = (mh // pe) * (mw // simd), pe * simd * w_type.bits
        _check_memories(ram_style, threshold_ram_style, buffer_ram_style, words, width,
                        weight_bank_depth)
        _optional_bool("Register operands", register_operands)
        _optional_bool("Register products", register_products)
        _optional_bool("Register adder tree", register_adder_tree)
        _optional_bool("Compare register", compare_register)

        self._weights = weights.astype(np.int64)
        self._weights.flags.writeable = False
        self._w_type, self._in_type = w_type, in_type
        self._datapath = select_datapath(w_type, in_type)
        self._threshold, self._ram_style = threshold, ram_style
        self._threshold_ram_style, self._buffer_ram_style = threshold_ram_style, buffer_ram_style
        self._bank_depth = weight_bank_depth
        self._register_threshold_read = register_threshold_read
        self._operand_copies = register_operand_copies
        self._thresholds_fetch = register_thresholds_fetch
        self._acc_lo, self._acc_hi = _acc_range(self._weights, in_type)
        self._acc_type = smallest_type(self._acc_lo, self._acc_hi)
        mults = pe * simd if self._datapath is Datapath.MAC else 0
        self._dsp_count = mults if dsp_budget is None else min(dsp_budget, mults)
        mac = self._datapath is Datapath.MAC
        self._register_operands = mac if register_operands is None else register_operands
        self._register_products = mac if register_products is None else register_products
        self._register_adder_tree = (simd > 1 if register_adder_tree is None
                                     else register_adder_tree)
        check_dsp_primitive(dsp_primitive)
        if dsp_primitive and self._dsp_count:
            if not (self._register_operands and self._register_products):
                raise ValueError("The 'ecp5' DSP primitive works in the operand and "
                                 "product register stages: it needs register_operands and "
                                 "register_products")
            check_dsp_primitive(dsp_primitive, [("Weight type", w_type), ("Input type", in_type)])
        self._dsp_primitive = dsp_primitive if self._dsp_count else None
        self._table = (None if threshold is None else
                       _threshold_table(self._weights, w_type, in_type, threshold, pe,
                                        register_compares=compare_register))
        members = {
            "i": In(stream.Signature(data.ArrayLayout(shape_of(in_type), simd))),
            "o": Out(stream.Signature(data.ArrayLayout(shape_of(self.out_type), pe))),
        }
        if ram_style is RamStyle.SPRAM:
            members["load"] = In(LoadSignature(spram_blocks(width)))
        super().__init__(members)

    mh = property(lambda self: self._weights.shape[0])
    mw = property(lambda self: self._weights.shape[1])
    pe = property(lambda self: self._pe)
    simd = property(lambda self: self._simd)
    weights = property(lambda self: self._weights)
    w_type = property(lambda self: self._w_type)
    in_type = property(lambda self: self._in_type)
    threshold = property(lambda self: self._threshold)
    datapath = property(lambda self: self._datapath, doc="The selected :class:`Datapath`.")
    acc_type = property(lambda self: self._acc_type,
                        doc="The narrowest type holding every accumulator value exactly.")
    dsp_count = property(lambda self: self._dsp_count,
                         doc="Multipliers written as ``*`` (for Yosys to map to DSPs). "
                             "iCE40 synthesis keeps products under 11 bits in LUTs anyway.")
    dsp_primitive = property(lambda self: self._dsp_primitive,
                             doc="'ecp5' when the DSP lanes are MULT18X18D blocks with their "
                                 "own registers (see qloom.hw.dsp), else None.")
    register_operands = property(lambda self: self._register_operands)
    register_products = property(lambda self: self._register_products)
    register_adder_tree = property(lambda self: self._register_adder_tree)

    @property
    def out_type(self) -> DataType:
        """The accumulator type, or the fused thresholds' output type."""
        return self._acc_type if self._threshold is None else self._threshold.out_type

    @property
    def neuron_folds(self) -> int:
        return self.mh // self._pe

    @property
    def synapse_folds(self) -> int:
        return self.mw // self._simd

    @property
    def cycles_per_vector(self) -> int:
        return self.neuron_folds * self.synapse_folds

    @property
    def latency(self) -> int:
        """Cycles from a vector's first input word taken to its first output word taken,
        with no stalls (see the module documentation)."""
        return latency(self.synapse_folds, register_operands=self._register_operands,
                       fetch=self.fetch_register, bank_stages=self.bank_stages,
                       hop=self.operand_hop, register_products=self._register_products,
                       dsp_blocks=self._dsp_primitive is not None,
                       register_adder_tree=self._register_adder_tree,
                       tree_stages=self.tree_stages,
                       thresholds=0 if self._threshold is None
                       else 1 + self._table.compare_register)

    @property
    def tree_stages(self) -> int:
        """Register stages inside the adder tree (``tree_stages`` of its terms when the
        tree is registered, else none)."""
        if not self._register_adder_tree:
            return 0
        parts = 1
        if self._register_products:
            parts = product_parts(shape_of(self._w_type).width, shape_of(self._in_type).width)
        return tree_stages(tree_terms(pe=self._pe, simd=self._simd, datapath=self._datapath,
                                      dsps=self._dsp_count, parts=parts), self.tree_levels)

    @property
    def tree_levels(self) -> tuple:
        """Adder levels before the tree's first register and between later ones
        (``tree_levels``)."""
        return tree_levels(self._datapath, bool(self._dsp_primitive))

    def _weight_words(self):
        w_shape = shape_of(self._w_type)
        words = weight_codes(self._weights, self._w_type, self._pe, self._simd)
        layout = data.ArrayLayout(data.ArrayLayout(w_shape, self._simd), self._pe)
        return pack_words(words.tolist(), w_shape.width), layout

    def _weight_memory(self):
        words, layout = self._weight_words()
        if self._ram_style is RamStyle.SPRAM:
            return SpramRom(width=layout.size, init=words), layout
        if self._bank_depth is not None:
            return BankedRom(layout.size, words, self._bank_depth), layout
        return rom(layout, words, self._ram_style), layout

    def spram_image(self) -> list[int]:
        """The 16-bit words ``load`` must write (``qloom.hw.spram.SpramRom.image``);
        empty unless the weights are in SPRAM."""
        if self._ram_style is not RamStyle.SPRAM:
            return []
        words, layout = self._weight_words()
        return spram_image(layout.size, words)

    @property
    def fetch_register(self) -> bool:
        """Whether the memories are addressed from a register of their own, a cycle after
        issue (``fetch_register``)."""
        return fetch_register(self._ram_style is RamStyle.DISTRIBUTED, self._register_operands)

    @property
    def rom_slices(self) -> list[tuple[int, int]]:
        """The ROMs the weights in logic are cut into (``rom_slices``)."""
        return rom_slices(self._pe, self._simd * shape_of(self._w_type).width,
                          self.neuron_folds * self.synapse_folds, self._operand_copies,
                          self.fetch_register)

    @property
    def thresholds_fetch(self) -> bool:
        """Whether fused thresholds in logic are read from a register of their fold
        counter (``register_thresholds_fetch`` and ``thresholds_fetch``)."""
        return self._thresholds_fetch and thresholds_fetch(
            self._table is not None, self.neuron_folds, self.synapse_folds,
            self._threshold_ram_style is RamStyle.BLOCK)

    @property
    def weights_block(self) -> bool:
        """Whether the weights are in block RAM or SPRAM (each PE's operand copy then
        its own, ``operand_groups``)."""
        return self._ram_style in (RamStyle.BLOCK, RamStyle.SPRAM)

    @property
    def buffer_copies(self) -> bool:
        """Whether the input buffer's word gets a register per group of PEs (``x`` in
        ``_elaborate_operands``): when the buffer is in logic or distributed RAM, whose
        read data no block holds in a register of its own."""
        return self._buffer_ram_style in (RamStyle.DISTRIBUTED, RamStyle.LUTRAM)

    @property
    def bank_stages(self) -> int:
        """Cycles the weights take beyond a read port's one when they are in banks
        (``BankedRom``)."""
        return bank_stages(self.neuron_folds * self.synapse_folds, self._bank_depth)

    @property
    def output_depth(self) -> int:
        """Words of the output queue (``output_depth``)."""
        return output_depth(self.latency, self.synapse_folds)

    def elaborate(self, platform):
        m = Module()
        spram = self._ram_style is RamStyle.SPRAM
        # SPRAM weights: nothing is issued before they are loaded.
        loaded = self.load.done if spram else 1
        queue, issue, s_fold, s_last, from_stream, w_addr = self._elaborate_issue(m, loaded)
        w_data, w_layout = self._elaborate_weight_port(m, w_addr, issue, spram)
        w, x, tag = self._elaborate_operands(m, w_data, w_layout, issue, s_fold, s_last,
                                             from_stream)
        blocks = self._elaborate_dsp_feed(m, w, x)
        terms, tag = self._elaborate_terms(m, w, x, blocks, tag)
        dots, tag = self._elaborate_adder_tree(m, terms, tag)
        self._elaborate_accumulate(m, dots, tag, queue)
        return m

    def _elaborate_weight_port(self, m, w_addr, issue, spram):
        """The weight memory and its read port, addressed from ``w_addr`` (or its fetch
        register): ``(read data, layout of the data)``. Weights in logic read from a fetch
        register are ROMs per slice of the word, each from a copy of the register of its
        own (``rom_slices``); weights in block RAM that need more than one address
        register are memories per slice of the word (``weight_address_copies``)."""
        slices = self.rom_slices
        if len(slices) > 1:
            words, w_layout = self._weight_words()
            return self._slice_roms(m, words, slices, self._ram_style, w_addr, "weights",
                                    "w_addr_fetch"), w_layout
        if self.weight_address_copies:
            return self._elaborate_weight_slices(m, w_addr, issue)
        weights, w_layout = self._weight_memory()
        m.submodules.weights = weights
        if spram:
            wiring.connect(m, wiring.flipped(self.load), weights.load)
            w_port = weights
        else:
            w_port = weights.read_port()
        w_fetch = w_addr
        if self.fetch_register:
            w_fetch = Signal.like(w_addr, name="w_addr_fetch")
            m.d.sync += w_fetch.eq(w_addr)
        m.d.comb += [w_port.addr.eq(w_fetch), w_port.en.eq(1)]
        return w_port.data, w_layout

    @property
    def operand_hop(self) -> bool:
        """Whether the input word reaches its copies in two hops (``operand_hop``)."""
        return (self._register_operands and self._operand_copies
                and operand_hop(operand_groups(self._pe, True, self.weights_block),
                                self.weights_block))

    @property
    def weight_address_copies(self) -> int:
        """Registers that repeat the weight address for block RAM weights: one per slice
        of the word (``qloom.hw.weight_mem.word_slices``) and, in banks, per group of
        banks (``address_groups``), but the first, which is the address itself."""
        if self._ram_style is not RamStyle.BLOCK:
            return 0
        return weight_address_copies(self._pe * self._simd * shape_of(self._w_type).width,
                                     self.neuron_folds * self.synapse_folds,
                                     self._bank_depth)

    def _elaborate_weight_slices(self, m, w_addr, issue):
        """Block RAM weights as a memory per slice of the word, each addressed (per group
        of banks when banked) from a register of its own: ``w_addr`` or a counter that
        steps with it (no cycle added). ``(read data, layout)``."""
        words, w_layout = self._weight_words()
        last = self.neuron_folds * self.synapse_folds - 1
        data, copies = [], 0
        for k, (lo, width) in enumerate(word_slices(w_layout.size)):
            part = bit_slice(words, lo, width)
            if self._bank_depth is not None:
                mem = BankedRom(width, part, self._bank_depth, split_address=True)
                addrs, port = mem.addrs, mem
            else:
                mem = rom(unsigned(width), part, RamStyle.BLOCK)
                port = mem.read_port()
                addrs = [port.addr]
            m.submodules[f"weights{k}"] = mem
            for addr in addrs:
                if copies:
                    copy = Signal.like(w_addr, name=f"w_addr{copies}", attrs={"keep": 1})
                    with m.If(issue):
                        m.d.sync += copy.eq(_next_address(copy, last))
                    m.d.comb += addr.eq(copy)
                else:
                    m.d.comb += addr.eq(w_addr)
                copies += 1
            m.d.comb += port.en.eq(1)
            data.append(port.data)
        return Cat(*data), w_layout

    def _slice_roms(self, m, words, slices, ram_style, addr, name, addr_name):
        """``words`` (packed) as a ROM per ``(lowest bit, width)`` of ``slices``
        (submodules ``{name}{k}``), each addressed from its own register of ``addr``
        (``{addr_name}{k}``): their read data side by side."""
        data = []
        for k, (lo, width) in enumerate(slices):
            mem = rom(unsigned(width), bit_slice(words, lo, width), ram_style)
            m.submodules[f"{name}{k}"] = mem
            port = mem.read_port()
            m.d.comb += [port.addr.eq(kept_register(m, addr, f"{addr_name}{k}")),
                         port.en.eq(1)]
            data.append(port.data)
        return Cat(*data)

    def _elaborate_operands(self, m, w_data, w_layout, issue, s_fold, s_last, from_stream):
        """The weight word and the input word (from the stream or the buffer) of each
        issued step, with the pipeline tag that travels beside them: ``(w, x, tag)``, ``x``
        one input word per PE (equal words, copies of each other's registers)."""
        nf = self.neuron_folds
        issued = {"valid": issue, "first": s_fold == 0, "last": s_last}
        tag = _Tag({key: Signal(name=f"issue_{key}") for key in issued}, "issue", issued)
        x_reg = Signal.like(self.i.payload, reset_less=True)
        x_from_stream = Signal()
        m.d.sync += [*(tag[key].eq(value) for key, value in issued.items()),
                     x_reg.eq(self.i.payload), x_from_stream.eq(from_stream)]
        # The weights come a cycle later when they are read from a register of their own
        # (``w_addr_fetch``), and one or two more when they are read in banks
        # (``BankedRom``, ``bank_stages``): the input words and the tag wait for them.
        waits = (["fetch"] if self.fetch_register else []) + \
            [f"bank{k}_" for k in range(self.bank_stages)]
        groups = operand_groups(self._pe, self._operand_copies, self.weights_block)
        # Registers beside ``x_reg`` that the copies read, a few copies each
        # (``operand_spread``).
        hop = self.operand_hop
        spread = [(kept_register(m, self.i.payload, f"operand_spread{k}"),
                   kept_register(m, from_stream, f"operand_spread_from_stream{k}"), None)
                  for k in range(operand_spread(groups, len(waits) + hop)
                                 if self._register_operands else 0)]
        in_layout = self.i.payload.shape()
        x_buffered = (self._elaborate_input_buffer(m, issue, s_fold, from_stream, x_reg,
                                                   tag["valid"], x_from_stream)
                      if nf > 1 else None)
        # The input words and the tag wait for the weights (the buffer keeps its read
        # address, so its write/read order is unchanged).
        for wait in waits:
            rows = [[x_reg]] + ([[x_buffered]] if x_buffered is not None else [])
            regs, tag = self._stage(m, wait, rows, tag, extra={"from_stream": x_from_stream})
            x_reg, x_from_stream = in_layout(regs[0][0]), tag.pop("from_stream")
            if x_buffered is not None:
                x_buffered = in_layout(regs[1][0])
        shared = x_buffered is not None and not self.buffer_copies
        if hop:
            # The weights a cycle more; the input word, its choice and (with copies) the
            # buffer's word to a register per OPERAND_PES copies, the tag beside them.
            w_data = read_register(m, w_data, Const(1), "weights_hop")
            spread = [(kept_register(m, x_reg, f"operand_hop{k}"),
                       kept_register(m, x_from_stream, f"operand_hop_from_stream{k}"),
                       None if x_buffered is None or shared else
                       kept_register(m, x_buffered, f"operand_hop_buffered{k}"))
                      for k in range(-(-groups // OPERAND_PES))]
            regs, tag = self._stage(m, "hop", [[x_buffered]] if shared else [], tag)
            if shared:
                x_buffered = in_layout(regs[0][0])
        w = w_layout(w_data)
        if not self._register_operands:
            return w, [self._chosen(m, x_reg, x_buffered, x_from_stream, "")] * self._pe, tag
        # The memories' read data go straight into the operand registers, the input
        # buffer's beside the stream's and the choice after them: nothing but a register
        # follows a block RAM read, which the ECP5 block can then hold itself
        # (qloom.flows.ecp5_outreg; the mux behind the buffer's block RAM cost TFC-w2a2
        # 1.5 ns of 9.1 at 150 MHz). The input words (and the choice) are registered once
        # per group of PEs or per PE (``operand_groups``), each copy near its PEs: one
        # register read by all 16 PEs of CNV-w1a1's Conv_3 was its ECP5 critical path (14 ns
        # of route to a PE 30 rows away). A block RAM buffer's word keeps one register, in
        # the block.
        rows = [[w]] + ([[x_buffered]] if shared else [])
        regs, tag = self._stage(m, "operand", rows, tag)
        w = w_layout(regs[0][0])
        words = []
        for group in range(groups):
            x_src, from_src, buffered_src = (spread[group // OPERAND_PES] if spread
                                             else (x_reg, x_from_stream, None))
            x = kept_register(m, x_src, f"operand_x{group}")
            from_stream = kept_register(m, from_src, f"operand_from_stream{group}")
            buffered = (in_layout(regs[1][0]) if shared else
                        None if x_buffered is None else
                        kept_register(m, x_buffered if buffered_src is None else buffered_src,
                                   f"operand_buffered{group}"))
            words.append(self._chosen(m, x, buffered, from_stream, str(group)))
        return w, [words[g] for g, pes in enumerate(pe_groups(self._pe, groups))
                   for _ in pes], tag

    def _elaborate_input_buffer(self, m, issue, s_fold, from_stream, x_reg, issued,
                                x_from_stream):
        """The buffer of the input words that later neuron folds read again: its read data
        at ``s_fold`` (``issued``, ``x_reg`` and ``x_from_stream``: the issue's registers)."""
        sf = self.synapse_folds
        # A read of the word being written (the first neuron fold's) is never used:
        # the stream's word is chosen then. ``no_rw_check`` tells Yosys so; without it
        # a block RAM read and write on different ports (a buffer over 18 bits wide on
        # the ECP5) get soft collision logic between the block and its register.
        m.submodules.buffer = buffer = Memory(
            shape=self.i.payload.shape(), depth=sf, init=[],
            attrs={**self._buffer_ram_style.attrs, "no_rw_check": 1})
        b_write, b_read = buffer.write_port(), buffer.read_port()
        m.d.comb += [b_read.addr.eq(s_fold), b_read.en.eq(1)]
        if sf > 1:
            # Written a cycle late, from the registered word, address and enable (the
            # stream's handshake into the write enable of a LUT RAM buffer 15 columns
            # away was the jet tagger's ULX3S path). The next read of that word comes
            # ``sf`` issues later, after the write.
            s_fold_w = Signal.like(s_fold, name="s_fold_w")
            m.d.sync += s_fold_w.eq(s_fold)
            m.d.comb += [b_write.addr.eq(s_fold_w), b_write.data.eq(x_reg),
                         b_write.en.eq(issued & x_from_stream)]
        else:
            m.d.comb += [b_write.addr.eq(s_fold), b_write.data.eq(self.i.payload),
                         b_write.en.eq(issue & from_stream)]
        return b_read.data

    @staticmethod
    def _chosen(m, x, x_buffered, from_stream, suffix):
        """The stream's word ``x`` or (when there is a buffer) the buffer's, by
        ``from_stream``."""
        if x_buffered is None:
            return x
        # One signal, not a Mux expression: a view over an expression writes the
        # expression again for every lane that reads it (SIMD x PE copies).
        x_sel = Signal.like(x, name=f"x_sel{suffix}")
        m.d.comb += Value.cast(x_sel).eq(Mux(from_stream, Value.cast(x),
                                             Value.cast(x_buffered)))
        return x_sel

    def _elaborate_dsp_feed(self, m, w, x) -> dict:
        """The lanes on ECP5 DSP blocks: lane -> the block's product.

        DSP blocks with their own registers take the operands through ``DSP_FEED`` more
        registers of their own, which placement spreads along the route to the block (a
        design using most of the ECP5-85F's blocks has some of them across the chip:
        from the operand register the route alone took 9.75 ns to a block 107 columns
        away on the jet tagger, 8.6 ns through one register placed beside its source),
        and give the product two cycles later; the other lanes wait in the product stage
        and ``DSP_FEED + 1`` more register stages (fed straight from the input buffer's
        LUT RAM, the blocks' input registers were the ECP5 critical path: 16.6 ns, 9.2 of
        them routing)."""
        blocks = {}
        if self._dsp_primitive:
            for lane in range(self._dsp_count):
                p, s = divmod(lane, self._simd)
                a, b = w[p][s], x[p][s]
                for k in range(DSP_FEED):
                    a_reg = Signal.like(Value.cast(a), name=f"to_dsp{lane}_a{k}",
                                        reset_less=True)
                    b_reg = Signal.like(Value.cast(b), name=f"to_dsp{lane}_b{k}",
                                        reset_less=True)
                    m.d.sync += [a_reg.eq(a), b_reg.eq(b)]
                    a, b = a_reg, b_reg
                block = Ecp5Multiplier(a.shape(), b.shape())
                m.submodules[f"dsp{lane}"] = block
                m.d.comb += [block.a.eq(a), block.b.eq(b), block.ce.eq(1)]
                blocks[lane] = block.p
        return blocks

    def _elaborate_terms(self, m, w, x, blocks, tag):
        """Each PE's terms for the adder tree, through the product register stages:
        ``(terms per PE, tag)``.

        Each lane gives one or more terms of its PE's sum: a lane on a DSP block a
        placeholder its product replaces once the other lanes caught up; a registered LUT
        multiplier its partial sums of two partial products each (``product_parts``),
        added in the adder tree after the register."""
        terms, placeholders = [[] for _ in range(self._pe)], {}
        xnor = self._datapath is Datapath.XNOR_POPCOUNT
        if xnor:
            # A PE's XNORs as one vector (a signal per PE, not one per lane: the Verilog
            # of a CNV layer was 2.7 MB of per-lane assignments); its bits are the terms.
            terms = [[~(Value.cast(w[p]) ^ Value.cast(x[p]))] for p in range(self._pe)]
        for lane in range(0 if xnor else self._pe * self._simd):
            p, s = divmod(lane, self._simd)
            if lane in blocks:
                placeholders[lane] = len(terms[p])
                terms[p].append(Const(0))
            elif (self._datapath is Datapath.MAC and lane >= self._dsp_count
                  and self._register_products):
                parts = product_parts(Value.cast(w[p][s]).shape().width,
                                      Value.cast(x[p][s]).shape().width)
                terms[p] += partial_sums(w[p][s], x[p][s], parts)
            else:
                terms[p].append(self._product(w[p][s], x[p][s], lane))
        if self._register_products:
            # Products of `*` lanes keep a reset: Yosys 0.70's ice40_dsp packs a reset-less
            # product register into one SB_MAC16 as its output register and into the
            # next lane's as its C/D input register, then leaves that input undriven (a
            # PE's two products summed: 2 SB_MAC16 for 4 multipliers, the netlist's sums
            # X in simulation, tests/hw/test_mvu.py). With a reset, neither is absorbed.
            soft = self._dsp_count > 0 and not self._dsp_primitive
            terms, tag = self._stage(m, "product", terms, tag, reset=soft)
        if xnor:
            terms = [nibble_counts(vector, self._simd) for (vector,) in terms]
        if self._dsp_primitive:
            terms, tag = self._stage(m, "aligned", terms, tag)
            for k in range(DSP_FEED):
                terms, tag = self._stage(m, f"aligned_route{k}", terms, tag)
        for lane, product in blocks.items():
            terms[lane // self._simd][placeholders[lane]] = product
        if self._dsp_primitive:
            # The route from a block to the adder tree gets a cycle of its own (with the
            # tree after it, 15.6 ns on the jet tagger, 8.2 of them that route). It is still
            # the jet tagger's path (8.4 ns from a block 76 columns away): a second register
            # stage here did not help, placement put both beside the tree (8.5 ns).
            terms, tag = self._stage(m, "from_dsp", terms, tag)
        return terms, tag

    def _elaborate_adder_tree(self, m, terms, tag):
        """Each PE's terms summed into its dot product, registered every ``tree_levels``
        adder levels: ``(dots, tag)``."""
        first, rest = self.tree_levels
        group = 1 << first
        for stage in range(self.tree_stages):
            # Sum groups of ``group`` terms (its adder levels), register, repeat.
            terms = [[tree_sum(lane[k:k + group]) for k in range(0, len(lane), group)]
                     for lane in terms]
            terms, tag = self._stage(m, f"partial{stage}_", terms, tag)
            group = 1 << rest
        assert not self._register_adder_tree or all(len(lane) <= 1 << rest
                                                    for lane in terms), \
            "tree_stages disagrees with the terms"
        dots = [tree_sum(lane) for lane in terms]
        if self._register_adder_tree:
            dots, tag = self._stage(m, "dot", [dots], tag)
            dots = dots[0]
        return dots, tag

    def _elaborate_accumulate(self, m, dots, tag, queue):
        """Accumulate; on a vector fold's last step hand the sum on (through the fused
        thresholds if any) into the output queue."""
        xnor = self._datapath is Datapath.XNOR_POPCOUNT
        acc_shape = unsigned(self.mw.bit_length()) if xnor else shape_of(self._acc_type)
        # The sum is handed on from the accumulator register, a cycle after the last
        # step: handed on from the adder, its output queue (or threshold) pulled the
        # adder away from the register (the jet tagger's iCEBreaker path: accumulator ->
        # 6.5 ns -> adder -> 7 ns -> accumulator).
        sums = []
        steer = self._tag_copies(m, tag, Shape.cast(acc_shape).width)
        for p, dot in enumerate(dots):
            # No reset ("first" clears it), so a whole-signal assignment (rtl_check).
            acc = Signal(acc_shape, name=f"acc{p}", reset_less=True)
            valid, first = steer[p]
            m.d.sync += acc.eq(Mux(valid, Mux(first, 0, acc) + dot, acc))
            sums.append(acc)
        done = Signal()
        m.d.sync += done.eq(tag["valid"] & tag["last"])
        result = Signal(self.o.payload.shape())
        if self._threshold is None:
            m.d.comb += queue.w_en.eq(done)
            for p, total in enumerate(sums):
                m.d.comb += result[p].eq((total << 1) - self.mw if xnor else total)
        else:
            m.d.comb += queue.w_en.eq(self._elaborate_thresholds(m, done, sums, result))
        m.d.comb += queue.w_data.eq(result)

    def _elaborate_issue(self, m, loaded):
        """The output queue, its credit and the fold counters: which (neuron fold,
        synapse fold) step is issued in each cycle. Returns the queue and the issue
        step's signals ``(queue, issue, s_fold, s_last, from_stream, w_addr)``."""
        nf, sf = self.neuron_folds, self.synapse_folds
        # Credit: ``reserved`` counts the outputs issued and not yet taken from the
        # queue; a step that completes an output needs ``room`` (a register, so the
        # issue logic and ``i.ready`` depend on registers only).
        depth = self.output_depth
        m.submodules.queue = queue = SyncFIFO(width=Shape.cast(self.o.payload.shape()).width,
                                              depth=depth)
        reserved, room = Signal(range(depth + 1)), Signal(init=1)
        m.d.comb += [self.o.payload.eq(queue.r_data), self.o.valid.eq(queue.r_rdy),
                     queue.r_en.eq(self.o.ready)]

        # Issue: one (neuron fold, synapse fold) step per cycle when its input is there.
        # The flags "last synapse fold" and "first neuron fold" (the input comes from the
        # stream) are registers, not compares of the counters: they feed the issue logic,
        # and on iCE40 the compares made it the critical path.
        s_fold, n_fold = Signal(range(sf)), Signal(range(nf))
        s_last, n_last, from_stream = Signal(init=sf == 1), Signal(init=nf == 1), Signal(init=1)
        w_addr = Signal(range(nf * sf))
        issue, may_issue = Signal(), Signal()
        # ``i.ready`` is a register of its own, computed from the next values of the flags
        # it depends on: from ``room`` through the ready logic to the input skid buffer's
        # enables far across the die was the jet tagger's ULX3S path (7.1 ns at 150 MHz).
        ready = Signal(init=1)
        m.d.comb += [may_issue.eq(loaded & (room | ~s_last)),
                     issue.eq(may_issue & (self.i.valid | ~from_stream)),
                     self.i.ready.eq(ready & loaded)]
        reserve, release = issue & s_last, queue.r_rdy & self.o.ready
        s_next = Mux(s_last, 0, s_fold + 1)
        n_next = Mux(n_last, 0, n_fold + 1)
        # The next flags from compares of the counters' present values (not of the
        # incremented ones: an adder and a compare in series into ``ready`` were the
        # iCEBreaker's path). Whole-signal assignments (under `If`, comb values become
        # `always @*` blocks that Icarus does not run at time 0: qloom.sim.rtl_check).
        s_penult = (s_fold == sf - 2) if sf > 1 else Const(0)
        n_penult = (n_fold == nf - 2) if nf > 1 else Const(0)
        s_last_next, from_stream_next, room_next = Signal(), Signal(), Signal()
        m.d.comb += [
            s_last_next.eq(Mux(issue, Mux(s_last, sf == 1, s_penult), s_last)),
            from_stream_next.eq(Mux(issue & s_last, n_last, from_stream)),
            room_next.eq(Mux(reserve & ~release, reserved < depth - 1,
                             Mux(release & ~reserve, 1, room)))]
        with m.If(reserve & ~release):
            m.d.sync += reserved.eq(reserved + 1)
        with m.Elif(release & ~reserve):
            m.d.sync += reserved.eq(reserved - 1)
        with m.If(issue):
            m.d.sync += [s_fold.eq(s_next),
                         w_addr.eq(_next_address(w_addr, nf * sf - 1))]
            with m.If(s_last):
                m.d.sync += [n_fold.eq(n_next), n_last.eq(Mux(n_last, nf == 1, n_penult))]
        m.d.sync += [s_last.eq(s_last_next), from_stream.eq(from_stream_next),
                     room.eq(room_next),
                     ready.eq(from_stream_next & (room_next | ~s_last_next))]
        return queue, issue, s_fold, s_last, from_stream, w_addr

    def _product(self, w_code, x_code, lane):
        """The value ``w * x`` of one lane (XNOR-popcount lanes are built per PE)."""
        w_type, in_type = self._w_type, self._in_type
        if self._datapath is Datapath.ADD_SUB:
            if is_select_type(w_type):
                return select_product(w_code, w_type, value_of(x_code, in_type))
            return select_product(x_code, in_type, value_of(w_code, w_type))
        return multiply(w_code, x_code, dsp=lane < self._dsp_count)

    @staticmethod
    def _stage(m, name, rows, tag, extra=None, reset=False):
        """Register every value of ``rows`` (a list of lists) and the pipeline tag (with
        ``extra`` control bits travelling beside it for this stage). Data registers have no
        reset unless ``reset`` (the tag's ``valid`` says when they count), so a register
        behind a block RAM read can move into the block (qloom.flows.ecp5_outreg) and the
        reset net reaches only the control bits."""
        registered = []
        for p, row in enumerate(rows):
            regs = [Signal(Value.cast(v).shape(), name=f"{name}{p}_{s}", reset_less=not reset)
                    for s, v in enumerate(row)]
            registered.append(regs)
        previous = tag if isinstance(tag, _Tag) else None
        tag = {**tag, **(extra or {})}
        new_tag = _Tag({key: Signal(name=f"{name}_{key}") for key in tag}, name, tag,
                       previous)
        for row, regs in zip(rows, registered):
            m.d.sync += [reg.eq(v) for reg, v in zip(regs, row)]
        m.d.sync += [new_tag[key].eq(tag[key]) for key in tag]
        return registered, new_tag

    def _tag_copies(self, m, tag, acc_bits):
        """``(valid, first)`` for each PE's accumulator: copies of ``tag``'s registers,
        one per group of accumulators of about ``GROUP_BITS`` bits, with no latency. One
        pair steering every accumulator was the jet tagger's ULX3S critical path
        (``dot_first`` to accumulators 38 columns away, 5.3 ns of route); a copy
        registered from the tag's source then sat by the source, 51 columns from its
        accumulators (3.1 ns of a 6.7 ns path). So each copy is two registers from the
        source's source where the stage before has one (the pipeline never stalls: a
        register chain is the tag's delay line), one hop each for placement. The copies
        are kept apart ("keep": Yosys would merge them)."""
        per_copy = _accumulators_per_copy(acc_bits)
        if self._pe <= per_copy:
            return [(tag["valid"], tag["first"])] * self._pe
        chained = _chained(tag)
        steer = []
        for p in range(self._pe):
            if p % per_copy == 0:
                copy = []
                for key in ("valid", "first"):
                    group = p // per_copy
                    value = tag.source[key]
                    if chained:
                        near = Signal(name=f"{tag.name}{group}_{key}_hop", attrs={"keep": 1})
                        m.d.sync += near.eq(tag.previous.source[key])
                        value = near
                    reg = Signal(name=f"{tag.name}{group}_{key}", attrs={"keep": 1})
                    m.d.sync += reg.eq(value)
                    copy.append(reg)
            steer.append(tuple(copy))
        return steer

    @property
    def threshold_groups(self) -> int:
        """The ROMs that fused thresholds read from registers of their fold counter
        (``thresholds_fetch``) are cut into, one per group of PEs (``pe_groups``), each
        addressed from a register of its own: as many as the input word's copies
        (``operand_groups``), so that each PE's thresholds sit near its compares; else one.

        CNV-w1a1's Conv_2 (16 PEs spread by their weights' blocks) routed at 84.84 MHz for
        104 with one address register for all: its critical path was that register's bit
        to a PE's threshold ROM 30 rows away, 8.45 ns of route."""
        if not self.thresholds_fetch:
            return 1
        return operand_groups(self._pe, self._operand_copies, self.weights_block)

    def _elaborate_thresholds(self, m, done, sums, result):
        """Fused thresholds: register the sums, read the fold's thresholds, compare
        into ``result``; returns the signal that says ``result`` is valid."""
        table = self._table
        fold = Signal(range(self.neuron_folds))
        with m.If(done):
            m.d.sync += fold.eq(Mux(fold == self.neuron_folds - 1, 0, fold + 1))
        if self.thresholds_fetch:
            # Read from registers of ``fold`` (equal to it when read: sums come at least
            # two cycles apart), one per ROM (``threshold_groups``): from ``fold`` itself,
            # synthesis built the ROM from the fold's increment (CNV-w1a1's Conv_4:
            # increment -> 4 LUT levels of ROM -> register, the deepest logic of the
            # design).
            words, layout = table.parallel_words()
            read = self._slice_roms(m, words, group_slices(self._pe, layout.size // self._pe,
                                                           self.threshold_groups),
                                    self._threshold_ram_style, fold, "thresholds",
                                    "thresholds_addr")
        else:
            mem, layout = table.parallel_memory(self._threshold_ram_style)
            m.submodules.thresholds = mem
            port = mem.read_port()
            m.d.comb += [port.addr.eq(fold), port.en.eq(1)]
            read = port.data
        held = [Signal.like(total, name=f"held{p}") for p, total in enumerate(sums)]
        held_valid = Signal()
        if (self._register_threshold_read and self.synapse_folds >= 2
                and self._threshold_ram_style is RamStyle.BLOCK):
            read = read_register(m, read, 1, "thresholds_read")
        rows = layout(read)
        m.d.sync += [held_valid.eq(done)]
        m.d.sync += [reg.eq(total) for reg, total in zip(held, sums)]
        metas = [rows[p].meta if table.meta_layout is not None else None
                 for p in range(self._pe)]
        counts, metas = table.counted(m, held, [rows[p].t for p in range(self._pe)], metas,
                                      "thresholds")
        if table.compare_register:
            crossed_valid = Signal()
            m.d.sync += crossed_valid.eq(held_valid)
            held_valid = crossed_valid
        for p, (count, meta) in enumerate(zip(counts, metas)):
            m.d.comb += result[p].eq(table.code(count, meta))
        return held_valid


def _check_matrix(weights, w_type, in_type, pe, simd, threshold, dsp_budget):
    """``MVU``'s checks of its matrix, datatypes, folding, thresholds and DSP budget:
    ``(pe, simd)``."""
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
    return pe, simd


def _check_memories(ram_style, threshold_ram_style, buffer_ram_style, words, width,
                    weight_bank_depth):
    """``MVU``'s checks of where its memories go, for ``words`` weight words of ``width``
    bits."""
    for style in (ram_style, threshold_ram_style, buffer_ram_style):
        if not isinstance(style, RamStyle):
            raise TypeError(f"RAM style must be a RamStyle, not {style!r}")
    if threshold_ram_style is RamStyle.SPRAM or buffer_ram_style is RamStyle.SPRAM:
        raise ValueError("Only the weights can be in SPRAM")
    if ram_style is RamStyle.SPRAM and (words > SPRAM_DEPTH
                                        or spram_blocks(width) > UP5K_SPRAMS):
        raise ValueError(f"Weights of {words} words of {width} bits do not fit SPRAMs "
                         f"side by side (at most {SPRAM_DEPTH} words of "
                         f"{UP5K_SPRAMS * 16} bits)")
    bank = weight_bank_depth
    if bank is not None and (ram_style is not RamStyle.BLOCK or not isinstance(bank, int)
                             or bank < 1 or bank & (bank - 1) or bank >= words):
        raise ValueError(f"Weight banks need the weights in block RAM and a power-of-two "
                         f"depth below {words} words, not {weight_bank_depth!r} with "
                         f"{ram_style}")

def latency(sf: int, *, register_operands: bool, register_products: bool, dsp_blocks: bool,
            register_adder_tree: bool, tree_stages: int, thresholds: int,
            fetch: bool = False, bank_stages: int = 0, hop: bool = False) -> int:
    """The MVU's latency (see the module documentation) from its register stages
    (``thresholds``: the fused thresholds' stages, 0 without; ``fetch``:
    ``fetch_register``; ``bank_stages``: ``bank_stages`` of weights in banks; ``hop``:
    ``operand_hop``)."""
    return (sf + 2 + fetch + bank_stages + hop + register_operands + register_products
            + (DSP_FEED + 2) * dsp_blocks
            + register_adder_tree + tree_stages + thresholds)


def _next_address(addr, last: int):
    """The weight address after ``addr`` in a memory of ``last + 1`` words (it wraps)."""
    return Mux(addr == last, 0, addr + 1)


def weight_address_copies(word_bits: int, words: int, bank_depth: int | None) -> int:
    """The registers repeating the address of block RAM weights of ``words`` words of
    ``word_bits`` bits (``MVU.weight_address_copies``)."""
    slices = len(word_slices(word_bits))
    return slices * address_groups(words, bank_depth) - 1


def bank_stages(words: int, bank_depth: int | None) -> int:
    """Cycles weights of ``words`` words in banks of ``bank_depth`` (None: one memory) take
    beyond a read port's one (``qloom.hw.weight_mem.BankedRom``)."""
    return 0 if bank_depth is None else banked_latency(banks(words, bank_depth)) - 1


def output_depth(latency: int, sf: int) -> int:
    """Words of the output queue: one for every output that can be in flight between
    its last fold step's issue and its word being taken, while the credit register
    catches up, so that the unit never waits for credit when ``o`` is always ready (an
    output every ``sf`` cycles; at least 2)."""
    return max(2, (latency - sf + 1) // sf + 1)


def _acc_range(weights: np.ndarray, in_type: DataType) -> tuple[int, int]:
    """The accumulator's extremes over every input of ``in_type`` with these weights."""
    pos, neg = np.clip(weights, 0, None), np.clip(weights, None, 0)
    return (int((pos.sum(1) * in_type.min + neg.sum(1) * in_type.max).min()),
            int((pos.sum(1) * in_type.max + neg.sum(1) * in_type.min).max()))


def _threshold_table(weights, w_type: DataType, in_type: DataType, spec: ThresholdSpec,
                     pe: int, register_compares: bool | None = None) -> ThresholdTable:
    """The fused thresholds' table as the unit builds it (on the XNOR datapath over the
    popcount: sum = 2 * popcount - MW)."""
    if select_datapath(w_type, in_type) is Datapath.XNOR_POPCOUNT:
        mw = weights.shape[1]
        return ThresholdTable(spec, pe, lo=0, hi=mw, scale=2, offset=-mw,
                              register_compares=register_compares)
    lo, hi = _acc_range(np.asarray(weights, dtype=np.int64), in_type)
    return ThresholdTable(spec, pe, lo=lo, hi=hi, register_compares=register_compares)


def threshold_lane_bits(weights, w_type: DataType, in_type: DataType,
                        spec: ThresholdSpec) -> int:
    """Bits per PE lane of the fused thresholds' memory word (thresholds narrowed to
    their codes, and the per-channel bias/sign when not uniform), for ``estimate``."""
    return _threshold_table(weights, w_type, in_type, spec, 1).lane_bits


class _Tag(dict):
    """A stage's registered pipeline tag, with the stage's name, the tag it registers
    (from which ``_tag_copies`` registers copies in the same cycle) and the stage before's
    ``_Tag`` if there is one."""

    def __init__(self, registers, name, source, previous=None):
        super().__init__(registers)
        self.name, self.source, self.previous = name, source, previous


def _chained(tag) -> bool:
    """Whether ``_tag_copies`` can copy ``tag`` through two registers: the stage before
    registers the valid and first bits too."""
    return tag.previous is not None and all(key in tag.previous.source
                                            for key in ("valid", "first"))


def _accumulators_per_copy(acc_bits: int) -> int:
    """Accumulators steered by one copy of the tag (``MVU._tag_copies``)."""
    return max(1, GROUP_BITS // acc_bits)


def tag_copy_registers(pe: int, acc_bits: int, chained: bool) -> int:
    """The flip-flops of ``MVU._tag_copies``: two per group of accumulators, four when
    ``chained`` (the tag's stage has a registered stage before it)."""
    per_copy = _accumulators_per_copy(acc_bits)
    return 0 if pe <= per_copy else (4 if chained else 2) * -(-pe // per_copy)


def weight_codes(weights: np.ndarray, w_type: DataType, pe: int, simd: int) -> np.ndarray:
    """The weight memory's words as the MVU lays them out: word ``n * SF + s`` (neuron
    fold ``n``, synapse fold ``s``) holds lane ``p``'s ``simd`` weight codes of row
    ``n * PE + p``, columns ``s * SIMD ...``: an ``[NF * SF, PE * SIMD]`` code array."""
    mh, mw = weights.shape
    nf, sf = mh // pe, mw // simd
    codes = w_type.encode(weights)
    return codes.reshape(nf, pe, sf, simd).transpose(0, 2, 1, 3).reshape(nf * sf, -1)


# A weight memory in logic of at most this many words is estimated by its distinct bit
# columns (below: counted from the weights).
FEW_WORDS = 16


def weight_columns(weights: np.ndarray, w_type: DataType, pe: int, simd: int,
                   slices: list[tuple[int, int]] | None = None) -> int | None:
    """The distinct bit columns of a shallow weight memory (``FEW_WORDS`` words or fewer)
    cut into ROMs per ``(lowest bit, width)`` of ``slices`` (``rom_slices``; default one
    ROM), summed over them; None for a deeper one. In
    LUTs, a column is a function of the address, and synthesis builds each distinct one
    once per ROM (identical LUTs and the identical registers after them are merged):
    TFC-w1a1 --fold auto's 784x64 layer at pe 64, simd 196 has 4 words of 12,544 bits but
    at most 16 distinct columns; counted as 12,544 its estimate had 25k flip-flops and
    12.5k LUT4s that Yosys did not build."""
    mh, mw = weights.shape
    if (mh // pe) * (mw // simd) > FEW_WORDS:
        return None
    codes = weight_codes(weights, w_type, pe, simd)
    width = shape_of(w_type).width
    bits = ((codes[:, :, None] >> np.arange(width)) & 1).reshape(len(codes), -1)
    return sum(int(np.unique(bits[:, lo:lo + part], axis=1).shape[1])
               for lo, part in slices or [(0, bits.shape[1])])


def estimate(*, mh: int, mw: int, pe: int, simd: int, w_type: DataType, in_type: DataType,
             acc_bits: int, thresholds: int, out_bits: int, dsps: int, pipeline: bool,
             dsp_blocks: bool, weights_block: bool, thresholds_block: bool,
             buffer_block: bool, family, weights_spram: bool = False,
             threshold_bits: int | None = None,
             weight_bank_depth: int | None = None,
             weight_columns: Callable[[list], int | None] | None = None) -> Features:
    """The MVU's resources as :class:`qloom.hw.estimate.Features`, from the parameters it
    is built from: ``thresholds`` fused thresholds per channel of ``out_bits``-bit
    outputs (0: none), ``dsps`` lanes on DSP blocks (``dsp_blocks``: ECP5 MULT18X18D
    blocks with their own registers), ``pipeline`` the register stages, and where each
    memory goes (the ``*_block`` flags, as ``RamStyle`` places them; ``weights_spram``:
    the weights in SPRAMs, whose address and select muxes are the logic they add;
    ``threshold_bits``: the thresholds' bits per lane, ``threshold_lane_bits``, when the
    values are known, else ``thresholds * acc_bits``; ``weight_columns``: the distinct
    bit columns of a shallow weight memory cut into given ROM slices (``rom_slices``),
    :func:`weight_columns` of the layer's weights)."""
    path = select_datapath(w_type, in_type)
    f = Features("mvu_" + {Datapath.XNOR_POPCOUNT: "xnor", Datapath.ADD_SUB: "addsub",
                           Datapath.MAC: "mac"}[path])
    f.add("lut", "control", 40)
    f.add("ff", "control", 30)
    # The fold counters and the weight address, each with its wrap compare.
    nf, sf = mh // pe, mw // simd
    counter_bits = sum((n - 1).bit_length() for n in (nf, sf, nf * sf))
    f.add("lut", "counters", 2 * counter_bits)
    f.add("ff", "counters", counter_bits)
    _datapath_estimate(f, path, pe=pe, simd=simd, w_type=w_type, in_type=in_type, dsps=dsps,
                       pipeline=pipeline, dsp_blocks=dsp_blocks)
    operands = pipeline and operand_register(path is Datapath.MAC, family)
    fetch = fetch_register(not (weights_block or weights_spram), operands)
    waits = bank_stages(nf * sf, weight_bank_depth)
    slices = rom_slices(pe, simd * w_type.bits, nf * sf, operand_copies(family), fetch)
    word_bits = _weight_word_bits(nf * sf, pe * simd * w_type.bits, family=family,
                                  weights_block=weights_block, weights_spram=weights_spram,
                                  weight_columns=weight_columns and weight_columns(slices))
    on_blocks = weights_block or weights_spram
    hop = _operands_estimate(f, pe=pe, simd=simd, in_type=in_type, nf=nf, sf=sf,
                             word_bits=word_bits, operands=operands, family=family,
                             on_blocks=on_blocks, buffer_block=buffer_block,
                             waits=fetch + waits)
    f.add("lut", "accumulator", pe * (acc_bits + 2))
    f.add("ff", "accumulator", pe * acc_bits * (2 if pipeline else 1)
          + tag_copy_registers(pe, acc_bits, chained=pipeline))
    stages = _tree_estimate(f, path, pe=pe, simd=simd, w_type=w_type, in_type=in_type,
                            dsps=dsps, pipeline=pipeline, dsp_blocks=dsp_blocks)
    _memories_estimate(f, mh=mh, mw=mw, pe=pe, simd=simd, w_type=w_type, in_type=in_type,
                       word_bits=word_bits, family=family, weights_block=weights_block,
                       weights_spram=weights_spram, buffer_block=buffer_block,
                       weight_bank_depth=weight_bank_depth)
    if thresholds:
        _thresholds_estimate(f, mh=mh, pe=pe, nf=nf, sf=sf, thresholds=thresholds,
                             acc_bits=acc_bits, out_bits=out_bits, family=family,
                             threshold_bits=threshold_bits, thresholds_block=thresholds_block,
                             fetch=pipeline and fetches_thresholds(family), on_blocks=on_blocks)
    # The registers on the way from the memories, and the output queue (in logic: a few
    # words read asynchronously) with its credit.
    if fetch:
        # The address's copies (one per ROM) and the inputs and tag that wait for it.
        f.add("ff", "fetch", simd * in_type.bits * (2 if nf > 1 else 1)
              + len(slices) * (nf * sf - 1).bit_length() + 4)
    # The inputs and the tag wait for the banks' registers.
    f.add("ff", "bank", waits * (simd * in_type.bits * (2 if nf > 1 else 1) + 4))
    depth = output_depth(latency(sf, register_operands=operands, fetch=fetch, bank_stages=waits,
                                 hop=hop,
                                 register_products=pipeline, dsp_blocks=dsp_blocks and dsps > 0,
                                 register_adder_tree=pipeline, tree_stages=stages,
                                 thresholds=thresholds and 1 + compare_register(thresholds,
                                                                                family)),
                         sf)
    f.add_memory("output", ram_cost(depth, pe * (out_bits if thresholds else acc_bits), family,
                                    block=False))
    f.add("ff", "credit", 2 * depth.bit_length())
    f.add("lut", "credit", 2 * depth.bit_length() + 4)
    return f


def _operands_estimate(f: Features, *, pe, simd, in_type, nf, sf, word_bits, operands, family,
                       on_blocks, buffer_block, waits) -> bool:
    """The operand registers (with ``operands``): the weights (a one-word memory's are
    constants: see memory_cost; twice with ``operand_hop``) and the input word's copies;
    with later neuron folds also the buffer's (chosen after them). Whether the input word
    takes two hops (``operand_hop``)."""
    hop = bool(operands and operand_copies(family)
               and operand_hop(operand_groups(pe, True, on_blocks), on_blocks))
    if operands:
        f.add("ff", "operands", (word_bits if nf * sf > 1 else 1) * (1 + hop)
              + operand_copy_registers(pe=pe, word_bits=simd * in_type.bits,
                                       buffered=nf > 1, buffer_copies=not buffer_block,
                                       copies=operand_copies(family),
                                       weights_block=on_blocks, waits=waits))
    return hop


def _thresholds_estimate(f: Features, *, mh, pe, nf, sf, thresholds, acc_bits, out_bits,
                         family, threshold_bits, thresholds_block, fetch, on_blocks):
    """The fused thresholds: each PE's compares (registered, ``compare_register``), their
    memory, and with ``fetch`` (``fetches_thresholds``) the fold counter's register per
    ROM (``threshold_groups``)."""
    f.add("lut", "compare", pe * (thresholds * comparator_luts(acc_bits)
                                  + adder_tree_luts(thresholds, 1)))
    f.add("ff", "compare", pe * out_bits * 2)
    if compare_register(thresholds, family):
        f.add("ff", "crossed", pe * thresholds)
    lane = thresholds * acc_bits if threshold_bits is None else threshold_bits
    f.add_memory("thresholds", memory_cost(nf, pe * lane, family, thresholds_block),
                 bits=mh * lane)
    if fetch and thresholds_fetch(True, nf, sf, thresholds_block):
        f.add("ff", "fetch", (nf - 1).bit_length() * operand_groups(
            pe, operand_copies(family), on_blocks))


def _datapath_estimate(f: Features, path: Datapath, *, pe, simd, w_type, in_type, dsps,
                       pipeline, dsp_blocks):
    """The lanes' products and the adder tree's logic, and the products' registers."""
    ib, wb = in_type.bits, w_type.bits
    if path is Datapath.XNOR_POPCOUNT:
        # An XNOR per lane, a table per four lanes (a LUT4 per count bit, see
        # nibble_counts), then the tree over the counts.
        nibbles = -(-simd // 4)
        f.add("lut", "xnor", pe * simd)
        f.add("lut", "nibbles", pe * nibbles * 3)
        f.add("lut", "tree", pe * adder_tree_luts(nibbles, 3))
        if pipeline:
            # The product register holds the XNORs.
            f.add("ff", "products", pe * simd)
    elif path is Datapath.ADD_SUB:
        # A select of the other operand or its negation: as wide as that operand. The
        # negation is a subtraction of its own (Yosys maps it to a carry chain before LUT
        # mapping, so it does not merge into the select's LUTs: a ternary weight on a
        # 2-bit input took 5.5 LUT4s per lane on the iCE40, not 3).
        select, other = (w_type, ib) if is_select_type(w_type) else (in_type, wb)
        f.add("lut", "select", pe * simd * (other + 1))
        if select != BINARY:
            f.add("lut", "negate", pe * simd * (other + 1))
        f.add("lut", "tree", pe * adder_tree_luts(simd, other + 1))
        if pipeline:
            f.add("ff", "products", pe * simd * (other + 1))
    else:
        # A shift-and-add multiplier per lane not on a DSP block.
        f.add("lut", "multiplier", (pe * simd - dsps) * lut_multiplier_luts(ib, wb))
        f.add("lut", "tree", pe * adder_tree_luts(simd, ib + wb))
        f.dsp = dsps
        if pipeline:
            # The products' register (``product_parts`` partial sums for a LUT
            # multiplier) and the adder tree's. With ECP5 DSP blocks (which hold their
            # lanes' product registers) every lane has two more stages, and a DSP lane's
            # operands take DSP_FEED + 1 registers on their way to the block. LUT and
            # DSP lanes apart: Yosys puts DSP lanes' registers into the blocks where it
            # can, so the two grow differently.
            in_blocks = dsps if dsp_blocks else 0
            product_stages = DSP_FEED + 3 if in_blocks else 1
            part_bits = partial_sum_bits(shape_of(w_type), shape_of(in_type),
                                         product_parts(wb, ib))
            f.add("ff", "products", (pe * simd - dsps) * part_bits * product_stages)
            f.add("ff", "dsp_products", dsps * (ib + wb) * (DSP_FEED + 1 if in_blocks else 1))
            if simd > 1:
                f.add("ff", "tree", pe * (ib + wb + (simd - 1).bit_length()))


def _weight_word_bits(depth: int, bits: int, *, family, weights_block, weights_spram,
                      weight_columns) -> int:
    """Bits of a ``depth`` x ``bits`` weight memory's word as built: one in logic, and the
    registers after it, are as wide as its distinct columns."""
    in_logic = not weights_spram and not (use_block_ram(depth, bits, family)
                                          if weights_block is None else weights_block)
    return weight_columns if in_logic and weight_columns is not None else bits


def _tree_estimate(f: Features, path: Datapath, *, pe, simd, w_type, in_type, dsps, pipeline,
                   dsp_blocks) -> int:
    """The registers inside the adder tree (a partial sum per group of terms per stage);
    returns its register stages."""
    parts = product_parts(w_type.bits, in_type.bits) if pipeline else 1
    terms = tree_terms(pe=pe, simd=simd, datapath=path, dsps=dsps, parts=parts)
    first, rest = levels = tree_levels(path, dsp_blocks and dsps > 0)
    groups = tree_groups(terms, levels) if pipeline else []
    term_bits = {Datapath.XNOR_POPCOUNT: 3, Datapath.MAC: in_type.bits + w_type.bits}.get(
        path, max(in_type.bits, w_type.bits) + 1)
    f.add("ff", "tree_stages", pe * sum(n * (term_bits + first + rest * k)
                                        for k, n in enumerate(groups)))
    return len(groups)


def _memories_estimate(f: Features, *, mh, mw, pe, simd, w_type, in_type, word_bits, family,
                       weights_block, weights_spram, buffer_block, weight_bank_depth):
    """The weight memory (block RAM, SPRAM or logic; ``word_bits`` wide, see
    ``_weight_word_bits``) and the input buffer that the later neuron folds read."""
    depth = (mh // pe) * (mw // simd)
    if weights_spram:
        f.spram = spram_blocks(pe * simd * w_type.bits)
        f.add("lut", "spram_mux", f.spram * (14 + 3))
    elif weights_block:
        # A memory per slice of the word, each (per group of banks) from an address
        # register of its own (``MVU.weight_address_copies``): counters like the address.
        f.add_memory("weights", sum((memory_cost(depth, width, family, True,
                                                 bank=weight_bank_depth)
                                     for _, width in word_slices(word_bits)), Resources()),
                     bits=mh * mw * w_type.bits)
        copies = weight_address_copies(word_bits, depth, weight_bank_depth)
        f.add("ff", "counters", copies * (depth - 1).bit_length())
        f.add("lut", "counters", copies * 2 * (depth - 1).bit_length())
    else:
        f.add_memory("weights", memory_cost(depth, word_bits, family, weights_block,
                                            bank=weight_bank_depth),
                     bits=mh * mw * w_type.bits)
    # The input vector is buffered for the later neuron folds (only when there are some).
    f.add("ff", "input", simd * in_type.bits)
    if mh // pe > 1:
        f.add_memory("buffer", ram_cost(mw // simd, simd * in_type.bits, family, buffer_block))
        if mw // simd > 1:
            f.add("ff", "input", (mw // simd - 1).bit_length())    # the write address copy
