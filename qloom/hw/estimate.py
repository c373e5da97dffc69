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
memories and multipliers have (``bram_count`` packs a memory into each family's real
aspect ratios as ``qloom.hw.mem_pack`` does; ``bit_efficiency`` says how full the blocks
are).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from . import mem_pack
from .target import Family, Resources

__all__ = ["Family", "Resources", "Features", "calibrated", "coefficients", "bram_count",
           "block_bits", "bit_efficiency", "rom_luts", "memory_cost", "ram_cost",
           "use_block_ram", "has_lutram", "auto_ram_cost", "adder_tree_luts", "lut_multiplier_luts",
           "comparator_luts", "unelaborated", "CALIBRATION_FILE"]

CALIBRATION_FILE = Path(__file__).with_name("calibration.json")


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
    spram: int = 0    # iCE40UP5K SPRAMs (weights loaded from the flash), exact
    # Parameter memories in block RAM: name -> (stored bits, blocks), for bit efficiency.
    bram_memories: dict = field(default_factory=dict)

    def add(self, kind: str, name: str, count: float):
        table = getattr(self, kind)
        table[name] = table.get(name, 0) + count

    def add_memory(self, name: str, cost: Resources, bits: int | None = None):
        """A memory costed by ``memory_cost``/``ram_cost``: its logic as two features of
        its own (``<name>_lut``, ``<name>_ff``), its blocks exact. ``bits`` (the stored
        bits of a weight or threshold memory) counts it in the bit efficiency."""
        self.add("lut", f"{name}_lut", cost.lut)
        self.add("ff", f"{name}_ff", cost.ff)
        self.bram += cost.bram
        if bits is not None and cost.bram:
            self.bram_memories[name] = (bits, cost.bram)

    def add_part(self, prefix: str, part: "Features"):
        """A submodule's features (a unit's sliding window), named ``<prefix>_<name>``:
        measured with this template, so weighed by this template's coefficients."""
        for kind in ("lut", "ff"):
            for name, count in getattr(part, kind).items():
                self.add(kind, f"{prefix}_{name}", count)
        self.dsp += part.dsp
        self.bram += part.bram
        self.spram += part.spram
        self.bram_memories.update({f"{prefix}_{k}": v for k, v in part.bram_memories.items()})

    def to_json(self) -> dict:
        return {"template": self.template, "lut": self.lut, "ff": self.ff,
                "dsp": self.dsp, "bram": self.bram, "spram": self.spram,
                "bram_memories": self.bram_memories}


@functools.lru_cache(maxsize=None)
def coefficients() -> dict:
    """The fitted coefficients: {family: {template: {"lut"|"ff": {feature: weight}}}}."""
    if not CALIBRATION_FILE.is_file():
        return {}
    return json.loads(CALIBRATION_FILE.read_text()).get("families", {})


def calibrated(features: Features, family: Family) -> Resources:
    """The template's resources: every LUT and FF feature times its coefficient for
    ``family`` (1 where none was fitted), rounded once."""
    key = family.target.calibrated_as.value
    weights = coefficients().get(key, {}).get(features.template, {})

    def total(kind):
        table = weights.get(kind, {})
        return max(0, round(sum(table.get(name, 1.0) * count
                                for name, count in getattr(features, kind).items())))
    return Resources(lut=total("lut"), ff=total("ff"), dsp=features.dsp, bram=features.bram)


def bram_count(depth: int, width: int, family: Family) -> int:
    """Blocks of a ``depth`` x ``width`` memory packed into the family's aspect ratios
    (``qloom.hw.mem_pack.pack``: slices of different ratios side by side)."""
    return mem_pack.pack(depth, width, family).blocks


def block_bits(family: Family) -> int:
    """The bits one block RAM of ``family`` holds."""
    return mem_pack.BLOCK_BITS[family.target.calibrated_as.value]


def bit_efficiency(features, family: Family) -> dict | None:
    """The weight/threshold memories in block RAM of one engine (an iterable of
    :class:`Features`): ``{"bits", "blocks", "efficiency"}``, efficiency being the stored
    bits over the blocks' capacity; None when none is in block RAM."""
    bits = blocks = 0
    for f in features:
        for b, n in f.bram_memories.values():
            bits, blocks = bits + b, blocks + n
    if not blocks:
        return None
    return {"bits": bits, "blocks": blocks,
            "efficiency": round(mem_pack.bit_efficiency(bits, blocks, family), 4)}


def rom_luts(depth: int, width: int, family: Family) -> int:
    """A ROM in LUT4s: one LUT per 16 words per output bit, plus the read mux tree: a
    LUT4 per 2:1 mux on iCE40, about a third of that where slices have wide-function
    muxes (ECP5's PFUMX and L6MUX21)."""
    leaves = math.ceil(depth / 16)
    if family is Family.ICE40:
        return width * (2 * leaves - 1)
    return width * (leaves + (leaves - 1) // 3)


def has_lutram(family: Family) -> bool:
    """Whether the family has distributed RAM cells (``FamilyTarget.lut_ram``)."""
    return family.target.lut_ram


def _ram_logic(depth: int, width: int, family: Family) -> Resources:
    """A writable memory in logic with a registered read: on iCE40 (no LUT RAM) the
    words in flip-flops and a read mux, elsewhere 16x4 distributed RAM cells (four LUT4s
    each, ECP5's TRELLIS_DPR16X4) and a mux over the cells of a bit."""
    if not has_lutram(family):
        # A 2:1 mux per LUT4 for the read, and a write enable decoded per word.
        return Resources(lut=width * (depth - 1) + depth, ff=depth * width + width)
    cells = math.ceil(depth / 16) * math.ceil(width / 4)
    return Resources(lut=4 * cells + width * (math.ceil(depth / 16) - 1), ff=width)


# On the ECP5 a ROM in logic whose address drives more LUTs than this (its width times its
# 16-word leaves) goes to block RAM whatever the LUT count: the jet tagger's 384-bit,
# 32-word weight ROM spent 6.9 ns routing its address to 768 LUTs (86.8 MHz), where a
# block RAM with its output register (qloom.flows.toolchain.ecp5_outreg) has a short path.
ROM_ADDRESS_FANOUT = 256


def use_block_ram(depth: int, width: int, family: Family, writable: bool = False) -> bool:
    """Whether a memory of ``depth`` words of ``width`` bits belongs in block RAM: a
    read-only one from 17 words on when its LUTs would cost more than the blocks (or, on
    the ECP5, its address would fan out to more than ``ROM_ADDRESS_FANOUT`` LUTs), a
    writable one when its flip-flops and read mux would (a block priced at the family's
    ``FamilyTarget.luts_per_bram``)."""
    blocks = family.target.luts_per_bram * bram_count(depth, width, family)
    if writable:
        logic = _ram_logic(depth, width, family)
        return depth > 2 and logic.lut + logic.ff > blocks
    if depth <= 16:
        return False
    if family is Family.ECP5 and width * math.ceil(depth / 16) > ROM_ADDRESS_FANOUT:
        return True
    return rom_luts(depth, width, family) > blocks


def ram_cost(depth: int, width: int, family: Family, block: bool | None = None) -> Resources:
    """A writable buffer with one write and one registered read port."""
    if block is None:
        block = use_block_ram(depth, width, family, writable=True)
    if block:
        return Resources(bram=bram_count(depth, width, family))
    return _ram_logic(depth, width, family)


# Yosys' memory_libmap costs (techlibs ice40/brams.txt, lattice/brams_16kd.txt and
# lutrams_trellis.txt; a bit in soft logic costs 1), for memories without a ram_style.
_YOSYS_BRAM_COST = 64
_YOSYS_ECP5_BRAM_COST, _YOSYS_LUTRAM_COST = 128, 4
# memory_libmap also charges the read mux over a bit's cells and the write enable's demux
# over them, half a unit per input (its FACTOR_MUX, FACTOR_DEMUX).
_YOSYS_MUX_COST = 0.5


def auto_ram_cost(depth: int, width: int, family: Family) -> Resources:
    """A writable memory without a ``ram_style`` (a FIFO's, the sliding window's line
    buffer): placed where Yosys' cost rule puts it, the cheapest of soft logic, block RAM
    and (ECP5) distributed RAM cells with their read mux and write demux (measured with
    one write and one registered read port on the ECP5: 150x8, 80x16 in distributed RAM,
    168x8, 96x16, 336x4 in a DP16KD; the cells alone put all five in distributed RAM)."""
    blocks = bram_count(depth, width, family)
    bits = depth * width
    if family is Family.ICE40:
        block = _YOSYS_BRAM_COST * blocks < bits
    else:
        rows = math.ceil(depth / 16)
        cells = rows * math.ceil(width / 4)
        lutram = _YOSYS_LUTRAM_COST * cells
        if rows > 1:
            lutram += _YOSYS_MUX_COST * ((rows - 1) * width + rows)
        block = _YOSYS_ECP5_BRAM_COST * blocks < min(bits, lutram)
    return ram_cost(depth, width, family, block)


def fifo_block_ram(depth: int, width: int, family: Family) -> bool:
    """Whether qloom puts a FIFO's storage of ``depth`` words in block RAM (it says where,
    ``qloom.hw.fifo.fifo_storage``): where a block costs less, by Yosys' unit costs, than
    the bits in flip-flops and (ECP5) than the distributed RAM cells alone. Stricter than
    Yosys' own choice (``auto_ram_cost``, which also charges the cells' mux), so that the
    block RAM stays for the weights: LFC-w1a1's 512 x 2-bit FIFOs take 32 cells each."""
    blocks = bram_count(depth, width, family)
    bits = depth * width
    if family is Family.ICE40:
        return _YOSYS_BRAM_COST * blocks < bits
    cells = math.ceil(depth / 16) * math.ceil(width / 4)
    return _YOSYS_ECP5_BRAM_COST * blocks < min(bits, _YOSYS_LUTRAM_COST * cells)


def memory_cost(depth: int, width: int, family: Family, block: bool | None = None,
                bank: int | None = None) -> Resources:
    """A read-only weight/threshold memory with a registered output port; ``block`` forces
    block RAM (True) or logic (False), None chooses like ``use_block_ram``; ``bank``: in
    block RAM, cut into banks of that many words (``qloom.hw.weight_mem.BankedRom``:
    their registers in the blocks, the select registers and their copies, the banks'
    mux)."""
    if depth <= 1:
        # One word is a constant: Yosys keeps no read register but one flip-flop shared by
        # the word's ones, which leave their reset value 0 at the first read (measured on
        # both families: a 24-bit word read into a register left one flip-flop).
        return Resources(ff=1)
    if block is None:
        block = use_block_ram(depth, width, family)
    if block and bank is not None:
        from .weight_mem import BankedRom
        count = -(-depth // bank)
        groups = -(-count // BankedRom.GROUP) if count > BankedRom.GROUP else 0
        return Resources(bram=mem_pack.banked_blocks(depth, width, family, bank),
                         lut=width * -(-(count + groups - 1) // 2),
                         ff=width * groups + BankedRom.select_registers(count, width))
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


def lut_multiplier_luts(a_bits: int, b_bits: int) -> int:
    """LUT4s of one shift-and-add multiplier of ``a_bits`` by ``b_bits`` operands."""
    return 2 * a_bits * b_bits + 2 * (a_bits + b_bits)


def comparator_luts(bits: int) -> int:
    """One ``x >= constant-from-memory`` comparison on a carry chain."""
    return bits + 1


def unelaborated(unit):
    """``unit``, marked as built only to be asked for its cycles, types and sizes (the
    planner's question), so Amaranth does not warn that it was never elaborated."""
    unit._MustUse__silence = True
    return unit
