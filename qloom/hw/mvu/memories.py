"""Where the MVU's memories go (:class:`MVUMemories`): the weights, the fused thresholds and
the input vector buffer, each a :class:`~qloom.hw.weight_mem.RamStyle`, and the rule that
places them for a device family (:meth:`MVUMemories.place`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..estimate import bram_count, has_lutram, use_block_ram
from ..mem_pack import bank_depth
from ..spram import SPRAM_DEPTH, spram_blocks
from ..target import Family
from ..weight_mem import RamStyle

__all__ = ["MVUMemories", "SPRAM_FROM_BRAMS", "weights_in_spram"]

# A weight memory goes to SPRAM (when the device has them) from this many block RAMs on:
# a quarter of the UP5K's 30, so that the memories that would exhaust block RAM go there
# and small ones stay in block RAM, which needs no load from the flash.
SPRAM_FROM_BRAMS = 8


@dataclass(frozen=True)
class MVUMemories:
    """Where each memory of one MVU goes: the weights (``weights``; in SPRAM on the
    iCE40UP5K, written through the unit's ``load`` port at start-up), the fused
    thresholds (``thresholds``) and the input vector buffer that later neuron folds read
    (``buffer``); block RAM weights deeper than one block in banks of ``bank_depth`` words
    (``qloom.hw.weight_mem.BankedRom``, the rule in ``qloom.hw.mem_pack.bank_depth``)."""

    weights: RamStyle = RamStyle.AUTO
    thresholds: RamStyle = RamStyle.AUTO
    buffer: RamStyle = RamStyle.AUTO
    bank_depth: int | None = None

    def __post_init__(self):
        for style in (self.weights, self.thresholds, self.buffer):
            if not isinstance(style, RamStyle):
                raise TypeError(f"RAM style must be a RamStyle, not {style!r}")
        if RamStyle.SPRAM in (self.thresholds, self.buffer):
            raise ValueError("Only the weights can be in SPRAM")

    @classmethod
    def place(cls, *, words: int, width: int, buffer_words: int, buffer_width: int,
              threshold_words: int, threshold_width: int, family: Family, sprams: int = 0,
              weights: str = "") -> "MVUMemories":
        """Where the memories of a unit go on ``family``: ``words`` x ``width`` bits of
        weights, a buffer of ``buffer_words`` x ``buffer_width`` bits, thresholds of
        ``threshold_words`` x ``threshold_width`` bits (0 wide: none). By the rules of
        ``use_block_ram`` and ``weights_in_spram`` (``sprams``: the SPRAMs the weights may
        use), the weights where ``weights`` ("block" or "logic") says when it is given;
        the writable buffer in block RAM, distributed RAM cells where the family has them,
        or flip-flops (as ``qloom.hw.estimate.ram_cost`` counts it)."""
        spram = not weights and weights_in_spram(words, width, family, sprams)
        block = weights == "block" if weights else use_block_ram(words, width, family)
        return cls(
            weights=(RamStyle.SPRAM if spram else
                     RamStyle.BLOCK if block else RamStyle.DISTRIBUTED),
            thresholds=(RamStyle.BLOCK if threshold_width and use_block_ram(
                threshold_words, threshold_width, family) else RamStyle.DISTRIBUTED),
            buffer=(RamStyle.BLOCK if use_block_ram(buffer_words, buffer_width, family,
                                                    writable=True) else
                    RamStyle.LUTRAM if has_lutram(family) else RamStyle.DISTRIBUTED),
            bank_depth=bank_depth(words, width, family) if block and not spram else None)

    @property
    def weights_block(self) -> bool:
        """Whether the weights are in block RAM or SPRAM (each PE's operand copy then its
        own, ``operand_groups``)."""
        return self.weights in (RamStyle.BLOCK, RamStyle.SPRAM)

    @property
    def buffer_copies(self) -> bool:
        """Whether the input buffer's word gets a register per group of PEs: when the
        buffer is in logic or distributed RAM, whose read data no block holds in a
        register of its own."""
        return self.buffer in (RamStyle.DISTRIBUTED, RamStyle.LUTRAM)


def weights_in_spram(words: int, width: int, family: Family, sprams: int) -> bool:
    """Whether a weight memory of ``words`` x ``width`` bits goes to SPRAM: the device has
    ``sprams`` (iCE40UP5K), the memory fits side by side SPRAMs (at most 16K words, at
    most ``sprams`` of them) and would take ``SPRAM_FROM_BRAMS`` block RAMs or more."""
    return (family is Family.ICE40 and sprams > 0 and words <= SPRAM_DEPTH
            and spram_blocks(width) <= sprams
            and bram_count(words, width, family) >= SPRAM_FROM_BRAMS)


def block(style: RamStyle) -> bool | None:
    """A memory style as the estimate's memory costs take it: block RAM (True), logic
    (False) or chosen by ``use_block_ram`` (None, ``RamStyle.AUTO``)."""
    return None if style is RamStyle.AUTO else style is RamStyle.BLOCK
