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

__all__ = ["SkidBuffer", "GROUP_BITS", "flag_groups", "flag_slices"]

# Payload bits steered by one copy of the flags (see SkidBuffer.elaborate).
GROUP_BITS = 32


def flag_groups(width: int) -> int:
    """How many copies of its two flags a skid buffer of ``width`` payload bits has."""
    return max(1, -(-width // GROUP_BITS))


def flag_slices(width: int) -> list[slice]:
    """The bits of a ``width``-bit word that each copy of a flag steers: ``flag_groups``
    slices of ``GROUP_BITS`` bits, the last one shorter."""
    return [slice(lo, min(width, lo + GROUP_BITS)) for lo in range(0, width, GROUP_BITS)]


def skid_cost(width: int) -> tuple[int, int]:
    """(flip-flops, LUT4s) of a skid buffer of ``width`` payload bits: two words and the
    flags' copies, and the output mux."""
    return 2 * width + 2 * flag_groups(width), width


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
        width = len(payload.as_value())   # len() of a View counts elements, not bits
        # The flags that steer the words, copied once per group of GROUP_BITS bits: a wide
        # word's bits are placed near their consumers, far apart, and one flag's fan-out to
        # all of them was the jet tagger's ULX3S critical path (spare_valid to ~100 payload
        # muxes, routed 8.4 ns). The copies are equal registers kept apart ("keep": Yosys
        # would merge them); the first copies are the ports' own.
        groups = flag_groups(width)
        spare_valid = [Signal(name=f"spare_valid{g}" if g else "spare_valid",
                              attrs={"keep": 1} if g else {}) for g in range(groups)]
        valid = [self.o.valid] + [Signal(name=f"o_valid{g}", attrs={"keep": 1})
                                  for g in range(1, groups)]
        # Every combinational output is a whole assignment from a register.
        m.d.comb += [self.i.ready.eq(~spare_valid[0]), self.o.payload.eq(payload)]
        for g, bits in enumerate(flag_slices(width)):
            move = self.o.ready | ~valid[g]
            take = self.i.valid & ~spare_valid[g]
            # The reset-less words as whole-signal assignments: under `If` they would
            # become `always @*` blocks that Icarus does not run at time 0
            # (qloom.sim.rtl_check).
            word = payload.as_value()[bits]
            m.d.sync += [
                word.eq(Mux(move, Mux(spare_valid[g], spare.as_value()[bits],
                                      self.i.payload.as_value()[bits]), word)),
                spare.as_value()[bits].eq(Mux(~move & take, self.i.payload.as_value()[bits],
                                              spare.as_value()[bits]))]
            with m.If(move):
                with m.If(spare_valid[g]):
                    m.d.sync += [valid[g].eq(1), spare_valid[g].eq(0)]
                with m.Else():
                    m.d.sync += valid[g].eq(take)
            with m.Elif(take):
                m.d.sync += spare_valid[g].eq(1)
        return m
