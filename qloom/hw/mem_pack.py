"""How a read-only memory is cut into block RAMs: the column packing of each family.

A block RAM has a few aspect ratios (ECP5 ``DP16KD``: 512 x 36 ... 16K x 1; iCE40
``SB_RAM40_4K``: 256 x 16 ... 2048 x 2) and delivers one word of its configured width per
read port and cycle. A memory of ``depth`` words of ``width`` bits read one word per cycle
is therefore a set of *column slices*: each slice is as deep as the memory, some number of
block columns wide in one aspect ratio, and costs ``ceil(depth / block depth)`` blocks per
block column. Packing chooses the mix of aspect ratios that covers the width with the
fewest blocks, e.g. 16K x 49 on ECP5 as 32 blocks of 512 x 36, 8 of 2048 x 9 and 4 of
4096 x 4 (44 blocks; one ratio alone needs at least 48).

This is the same choice Yosys' ``memory_libmap`` makes for a memory it maps to block RAM
(``bench/memory.py`` checks the two agree over a sweep of shapes), so the cost model can
count the blocks a design will use exactly, and say how full they are (``bit_efficiency``:
stored bits over the bits of the blocks holding them).

Bandwidth bounds what packing can do: every block gives at most 36 (ECP5) or 16 (iCE40)
bits per cycle, so a memory read ``width`` bits per cycle needs at least
``width / 36`` blocks however shallow it is. A shallow, wide memory (a weight memory at
a fast folding) is then necessarily emptier than its blocks; ``bit_efficiency`` says by
how much, and the planner weighs it like any other block.
"""

from __future__ import annotations

import enum
import functools
import math
from dataclasses import dataclass

from .target import Family

__all__ = ["BlockShape", "Slice", "Packing", "BLOCK_SHAPES", "BLOCK_BITS", "pack",
           "bit_efficiency", "bank_depth", "banked_blocks"]


@dataclass(frozen=True)
class BlockShape:
    """One aspect ratio of a block RAM's read port: ``depth`` words of ``width`` bits."""

    depth: int
    width: int

    def __str__(self):
        return f"{self.depth}x{self.width}"


def _family_key(family) -> str:
    """The packing rules of ``family`` (a qloom Family or its value): those of its
    ``FamilyTarget.calibrated_as`` ('generic' is counted like ECP5)."""
    value = family.value if isinstance(family, enum.Enum) else str(family)
    if value not in ("ice40", "ecp5", "generic"):
        raise ValueError(f"Family must be 'ice40', 'ecp5' or 'generic', not {family!r}")
    return Family(value).target.calibrated_as.value


# The read-port aspect ratios a read-only memory can use (Yosys' share/lattice/
# brams_16kd.txt: DP16KD widths 1..18 per port and PDPW16KD's 36-bit read port;
# share/ice40/brams.txt: SB_RAM40_4K read widths 2..16).
BLOCK_SHAPES = {
    "ecp5": (BlockShape(512, 36), BlockShape(1024, 18), BlockShape(2048, 9),
             BlockShape(4096, 4), BlockShape(8192, 2), BlockShape(16384, 1)),
    "ice40": (BlockShape(256, 16), BlockShape(512, 8), BlockShape(1024, 4),
              BlockShape(2048, 2),
              # No native 1-bit mode, but Yosys folds an address bit into the 2-bit one
              # (two words per entry and a mux): 4096 x 3 maps to 3 blocks, not 4.
              BlockShape(4096, 1)),
}
# The bits one block holds at its widest (parity bits included on ECP5).
BLOCK_BITS = {"ecp5": 18432, "ice40": 4096}


@dataclass(frozen=True)
class Slice:
    """``columns`` block columns of ``shape``, each ``stack`` blocks deep."""

    shape: BlockShape
    columns: int
    stack: int

    @property
    def width(self) -> int:
        return self.columns * self.shape.width

    @property
    def blocks(self) -> int:
        return self.columns * self.stack


@dataclass(frozen=True)
class Packing:
    """A ``depth`` x ``width`` memory cut into slices (least significant bits first)."""

    depth: int
    width: int
    family: str
    slices: tuple

    @property
    def blocks(self) -> int:
        return sum(s.blocks for s in self.slices)

    @property
    def efficiency(self) -> float:
        return bit_efficiency(self.depth * self.width, self.blocks, self.family)

    def __str__(self):
        return " + ".join(f"{s.blocks} x {s.shape}" for s in self.slices)


def bit_efficiency(bits: int, blocks: int, family) -> float:
    """Stored bits over the capacity of the ``blocks`` block RAMs holding them (0 when
    there are no blocks)."""
    return bits / (blocks * BLOCK_BITS[_family_key(family)]) if blocks else 0.0


def pack(depth: int, width: int, family) -> Packing:
    """The fewest blocks holding ``depth`` words of ``width`` bits, read a word a cycle."""
    for name, value in (("Depth", depth), ("Width", width)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, not {value!r}")
    key = _family_key(family)
    return Packing(depth, width, key, _pack(depth, width, key))


@functools.lru_cache(maxsize=4096)
def _pack(depth: int, width: int, key: str) -> tuple:
    shapes = BLOCK_SHAPES[key]
    cost = [math.ceil(depth / s.depth) for s in shapes]
    # A minimum-cost cover of the width by block columns (an unbounded knapsack). An
    # optimal cover uses fewer than ``best.width`` columns of the other ratios (among
    # more, some subset's widths would sum to a multiple of best.width, which best's
    # columns cover at no more cost), so columns of the cheapest ratio per bit cover all
    # but the last ``best.width * max width`` bits and dynamic programming the rest.
    best = min(range(len(shapes)), key=lambda i: (cost[i] / shapes[i].width, -shapes[i].width))
    widest = max(s.width for s in shapes)
    bulk = max(0, math.ceil((width - shapes[best].width * widest) / shapes[best].width))
    rest = width - bulk * shapes[best].width
    # table[w] = (blocks, columns per shape) covering at least w bits.
    table = [(0, (0,) * len(shapes))]
    for w in range(1, max(0, rest) + 1):
        options = []
        for i, s in enumerate(shapes):
            blocks, cols = table[max(0, w - s.width)]
            options.append((blocks + cost[i], -s.width, i, cols))
        blocks, _, i, cols = min(options)
        table.append((blocks, cols[:i] + (cols[i] + 1,) + cols[i + 1:]))
    columns = list(table[max(0, rest)][1])
    columns[best] += bulk
    return tuple(Slice(s, n, cost[i]) for i, (s, n) in enumerate(zip(shapes, columns)) if n)


def bank_depth(depth: int, width: int, family) -> int | None:
    """The depth of the banks an ECP5 read-only block RAM memory is cut into when Yosys
    would stack blocks in depth, else None. Stacked blocks' outputs meet in a LUT mux
    before the read register, which then cannot move into the blocks (``OUTREG``,
    qloom.flows.toolchain.ecp5_outreg): 5.83 ns clock-to-out and three LUT levels, 106.8 MHz for
    TFC-w1a1's 3,584-word first layer at 150. Banks one block deep keep a read register
    of their own each, and their mux goes after it (a cycle of latency). The bank depth is
    a block depth at which Yosys packs a bank without stacking, the one taking the fewest
    blocks (the deeper on a tie: fewer banks to mux); no banks when every such depth costs
    more than ``BANK_EXTRA`` of the memory's blocks (16K x 49: 44 blocks stacked, 64 in
    banks). Only the ECP5: an iCE40 block has no output register."""
    value = family.value if isinstance(family, enum.Enum) else str(family)
    if value != "ecp5":
        return None
    whole = pack(depth, width, value)
    if all(s.stack == 1 for s in whole.slices):
        return None
    best = None
    for shape in BLOCK_SHAPES["ecp5"]:
        if shape.depth >= depth or any(s.stack > 1 for s in pack(shape.depth, width,
                                                                  "ecp5").slices):
            continue
        cost = (banked_blocks(depth, width, "ecp5", shape.depth), -shape.depth)
        if best is None or cost < best[0]:
            best = (cost, shape.depth)
    if best is None or best[0][0] > whole.blocks * (1 + BANK_EXTRA):
        return None
    return best[1]


# Banks may take this share more blocks than the stacked memory.
BANK_EXTRA = 0.125


def banked_blocks(depth: int, width: int, family, bank: int) -> int:
    """Blocks of a memory cut into banks of ``bank`` words (the last one shorter)."""
    full, rest = divmod(depth, bank)
    return full * pack(bank, width, family).blocks + (pack(rest, width, family).blocks
                                                      if rest else 0)
