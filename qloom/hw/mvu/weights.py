"""The MVU's weight memory: the weights' codes laid out in words of ``PE * SIMD`` lanes, a
read-only :class:`amaranth.lib.memory.Memory` of ``NF * SF`` words read synchronously and
placed by ``MVUMemories.weights``: in logic (ROMs cut per group of PEs, ``rom_slices``), in
block RAM (a memory per slice of the word, in banks when deeper than a block) or in SPRAM
(``qloom.hw.spram``, written through the unit's ``load`` port)."""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Cat, Mux, Signal, unsigned
from amaranth.lib import data, wiring

from ...nn.dtypes import DataType
from ..estimate import ROM_ADDRESS_FANOUT
from ..spram import SpramRom, spram_image
from ..types import shape_of
from ..weight_mem import (BankedRom, RamStyle, address_groups, banked_latency, banks, bit_slice,
                          kept_register, pack_words, rom, word_slices)
from .registers import group_slices, operand_groups

__all__ = ["ROM_SLICE_LOADS", "FEW_WORDS", "rom_slices", "weight_codes", "weight_columns",
           "weight_address_copies", "bank_stages", "next_address", "weight_words",
           "weights_spram_image", "weight_port", "slice_roms"]


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


def weight_address_copies(word_bits: int, words: int, bank_depth: int | None) -> int:
    """The registers repeating the address of block RAM weights of ``words`` words of
    ``word_bits`` bits (``MVUConfig.weight_address_copies``)."""
    slices = len(word_slices(word_bits))
    return slices * address_groups(words, bank_depth) - 1


def bank_stages(words: int, bank_depth: int | None) -> int:
    """Cycles weights of ``words`` words in banks of ``bank_depth`` (None: one memory) take
    beyond a read port's one (``qloom.hw.weight_mem.BankedRom``)."""
    return 0 if bank_depth is None else banked_latency(banks(words, bank_depth)) - 1


def next_address(addr, last: int):
    """The weight address after ``addr`` in a memory of ``last + 1`` words (it wraps)."""
    return Mux(addr == last, 0, addr + 1)


def weight_words(cfg) -> tuple[list[int], data.ArrayLayout]:
    """The weight memory's words of unit configuration ``cfg`` packed as integers, and the
    layout of a word: ``PE`` lanes of ``SIMD`` weight codes."""
    w_shape = shape_of(cfg.w_type)
    words = weight_codes(cfg.weights, cfg.w_type, cfg.pe, cfg.simd)
    layout = data.ArrayLayout(data.ArrayLayout(w_shape, cfg.simd), cfg.pe)
    return pack_words(words.tolist(), w_shape.width), layout


def weights_spram_image(cfg) -> list[int]:
    """The 16-bit words the unit's ``load`` port must write (``SpramRom.image``); empty
    unless the weights are in SPRAM."""
    if cfg.memories.weights is not RamStyle.SPRAM:
        return []
    words, layout = weight_words(cfg)
    return spram_image(layout.size, words)


def _weight_memory(cfg):
    words, layout = weight_words(cfg)
    style, bank = cfg.memories.weights, cfg.memories.bank_depth
    if style is RamStyle.SPRAM:
        return SpramRom(width=layout.size, init=words), layout
    if bank is not None:
        return BankedRom(layout.size, words, bank), layout
    return rom(layout, words, style), layout


def weight_port(m, cfg, load, w_addr, issue):
    """The weight memory and its read port, addressed from ``w_addr`` (or its fetch
    register): ``(read data, layout of the data)``. Weights in logic read from a fetch
    register are ROMs per slice of the word, each from a copy of the register of its
    own (``rom_slices``); weights in block RAM that need more than one address
    register are memories per slice of the word (``weight_address_copies``); SPRAM
    weights are written through ``load``."""
    slices = cfg.rom_slices
    if len(slices) > 1:
        words, w_layout = weight_words(cfg)
        return slice_roms(m, words, slices, cfg.memories.weights, w_addr, "weights",
                          "w_addr_fetch"), w_layout
    if cfg.weight_address_copies:
        return _weight_slices(m, cfg, w_addr, issue)
    weights, w_layout = _weight_memory(cfg)
    m.submodules.weights = weights
    if cfg.memories.weights is RamStyle.SPRAM:
        wiring.connect(m, wiring.flipped(load), weights.load)
        w_port = weights
    else:
        w_port = weights.read_port()
    w_fetch = w_addr
    if cfg.fetch_register:
        w_fetch = Signal.like(w_addr, name="w_addr_fetch")
        m.d.sync += w_fetch.eq(w_addr)
    m.d.comb += [w_port.addr.eq(w_fetch), w_port.en.eq(1)]
    return w_port.data, w_layout


def _weight_slices(m, cfg, w_addr, issue):
    """Block RAM weights as a memory per slice of the word, each addressed (per group
    of banks when banked) from a register of its own: ``w_addr`` or a counter that
    steps with it (no cycle added). ``(read data, layout)``."""
    words, w_layout = weight_words(cfg)
    last = cfg.cycles_per_vector - 1
    bank = cfg.memories.bank_depth
    data, copies = [], 0
    for k, (lo, width) in enumerate(word_slices(w_layout.size)):
        part = bit_slice(words, lo, width)
        if bank is not None:
            mem = BankedRom(width, part, bank, split_address=True)
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
                    m.d.sync += copy.eq(next_address(copy, last))
                m.d.comb += addr.eq(copy)
            else:
                m.d.comb += addr.eq(w_addr)
            copies += 1
        m.d.comb += port.en.eq(1)
        data.append(port.data)
    return Cat(*data), w_layout


def slice_roms(m, words, slices, ram_style, addr, name, addr_name):
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
