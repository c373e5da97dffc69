"""Multiply a stream's elements by a positive integer constant (``qloom.nn.ir.IntMul``): the
exact alignment of a residual branch whose scale is ``factor`` times the other branch's.

The product is a sum of shifted copies of the input (one per set bit of ``factor``, a
single shift for the usual power of two), so no multiplier or DSP block is spent on it.
"""

from amaranth.hdl import Module, Mux
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..nn.dtypes import DataType, smallest_type
from .estimate import Features
from .types import shape_of

__all__ = ["ConstMul"]


class ConstMul(wiring.Component):
    """``i``: ``ArrayLayout(shape_of(in_type), lanes)`` -> ``o``:
    ``ArrayLayout(shape_of(out_type), lanes)`` with ``out = value(in) * factor``.

    Registered: one word per cycle, latency one cycle; the output holds under backpressure.
    """

    def __init__(self, *, in_type: DataType, factor: int, lanes: int):
        if not isinstance(in_type, DataType):
            raise TypeError(f"in_type must be a qloom DataType, not {in_type!r}")
        if not isinstance(factor, int) or isinstance(factor, bool) or factor < 1:
            raise TypeError(f"Factor must be a positive integer, not {factor!r}")
        if not isinstance(lanes, int) or isinstance(lanes, bool) or lanes < 1:
            raise TypeError(f"Lane count must be a positive integer, not {lanes!r}")
        self._in_type, self._factor, self._lanes = in_type, factor, lanes
        self._out_type = smallest_type(in_type.min * factor, in_type.max * factor)
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(shape_of(in_type), lanes))),
            "o": Out(stream.Signature(data.ArrayLayout(shape_of(self._out_type), lanes))),
        })

    @property
    def out_type(self) -> DataType:
        return self._out_type

    @property
    def factor(self) -> int:
        return self._factor

    def estimate(self, family) -> Features:
        """Resources (:class:`qloom.hw.estimate.Features`): per lane an adder of the output
        width for each set bit of ``factor`` beyond the first, and the output register."""
        bits = self._out_type.bits
        adders = bin(self._factor).count("1") - 1
        f = Features("const_mul")
        f.add("lut", "adders", self._lanes * bits * adders)
        f.add("ff", "lanes", self._lanes * bits)
        f.add("lut", "control", 4)
        f.add("ff", "control", 2)
        return f

    def _times(self, value):
        terms = [value << bit for bit in range(self._factor.bit_length())
                 if self._factor >> bit & 1]
        return sum(terms[1:], terms[0])

    def elaborate(self, platform):
        m = Module()
        take = self.i.valid & (~self.o.valid | self.o.ready)
        m.d.comb += self.i.ready.eq(~self.o.valid | self.o.ready)
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(take):
            m.d.sync += self.o.valid.eq(1)
            for lane in range(self._lanes):
                code = self.i.payload[lane]
                value = Mux(code, 1, -1) if self._in_type.bipolar else code
                m.d.sync += self.o.payload[lane].eq(self._times(value))
        return m
