"""A lookup table per lane: ``out = table[c, x - lo]`` (``qloom.nn.ir.Lookup``), the exact
form of an activation that is not monotone (HardSwish, GELU, ...) over a narrow input.

A pixel's ``C`` channels arrive as ``C/lanes`` words (word ``j`` lane ``p`` is channel
``j*lanes + p``). Each lane has its own read-only memory: the shared table (one row), or
the rows of its channels one after the other, addressed by ``base + x - lo`` where
``base`` steps by the table's span per word. The memory's registered read is the first
stage and an output register the second, behind one global stall: one word per cycle,
latency 2, the output held under backpressure. Each memory is in LUTs or block RAM where
:func:`qloom.hw.estimate.use_block_ram` says.
"""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..nn.dtypes import DataType
from .estimate import Features, memory_cost, use_block_ram
from .target import Family, Resources
from .types import shape_of
from .weight_mem import RamStyle, rom

__all__ = ["LookupTable"]


class LookupTable(wiring.Component):
    """``i``: ``ArrayLayout(shape_of(in_type), lanes)`` -> ``o``:
    ``ArrayLayout(shape_of(out_type), lanes)``; ``table``: int64 ``[rows, span]`` output
    values with ``rows`` 1 (every channel) or ``channels``."""

    latency = 2

    def __init__(self, *, table, lo: int, channels: int, in_type: DataType,
                 out_type: DataType, lanes: int, block: bool | Family = False):
        if not isinstance(in_type, DataType) or not isinstance(out_type, DataType):
            raise TypeError(f"Datatypes must be qloom DataTypes, not {in_type!r} and "
                            f"{out_type!r}")
        if in_type.bipolar:
            raise ValueError("A lookup table takes integer inputs, not bipolar values")
        for what, value in (("Lane count", lanes), ("Channel count", channels)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise TypeError(f"{what} must be a positive integer, not {value!r}")
        table = np.asarray(table)
        if table.ndim != 2 or not np.issubdtype(table.dtype, np.integer) or table.size == 0:
            raise TypeError(f"Table must be a 2-D integer array, not {table!r}")
        if table.shape[0] not in (1, channels):
            raise ValueError(f"Table rows ({table.shape[0]}) must be 1 or the channel "
                             f"count ({channels})")
        if channels % lanes:
            raise ValueError(f"Channel count ({channels}) must be divisible by lanes "
                             f"({lanes})")
        if lo < in_type.min or lo + table.shape[1] - 1 > in_type.max:
            raise ValueError(f"Table inputs [{lo}, {lo + table.shape[1] - 1}] must lie "
                             f"within {in_type} [{in_type.min}, {in_type.max}]")
        if not out_type.allows(table):
            raise ValueError(f"Table values must be {out_type} values")
        self._table, self._lo, self._channels = table.astype(np.int64), int(lo), channels
        self._in_type, self._out_type, self._lanes = in_type, out_type, lanes
        if isinstance(block, Family):
            block = use_block_ram(self.depth, out_type.bits, block)
        self._block = bool(block)
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(shape_of(in_type), lanes))),
            "o": Out(stream.Signature(data.ArrayLayout(shape_of(out_type), lanes))),
        })

    @property
    def lanes(self) -> int:
        return self._lanes

    @property
    def out_type(self) -> DataType:
        return self._out_type

    @property
    def span(self) -> int:
        return self._table.shape[1]

    @property
    def folds(self) -> int:
        """Words per pixel; the memories hold one row per fold unless the table is shared."""
        return self._channels // self._lanes if self._table.shape[0] > 1 else 1

    @property
    def depth(self) -> int:
        """Words in each lane's memory."""
        return self.folds * self.span

    @property
    def block(self) -> bool:
        return self._block

    def estimate(self, family: Family) -> Features:
        """Resources (:class:`qloom.hw.estimate.Features`): per lane the memory (LUTs or
        block RAM), the address adder and the output register; the fold base."""
        lanes, bits = self._lanes, self._out_type.bits
        address_bits = max(1, (self.depth - 1).bit_length())
        f = Features("lookup")
        one = memory_cost(self.depth, bits, family, block=self._block)
        f.add_memory("table", Resources(lut=lanes * one.lut, ff=lanes * one.ff,
                                        bram=lanes * one.bram), bits=lanes * self.depth * bits)
        f.add("lut", "address", lanes * address_bits)
        f.add("ff", "lanes", lanes * bits)
        f.add("lut", "control", 4 + (2 * address_bits if self.folds > 1 else 0))
        f.add("ff", "control", 2 + (address_bits if self.folds > 1 else 0))
        return f

    def _contents(self, lane: int) -> list[int]:
        """Lane ``lane``'s memory words: the encoded output codes, row after row."""
        rows = self._table if self._table.shape[0] == 1 else \
            self._table[lane::self._lanes]
        mask = (1 << self._out_type.bits) - 1
        return [int(v) & mask for v in self._out_type.encode(rows).ravel()]

    def elaborate(self, platform):
        m = Module()
        advance = Signal()
        m.d.comb += [advance.eq(~self.o.valid | self.o.ready), self.i.ready.eq(advance)]
        take = self.i.valid & advance
        base = Signal(range(max(2, self.depth)))
        if self.folds > 1:
            last = (self.folds - 1) * self.span
            with m.If(take):
                m.d.sync += base.eq(Mux(base == last, 0, base + self.span))
        style = RamStyle.BLOCK if self._block else RamStyle.DISTRIBUTED
        loaded = Signal()
        with m.If(advance):
            m.d.sync += [loaded.eq(take), self.o.valid.eq(loaded)]
        for p in range(self._lanes):
            memory = rom(self._out_type.bits, self._contents(p), style)
            m.submodules[f"table{p}"] = memory
            port = memory.read_port()
            m.d.comb += [port.addr.eq(base + (self.i.payload[p] - self._lo)),
                         port.en.eq(advance)]
            with m.If(advance):
                m.d.sync += self.o.payload[p].eq(port.data)
        return m
