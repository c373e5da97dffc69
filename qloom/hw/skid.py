"""A skid buffer: a register slice whose ``i.ready`` comes straight from a flip-flop.

Engines stall globally, so their ``i.ready`` is a combinational function of their
``o.ready``; without a break, ready chains run through FIFO, width converter and engine
after engine, and on the iCE40 that chain set the clock. A skid buffer in front of each
engine ends every such chain in its own registers: full rate, one cycle of latency, two
words of storage.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SkidBuffer"]


class SkidBuffer(wiring.Component):
    """``i`` -> ``o`` of one payload shape; every output is a register."""

    def __init__(self, *, shape):
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        spare = Signal.like(self.i.payload)
        spare_valid = Signal()
        take = self.i.valid & self.i.ready
        # Every combinational output is a whole assignment from a register.
        m.d.comb += self.i.ready.eq(~spare_valid)
        with m.If(self.o.ready | ~self.o.valid):
            with m.If(spare_valid):
                m.d.sync += [self.o.payload.eq(spare), self.o.valid.eq(1), spare_valid.eq(0)]
            with m.Else():
                m.d.sync += [self.o.payload.eq(self.i.payload), self.o.valid.eq(take)]
        with m.Elif(take):
            m.d.sync += [spare.eq(self.i.payload), spare_valid.eq(1)]
        return m
