"""The MVU's pipeline registers: which stages it has (:class:`MVURegisters`, the policy per
family in :meth:`MVURegisters.for_target`), the copies of the input word's operand register
and of the pipeline tag, and the latency and output queue that follow from them."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..mvu_datapath import Datapath
from ..skid import GROUP_BITS
from ..target import Family
from ..threshold import compare_register

__all__ = ["MVURegisters", "DSP_FEED", "OPERAND_PES", "operand_register", "operand_copies",
           "fetches_thresholds", "operand_groups", "pe_groups", "group_slices",
           "operand_spread", "operand_hop", "operand_copy_registers", "thresholds_fetch",
           "fetch_register", "latency", "output_depth", "accumulators_per_copy",
           "tag_copy_registers"]

# Register stages between the operand register and an ECP5 DSP block's own input registers.
DSP_FEED = 2

# PEs that read one register copy of the input word (``qloom.hw.mvu.datapath.operands``)
# when their weights are in logic; a PE whose weights are in block RAM gets a copy of its own.
OPERAND_PES = 4


def _optional_bool(name: str, value) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool or None, not {value!r}")
    return value


def _bool(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {value!r}")
    return value


@dataclass(frozen=True)
class MVURegisters:
    """The MVU's pipeline register stages.

    ``operands``, ``products`` and ``adder_tree`` are registers before and after the lane
    products and after the per-PE sum (None: operands and products registered for the MAC
    datapath only, the tree when ``SIMD > 1``); ``compares`` registers the fused
    thresholds' compares before their count (None: the rule of
    ``qloom.hw.threshold.compare_register`` without a family). ``threshold_read``
    registers the fused thresholds as they leave their block RAM when a vector takes two
    cycles or more (``SF >= 2``: the thresholds' address then holds for two cycles, so the
    register costs no latency); on the ECP5 it is the block's own output register
    (qloom.flows.toolchain.ecp5_outreg). Without it the block's clock-to-out (5.8 ns) began the
    compare's path into the output queue. ``operand_copies`` registers the input word once
    per ``OPERAND_PES`` PEs (per PE with the weights in block RAM) when the operands are
    registered (``operand_groups``); ``thresholds_fetch`` reads fused thresholds in logic
    from a register of their fold counter (``thresholds_fetch``, ``fetches_thresholds``).

    :meth:`resolved` fills the None fields for a unit; a resolved value is what
    :class:`qloom.hw.mvu.MVUConfig` holds.
    """

    operands: bool | None = None
    products: bool | None = None
    adder_tree: bool | None = None
    compares: bool | None = None
    threshold_read: bool = False
    operand_copies: bool = False
    thresholds_fetch: bool = False

    def __post_init__(self):
        _optional_bool("Register operands", self.operands)
        _optional_bool("Register products", self.products)
        _optional_bool("Register adder tree", self.adder_tree)
        _optional_bool("Compare register", self.compares)
        _bool("Register threshold read", self.threshold_read)
        _bool("Register operand copies", self.operand_copies)
        _bool("Register thresholds fetch", self.thresholds_fetch)

    @classmethod
    def for_target(cls, *, pipeline: bool, family, datapath: Datapath,
                   thresholds: int = 0) -> "MVURegisters":
        """The stages a build for ``family`` gives a unit of ``datapath`` with
        ``thresholds`` fused thresholds per channel (0: none): every stage when
        ``pipeline``, each as its rule says (``operand_register``, ``operand_copies``,
        ``fetches_thresholds``; the thresholds' read register only where it is the block
        RAM's own, on the ECP5; the compares by ``compare_register`` for the family)."""
        return cls(operands=pipeline and operand_register(datapath is Datapath.MAC, family),
                   products=pipeline, adder_tree=pipeline,
                   compares=compare_register(thresholds, family) if thresholds else None,
                   threshold_read=pipeline and family is Family.ECP5,
                   operand_copies=pipeline and operand_copies(family),
                   thresholds_fetch=pipeline and fetches_thresholds(family))

    def resolved(self, datapath: Datapath, simd: int, thresholds: int) -> "MVURegisters":
        """These stages with every None field decided for a unit of ``datapath`` over
        ``simd`` lanes with ``thresholds`` fused thresholds per channel (0: none)."""
        mac = datapath is Datapath.MAC
        return replace(
            self, operands=mac if self.operands is None else self.operands,
            products=mac if self.products is None else self.products,
            adder_tree=simd > 1 if self.adder_tree is None else self.adder_tree,
            compares=bool(thresholds) and (compare_register(thresholds)
                                           if self.compares is None else self.compares))


def operand_register(multipliers: bool, family) -> bool:
    """Whether a pipelined MVU registers its operands: always before multipliers; on the
    ECP5 for every datapath, because a block RAM's read data leaves 5.8 ns after the clock
    there (nextpnr, LFE5U-85F), so at 150 MHz (6.7 ns) nothing but a register fits behind
    it."""
    return multipliers or family is Family.ECP5


def operand_copies(family) -> bool:
    """Whether a pipelined MVU copies its input word's operand register per group of PEs:
    on the ECP5, whose designs span a die of 85k LUT4s; the iCE40UP5K's are small, and
    short of flip-flops."""
    return family is Family.ECP5


def fetches_thresholds(family) -> bool:
    """Whether a pipelined MVU on ``family`` may read fused thresholds in logic from a
    register of their fold counter: on the ECP5, where from the counter itself synthesis
    built the ROM from the counter's increment (the design's deepest logic). Not on the
    iCE40, where the read register sat farther from the compares and routed slower."""
    return family is Family.ECP5


def operand_groups(pe: int, copies: bool = True, weights_block: bool = False) -> int:
    """The register copies of a pipelined MVU's input word: one per ``OPERAND_PES`` PEs,
    or one per PE when the weights are in block RAM (``weights_block``), one without
    ``copies``.

    A PE with its weights in logic is placed beside its group's copy; a PE with its
    weights in block RAM sits by its block, and the blocks of a design that uses most of
    them are spread over the die, so a group's copy would be far from some of its PEs."""
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


def operand_spread(groups: int, waits: int) -> int:
    """The registers of the stream's word (and of its stream/buffer choice) that the
    operand copies read when there are more than ``OPERAND_PES`` copies and no stage waits
    between the stream and the copies (``waits``: fetch and bank stages): one per
    ``OPERAND_PES`` copies, taken from the stream beside the word's own register (so no
    cycle is added); else none, and every copy reads that one register (which then sits
    far from some copies)."""
    return -(-groups // OPERAND_PES) if groups > OPERAND_PES and not waits else 0


def operand_hop(groups: int, weights_block: bool) -> bool:
    """Whether the input word reaches its copies in two hops, a cycle more (the weights
    are registered once more to match): from its register to one register per
    ``OPERAND_PES`` copies, which the placer puts on the way, then to the copies. When the
    weights are in block RAM and there are more than ``OPERAND_PES`` copies: the PEs then
    sit by their weights' blocks over most of the die's height."""
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


def thresholds_fetch(fused: bool, nf: int, sf: int, thresholds_block: bool) -> bool:
    """Whether fused thresholds outside block RAM can be read from a register of their
    fold counter: when there is more than one fold to read and sums come two or more
    cycles apart (SF >= 2), so that the register equals the counter when it is read."""
    return fused and nf > 1 and sf >= 2 and not thresholds_block


def fetch_register(weights_in_logic: bool, register_operands: bool) -> bool:
    """Whether a pipelined MVU addresses its memories from a register of their own, a cycle
    after issue: when its weights are a ROM in logic. Otherwise the synthesis tools build
    that ROM from the fold counter's next value (ABC reuses the counter's carry-chain sums,
    and increment -> ROM -> register becomes the critical path)."""
    return register_operands and weights_in_logic


def latency(sf: int, *, register_operands: bool, register_products: bool, dsp_blocks: bool,
            register_adder_tree: bool, tree_stages: int, thresholds: int,
            fetch: bool = False, bank_stages: int = 0, hop: bool = False) -> int:
    """The MVU's latency (see ``qloom.hw.mvu``) from its register stages (``thresholds``:
    the fused thresholds' stages, 0 without; ``fetch``: ``fetch_register``;
    ``bank_stages``: cycles of weights in banks; ``hop``: ``operand_hop``)."""
    return (sf + 2 + fetch + bank_stages + hop + register_operands + register_products
            + (DSP_FEED + 2) * dsp_blocks
            + register_adder_tree + tree_stages + thresholds)


def output_depth(latency: int, sf: int) -> int:
    """Words of the output queue: one for every output that can be in flight between
    its last fold step's issue and its word being taken, while the credit register
    catches up, so that the unit never waits for credit when ``o`` is always ready (an
    output every ``sf`` cycles; at least 2)."""
    return max(2, (latency - sf + 1) // sf + 1)


def accumulators_per_copy(acc_bits: int) -> int:
    """Accumulators steered by one copy of the pipeline tag (``datapath.tag_copies``)."""
    return max(1, GROUP_BITS // acc_bits)


def tag_copy_registers(pe: int, acc_bits: int, chained: bool) -> int:
    """The flip-flops of the tag's copies (``datapath.tag_copies``): two per group of
    accumulators, four when ``chained`` (the tag's stage has a registered stage before
    it)."""
    per_copy = accumulators_per_copy(acc_bits)
    return 0 if pe <= per_copy else (4 if chained else 2) * -(-pe // per_copy)
