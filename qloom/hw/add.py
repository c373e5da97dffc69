"""Residual add: two element streams summed lane by lane into the exact result type.

Lanes carry codes; each operand is decoded to its value first (a bipolar code 0/1 is
-1/+1), so the output code is the exact integer ``value(a) + value(b)`` in ``out_type``,
the narrowest plain type holding every possible sum.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..nn.dtypes import DataType, smallest_type
from .estimate import Features
from .types import shape_of

__all__ = ["ElementwiseAdd"]


def _value(code, dtype: DataType):
    """The integer value carried by a lane ``code`` of ``dtype``."""
    return Mux(code, 1, -1) if dtype.bipolar else code


class ElementwiseAdd(wiring.Component):
    """``i_a``, ``i_b``: ``ArrayLayout(shape_of(x_type), lanes)`` -> ``o``:
    ``ArrayLayout(shape_of(out_type), lanes)``.

    A word is taken from both inputs at once, when both are valid; the sum is registered,
    so throughput is one word per cycle and latency one cycle.
    """

    def __init__(self, *, a_type: DataType, b_type: DataType, lanes: int):
        for name, dtype in (("a_type", a_type), ("b_type", b_type)):
            if not isinstance(dtype, DataType):
                raise TypeError(f"{name} must be a qloom DataType, not {dtype!r}")
        if not isinstance(lanes, int) or isinstance(lanes, bool) or lanes < 1:
            raise TypeError(f"Lane count must be a positive integer, not {lanes!r}")
        self._a_type = a_type
        self._b_type = b_type
        self._lanes = lanes
        self._out_type = smallest_type(a_type.min + b_type.min, a_type.max + b_type.max)
        super().__init__({
            "i_a": In(stream.Signature(data.ArrayLayout(shape_of(a_type), lanes))),
            "i_b": In(stream.Signature(data.ArrayLayout(shape_of(b_type), lanes))),
            "o": Out(stream.Signature(data.ArrayLayout(shape_of(self._out_type), lanes))),
        })

    @property
    def a_type(self) -> DataType:
        return self._a_type

    @property
    def b_type(self) -> DataType:
        return self._b_type

    @property
    def lanes(self) -> int:
        return self._lanes

    @property
    def out_type(self) -> DataType:
        return self._out_type

    def estimate(self, family) -> Features:
        """Resources (:class:`qloom.hw.estimate.Features`): an adder and an output register
        per lane, of the output type's width."""
        bits = self._out_type.bits
        f = Features("add")
        f.add("lut", "lanes", self._lanes * bits)
        f.add("ff", "lanes", self._lanes * bits)
        f.add("lut", "control", 4)
        f.add("ff", "control", 2)
        return f

    def elaborate(self, platform):
        m = Module()
        both = Signal()
        take = Signal()
        m.d.comb += [
            both.eq(self.i_a.valid & self.i_b.valid),
            take.eq(both & (~self.o.valid | self.o.ready)),
            self.i_a.ready.eq(take),
            self.i_b.ready.eq(take),
        ]
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(take):
            m.d.sync += self.o.valid.eq(1)
            for lane in range(self._lanes):
                m.d.sync += self.o.payload[lane].eq(
                    _value(self.i_a.payload[lane], self._a_type)
                    + _value(self.i_b.payload[lane], self._b_type))
        return m
