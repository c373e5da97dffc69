"""Nearest-neighbour upsampling by integer factors (``qloom.nn.ir.Upsample``).

The input image ``[H, W, C]`` arrives pixel by pixel, row-major, each pixel as
``C/lanes`` words. Each input row leaves ``SH`` times, and within a row each pixel ``SW``
times in a row (its words in order each time). The first time a row leaves, its pixels
pass straight through as they arrive and are written into a line buffer of one image row;
the pixel's further repetitions and the row's further copies are read back from it. So
the input is taken only while the first copy of a row passes (the unit never holds more
than one row), and one word leaves per cycle whenever the output is ready.

Without vertical repetition (``SH == 1``) the buffer holds one pixel instead of a row.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..nn.dtypes import DataType
from .estimate import Features
from .types import shape_of

__all__ = ["Upsample", "input_words_needed"]


def input_words_needed(*, in_h: int, in_w: int, words: int, scale: tuple[int, int]):
    """For every output word of a frame, how many input words the unit must have taken
    before it can emit it (a numpy array): the output word of pixel ``(r, c)`` and channel
    word ``w`` is input word ``w`` of pixel ``(r // SH, c // SW)``. This is the unit's
    schedule as the planner sizes the buffers of reconvergent paths with it
    (``qloom.flows.compile.schedule``)."""
    import numpy as np
    sh, sw = scale
    rows = np.arange(in_h * sh) // sh
    cols = np.arange(in_w * sw) // sw
    pixel = rows[:, None] * in_w + cols[None, :]
    return (pixel[:, :, None] * words + np.arange(words) + 1).ravel()


class Upsample(wiring.Component):
    """``i``: pixels as ``channels/lanes`` words of ``ArrayLayout(shape_of(dtype), lanes)``
    -> ``o``: the same words, ``in_h * SH`` rows of ``in_w * SW`` pixels."""

    def __init__(self, *, in_h: int, in_w: int, channels: int, scale: tuple[int, int],
                 dtype: DataType, lanes: int):
        for name, value in (("in_h", in_h), ("in_w", in_w), ("channels", channels),
                            ("lanes", lanes)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise TypeError(f"{name} must be a positive integer, not {value!r}")
        if (not isinstance(scale, tuple) or len(scale) != 2 or not all(
                isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in scale)):
            raise TypeError(f"scale must be a tuple of 2 positive integers, not {scale!r}")
        if not isinstance(dtype, DataType):
            raise TypeError(f"dtype must be a qloom DataType, not {dtype!r}")
        if channels % lanes:
            raise ValueError(f"channels ({channels}) must be divisible by lanes ({lanes})")
        self._in_h, self._in_w, self._channels = in_h, in_w, channels
        self._scale, self._dtype, self._lanes = scale, dtype, lanes
        layout = data.ArrayLayout(shape_of(dtype), lanes)
        super().__init__({"i": In(stream.Signature(layout)), "o": Out(stream.Signature(layout))})

    lanes = property(lambda self: self._lanes)
    scale = property(lambda self: self._scale)

    @property
    def words_per_pixel(self) -> int:
        return self._channels // self._lanes

    @property
    def in_words_per_frame(self) -> int:
        return self._in_h * self._in_w * self.words_per_pixel

    @property
    def out_words_per_frame(self) -> int:
        return self.in_words_per_frame * self._scale[0] * self._scale[1]

    @property
    def cycles_per_frame(self) -> int:
        """Cycles per frame with frames back to back: one output word per cycle."""
        return self.out_words_per_frame

    @property
    def buffer_words(self) -> int:
        """Words of the line buffer: one image row, or one pixel without ``SH``."""
        return self.words_per_pixel * (self._in_w if self._scale[0] > 1 else 1)

    def input_words_needed(self):
        """Per output word, the input words taken before it (``input_words_needed``)."""
        return input_words_needed(in_h=self._in_h, in_w=self._in_w,
                                  words=self.words_per_pixel, scale=self._scale)

    def estimate(self, family) -> Features:
        """Resources (:class:`qloom.hw.estimate.Features`): the line buffer (where Yosys
        puts a memory of its size), the output register and its source mux, the four
        counters and the buffer address."""
        from .estimate import auto_ram_cost
        width = self._lanes * self._dtype.bits
        f = Features("upsample")
        f.add_memory("buffer", auto_ram_cost(self.buffer_words, width, family))
        f.add("ff", "output", 2 * width)           # the output word and the passed word
        f.add("lut", "output", width)
        counter_bits = sum(max(1, (n - 1).bit_length()) for n in (
            self.words_per_pixel, self._scale[1], self._in_w, self._scale[0]))
        address_bits = max(1, (self.buffer_words - 1).bit_length())
        f.add("ff", "counters", counter_bits + address_bits)
        f.add("lut", "counters", 2 * counter_bits + 2 * address_bits)
        f.add("lut", "control", 8)
        f.add("ff", "control", 2)
        return f

    def elaborate(self, platform):
        m = Module()
        sh, sw = self._scale
        cw, w_in = self.words_per_pixel, self._in_w
        m.submodules.mem = mem = Memory(shape=self.i.payload.shape(),
                                        depth=self.buffer_words, init=[])
        wp, rp = mem.write_port(), mem.read_port()

        # The position of the next output word: channel word, repetition along W, input
        # pixel in its row, copy of the row; and the buffer address of the pixel's word 0.
        word = Signal(range(cw))
        rep = Signal(range(sw))
        col = Signal(range(w_in))
        copy = Signal(range(sh))
        base = Signal(range(self.buffer_words))
        passing = Signal()          # the word is the input's (first copy, first repetition)
        advance, issue = Signal(), Signal()
        from_input = Signal()       # the output register holds the passed word
        held = Signal.like(self.i.payload)
        m.d.comb += [
            passing.eq((copy == 0) & (rep == 0)),
            advance.eq(~self.o.valid | self.o.ready),
            issue.eq(advance & (~passing | self.i.valid)),
            self.i.ready.eq(advance & passing),
            wp.addr.eq(base + word), wp.data.eq(self.i.payload),
            wp.en.eq(self.i.valid & self.i.ready),
            rp.addr.eq(base + word), rp.en.eq(issue & ~passing),
            self.o.payload.eq(Mux(from_input, held, rp.data)),
        ]
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(issue):
            m.d.sync += [self.o.valid.eq(1), from_input.eq(passing)]
            with m.If(passing):
                m.d.sync += held.eq(self.i.payload)
            self._step(m, word, rep, col, copy, base)
        return m

    def _step(self, m, word, rep, col, copy, base):
        """Move the position to the next output word."""
        sh, sw = self._scale
        cw, w_in = self.words_per_pixel, self._in_w
        row_buffer = sh > 1
        with m.If(word != cw - 1):
            m.d.sync += word.eq(word + 1)
        with m.Else():
            m.d.sync += word.eq(0)
            with m.If(rep != sw - 1):
                m.d.sync += rep.eq(rep + 1)
            with m.Else():
                m.d.sync += rep.eq(0)
                with m.If(col != w_in - 1):
                    m.d.sync += col.eq(col + 1)
                    if row_buffer:
                        m.d.sync += base.eq(base + cw)
                with m.Else():
                    m.d.sync += [col.eq(0), base.eq(0)]
                    m.d.sync += copy.eq(Mux(copy == sh - 1, 0, copy + 1))
