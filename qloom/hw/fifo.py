"""A stream FIFO: Amaranth's ``SyncFIFOBuffered`` behind ``i``/``o`` stream ports.

Used between layers to absorb rate differences (and on the short branch of a residual
connection, where the long branch's latency must be buffered).
"""

from amaranth.hdl import Module, Shape
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

__all__ = ["StreamFIFO"]


class StreamFIFO(wiring.Component):
    """First-in first-out buffer of ``depth`` payloads of ``shape``.

    Words are delivered in order, each exactly once. The output is registered (the FIFO is
    ``SyncFIFOBuffered``), so a word written while the FIFO is empty leaves one cycle later
    at the earliest; full throughput (one word per cycle) in steady state.
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
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=Shape.cast(self._shape).width,
                                                     depth=self._depth)
        m.d.comb += [
            fifo.w_data.eq(self.i.payload),
            fifo.w_en.eq(self.i.valid),
            self.i.ready.eq(fifo.w_rdy),
            self.o.payload.eq(fifo.r_data),
            self.o.valid.eq(fifo.r_rdy),
            fifo.r_en.eq(self.o.ready),
        ]
        return m
