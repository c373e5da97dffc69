"""Shift-and-round requantization: ``code = clip(round((x + bias[c]) / 2**shift), lo, hi)``
per lane, the exact stand-in for a many-level threshold unit (see
``qloom.nn.passes.thresholds_to_requant``).

A pixel's ``C`` channels arrive as ``C/lanes`` words (word ``j`` lane ``p`` is channel
``j*lanes + p``); the per-channel offsets are constants selected by the channel fold.
Four register stages (add; quotient and round-up bit; round; clamp) behind one global
stall: one word per cycle, latency 4. The offsets are looked up words ahead, into
registers, so that no table read precedes the adder (it made the requantizer the iCE40
critical path). The offset table is a ROM in LUTs, or in block RAM where
:func:`table_in_block_ram` says the LUTs would cost more (then the unit takes no word
for the first two cycles after reset, while the block's read pipeline fills).
"""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..nn.dtypes import DataType, smallest_type
from ..nn.ir import Rounding
from .estimate import Features, memory_cost, use_block_ram
from .target import Family
from .types import shape_of
from .weight_mem import RamStyle, pack_words, read_register, rom

__all__ = ["Requantizer", "table_in_block_ram"]


def table_in_block_ram(*, channels: int, lanes: int, width: int, family: Family) -> bool:
    """Whether a requantizer's offset table (``channels/lanes`` words of ``lanes``
    ``width``-bit offsets) belongs in block RAM: the general read-only memory rule of
    :func:`qloom.hw.estimate.use_block_ram`. On a UP5K the jet tagger's 64 x 26-bit table
    in LUTs was the critical path (a 4-level LUT mux, 50.19 MHz at 50.25)."""
    return use_block_ram(channels // lanes, lanes * width, family)


class Requantizer(wiring.Component):
    """``i``: ``ArrayLayout(shape_of(in_type), lanes)`` -> ``o``:
    ``ArrayLayout(shape_of(out_type), lanes)``."""

    latency = 4

    def __init__(self, *, bias, shift: int, rounding: Rounding, lo: int, hi: int,
                 in_type: DataType, out_type: DataType, lanes: int,
                 block_table: bool | Family = False):
        if not isinstance(in_type, DataType) or not isinstance(out_type, DataType):
            raise TypeError(f"Datatypes must be qloom DataTypes, not {in_type!r} and "
                            f"{out_type!r}")
        if out_type.bipolar or in_type.bipolar:
            raise ValueError("Requantization takes and gives integers, not bipolar values")
        if not isinstance(lanes, int) or isinstance(lanes, bool) or lanes < 1:
            raise TypeError(f"Lane count must be a positive integer, not {lanes!r}")
        if not isinstance(shift, int) or isinstance(shift, bool) or shift < 0:
            raise TypeError(f"Shift must be a non-negative integer, not {shift!r}")
        if not isinstance(rounding, Rounding):
            raise TypeError(f"Rounding must be a Rounding, not {rounding!r}")
        bias = np.asarray(bias)
        if bias.ndim != 1 or not np.issubdtype(bias.dtype, np.integer):
            raise TypeError(f"Bias must be a 1-D integer array, not {bias!r}")
        if bias.size % lanes:
            raise ValueError(f"Channel count ({bias.size}) must be divisible by lanes ({lanes})")
        if not (out_type.min <= lo <= hi <= out_type.max):
            raise ValueError(f"Clamp range [{lo}, {hi}] must lie within {out_type} "
                             f"[{out_type.min}, {out_type.max}]")
        self._bias = bias.astype(np.int64)
        self._shift, self._rounding, self._lo, self._hi = shift, rounding, lo, hi
        self._in_type, self._out_type, self._lanes = in_type, out_type, lanes
        self._sum_type = smallest_type(in_type.min + int(self._bias.min()),
                                       in_type.max + int(self._bias.max()))
        if isinstance(block_table, Family):
            block_table = table_in_block_ram(channels=bias.size, lanes=lanes,
                                             width=self.width, family=block_table)
        self._block_table = bool(block_table)
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(shape_of(in_type), lanes))),
            "o": Out(stream.Signature(data.ArrayLayout(shape_of(out_type), lanes))),
        })

    @property
    def lanes(self) -> int:
        return self._lanes

    @property
    def channels(self) -> int:
        return self._bias.size

    @property
    def out_type(self) -> DataType:
        return self._out_type

    @property
    def width(self) -> int:
        """Bits of an offset and of the sum it is added into (the sum's type and a bit for
        the rounding's carry)."""
        return self._sum_type.bits + 1

    @property
    def block_table(self) -> bool:
        return self._block_table

    def estimate(self, family: Family) -> Features:
        """The resources (:class:`qloom.hw.estimate.Features`). Per lane: the offset adder,
        the rounding increment, the clamp, the offset table over the channel folds (in LUTs
        or block RAM) and the registers between them."""
        bits, lanes, out_bits = self.width, self._lanes, self._out_type.bits
        f = Features("requant")
        folds = self.channels // lanes
        table = memory_cost(folds, lanes * bits, family, block=self._block_table)
        f.add("lut", "lanes", lanes * (3 * bits + out_bits))
        f.add("ff", "lanes", lanes * (4 * bits + 1 + out_bits))
        # The looked-up offsets (a read register beside a block, its data register
        # otherwise).
        f.add("ff", "lookahead", lanes * bits)
        f.add_memory("table", table, bits=folds * lanes * bits)
        f.add("lut", "control", 10)
        f.add("ff", "control", 8 + 2 * self._block_table)
        return f

    def _round(self, y):
        """``(q, up)`` with ``round(y / 2**shift) = q + up`` for a signed value ``y``, in
        this unit's rounding mode: the quotient and whether the remainder rounds it up."""
        s = self._shift
        if s == 0:
            return y, Const(0, 1)
        q = y >> s
        rem = y.as_unsigned()[:s]
        half = 1 << (s - 1)
        up = {Rounding.FLOOR: Const(0, 1),
              Rounding.CEIL: rem != 0,
              Rounding.HALF_UP: rem >= half,
              Rounding.HALF_EVEN: (rem > half) | ((rem == half) & q[0])}[self._rounding]
        return q, up

    def _logic_lookup(self, m, folds, width, advance):
        """The offsets in use (a register per lane), from a table in LUTs."""
        m.d.comb += self.i.ready.eq(advance)
        # The lanes' offsets packed in one constant each and selected by a shift, which
        # Yosys writes as an `assign` (an Array would become an `always @*`).
        tables = [Cat(Const(int(b), signed(width)) for b in self._bias[p::self._lanes])
                  for p in range(self._lanes)]
        # The offsets run three words ahead of the input through registers that all move
        # when a word is taken: the fold counter, a copy of it that addresses the table,
        # the looked-up offsets, the offsets in use. The table is read from the copy, which
        # no increment shares: read from the counter itself (or its next value) the lookup
        # was the jet tagger's iCEBreaker critical path (6 levels; 8 before the counter).
        count = Signal(range(max(2, folds)), init=3 % folds)
        address = Signal.like(count, init=2 % folds)
        second = (1 % folds) * self._lanes
        ahead = [Signal(signed(width), name=f"ahead{p}", init=int(self._bias[second + p]))
                 for p in range(self._lanes)]
        offsets = [Signal(signed(width), name=f"offset{p}", init=int(self._bias[p]))
                   for p in range(self._lanes)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [count.eq(Mux(count == folds - 1, 0, count + 1)), address.eq(count)]
            m.d.sync += [a.eq(t.word_select(address, width).as_signed())
                         for a, t in zip(ahead, tables)]
            m.d.sync += [o.eq(a) for o, a in zip(offsets, ahead)]
        return offsets

    def _block_lookup(self, m, folds, width, advance):
        """The offsets in use (a register per lane), from a table in block RAM: the read
        port's data and a read register (which the ECP5 block holds itself) run two words
        ahead, their address three. A block RAM's read data has no reset value, so after
        reset the unit primes them (two reads, taking no word) before it is ready."""
        lanes = self._lanes
        table = rom(lanes * width, pack_words(self._bias.reshape(folds, lanes), width),
                    RamStyle.BLOCK)
        m.submodules.offset_table = table
        port = table.read_port()
        primed = Signal(2)      # shifts in a one per cycle after reset: primed[1] = ready
        m.d.sync += primed.eq(Cat(1, primed[0]))
        m.d.comb += self.i.ready.eq(advance & primed[1])
        step = Signal()
        m.d.comb += step.eq(self.i.valid & self.i.ready | ~primed[1])
        address = Signal(range(max(2, folds)), init=1 % folds)
        with m.If(step):
            m.d.sync += address.eq(Mux(address == folds - 1, 0, address + 1))
        m.d.comb += [port.addr.eq(address), port.en.eq(step)]
        ahead = read_register(m, port.data, step, "ahead")
        offsets = [Signal(signed(width), name=f"offset{p}", init=int(self._bias[p]))
                   for p in range(lanes)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [o.eq(ahead.word_select(p, width).as_signed())
                         for p, o in enumerate(offsets)]
        return offsets

    def elaborate(self, platform):
        m = Module()
        folds = self.channels // self._lanes
        advance = Signal()
        m.d.comb += advance.eq(~self.o.valid | self.o.ready)

        width = self.width
        lookup = self._block_lookup if self._block_table else self._logic_lookup
        offsets = lookup(m, folds, width, advance)
        payload = Signal.like(self.o.payload, reset_less=True)
        m.d.comb += self.o.payload.eq(payload)
        valid1, valid2, valid3 = Signal(), Signal(), Signal()
        with m.If(advance):
            m.d.sync += [valid1.eq(self.i.valid & self.i.ready), valid2.eq(valid1),
                         valid3.eq(valid2), self.o.valid.eq(valid3)]
        # Data registers without reset (the valid bits say when they count). The
        # quotient and its round-up bit are registered before they are added: the
        # remainder's compare and the increment's carry chain in one cycle were the jet
        # tagger's iCEBreaker path (48.3 MHz at 50.25).
        for p in range(self._lanes):
            total = read_register(m, self.i.payload[p] + offsets[p], advance, f"sum{p}",
                                  signed(width))
            q, up = self._round(total)
            q = read_register(m, q, advance, f"quotient{p}", signed(width))
            up = read_register(m, up, advance, f"up{p}", 1)
            r = read_register(m, q + up, advance, f"rounded{p}", signed(width + 1))
            m.d.sync += payload[p].eq(Mux(advance, Mux(r < self._lo, self._lo,
                                                       Mux(r > self._hi, self._hi, r)),
                                          payload[p]))
        return m
