"""A stream FIFO with every handshake output a flip-flop.

Used between layers to absorb rate differences (and on the short branch of a residual
connection, where the long branch's latency must be buffered).
"""

from amaranth.hdl import Module, Mux, Shape, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["StreamFIFO"]


class StreamFIFO(wiring.Component):
    """First-in first-out buffer of ``depth`` payloads of ``shape``.

    Words are delivered in order, each exactly once. The output is registered (the memory's
    read register), so a word written while the FIFO is empty leaves one cycle later at the
    earliest; full throughput (one word per cycle) in steady state. ``i.ready`` and
    ``o.valid`` are flip-flops.

    Built here rather than with Amaranth's ``SyncFIFOBuffered`` (which the shallow cases
    still use) because that FIFO derives ``w_rdy`` by comparing its level counter in logic:
    on the UP5K that compare drove the enable of every payload register of the skid buffer
    in front (TFC-w1a1 with ``--fold auto``: 21.2 ns, 15.9 of them routing). Here "room"
    and "not empty" are next-state registers, exact, so the capacity is still ``depth``.
    """

    def __init__(self, *, shape, depth: int):
        try:
            Shape.cast(shape)
        except TypeError as exc:
            raise TypeError(f"Payload shape must be a shape-like object, not {shape!r}") from exc
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
            raise TypeError(f"FIFO depth must be a positive integer, not {depth!r}")
        self._shape = shape
        self._depth = depth
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    @property
    def shape(self):
        return self._shape

    @property
    def depth(self) -> int:
        return self._depth

    def elaborate(self, platform):
        m = Module()
        width = Shape.cast(self._shape).width
        if self._depth < 3:
            # One or two words: Amaranth's level compares are single flip-flops already.
            m.submodules.fifo = fifo = SyncFIFOBuffered(width=width, depth=self._depth)
            m.d.comb += [
                fifo.w_data.eq(self.i.payload),
                fifo.w_en.eq(self.i.valid),
                self.i.ready.eq(fifo.w_rdy),
                self.o.payload.eq(fifo.r_data),
                self.o.valid.eq(fifo.r_rdy),
                fifo.r_en.eq(self.o.ready),
            ]
            return m

        stored = self._depth - 1          # words in the memory; its read register holds one
        m.submodules.storage = storage = Memory(shape=width, depth=stored, init=[])
        w_port = storage.write_port()
        r_port = storage.read_port(domain="sync")
        produce, consume = Signal(range(stored)), Signal(range(stored))
        level = Signal(range(stored + 1))          # words in the memory
        room, filled = Signal(init=1), Signal()   # level < stored, level > 0
        out_valid = Signal()
        write = self.i.valid & room
        read = filled & (~out_valid | self.o.ready)
        m.d.comb += [
            self.i.ready.eq(room),
            w_port.addr.eq(produce), w_port.data.eq(self.i.payload), w_port.en.eq(write),
            r_port.addr.eq(consume), r_port.en.eq(read),
            self.o.payload.eq(r_port.data), self.o.valid.eq(out_valid),
        ]
        with m.If(write):
            m.d.sync += produce.eq(Mux(produce == stored - 1, 0, produce + 1))
        with m.If(read):
            m.d.sync += [consume.eq(Mux(consume == stored - 1, 0, consume + 1)),
                         out_valid.eq(1)]
        with m.Elif(self.o.ready):
            m.d.sync += out_valid.eq(0)
        # The flags follow the level one step ahead, from the level before the step.
        with m.If(write & ~read):
            m.d.sync += [level.eq(level + 1), room.eq(level < stored - 1), filled.eq(1)]
        with m.If(read & ~write):
            m.d.sync += [level.eq(level - 1), room.eq(1), filled.eq(level > 1)]
        return m
