"""Resource estimates of the templates: structural counts, calibrated per family.

Each template estimates itself from the parameters it is built from (``estimate`` next to
the template's class): it counts what it instantiates as *features* (XNOR lanes, adder
bits, register bits, ROM LUTs, ...) and hands them to ``calibrated``, which weighs every
feature by a coefficient fitted against Yosys for the template and the family
(``calibration.json`` beside this file, written by ``bench/calibrate.py`` from the
measurements of ``bench/estimates.py``; the file records the commit and tool versions it
was measured with). A feature without a coefficient counts once: the uncalibrated model
is the structural count itself.

DSP blocks and block RAMs are not fitted: they are counted exactly from the shapes the
memories and multipliers have (``bram_count`` uses each family's real aspect ratios).
"""

from __future__ import annotations

import enum
import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..boards.board import Resources

__all__ = ["Family", "Resources", "Features", "calibrated", "coefficients", "bram_count",
           "rom_luts", "memory_cost", "ram_cost", "use_block_ram", "adder_tree_luts",
           "comparator_luts", "CALIBRATION_FILE"]

CALIBRATION_FILE = Path(__file__).with_name("calibration.json")


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


@dataclass
class Features:
    """What one template instance is made of, before calibration: ``lut`` and ``ff``
    map feature names to counts (each weighed by its coefficient), ``dsp`` and ``bram``
    are exact."""

    template: str
    lut: dict = field(default_factory=dict)
    ff: dict = field(default_factory=dict)
    dsp: int = 0
    bram: int = 0

    def add(self, kind: str, name: str, count: float):
        table = getattr(self, kind)
        table[name] = table.get(name, 0) + count

    def add_memory(self, name: str, cost: Resources):
        """A memory costed by ``memory_cost``/``ram_cost``: its logic as two features of
        its own (``<name>_lut``, ``<name>_ff``), its blocks exact."""
        self.add("lut", f"{name}_lut", cost.lut)
        self.add("ff", f"{name}_ff", cost.ff)
        self.bram += cost.bram

    def to_json(self) -> dict:
        return {"template": self.template, "lut": self.lut, "ff": self.ff,
                "dsp": self.dsp, "bram": self.bram}


@functools.lru_cache(maxsize=None)
def coefficients() -> dict:
    """The fitted coefficients: {family: {template: {"lut"|"ff": {feature: weight}}}}."""
    if not CALIBRATION_FILE.is_file():
        return {}
    return json.loads(CALIBRATION_FILE.read_text()).get("families", {})


def calibrated(features: Features, family: Family) -> Resources:
    """The template's resources: every LUT and FF feature times its coefficient for
    ``family`` (1 where none was fitted), rounded once."""
    key = Family.ECP5.value if family is Family.GENERIC else family.value
    weights = coefficients().get(key, {}).get(features.template, {})

    def total(kind):
        table = weights.get(kind, {})
        return max(0, round(sum(table.get(name, 1.0) * count
                                for name, count in getattr(features, kind).items())))
    return Resources(lut=total("lut"), ff=total("ff"), dsp=features.dsp, bram=features.bram)


def bram_count(depth: int, width: int, family: Family) -> int:
    """Blocks of a ``depth`` x ``width`` memory in the family's best aspect ratio."""
    return min(math.ceil(depth / d) * math.ceil(width / w) for d, w in _BRAM_SHAPES[family])


def rom_luts(depth: int, width: int, family: Family) -> int:
    """A ROM in LUT4s: one LUT per 16 words per output bit, plus the read mux tree: a
    LUT4 per 2:1 mux on iCE40, about a third of that where slices have wide-function
    muxes (ECP5's PFUMX and L6MUX21)."""
    leaves = math.ceil(depth / 16)
    if family is Family.ICE40:
        return width * (2 * leaves - 1)
    return width * (leaves + (leaves - 1) // 3)


def _ram_logic(depth: int, width: int, family: Family) -> Resources:
    """A writable memory in logic with a registered read: on iCE40 (no LUT RAM) the
    words in flip-flops and a read mux, elsewhere 16x4 distributed RAM cells (four LUT4s
    each, ECP5's TRELLIS_DPR16X4) and a mux over the cells of a bit."""
    if family is Family.ICE40:
        # A 2:1 mux per LUT4 for the read, and a write enable decoded per word.
        return Resources(lut=width * (depth - 1) + depth, ff=depth * width + width)
    cells = math.ceil(depth / 16) * math.ceil(width / 4)
    return Resources(lut=4 * cells + width * (math.ceil(depth / 16) - 1), ff=width)


def use_block_ram(depth: int, width: int, family: Family, writable: bool = False) -> bool:
    """Whether a memory of ``depth`` words of ``width`` bits belongs in block RAM: a
    read-only one from 17 words on when its LUTs would cost more than the blocks, a
    writable one when its flip-flops and read mux would."""
    blocks = _LUTS_PER_BRAM[family] * bram_count(depth, width, family)
    if writable:
        logic = _ram_logic(depth, width, family)
        return depth > 2 and logic.lut + logic.ff > blocks
    if depth <= 16:
        return False
    return rom_luts(depth, width, family) > blocks


def ram_cost(depth: int, width: int, family: Family, block: bool | None = None) -> Resources:
    """A writable buffer with one write and one registered read port."""
    if block is None:
        block = use_block_ram(depth, width, family, writable=True)
    if block:
        return Resources(bram=bram_count(depth, width, family))
    return _ram_logic(depth, width, family)


def memory_cost(depth: int, width: int, family: Family, block: bool | None = None) -> Resources:
    """A read-only weight/threshold memory with a registered output port; ``block`` forces
    block RAM (True) or logic (False), None chooses like ``use_block_ram``."""
    if depth <= 1:
        return Resources(ff=width)
    if block is None:
        block = use_block_ram(depth, width, family)
    if block:
        return Resources(bram=bram_count(depth, width, family))
    return Resources(lut=rom_luts(depth, width, family), ff=width)


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
