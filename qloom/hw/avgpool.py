"""Average pooling as exact window sums, per channel (``qloom.nn.ir.AvgPool``): the
``1 / (KH*KW)`` of the average is left to the next quantizer, so the output is the sum.

Two templates over the same pixel streams (``channels/lanes`` words of
``ArrayLayout(shape_of(dtype), lanes)`` per pixel, row-major):

- ``AvgPool``: ``KH x KW`` windows with stride and zero padding, from a ``SlidingWindow``
  in channel-major window order, so the ``KH*KW`` words of one channel word arrive back to
  back and one running sum per lane reduces them (like ``MaxPool``).
- ``GlobalAvgPool``: the whole frame is the window. No line buffer: one accumulator per
  channel, kept as a ring of ``channels/lanes`` words that turns by one word per input word,
  so the word arriving always meets its own channels' partial sums at the head; the last
  pixel's sums leave as the output pixel.

Sums are of values: bipolar codes (0 = -1, 1 = +1) count as -1 and +1. The output element
type is ``window_sum_type(dtype, KH*KW)``, the IR tensor's type.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..nn.dtypes import DataType
from ..nn.ir import window_sum_type
from .estimate import Features
from .swg import SlidingWindow, WindowConfig, WindowOrder
from .types import shape_of

__all__ = ["AvgPool", "GlobalAvgPool"]


def _positive_int(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise TypeError(f"{name} must be a positive integer, not {value!r}")


def _check_common(in_h, in_w, channels, dtype, lanes):
    for name, value in (("in_h", in_h), ("in_w", in_w), ("channels", channels),
                        ("lanes", lanes)):
        _positive_int(name, value)
    if not isinstance(dtype, DataType):
        raise TypeError(f"dtype must be a qloom DataType, not {dtype!r}")
    if channels % lanes:
        raise ValueError(f"channels ({channels}) must be divisible by lanes ({lanes})")


def _value(code, dtype: DataType):
    """The value of one lane's code, as an Amaranth expression."""
    return Mux(code, 1, -1) if dtype.bipolar else code


class AvgPool(wiring.Component):
    """``i``: pixels -> ``o``: window sums of ``window_sum_type(dtype, KH*KW)``, ``out_h``
    rows of ``out_w`` pixels, like ONNX AveragePool (``count_include_pad=1``, ``ceil_mode``
    0) times ``KH*KW``."""

    def __init__(self, *, in_h: int, in_w: int, channels: int, kernel: tuple[int, int],
                 stride: tuple[int, int], pads: tuple[int, int, int, int] = (0, 0, 0, 0),
                 dtype: DataType, lanes: int):
        _check_common(in_h, in_w, channels, dtype, lanes)
        # WindowConfig validates kernel, stride, pads and the fit of the window.
        swg = WindowConfig(in_h=in_h, in_w=in_w, channels=channels, kernel=kernel,
                           stride=stride, pads=pads, dtype=dtype, simd=lanes,
                           order=WindowOrder.C_KH_KW)
        if any(pads) and dtype.bipolar:
            raise ValueError("a bipolar input cannot be zero padded (0 is no bipolar value)")
        self._window = swg
        self._dtype, self._lanes, self._channels = dtype, lanes, channels
        self._kernel = kernel
        self._taps = kernel[0] * kernel[1]
        self._acc_type = window_sum_type(dtype, self._taps)
        self._out_h, self._out_w = swg.out_h, swg.out_w
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(shape_of(dtype), lanes))),
            "o": Out(stream.Signature(data.ArrayLayout(shape_of(self._acc_type), lanes)))})

    out_h = property(lambda self: self._out_h)
    out_w = property(lambda self: self._out_w)
    lanes = property(lambda self: self._lanes)
    acc_type = property(lambda self: self._acc_type)

    @property
    def buffer_words(self) -> int:
        """Line buffer words of ``lanes * dtype.bits`` bits (the sliding window's)."""
        return self._window.buffer_words

    @property
    def in_words_per_frame(self) -> int:
        return self._window.in_words_per_frame

    @property
    def out_words_per_frame(self) -> int:
        return self._out_h * self._out_w * self._channels // self._lanes

    @property
    def cycles_per_frame(self) -> int:
        """Steady-state cycles per frame: the window stream carries ``KH*KW`` words per
        output word at one word per cycle, or the input is the bottleneck."""
        return max(self.in_words_per_frame, self.out_words_per_frame * self._taps)

    def estimate(self, family) -> Features:
        """Resources (:class:`qloom.hw.estimate.Features`): the sliding window's
        (:func:`qloom.hw.swg.estimate`, its line buffer and counters, as features named
        ``window_*``: the window is a submodule of this unit, measured with it), one adder
        per lane, the running sum and output registers."""
        from . import swg
        window = swg.estimate(self._window, family)
        acc = self._acc_type.bits
        f = Features("avgpool")
        f.add_part("window", window)
        f.add("lut", "lanes", self._lanes * acc)
        f.add("ff", "lanes", self._lanes * acc * 2)
        f.add("lut", "control", 60)
        f.add("ff", "control", 50)
        return f

    def elaborate(self, platform):
        m = Module()
        m.submodules.swg = swg = SlidingWindow(self._window)
        wiring.connect(m, wiring.flipped(self.i), swg.i)

        acc_shape = shape_of(self._acc_type)
        word = swg.o.payload
        total = Signal(data.ArrayLayout(acc_shape, self._lanes))   # sum of the words so far
        tap = Signal(range(self._taps))
        last = tap == self._taps - 1
        summed = Signal.like(total)                                  # including this word
        for lane in range(self._lanes):
            value = _value(word[lane], self._dtype)
            m.d.comb += summed[lane].eq(Mux(tap == 0, value, total[lane] + value))

        m.d.comb += swg.o.ready.eq(~last | ~self.o.valid | self.o.ready)
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(swg.o.valid & swg.o.ready):
            m.d.sync += [total.eq(summed), tap.eq(tap + 1)]
            with m.If(last):
                m.d.sync += [tap.eq(0), self.o.valid.eq(1), self.o.payload.eq(summed)]
        return m


class GlobalAvgPool(wiring.Component):
    """``i``: ``in_h * in_w`` pixels per frame -> ``o``: one pixel per frame, each channel's
    sum over the frame, of ``window_sum_type(dtype, in_h * in_w)``, like ONNX
    GlobalAveragePool times ``in_h * in_w``."""

    def __init__(self, *, in_h: int, in_w: int, channels: int, dtype: DataType, lanes: int):
        _check_common(in_h, in_w, channels, dtype, lanes)
        self._pixels = in_h * in_w
        self._dtype, self._lanes, self._channels = dtype, lanes, channels
        self._acc_type = window_sum_type(dtype, self._pixels)
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(shape_of(dtype), lanes))),
            "o": Out(stream.Signature(data.ArrayLayout(shape_of(self._acc_type), lanes)))})

    lanes = property(lambda self: self._lanes)
    acc_type = property(lambda self: self._acc_type)

    @property
    def accumulators(self) -> int:
        """Accumulator registers of ``acc_type``: one per channel."""
        return self._channels

    @property
    def in_words_per_frame(self) -> int:
        return self._pixels * self._channels // self._lanes

    @property
    def out_words_per_frame(self) -> int:
        return self._channels // self._lanes

    @property
    def cycles_per_frame(self) -> int:
        """One input word per cycle; the output words leave with the last pixel's."""
        return self.in_words_per_frame

    def estimate(self, family) -> Features:
        """Resources (:class:`qloom.hw.estimate.Features`): the ring of accumulators, one
        adder per lane, the output register and counters."""
        acc = self._acc_type.bits
        f = Features("global_avgpool")
        f.add("lut", "lanes", self._lanes * acc)
        f.add("ff", "accumulators", self.accumulators * acc)
        f.add("ff", "lanes", self._lanes * acc)
        f.add("lut", "control", 20)
        f.add("ff", "control", 30)
        return f

    def elaborate(self, platform):
        m = Module()
        words = self._channels // self._lanes
        layout = data.ArrayLayout(shape_of(self._acc_type), self._lanes)
        ring = [Signal(layout, name=f"ring{k}") for k in range(words)]
        cw = Signal(range(words))
        pixel = Signal(range(self._pixels))
        first, final = pixel == 0, pixel == self._pixels - 1
        summed = Signal(layout)
        for lane in range(self._lanes):
            value = _value(self.i.payload[lane], self._dtype)
            m.d.comb += summed[lane].eq(Mux(first, value, ring[0][lane] + value))

        m.d.comb += self.i.ready.eq(~final | ~self.o.valid | self.o.ready)
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [ring[k].eq(ring[k + 1]) for k in range(words - 1)]
            m.d.sync += [ring[-1].eq(summed), cw.eq(cw + 1)]
            with m.If(cw == words - 1):
                m.d.sync += [cw.eq(0), pixel.eq(pixel + 1)]
                with m.If(final):
                    m.d.sync += pixel.eq(0)
            with m.If(final):
                m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(summed)]
        return m
