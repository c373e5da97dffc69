"""Read-only parameter memories (weights, thresholds) and where synthesis should put them.

A layer's constants live in an ``amaranth.lib.memory.Memory`` with one synchronous read
port, so Yosys can map it to block RAM when it is large and to LUTs when it is small.
``RamStyle`` forces either choice through the ``ram_style`` attribute, which Yosys 0.70's
``memory_libmap`` honours on both iCE40 and ECP5:

- ``"block"`` maps to ``SB_RAM40_4K`` (iCE40) or ``DP16KD`` (ECP5);
- ``"logic"`` maps to LUTs and flip-flops. Yosys' ``"distributed"`` style is *not* used: it
  has no mapping on iCE40 at all, and on ECP5 it rejects read-only memories
  ("no valid mapping found for memory").
- ``SPRAM`` is not a Yosys style: the matrix unit builds the memory from the UP5K's
  ``SB_SPRAM256KA`` blocks itself (``qloom.hw.spram.SpramRom``), loaded from the flash at
  start-up, since the bitstream cannot initialize them (``rom`` refuses it).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from amaranth.hdl import (Cat, Elaboratable, Module, Mux, Shape, ShapeCastable, Signal, Value,
                          unsigned)
from amaranth.lib import data
from amaranth.lib.memory import Memory

from .skid import flag_groups, flag_slices

__all__ = ["RamStyle", "pack_words", "pack_layout", "rom", "read_register", "delayed",
           "BankedRom", "banks", "banked_latency", "word_slices", "address_groups", "SLICE_BITS",
           "kept_register", "bit_slice"]


class RamStyle(enum.Enum):
    """Where a parameter memory should be implemented."""

    AUTO = "auto"                # let Yosys choose from the memory's size
    BLOCK = "block"              # block RAM (EBR)
    DISTRIBUTED = "distributed"  # LUTs (logic), never block RAM
    SPRAM = "spram"              # iCE40UP5K SPRAM, loaded from the flash (qloom.hw.spram)
    LUTRAM = "lutram"            # distributed RAM cells where the family has them (ECP5)

    @property
    def attrs(self) -> dict[str, str]:
        """The Yosys attributes requesting this style."""
        return {RamStyle.AUTO: {},
                RamStyle.BLOCK: {"ram_style": "block"},
                RamStyle.SPRAM: {},
                RamStyle.DISTRIBUTED: {"ram_style": "logic"},
                RamStyle.LUTRAM: {"ram_style": "distributed"}}[self]


def pack_words(words: Sequence[Sequence[int]], width: int) -> list[int]:
    """Pack each word's fields (least significant first, ``width`` bits each, two's
    complement for negative fields) into one unsigned integer."""
    mask = (1 << width) - 1
    packed = []
    for fields in words:
        value = 0
        for k, field in enumerate(fields):
            value |= (int(field) & mask) << (k * width)
        packed.append(value)
    return packed


def pack_layout(layout: data.Layout, words: Sequence) -> list[int]:
    """Pack each word (any value ``layout.const`` accepts) into one unsigned integer.
    General but slower than :func:`pack_words`; meant for small tables."""
    return [layout.const(word).as_value().value for word in words]


def rom(shape: ShapeCastable | Shape, init: list[int],
        ram_style: RamStyle = RamStyle.AUTO) -> Memory:
    """A read-only memory of ``len(init)`` words of ``shape``, given as packed unsigned
    integers (see :func:`pack_words`, :func:`pack_layout`). Its ports carry plain unsigned
    bits: view them with ``layout(port.data)`` (or ``.as_signed()``)."""
    if not isinstance(ram_style, RamStyle):
        raise TypeError(f"RAM style must be a RamStyle, not {ram_style!r}")
    if ram_style is RamStyle.SPRAM:
        raise ValueError("An SPRAM cannot be initialized by the bitstream: build the memory "
                         "with qloom.hw.spram.SpramRom and load it")
    return Memory(shape=unsigned(Shape.cast(shape).width), depth=len(init), init=init,
                  attrs=ram_style.attrs)


def read_register(m, data, enable, name: str, shape=None) -> Signal:
    """A register taking ``data`` (a memory read port's, or any data a valid bit travels
    beside) while ``enable``: without reset, so that on the ECP5 a block RAM can hold it
    itself (qloom.flows.toolchain.ecp5_outreg) and the reset net reaches control bits only, and
    written as one whole-signal assignment (a register without reset under ``If`` is an
    ``always @*`` block that Icarus -g2012 never runs at time 0, see qloom.sim.rtl_check).
    ``shape``: the register's, if not ``data``'s."""
    reg = (Signal(shape, name=name, reset_less=True) if shape is not None
           else Signal.like(data, name=name, reset_less=True))
    m.d.sync += reg.eq(Mux(enable, data, reg))
    return reg


def kept_register(m, value, name: str, enable=None) -> Signal:
    """A register of ``value`` (taking it while ``enable``, if given), without reset, that
    synthesis keeps apart from its equal copies ("keep": Yosys would merge them): a copy
    for logic that sits far from the other copies' readers."""
    reg = Signal.like(value, name=name, reset_less=True, attrs={"keep": 1})
    m.d.sync += Value.cast(reg).eq(value if enable is None else Mux(enable, value, reg))
    return reg


def delayed(m, value, cycles: int, name: str, init: int = 0) -> Value:
    """``value`` ``cycles`` cycles later: through that many registers in a row, named
    ``{name}_d1``, ``{name}_d2``, ... (``value`` itself for 0)."""
    for step in range(cycles):
        reg = Signal(Value.cast(value).shape(), name=f"{name}_d{step + 1}", init=init)
        m.d.sync += reg.eq(value)
        value = reg
    return value


def bit_slice(words: list[int], lo: int, width: int) -> list[int]:
    """Bits ``lo`` to ``lo + width - 1`` of each packed word."""
    return [(word >> lo) & ((1 << width) - 1) for word in words]


# Bits of a block RAM word per slice with an address register of its own: a multiple of
# every block width of both families (ECP5 36/18/9/4/2/1, iCE40 16/8/4/2), so the slices
# take the blocks the whole word would. One register addressing every block of a wide
# word reaches block RAM rows all over the die (CNV-w1a1's Conv_3: 57 blocks).
SLICE_BITS = 288


def word_slices(width: int) -> list[tuple[int, int]]:
    """``(lowest bit, width)`` of each slice of a ``width``-bit block RAM word."""
    return [(lo, min(SLICE_BITS, width - lo)) for lo in range(0, width, SLICE_BITS)]


def address_groups(depth: int, bank: int | None) -> int:
    """Address inputs of a block RAM memory of ``depth`` words: one, or in banks of
    ``bank`` words one per group of ``BankedRom.GROUP`` banks when there are more."""
    count = 1 if bank is None else banks(depth, bank)
    return -(-count // BankedRom.GROUP) if count > BankedRom.GROUP else 1


class BankedRom(Elaboratable):
    """A read-only block RAM memory cut into banks of ``bank`` words
    (``qloom.hw.mem_pack.bank_depth``), each read into a register of its own (which the
    ECP5 block holds, ``OUTREG``), then chosen: ``data`` is ``init[addr]`` ``latency``
    cycles after ``addr`` with ``en`` high (a memory's read port gives it after one). More
    than ``GROUP`` banks are chosen in two steps with a register between (a cycle more):
    18 banks' 64-bit words chosen at once were 4 LUT levels behind the select register,
    131 MHz on the ECP5-85F. It has the read port's ``addr``, ``en`` and ``data`` and is
    its own port (``read_port()``). ``addrs``: ``addr`` and, with ``split_address``, an
    address input per further group of banks (``address_groups``), each given the same
    address by a register of its own."""

    GROUP = 4

    def __init__(self, width: int, init: list[int], bank: int, split_address: bool = False):
        if not isinstance(bank, int) or bank < 1 or bank & (bank - 1) or bank >= len(init):
            raise ValueError(f"Bank depth must be a power of two below the depth "
                             f"({len(init)}), not {bank!r}")
        self._width, self._init, self._bank = width, list(init), bank
        self.addr = Signal(range(len(init)))
        groups = address_groups(len(init), bank) if split_address else 1
        self.addrs = [self.addr] + [Signal(range(len(init)), name=f"addr{g}")
                                    for g in range(1, groups)]
        self.en = Signal(init=1)
        self.data = Signal(width)

    @property
    def banks(self) -> int:
        return banks(len(self._init), self._bank)

    @property
    def latency(self) -> int:
        return banked_latency(self.banks)

    def read_port(self):
        return self

    def elaborate(self, platform):
        m = Module()
        low = self._bank.bit_length() - 1
        words = []
        for k in range(self.banks):
            part = self._init[k * self._bank:(k + 1) * self._bank]
            memory = rom(unsigned(self._width), part, RamStyle.BLOCK)
            m.submodules[f"bank{k}"] = memory
            port = memory.read_port()
            addr = self.addrs[min(k // self.GROUP, len(self.addrs) - 1)]
            m.d.comb += [port.addr.eq(addr[:low]), port.en.eq(self.en)]
            words.append(read_register(m, port.data, self.en, f"bank{k}_data"))
        # Which bank, as old as the data it chooses from (an address, then a read, ago).
        # The register that chooses is copied per group of banks and per GROUP_BITS bits of
        # the word, kept apart ("keep"): the banks sit in block RAM rows all over the die,
        # and one select register steering every bank's mux (CNV-w1a1's Conv_5: one bit
        # read by 832 LUTs) was a route across it.
        slices = flag_slices(self._width)
        select = read_register(m, self.addr[low:], self.en, "bank_select0")

        def chosen(options, select, name):
            """``options[select]``, bit slice by bit slice, each by its own copy of
            ``select`` a cycle later."""
            parts = []
            for k, bits in enumerate(slices):
                copy = kept_register(m, select, f"{name}_{k}", self.en)
                parts.append(Cat(*(o[bits] for o in options)).word_select(
                    copy, bits.stop - bits.start))
            return Cat(*parts)

        if self.banks > self.GROUP:
            # Per group a part-select of its words, registered; then the group, by the
            # select's high bits registered beside them.
            in_group = (self.GROUP - 1).bit_length()
            words = [read_register(m, chosen(words[g:g + self.GROUP], select[:in_group],
                                             f"bank_select1_g{g // self.GROUP}"),
                                   self.en, f"bank_group{g // self.GROUP}")
                     for g in range(0, self.banks, self.GROUP)]
            select = read_register(m, select[in_group:], self.en, "bank_select1")
            m.d.comb += self.data.eq(chosen(words, select, "bank_select2"))
        else:
            m.d.comb += self.data.eq(chosen(words, select, "bank_select1"))
        return m

    @staticmethod
    def select_registers(banks: int, width: int) -> int:
        """Flip-flops of the bank select registers and their copies (``elaborate``)."""
        bits = (banks - 1).bit_length()
        slices = flag_groups(width)
        if banks <= BankedRom.GROUP:
            return bits + slices * bits
        in_group = (BankedRom.GROUP - 1).bit_length()
        groups = -(-banks // BankedRom.GROUP)
        return bits + groups * slices * in_group + (1 + slices) * (bits - in_group)


def banks(depth: int, bank: int) -> int:
    """Banks of ``bank`` words holding ``depth`` words (``BankedRom``)."""
    return -(-depth // bank)


def banked_latency(count: int) -> int:
    """``BankedRom``'s read latency with ``count`` banks."""
    return 2 if count <= BankedRom.GROUP else 3
