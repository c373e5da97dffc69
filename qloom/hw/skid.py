"""A skid buffer: a register slice whose ``i.ready`` comes straight from a flip-flop.

Engines stall globally, so their ``i.ready`` is a combinational function of their
``o.ready``; without a break, ready chains run through FIFO, width converter and engine
after engine, and on the iCE40 that chain set the clock. A skid buffer in front of each
engine ends every such chain in its own registers: full rate, one cycle of latency, two
words of storage.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SkidBuffer"]


class SkidBuffer(wiring.Component):
    """``i`` -> ``o`` of one payload shape; every output is a register."""

    def __init__(self, *, shape):
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        # The words have no reset (the valid flags say when they count): the reset net
        # reached every skid buffer's payload bits, and on the jet tagger's ULX3S build
        # that net's 9.9 ns route was the critical path.
        spare = Signal.like(self.i.payload, reset_less=True)
        payload = Signal.like(self.i.payload, reset_less=True)
        spare_valid = Signal()
        take = self.i.valid & self.i.ready
        # Every combinational output is a whole assignment from a register.
        m.d.comb += [self.i.ready.eq(~spare_valid), self.o.payload.eq(payload)]
        move = self.o.ready | ~self.o.valid
        # The reset-less words as whole-signal assignments: under `If` they would become
        # `always @*` blocks that Icarus does not run at time 0 (qloom.sim.rtl_check).
        m.d.sync += [payload.eq(Mux(move, Mux(spare_valid, spare, self.i.payload), payload)),
                     spare.eq(Mux(~move & take, self.i.payload, spare))]
        with m.If(move):
            with m.If(spare_valid):
                m.d.sync += [self.o.valid.eq(1), spare_valid.eq(0)]
            with m.Else():
                m.d.sync += self.o.valid.eq(take)
        with m.Elif(take):
            m.d.sync += spare_valid.eq(1)
        return m
