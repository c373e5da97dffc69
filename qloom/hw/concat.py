"""Concatenate two pixel streams along channels (``qloom.nn.ir.Concat``).

Both inputs carry the same pixels in the same order, channels-last: ``[H, W, Ca]`` as
``Ca/lanes`` words per pixel and ``[H, W, Cb]`` as ``Cb/lanes``. Per pixel the output takes
the ``a`` words, then the ``b`` words, so each output pixel is ``[a channels, b channels]``.
Elements are re-encoded to the output type by value (a sign- or zero-extension; bipolar
codes stay codes: both inputs are then bipolar).
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..nn.dtypes import DataType
from .estimate import Features
from .types import shape_of

__all__ = ["ChannelConcat"]


class ChannelConcat(wiring.Component):
    """``i_a``: ``a_words`` words per pixel, ``i_b``: ``b_words``, ``o``: both in turn, each
    ``ArrayLayout(shape_of(type), lanes)``. Registered output: one word per cycle."""

    def __init__(self, *, a_type: DataType, b_type: DataType, out_type: DataType,
                 a_channels: int, b_channels: int, lanes: int):
        for name, dtype in (("a_type", a_type), ("b_type", b_type), ("out_type", out_type)):
            if not isinstance(dtype, DataType):
                raise TypeError(f"{name} must be a qloom DataType, not {dtype!r}")
        for name, value in (("a_channels", a_channels), ("b_channels", b_channels),
                            ("lanes", lanes)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise TypeError(f"{name} must be a positive integer, not {value!r}")
        for name, value in (("a_channels", a_channels), ("b_channels", b_channels)):
            if value % lanes:
                raise ValueError(f"{name} ({value}) must be divisible by lanes ({lanes})")
        for name, dtype in (("a_type", a_type), ("b_type", b_type)):
            if dtype.bipolar != out_type.bipolar or (not dtype.bipolar and not (
                    out_type.min <= dtype.min and dtype.max <= out_type.max)):
                raise ValueError(f"{name} {dtype} does not fit out_type {out_type}")
        self._a_words, self._b_words = a_channels // lanes, b_channels // lanes
        self._lanes, self._out_type = lanes, out_type
        super().__init__({
            "i_a": In(stream.Signature(data.ArrayLayout(shape_of(a_type), lanes))),
            "i_b": In(stream.Signature(data.ArrayLayout(shape_of(b_type), lanes))),
            "o": Out(stream.Signature(data.ArrayLayout(shape_of(out_type), lanes))),
        })

    @property
    def words_per_pixel(self) -> int:
        return self._a_words + self._b_words

    def estimate(self, family) -> Features:
        """Resources (:class:`qloom.hw.estimate.Features`): the output word's select and
        register per lane, the word counter and flags."""
        bits = self._out_type.bits
        f = Features("concat")
        f.add("lut", "lanes", self._lanes * bits)
        f.add("ff", "lanes", self._lanes * bits)
        f.add("lut", "control", 10)
        f.add("ff", "control", 8)
        return f

    def elaborate(self, platform):
        m = Module()
        word = Signal(range(self.words_per_pixel))
        from_a = Signal()
        valid, take = Signal(), Signal()
        m.d.comb += [
            from_a.eq(word < self._a_words),
            valid.eq(from_a & self.i_a.valid | ~from_a & self.i_b.valid),
            take.eq(valid & (~self.o.valid | self.o.ready)),
            self.i_a.ready.eq(take & from_a),
            self.i_b.ready.eq(take & ~from_a),
        ]
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(take):
            m.d.sync += [self.o.valid.eq(1),
                         word.eq(0 if self.words_per_pixel == 1 else
                                 Mux(word == self.words_per_pixel - 1, 0, word + 1))]
            for lane in range(self._lanes):
                with m.If(from_a):
                    m.d.sync += self.o.payload[lane].eq(self.i_a.payload[lane])
                with m.Else():
                    m.d.sync += self.o.payload[lane].eq(self.i_b.payload[lane])
        return m
