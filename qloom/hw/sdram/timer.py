"""A down-counter of the cycles until an SDRAM command is allowed, as the controller keeps
one per bank and per constraint."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal

__all__ = ["WaitTimer"]


class WaitTimer:
    """A down-counter of cycles until a command is allowed; ``load(cond, n)`` makes it
    allow the command no sooner than ``n`` cycles after this one (it keeps a longer wait
    already running). At most one load condition holds in a cycle (one command a cycle),
    and each compares the count with a constant: no adder between the loads."""

    def __init__(self, name: str):
        self.name = name
        self._loads = []

    def load(self, cond, n: int):
        if n > 1:
            self._loads.append((cond, n - 1))

    def elaborate(self, m: Module):
        top = max([v for _, v in self._loads], default=1)
        self.count = Signal(range(top + 1), name=self.name)
        # ``done`` is a register too (count == 0 next cycle): the scheduler reads it
        self.done = Signal(init=1, name=f"{self.name}_done")
        with m.If(~self.done):
            m.d.sync += self.count.eq(self.count - 1)
        loading = Cat(*(cond for cond, _ in self._loads)).any() if self._loads else 0
        m.d.sync += self.done.eq((self.count <= 1) & ~loading)
        for cond, value in self._loads:
            # count - 1 < value, i.e. the wait running is shorter than this one
            with m.If(cond & (self.count <= value)):
                m.d.sync += self.count.eq(value)
