"""Max pooling over ``KH x KW`` windows with stride ``(SH, SW)``, per channel, optionally
padded (rectangular windows are the 1D pools of Conv1D networks, lifted to a height of 1).

Padding enters as the type's minimum value: ONNX pads MaxPool with -inf, and with every pad
smaller than the kernel each window holds an input pixel, whose value is at least the
minimum, so the maximum is ONNX's.

Built from a ``SlidingWindow`` in channel-major window order, so the ``KH*KW`` words of
one channel word of a window arrive back to back and a running maximum per lane reduces
them: no accumulator memory. Comparison is on values: signed lanes compare signed, and
bipolar codes (0 = -1, 1 = +1) are ordered like their values.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..nn.dtypes import DataType
from .estimate import Features
from .skid import SkidBuffer, skid_cost
from .swg import SlidingWindow, WindowConfig, WindowOrder
from .types import shape_of

__all__ = ["MaxPool"]


class MaxPool(wiring.Component):
    """``i``: pixels as ``channels/lanes`` words of ``ArrayLayout(shape_of(dtype), lanes)``
    -> ``o``: pooled pixels in the same word format, ``floor((H - KH) / SH) + 1`` rows of
    ``floor((W - KW) / SW) + 1`` pixels of the input padded by ``pads`` (top, left, bottom,
    right), like ONNX MaxPool with ``ceil_mode`` 0."""

    def __init__(self, *, in_h: int, in_w: int, channels: int, kernel: tuple[int, int],
                 stride: tuple[int, int], pads: tuple[int, int, int, int] = (0, 0, 0, 0),
                 dtype: DataType, lanes: int):
        for name, value in (("in_h", in_h), ("in_w", in_w), ("channels", channels),
                            ("lanes", lanes)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise TypeError(f"{name} must be a positive integer, not {value!r}")
        for name, value in (("kernel", kernel), ("stride", stride)):
            if (not isinstance(value, tuple) or len(value) != 2
                    or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1
                               for v in value)):
                raise TypeError(f"{name} must be a tuple of 2 positive integers, not {value!r}")
        if (not isinstance(pads, tuple) or len(pads) != 4
                or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                           for v in pads)):
            raise TypeError(f"pads must be a tuple of 4 non-negative integers, not {pads!r}")
        if not isinstance(dtype, DataType):
            raise TypeError(f"dtype must be a qloom DataType, not {dtype!r}")
        if channels % lanes:
            raise ValueError(f"channels ({channels}) must be divisible by lanes ({lanes})")
        if max(pads[0], pads[2]) >= kernel[0] or max(pads[1], pads[3]) >= kernel[1]:
            raise ValueError(f"pads {pads} must be smaller than the kernel {kernel}")
        padded = (in_h + pads[0] + pads[2], in_w + pads[1] + pads[3])
        if kernel[0] > padded[0] or kernel[1] > padded[1]:
            raise ValueError(f"kernel {kernel} must not exceed the input ({in_h} x {in_w})")
        self._kernel, self._dtype, self._lanes = kernel, dtype, lanes
        self._channels, self._in_h, self._in_w = channels, in_h, in_w
        # The window it takes the maxima of: padding is the smallest value, never the max.
        self._window = WindowConfig(
            in_h=in_h, in_w=in_w, channels=channels, kernel=kernel, stride=stride, pads=pads,
            dtype=dtype, simd=lanes, pad_code=int(dtype.encode([dtype.min])[0]),
            order=WindowOrder.C_KH_KW)
        self._out_h, self._out_w = self._window.out_h, self._window.out_w
        layout = data.ArrayLayout(shape_of(dtype), lanes)
        super().__init__({"i": In(stream.Signature(layout)), "o": Out(stream.Signature(layout))})

    out_h = property(lambda self: self._out_h)
    out_w = property(lambda self: self._out_w)
    lanes = property(lambda self: self._lanes)

    @property
    def in_words_per_frame(self) -> int:
        return self._in_h * self._in_w * self._channels // self._lanes

    @property
    def out_words_per_frame(self) -> int:
        return self._out_h * self._out_w * self._channels // self._lanes

    @property
    def cycles_per_frame(self) -> int:
        """Steady-state cycles per frame: the window stream carries ``KH*KW`` words per
        output word at one word per cycle, or the input is the bottleneck."""
        return max(self.in_words_per_frame, self.out_words_per_frame * self._taps)

    @property
    def _taps(self) -> int:
        return self._kernel[0] * self._kernel[1]

    def estimate(self, family) -> Features:
        """Resources (:class:`qloom.hw.estimate.Features`): the sliding window's
        (:func:`qloom.hw.swg.estimate`: its line buffer and counters, as features named
        ``window_*``: the window is a submodule of this unit, measured with it) and the
        pool's own (two comparators per lane, the running maximum and output registers,
        the skid buffer after the window, counters)."""
        from . import swg
        from .estimate import comparator_luts
        bits = self._dtype.bits
        f = Features("maxpool")
        window = swg.estimate(self._window, family)
        f.add_part("window", window)
        f.add("lut", "compare", self._lanes * 2 * comparator_luts(bits))
        skid_ff, skid_lut = skid_cost(self._lanes * bits)
        f.add("lut", "skid", skid_lut)
        f.add("ff", "skid", skid_ff)
        f.add("lut", "control", 40)
        f.add("ff", "lanes", self._lanes * bits * 2)
        f.add("ff", "control", 30)
        return f

    def elaborate(self, platform):
        m = Module()
        m.submodules.swg = swg = SlidingWindow(self._window)
        wiring.connect(m, wiring.flipped(self.i), swg.i)
        # The window's words through a skid buffer, so that the window's issue sees a
        # register, not the reduction's ready (its last tap, the output's valid and the
        # next engine's ready): with it, that issue was an eight-input function ahead of
        # the window's counters, CNV-w1a1's deepest logic (10.3 ns by logic_depth).
        m.submodules.skid = skid = SkidBuffer(shape=swg.o.payload.shape())
        wiring.connect(m, swg.o, skid.i)
        window = skid.o

        taps = self._taps
        word = window.payload
        best = Signal.like(word)        # running maximum of the window words so far
        # Whether the word is the window's first or last, as registers kept with the tap
        # counter: the compare of the counter ahead of the window's ready was a LUT level
        # of CNV-w1a1's deepest logic (ready -> the window's issue -> its counters).
        tap = Signal(range(taps))
        first, last = Signal(init=1), Signal(init=taps == 1)
        reduced = Signal.like(word)     # maximum including the current word
        for lane in range(self._lanes):
            m.d.comb += reduced[lane].eq(
                Mux(first | (word[lane] > best[lane]), word[lane], best[lane]))

        m.d.comb += window.ready.eq(~last | ~self.o.valid | self.o.ready)
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(window.valid & window.ready):
            m.d.sync += [best.eq(reduced), tap.eq(tap + 1), first.eq(0),
                         last.eq(tap == taps - 2)]
            with m.If(last):
                m.d.sync += [tap.eq(0), first.eq(1), last.eq(taps == 1),
                             self.o.valid.eq(1), self.o.payload.eq(reduced)]
        return m
