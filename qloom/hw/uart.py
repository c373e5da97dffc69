"""A UART (8 data bits, no parity, 1 stop bit, LSB first) with stream byte ports.

``divisor`` is the number of clock cycles per bit (``divisor_for(clock_hz, baud)``); the
receiver samples each bit in its middle, so a divisor of 4 already works (what the
simulations use to run fast).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["divisor_for", "check_divisor", "UARTTx", "UARTRx"]

MIN_DIVISOR = 4


def divisor_for(clock_hz: float, baud: int, tolerance: float = 0.02) -> int:
    """Clock cycles per bit for ``baud`` at ``clock_hz``; ValueError when the nearest
    integer divisor misses the baud rate by more than ``tolerance`` (2 %: a UART frame
    is 10 bits and the receiver samples mid-bit, so both sides together may drift 5 %)."""
    if not isinstance(baud, int) or baud <= 0:
        raise TypeError(f"Baud rate must be a positive integer, not {baud!r}")
    if not clock_hz > 0:
        raise ValueError(f"Clock frequency must be positive, not {clock_hz!r}")
    divisor = round(clock_hz / baud)
    if divisor < MIN_DIVISOR:
        raise ValueError(f"Baud rate {baud} is too fast for a {clock_hz / 1e6:g} MHz clock "
                         f"(divisor {clock_hz / baud:.2f}, at least {MIN_DIVISOR} needed)")
    error = abs(clock_hz / divisor - baud) / baud
    if error > tolerance:
        raise ValueError(f"Baud rate {baud} is off by {error:.1%} at {clock_hz / 1e6:g} MHz "
                         f"(divisor {divisor}); choose another baud rate or clock")
    return divisor


def check_divisor(divisor):
    """Raise the TypeError/ValueError a UART raises for a bad ``divisor``."""
    if not isinstance(divisor, int) or isinstance(divisor, bool):
        raise TypeError(f"Divisor must be an integer, not {divisor!r}")
    if divisor < MIN_DIVISOR:
        raise ValueError(f"Divisor must be at least {MIN_DIVISOR} clocks per bit, "
                         f"not {divisor}")


class UARTTx(wiring.Component):
    """Serializes bytes taken from ``i`` onto the ``tx`` line (idle high)."""

    def __init__(self, *, divisor: int):
        check_divisor(divisor)
        self.divisor = divisor
        super().__init__({"i": In(stream.Signature(8)), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        # Only `idle` is reset (the line is high while idle): every other register is
        # loaded before it is read. A synchronous reset joins the enable of a register
        # that has one (the iCE40's SB_DFFESR resets only when enabled), and the reset's
        # route into the timer's enable was the iCEBreaker jet tagger's critical path.
        shreg = Signal(10, reset_less=True)  # stop, 8 data bits, start; LSB first
        bits = Signal(range(11), reset_less=True)
        timer = Signal(range(self.divisor), reset_less=True)
        # The byte's state as registers, each set the cycle before it holds: `idle`
        # (bits == 0), `last` (bits == 1) and `expired` (timer == 0). Decoded from the
        # counters they were 3 LUT levels into the shift register's enable, spread over a
        # nearly full UP5K (the iCEBreaker jet tagger's critical path, 4 ns per hop).
        idle = Signal(init=1)
        last, expired = Signal(reset_less=True), Signal(reset_less=True)
        m.d.comb += [self.tx.eq(shreg[0] | idle), self.i.ready.eq(idle)]
        with m.If(idle):
            with m.If(self.i.valid):
                m.d.sync += [shreg.eq(Cat(Const(0, 1), self.i.payload, Const(1, 1))),
                             bits.eq(10), idle.eq(0), last.eq(0),
                             timer.eq(self.divisor - 1), expired.eq(0)]
        with m.Elif(expired):
            m.d.sync += [shreg.eq(Cat(shreg[1:], Const(1, 1))), bits.eq(bits - 1),
                         idle.eq(last), last.eq(bits == 2),
                         timer.eq(self.divisor - 1), expired.eq(0)]
        with m.Else():
            m.d.sync += [timer.eq(timer - 1), expired.eq(timer == 1)]
        return m


class UARTRx(wiring.Component):
    """Deserializes the ``rx`` line into bytes on ``o``. ``error`` (a register) pulses for
    one cycle on a framing error (stop bit low) and on an overrun (a byte completed while
    the previous one was still not taken; the new byte is dropped)."""

    def __init__(self, *, divisor: int):
        check_divisor(divisor)
        self.divisor = divisor
        super().__init__({"rx": In(1, init=1), "o": Out(stream.Signature(8)),
                          "error": Out(1)})

    def elaborate(self, platform):
        m = Module()
        rx = Signal(init=1)
        m.submodules.sync = FFSynchronizer(self.rx, rx, init=1)
        # The counters and the byte are loaded before they are read: not reset (see
        # UARTTx), only the state, the output's valid and the error are.
        timer = Signal(range(self.divisor), reset_less=True)
        # `timer == 0` while counting, as a register: compared in logic, it fed the bit
        # counter's enable and the byte's valid (the iCEBreaker's critical path once, 5
        # levels). Every value loaded is at least 1 (MIN_DIVISOR), so a load clears it.
        expired = Signal()
        shreg = Signal(8, reset_less=True)
        bits = Signal(range(9), reset_less=True)
        last = Signal(reset_less=True)     # bits == 1, as a register (set with bits)

        def count_down():
            m.d.sync += [timer.eq(timer - 1), expired.eq(timer == 1)]

        def load(value):
            m.d.sync += [timer.eq(value), expired.eq(0)]

        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        m.d.sync += self.error.eq(0)

        with m.FSM() as fsm:
            with m.State("IDLE"):
                m.d.sync += expired.eq(0)
                with m.If(~rx):
                    load(self.divisor // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                count_down()
                with m.If(expired):
                    load(self.divisor - 1)
                    m.d.sync += [bits.eq(8), last.eq(0)]
                    m.next = "DATA"
                    with m.If(rx):   # a glitch, not a start bit
                        m.next = "IDLE"
            with m.State("DATA"):
                count_down()
                with m.If(expired):
                    load(self.divisor - 1)
                    m.d.sync += [shreg.eq(Cat(shreg[1:], rx)), bits.eq(bits - 1),
                                 last.eq(bits == 2)]
                    with m.If(last):
                        m.next = "STOP"
            with m.State("STOP"):
                count_down()
                with m.If(expired):
                    with m.If(~rx):
                        m.d.sync += self.error.eq(1)              # framing error
                    with m.Elif(self.o.valid & ~self.o.ready):
                        m.d.sync += self.error.eq(1)              # overrun
                    with m.Else():
                        m.d.sync += [self.o.payload.eq(shreg), self.o.valid.eq(1)]
                    m.next = "IDLE"
        # One flip-flop per state, so that each next state is a function of a few
        # registers (decoded from a binary state with `bits == 1` it was 3 LUT levels, the
        # iCEBreaker jet tagger's critical path). The clock domain starts in reset.
        fsm.state.attrs["fsm_encoding"] = "one-hot"
        return m
