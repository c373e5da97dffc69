"""Duplicate a stream: every word of ``i`` leaves once on ``o0`` and once on ``o1``.

The two outputs are independent: each may stall while the other keeps taking the current
word. The input word is released only once both outputs have taken it, so nothing is lost
or sent twice. A residual connection forks its input with this (the short branch then goes
through a ``StreamFIFO`` deep enough to cover the long branch's latency).
"""

from amaranth.hdl import Module, Shape, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Duplicate"]


class Duplicate(wiring.Component):
    """``i`` -> ``o0`` and ``o1``, all with payload ``shape``. No buffering: outputs carry the
    input payload combinationally; one word per cycle when both outputs are ready."""

    def __init__(self, *, shape):
        try:
            Shape.cast(shape)
        except TypeError as exc:
            raise TypeError(f"Payload shape must be a shape-like object, not {shape!r}") from exc
        self._shape = shape
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o0": Out(stream.Signature(shape)),
            "o1": Out(stream.Signature(shape)),
        })

    def elaborate(self, platform):
        m = Module()
        outs = (self.o0, self.o1)
        # taken[k]: output k already took the word now on the input
        taken = [Signal(name=f"taken{k}") for k in range(len(outs))]
        m.d.comb += self.i.ready.eq(
            (outs[0].ready | taken[0]) & (outs[1].ready | taken[1]))
        for out, done in zip(outs, taken):
            m.d.comb += [
                out.payload.eq(self.i.payload),
                out.valid.eq(self.i.valid & ~done),
            ]
            with m.If(self.i.valid & self.i.ready):
                m.d.sync += done.eq(0)
            with m.Elif(out.valid & out.ready):
                m.d.sync += done.eq(1)
        return m
