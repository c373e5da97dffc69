"""The resource cost model: LUT4, flip-flops, DSP blocks and block RAMs per engine.

Every formula here is a first-order model of what the templates in ``qloom.hw`` instantiate,
fitted against Yosys (``stat -json``) on iCE40 and ECP5; ``bench/`` and ``qloom build``
compare its numbers with real synthesis on every build and report the error.
"""

from __future__ import annotations

import enum
import math

from ..boards.board import Resources

__all__ = ["Family", "Resources", "memory_cost", "ram_cost", "use_block_ram", "adder_tree_luts",
           "comparator_luts"]


class Family(enum.Enum):
    ICE40 = "ice40"
    ECP5 = "ecp5"
    GENERIC = "generic"   # counted like ECP5 (LUT4 fabric with 18x18 multipliers)


# Block RAM aspect ratios (depth, width) per family.
_BRAM_SHAPES = {
    Family.ICE40: [(256, 16), (512, 8), (1024, 4), (2048, 2)],
    Family.ECP5: [(512, 36), (1024, 18), (2048, 9), (4096, 4), (8192, 2), (16384, 1)],
}
_BRAM_SHAPES[Family.GENERIC] = _BRAM_SHAPES[Family.ECP5]
# One block RAM is worth this many LUT4s: a ROM goes to block RAM only when its LUT
# implementation would cost more than that per block (roughly the device's LUT/BRAM ratio
# over two, so that neither runs out first).
_LUTS_PER_BRAM = {Family.ICE40: 90, Family.ECP5: 200, Family.GENERIC: 200}


def _bram_count(depth: int, width: int, family: Family) -> int:
    return min(math.ceil(depth / d) * math.ceil(width / w) for d, w in _BRAM_SHAPES[family])


def _rom_luts(depth: int, width: int) -> int:
    """A ROM in LUT4s: one LUT per 16 words per output bit, plus the read mux tree."""
    leaves = math.ceil(depth / 16)
    return width * (leaves + (leaves - 1) // 3)


def _ram_logic(depth: int, width: int) -> Resources:
    """A writable memory in flip-flops (iCE40 has no LUT RAM): the words plus a read mux."""
    return Resources(lut=width * ((depth - 1 + 2) // 3), ff=depth * width + width)


def use_block_ram(depth: int, width: int, family: Family, writable: bool = False) -> bool:
    """Whether a memory of ``depth`` words of ``width`` bits belongs in block RAM: a
    read-only one from 17 words on when its LUTs would cost more than the blocks, a
    writable one when its flip-flops and read mux would."""
    blocks = _LUTS_PER_BRAM[family] * _bram_count(depth, width, family)
    if writable:
        logic = _ram_logic(depth, width)
        return depth > 2 and logic.lut + logic.ff > blocks
    if depth <= 16:
        return False
    return _rom_luts(depth, width) > blocks


def ram_cost(depth: int, width: int, family: Family, block: bool | None = None) -> Resources:
    """A writable buffer with one write and one registered read port."""
    if block is None:
        block = use_block_ram(depth, width, family, writable=True)
    if block:
        return Resources(bram=_bram_count(depth, width, family))
    return _ram_logic(depth, width)


def memory_cost(depth: int, width: int, family: Family, block: bool | None = None) -> Resources:
    """A read-only weight/threshold memory with a registered output port; ``block`` forces
    block RAM (True) or logic (False), None chooses like ``use_block_ram``."""
    if depth <= 1:
        return Resources(ff=width)
    if block is None:
        block = use_block_ram(depth, width, family)
    if block:
        return Resources(bram=_bram_count(depth, width, family))
    return Resources(lut=_rom_luts(depth, width), ff=width)


def adder_tree_luts(n: int, bits: int) -> int:
    """LUT4s of an adder tree summing ``n`` operands of ``bits`` bits (carry chains: about
    one LUT per result bit per adder)."""
    luts, width = 0, bits
    while n > 1:
        pairs = n // 2
        width += 1
        luts += pairs * width
        n -= pairs
    return luts


def comparator_luts(bits: int) -> int:
    """One ``x >= constant-from-memory`` comparison on a carry chain."""
    return bits + 1
