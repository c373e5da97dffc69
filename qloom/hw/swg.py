"""Sliding window generator: im2col as a stream, with the line buffer in block memory.

The input image ``[H, W, C]`` arrives pixel by pixel (row-major), each pixel as ``C/simd``
words of ``simd`` channels. For every output pixel, in row-major order, the generator emits
its ``KH x KW x C`` window as ``KH*KW*C/simd`` words, in the (kh, kw, c) order of
``qloom.nn.ir.im2col`` (or, for pooling, channel word outermost: see ``WindowOrder``).
Zero padding is generated on the fly, never stored.

Line buffer: a circular memory of ``R`` image rows (:func:`buffer_rows`). The writer fills
rows in order and may start a row only while fewer than ``R`` rows are held; the reader
releases the rows below its current window when it moves to the next output row (all of a
frame's rows at the end of the frame). Nothing of a frame, padding included, leaves before
its first input word has arrived. ``KH`` rows are enough to never deadlock; ``KH + SH``
let the writer bring in the next output row's new rows while the reader is still emitting
the current one, so in steady state one word leaves per cycle unless the input itself is
the bottleneck. Frames follow each other back to back: ``R`` also holds, beside the rows
of a frame's last output row, every row of the next frame's first window, which the
writer can thus take in while the last row is read. (With ``KH + SH`` rows only, the first
window waited at each frame's start for rows the layers before had to compute then:
CNV-w1a1 ran at 11,399 cycles per frame where its plan said 10,368.)
"""

import dataclasses
import enum

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..nn.dtypes import DataType
from .estimate import Features
from .skid import flag_groups, flag_slices
from .types import shape_of
from .weight_mem import read_register

__all__ = ["WindowOrder", "WindowConfig", "SlidingWindow", "buffer_rows", "estimate"]


class WindowOrder(enum.Enum):
    """The order of one window's words."""
    #: (kh, kw, c): im2col order, what a convolution's weights are laid out for
    KH_KW_C = "kh_kw_c"
    #: (c, kh, kw): the ``KH*KW`` words of one channel word follow each other (pooling)
    C_KH_KW = "c_kh_kw"


def _positive_int(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise TypeError(f"{name} must be a positive integer, not {value!r}")


def _int_tuple(name, value, length, minimum):
    what = "positive" if minimum == 1 else "non-negative"
    if (not isinstance(value, tuple) or len(value) != length
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= minimum
                       for v in value)):
        raise TypeError(f"{name} must be a tuple of {length} {what} integers, not {value!r}")


def _times(value, const):
    """``value * const`` for a constant ``const >= 0`` as a sum of shifts, so synthesis
    never spends a DSP block on address arithmetic."""
    terms = [value << bit for bit in range(const.bit_length()) if const >> bit & 1]
    return sum(terms[1:], terms[0]) if terms else 0


def _add_mod(value, const, modulus):
    """``(value + const) % modulus`` for ``0 <= value < modulus``: the wrap decided on
    ``value`` (a compare beside the additions, not after them); an int for an int."""
    const %= modulus
    if isinstance(value, int):
        return (value + const) % modulus
    return Mux(value >= modulus - const, value + (const - modulus), value + const)


@dataclasses.dataclass(frozen=True)
class WindowConfig:
    """What a sliding window generator is, checked once: an ``[in_h, in_w, channels]``
    image of ``dtype`` elements arriving ``simd`` channels per word, the ``kernel`` windows
    at ``stride`` over the image with ``pads`` (top, left, bottom, right) rows and columns
    of ``pad_code``, each window's words in ``order``. The generator
    (``SlidingWindow``), its estimate (``estimate``) and its cycle count read it."""

    in_h: int
    in_w: int
    channels: int
    kernel: tuple
    dtype: DataType
    simd: int
    stride: tuple = (1, 1)
    pads: tuple = (0, 0, 0, 0)
    pad_code: int = 0
    order: WindowOrder = WindowOrder.KH_KW_C

    def __post_init__(self):
        for name in ("in_h", "in_w", "channels", "simd"):
            _positive_int(name, getattr(self, name))
        _int_tuple("kernel", self.kernel, 2, 1)
        _int_tuple("stride", self.stride, 2, 1)
        _int_tuple("pads", self.pads, 4, 0)
        if not isinstance(self.dtype, DataType):
            raise TypeError(f"dtype must be a qloom DataType, not {self.dtype!r}")
        if not isinstance(self.order, WindowOrder):
            raise TypeError(f"order must be a WindowOrder, not {self.order!r}")
        if not isinstance(self.pad_code, int) or isinstance(self.pad_code, bool):
            raise TypeError(f"pad_code must be an integer, not {self.pad_code!r}")
        if self.channels % self.simd:
            raise ValueError(f"channels ({self.channels}) must be divisible by simd "
                             f"({self.simd})")
        padded = self.padded
        if self.kernel[0] > padded[0] or self.kernel[1] > padded[1]:
            raise ValueError(f"kernel {self.kernel} does not fit the padded input {padded}")
        code_min, code_max = self.dtype.encode([self.dtype.min, self.dtype.max]).tolist()
        if not code_min <= self.pad_code <= code_max:
            raise ValueError(f"pad_code ({self.pad_code}) must be a code of {self.dtype}, "
                             f"in [{code_min}, {code_max}]")

    @property
    def padded(self) -> tuple[int, int]:
        """The padded image's height and width."""
        top, left, bottom, right = self.pads
        return self.in_h + top + bottom, self.in_w + left + right

    @property
    def out_h(self) -> int:
        return (self.padded[0] - self.kernel[0]) // self.stride[0] + 1

    @property
    def out_w(self) -> int:
        return (self.padded[1] - self.kernel[1]) // self.stride[1] + 1

    @property
    def window(self) -> int:
        """Elements per window: ``KH * KW * channels``."""
        return self.kernel[0] * self.kernel[1] * self.channels

    @property
    def pixel_words(self) -> int:
        """Words per pixel."""
        return self.channels // self.simd

    @property
    def row_words(self) -> int:
        """Words per image row."""
        return self.in_w * self.pixel_words

    @property
    def in_words_per_frame(self) -> int:
        return self.in_h * self.row_words

    @property
    def out_words_per_frame(self) -> int:
        return self.out_h * self.out_w * self.window // self.simd

    @property
    def cycles_per_frame(self) -> int:
        """Steady-state cycles per frame with frames back to back: one word per cycle on the
        busier side."""
        return max(self.in_words_per_frame, self.out_words_per_frame)

    @property
    def buffer_rows(self) -> int:
        return buffer_rows(self.in_h, self.kernel, self.stride, self.pads)

    @property
    def buffer_words(self) -> int:
        """Line buffer size in words of ``simd`` elements."""
        return self.buffer_rows * self.row_words


class SlidingWindow(wiring.Component):
    """``i``: ``ArrayLayout(shape_of(dtype), simd)`` pixels -> ``o``: the same layout,
    windows of ``KH*KW*channels/simd`` words per output pixel, as ``config`` (a
    ``WindowConfig``) describes."""

    def __init__(self, config: WindowConfig):
        if not isinstance(config, WindowConfig):
            raise TypeError(f"config must be a WindowConfig, not {config!r}")
        self.config = config
        layout = data.ArrayLayout(shape_of(config.dtype), config.simd)
        super().__init__({"i": In(stream.Signature(layout)), "o": Out(stream.Signature(layout))})

    out_h = property(lambda self: self.config.out_h)
    out_w = property(lambda self: self.config.out_w)
    kernel = property(lambda self: self.config.kernel)
    stride = property(lambda self: self.config.stride)
    pads = property(lambda self: self.config.pads)
    simd = property(lambda self: self.config.simd)
    dtype = property(lambda self: self.config.dtype)
    order = property(lambda self: self.config.order)
    window = property(lambda self: self.config.window)
    in_words_per_frame = property(lambda self: self.config.in_words_per_frame)
    out_words_per_frame = property(lambda self: self.config.out_words_per_frame)
    cycles_per_frame = property(lambda self: self.config.cycles_per_frame)
    buffer_rows = property(lambda self: self.config.buffer_rows)
    buffer_words = property(lambda self: self.config.buffer_words)

    def elaborate(self, platform):
        m = Module()
        # The reader never reads a row the writer is writing (it reads completed rows; the
        # writer writes rows released a cycle before at the earliest), so a read-write
        # collision needs no handling (no_rw_check). Yosys honours that for a read port it
        # makes synchronous itself (an asynchronous port and the register after it):
        # emitted synchronous, the port kept its read-before-write emulation, a mux after
        # the block RAM that kept the block's own output register from the read (CNV-w1a1:
        # every line buffer's blocks without it).
        m.submodules.mem = mem = Memory(shape=self.i.payload.shape(),
                                        depth=self.buffer_rows * self.config.row_words, init=[],
                                        attrs={"no_rw_check": 1})
        rows, candidate = self._shared_signals(mem)
        self._elaborate_writer(m, mem.write_port(), rows)
        self._elaborate_reader(m, mem.read_port(domain="comb"), rows, candidate)
        self._elaborate_walk(m, rows, candidate)
        return m

    def _shared_signals(self, mem):
        """The signals the writer, the reader and the window walk share: the row
        bookkeeping (``_Rows``) and the reader's next window position (``_Candidate``)."""
        H, (KH, _), top = self.config.in_h, self.config.kernel, self.config.pads[0]
        R = self.buffer_rows
        # Signed: the reader may release rows the writer has not finished yet, e.g. rows a
        # stride skips or the frame's last rows.
        rows = _Rows(held=Signal(range(-2 * H - R, R + 1), name="held"),
                     avail=Signal(range(-2 * H - R, 2 * H + R + 1), name="avail"),
                     row_written=Signal(name="row_written"),
                     w_col=Signal(range(self.config.row_words), name="w_col"),
                     issue=Signal(name="issue"), release_c=Signal(range(H + 1), name="release_c"),
                     frame_read=Signal(name="frame_read"),
                     room_limits=(Signal(range(H + R + 1), name="room_limit0"),
                                  Signal(range(H + R + 1), name="room_limit1")))
        iy = Signal(range(-top, H + self.config.pads[2] + KH))
        candidate = _Candidate(valid=Signal(name="valid_c"), pad=Signal(name="pad_c"),
                               frame=Signal(name="frame_c"),
                               addr=Signal(range(mem.depth), name="addr_c"),
                               iy=Signal.like(iy, name="iy_c"), load=Signal(), next_iy=iy)
        return rows, candidate

    def _elaborate_writer(self, m, wp, rows):
        """Image words into the circular buffer, row after row, and the row bookkeeping
        (``held``, ``avail``) that the writer's rows and the reader's releases move."""
        H, R, RW = self.config.in_h, self.buffer_rows, self.config.row_words
        w_addr = Signal(range(R * RW))
        w_col = rows.w_col
        # `held < R` as a register kept with `held`, so that a word's write does not wait
        # for the compare.
        room = Signal(init=1)
        m.d.comb += [
            self.i.ready.eq(room),
            wp.addr.eq(w_addr),
            wp.data.eq(self.i.payload),
            wp.en.eq(self.i.valid & self.i.ready),
        ]
        w_col_last = Signal(init=RW == 1)               # w_col == RW - 1, as a register
        m.d.comb += rows.row_written.eq(wp.en & w_col_last)
        with m.If(wp.en):
            m.d.sync += [w_addr.eq(Mux(w_addr == R * RW - 1, 0, w_addr + 1)),
                         w_col.eq(Mux(w_col_last, 0, w_col + 1)),
                         w_col_last.eq(Mux(w_col_last, RW == 1, w_col == RW - 2))]

        # Every sum the bookkeeping can take is computed from registers, and the late
        # signals choose among them last: whether a row completes now, then the reader's
        # issue (the output's ready through the issue decision).
        def choose(late, value, step):
            return Mux(late, Mux(rows.row_written, value + 1 - step, value - step),
                       Mux(rows.row_written, value + 1, value))

        # The room after this cycle, `held' < R`, from compares of `held` with registers
        # and constants: `held + 1 - release_c < R` is `held < R - 1 + release_c`.
        limit, limit1 = rows.room_limits
        m.d.sync += [rows.held.eq(choose(rows.issue, rows.held, rows.release_c)),
                     room.eq(Mux(rows.issue,
                                 Mux(rows.row_written, rows.held < limit1, rows.held < limit),
                                 Mux(rows.row_written, rows.held < R - 1, rows.held < R))),
                     rows.avail.eq(choose(rows.frame_read, rows.avail, H))]

    def _elaborate_reader(self, m, rp, rows, candidate):
        """Issue the candidate when its row is there and the output can move; stages 1 and
        2: the word read (or the pad code), then a register after the memory (on the ECP5
        the block RAM's own, see qloom.flows.toolchain.ecp5_outreg), both held under backpressure."""
        avail, c = rows.avail, candidate
        valid1, pad1, valid2 = Signal(), Signal(), Signal()
        # the writer has begun the frame being read (no padding is emitted ahead of a frame)
        started, ready_c, advance = Signal(), Signal(), Signal()
        # Whether the writer has begun the read frame and whether the candidate's row is
        # there, as registers from the bookkeeping one cycle before: compared in logic, the
        # row compare fed the issue and so every counter's enable (UP5K: 43.2 MHz). A stale
        # answer is never wrong: within a frame rows only arrive, and the frame's end, when
        # `avail` drops by H, is an issue that clears both (one bubble per frame). A loaded
        # candidate's row is compared as it is loaded, so issues run back to back.
        row_there = Signal()
        m.d.sync += started.eq(((avail > 0) | ((avail == 0) & (rows.w_col != 0)))
                               & ~rows.frame_read)
        with m.If(c.load):
            m.d.sync += row_there.eq((c.next_iy < avail) & ~rows.frame_read)
        with m.Else():
            m.d.sync += row_there.eq(c.iy < avail)
        m.d.comb += [
            ready_c.eq(c.valid & started & (c.pad | row_there)),
            advance.eq(~valid2 | self.o.ready),
            rows.issue.eq(ready_c & advance),
            c.load.eq(~c.valid | rows.issue),
            rp.addr.eq(c.addr),
            self.o.valid.eq(valid2),
        ]
        # Whole-signal combinational assignments (Verilog `assign`), not ones under `If`:
        # those become `always @*` blocks that Icarus in SystemVerilog mode never runs
        # when their inputs settle at time 0, and their X would then stick in `held`/`avail`.
        # A candidate's rows are released when it is issued, not when it is computed.
        m.d.comb += rows.frame_read.eq(rows.issue & c.frame)
        pad_word = Value.cast(self.o.payload.shape().const([self.config.pad_code] * self.config.simd))
        data1 = read_register(m, rp.data, advance, "data1")     # the block's read
        data2 = Value.cast(read_register(m, data1, advance, "data2"))
        # The flag choosing the pad code, copied per GROUP_BITS bits of the word and kept
        # apart (as a skid buffer's flags): a wide word's bits go to consumers far apart.
        parts = []
        for k, bits in enumerate(flag_slices(len(data2))):
            pad2 = Signal(name=f"pad2_{k}", attrs={"keep": 1} if k else {})
            with m.If(advance):
                m.d.sync += pad2.eq(pad1)
            parts.append(Mux(pad2, pad_word[bits], data2[bits]))
        m.d.comb += Value.cast(self.o.payload).eq(Cat(*parts))
        with m.If(advance):
            m.d.sync += [valid1.eq(ready_c), pad1.eq(c.pad), valid2.eq(valid1)]

    def _elaborate_walk(self, m, rows, candidate):
        """Walk output pixels and their windows. The counters compute the next window
        position and everything about it (read address, padding, the input row it needs,
        the rows it releases) into the candidate registers; the candidate is issued when
        its row is there and the output can move, and the counters load the next one in the
        same cycle. So the issue decision compares registers only, and no path runs from the
        output's ready through the counters into the address (that path was 15 levels on
        the UP5K).

        The position's input row and column and the address of its row and column in the
        buffer are registers too, kept with the counters (each moves by a constant, or takes
        the value of the window's first row or column), so that a candidate is one addition
        and a few compares of registers: computed from the counters (the buffer slot modulo
        the rows, times the row's words, plus the column times the pixel's words), the read
        address and the input room were the deepest logic of CNV-w1a1 (7-9 levels)."""
        counters = self._elaborate_counters(m, candidate.load)
        origin = self._elaborate_origin(m, candidate.load, counters)
        self._elaborate_position(m, candidate, counters, origin)
        self._elaborate_release(m, rows, candidate.load, origin.lo_row, counters.row_last,
                                counters.oy_last)

    def _elaborate_counters(self, m, load) -> "_Counters":
        """The window's word counters (channel words, kernel column and row, in the
        window's order), each with a register saying that it is at its last value, and
        the last-pixel, last-row and last-frame conditions built from those.

        Each counter's enable is ``load`` and a product of those registers (``below``:
        every counter inside this one at its last value), and what any register here loads
        depends on registers only. With equality compares chained after ``load`` and
        nested pixel/row/frame conditions (a mux level each), the output's ready through
        ``load`` into the counters was CNV-w1a1's deepest logic: seven LUT levels."""
        (KH, KW), CW = self.config.kernel, self.config.pixel_words   # words per pixel
        kh, kw = Signal(range(KH), name="kh"), Signal(range(KW), name="kw")
        cw = Signal(range(CW), name="cw")
        inner = [(cw, CW), (kw, KW), (kh, KH)]
        if self.config.order is WindowOrder.C_KH_KW:
            inner = [(kw, KW), (kh, KH), (cw, CW)]
        below, steps = Const(1), {}
        for counter, count in inner:
            last = Signal(init=count == 1, name=f"{counter.name}_last")
            steps[counter.name] = (load & below, last)     # by name: Values do not hash
            with m.If(load & below):
                m.d.sync += [counter.eq(Mux(last, 0, counter + 1)),
                             last.eq(Mux(last, count == 1, counter == count - 2))]
            below = below & last
        ox_last = Signal(init=self.config.out_w == 1)
        oy_last = Signal(init=self.config.out_h == 1)
        return _Counters(cw=cw, row_step=steps["kh"], column_step=steps["kw"],
                         pixel_last=below, ox_last=ox_last, oy_last=oy_last)

    def _elaborate_origin(self, m, load, counters) -> "_Origin":
        """The window's first input column (``x0``) and row (``lo_row``), where they are
        in the buffer (``x0 * CW`` words, the row's slot times ``RW``), and the next
        window's: the next window row's first row and its words are the next frame's (which
        begins ``H`` rows after this frame's row 0) after the frame's last row. Both
        candidate words are registers kept with ``frame_words`` and ``lo_words`` (computed
        after them, the additions modulo the buffer and three choices were CNV-w1a1's
        deepest logic into ``row_words``, 9.75 ns by logic_depth). Also the counters'
        last-pixel-of-row and last-row-of-frame registers, which follow the origin."""
        H, W = self.config.in_h, self.config.in_w
        SH, SW = self.config.stride
        top, left, bottom, right = self.config.pads
        CW = self.config.pixel_words   # words per pixel
        RW, R = self.config.row_words, self.buffer_rows
        words = R * RW                      # the buffer, R rows of RW words
        c = counters
        pixel_last, row_last = c.pixel_last, c.row_last
        x0 = Signal(range(-left, W + right + 1), init=-left)
        x0_words = Signal(range(-left * CW, (W + right + 1) * CW), init=-left * CW)
        lo_row = Signal(range(-top, H + bottom + 1), init=-top)
        lo_words = Signal(range(words), init=(-top % R) * RW)
        frame_words = Signal(range(words))          # the frame's row 0
        next_x0 = Mux(pixel_last, Mux(c.ox_last, -left, x0 + SW), x0)
        next_x0_words = Mux(pixel_last, Mux(c.ox_last, -left * CW, x0_words + SW * CW),
                            x0_words)

        def rows_on(value, rows):
            """The buffer address ``rows`` rows after ``value``."""
            return _add_mod(value, rows * RW, words)

        frame_lo_words = Signal(range(words), init=rows_on(0, H - top))
        lo_down_words = Signal(range(words), init=rows_on((-top % R) * RW, SH))
        down_lo = Mux(c.oy_last, -top, lo_row + SH)
        down_words = Mux(c.oy_last, frame_lo_words, lo_down_words)
        with m.If(load & pixel_last):
            m.d.sync += [x0.eq(next_x0), x0_words.eq(next_x0_words)]
            # The row's next-to-last pixel, from its first column.
            m.d.sync += c.ox_last.eq(Mux(c.ox_last, self.config.out_w == 1,
                                         x0 == -left + (self.config.out_w - 2) * SW))
        with m.If(load & row_last):
            m.d.sync += [lo_row.eq(down_lo), lo_words.eq(down_words),
                         lo_down_words.eq(Mux(c.oy_last, rows_on(frame_words, H - top + SH),
                                              rows_on(lo_words, 2 * SH))),
                         c.oy_last.eq(Mux(c.oy_last, self.config.out_h == 1,
                                          lo_row == -top + (self.config.out_h - 2) * SH))]
        with m.If(load & c.frame_last):
            m.d.sync += [frame_words.eq(rows_on(frame_words, H)),
                         frame_lo_words.eq(rows_on(frame_words, 2 * H - top))]
        return _Origin(lo_row=lo_row, next_x0=next_x0, next_x0_words=next_x0_words,
                       next_lo=Mux(row_last, down_lo, lo_row),
                       next_lo_words=Mux(row_last, down_words, lo_words))

    def _elaborate_position(self, m, candidate, counters, origin):
        """The position's input row and column and their words in the buffer, each moving
        by a constant or taking the origin's, and from them the candidate: its read address
        (one addition of registers), padding and input row."""
        H, W = self.config.in_h, self.config.in_w
        KH, KW = self.config.kernel
        top, left, bottom, right = self.config.pads
        CW = self.config.pixel_words   # words per pixel
        RW, words = self.config.row_words, self.buffer_rows * self.config.row_words
        c, o = candidate, origin
        iy = Signal(range(-top, H + bottom + KH), init=-top)
        ix = Signal(range(-left, W + right + KW), init=-left)
        row_words = Signal(range(words), init=(-top % self.buffer_rows) * RW)
        col_words = Signal(range(-left * CW, (W + right + 1) * CW), init=-left * CW)
        step, last = counters.row_step
        with m.If(step):
            m.d.sync += [iy.eq(Mux(last, o.next_lo, iy + 1)),
                         row_words.eq(Mux(last, o.next_lo_words,
                                          _add_mod(row_words, RW, words)))]
        step, last = counters.column_step
        with m.If(step):
            m.d.sync += [ix.eq(Mux(last, o.next_x0, ix + 1)),
                         col_words.eq(Mux(last, o.next_x0_words, col_words + CW))]
        m.d.comb += c.next_iy.eq(iy)
        with m.If(c.load):
            m.d.sync += [c.valid.eq(1), c.iy.eq(iy), c.frame.eq(counters.frame_last),
                         c.pad.eq((iy < 0) | (iy >= H) | (ix < 0) | (ix >= W)),
                         c.addr.eq(row_words + col_words + counters.cw)]

    def _elaborate_release(self, m, rows, load, lo_row, row_last, oy_last):
        """The rows the candidate releases when issued: when the window moves down, up to
        the next window's first row, clamped to the image (``next_rel``, a register kept
        with ``lo_row``); all of the frame's rest at its end. Also that count plus the line
        buffer's rows and plus one less, for the writer's room (``_Rows.room_limits``)."""
        H, top, SH, R = self.config.in_h, self.config.pads[0], self.config.stride[0], self.buffer_rows
        frame_last = row_last & oy_last

        def clamp(row, offset=0):
            if isinstance(row, int):
                return min(max(row, 0), H) + offset
            return Mux(row < 0, offset, Mux(row > H, H + offset, row + offset))

        rel = Signal(range(H + 1))                  # rows released this frame
        released = [rows.release_c, *rows.room_limits]
        offsets = [0, R, R - 1]
        next_rels = [Signal(range(H + offset + 1), init=clamp(-top + SH, offset),
                            name=f"next_rel{k}") for k, offset in enumerate(offsets)]
        with m.If(load):
            m.d.sync += [reg.eq(Mux(frame_last, H + offset - rel,
                                    Mux(row_last, next_rel - rel, offset)))
                         for reg, next_rel, offset in zip(released, next_rels, offsets)]
        with m.If(load & row_last):
            m.d.sync += rel.eq(Mux(oy_last, 0, next_rels[0]))
            m.d.sync += [next_rel.eq(Mux(oy_last, clamp(-top + SH, offset),
                                         clamp(lo_row + 2 * SH, offset)))
                         for next_rel, offset in zip(next_rels, offsets)]


@dataclasses.dataclass(frozen=True)
class _Rows:
    """The line buffer's row bookkeeping, shared by the writer and the reader:
    completed rows not released (``held``), completed rows of the frame being read
    (``avail``), whether a row completes this cycle (``row_written``), the writer's word in
    its row (``w_col``), whether the reader issues its candidate (``issue``), the rows the
    candidate releases when issued (``release_c``) and whether it ends a frame
    (``frame_read``); ``room_limits``: ``R + release_c`` and ``R - 1 + release_c``
    (``R`` the buffer's rows), loaded with it."""
    held: Signal
    avail: Signal
    row_written: Signal
    w_col: Signal
    issue: Signal
    release_c: Signal
    frame_read: Signal
    room_limits: tuple


@dataclasses.dataclass(frozen=True)
class _Candidate:
    """The reader's next window word, computed by the walk a cycle ahead of its issue:
    registers for whether there is one, padding, the frame's last word, the read address and
    the input row it needs; ``load`` (the walk moves on) and ``next_iy`` (the input row of
    the position being computed)."""
    valid: Signal
    pad: Signal
    frame: Signal
    addr: Signal
    iy: Signal
    load: Signal
    next_iy: Signal


@dataclasses.dataclass(frozen=True)
class _Counters:
    """The walk's word counters (``SlidingWindow._elaborate_counters``): the channel word
    ``cw``, the kernel row's and column's (enable, at last value) pairs, the window's last
    word (``pixel_last``) and the registers saying that the output pixel is its row's last
    (``ox_last``) and the output row the frame's last (``oy_last``)."""
    cw: Signal
    row_step: tuple
    column_step: tuple
    pixel_last: object
    ox_last: Signal
    oy_last: Signal

    @property
    def row_last(self):
        """The window's last word of its row's last pixel."""
        return self.pixel_last & self.ox_last

    @property
    def frame_last(self):
        """The window's last word of the frame's last pixel."""
        return self.row_last & self.oy_last


@dataclasses.dataclass(frozen=True)
class _Origin:
    """The window origin's row and the next position's origin (``_elaborate_origin``):
    the first row, column and their buffer words the kernel's row and column counters
    return to."""
    lo_row: Signal
    next_x0: object
    next_x0_words: object
    next_lo: object
    next_lo_words: object


def buffer_rows(in_h: int, kernel: tuple, stride: tuple, pads: tuple = (0, 0, 0, 0)) -> int:
    """Image rows in the line buffer: ``KH + SH``, or more where a frame's last output row
    and the next frame's first window together hold more rows (see the module's text)."""
    (kh, _), (sh, _), top, bottom = kernel, stride, pads[0], pads[2]
    out_h = (in_h + top + bottom - kh) // sh + 1
    last = in_h - min(max((out_h - 1) * sh - top, 0), in_h)   # held by the last output row
    first = min(max(kh - top, 0), in_h)                         # the first window's rows
    return max(kh + sh, last + first)


def estimate(config: WindowConfig, family) -> Features:
    """The sliding window's resources (:class:`qloom.hw.estimate.Features`): its line
    buffer of :func:`buffer_rows` image rows (``buffer_words``) and its counters."""
    from .estimate import auto_ram_cost
    c = config
    f = Features("swg")
    f.add("lut", "control", 60)
    f.add("ff", "control", 50)
    rows, words, bits = c.buffer_rows, c.buffer_words, c.simd * c.dtype.bits
    # Logic that grows with the sizes: the window counters' increments and wraps, the
    # read address (slot * row words + column * pixel words + word), the row bookkeeping.
    counter_bits = sum(max(1, (n - 1).bit_length())
                       for n in (c.out_h, c.out_w, *c.kernel, c.pixel_words))
    address_bits = max(1, (words - 1).bit_length())
    row_bits = (2 * c.in_h + rows).bit_length()
    f.add("lut", "counters", 2 * counter_bits)
    f.add("lut", "address", 3 * address_bits)
    f.add("lut", "rows", 4 * row_bits)
    # The registers kept with the counters (``_elaborate_walk``): seven buffer addresses
    # (the position's row and column, the window's first column and row, the frame's row
    # 0, the next window row's two candidates), each an addition and a choice, and the
    # position's row and column, the room's limits and the release counts beside them.
    f.add("lut", "tracking", 12 * address_bits + 4 * row_bits)
    f.add("ff", "tracking", 7 * address_bits + 4 * row_bits)
    f.add_memory("buffer", auto_ram_cost(words, bits, family))
    # The read word twice (the memory's register and the one after it) with the pad flag
    # per GROUP_BITS bits, the candidate's address, row and release count.
    f.add("ff", "output", 2 * bits + flag_groups(bits))
    f.add("ff", "candidate", words.bit_length() + 2 * 8)
    return f


def input_rows_needed(*, in_h: int, kernel: tuple, stride: tuple, pads: tuple):
    """Per output row (a numpy array), the input rows the generator must have taken whole
    before the last word of that row's windows can leave: it reads completed rows only,
    so a window's last kernel row, clipped to the image, must be complete. This is the
    window's schedule as the planner sizes the buffers of reconvergent paths with it
    (``qloom.flows.compile.schedule``)."""
    import numpy as np
    (kh, _), (sh, _), top, bottom = kernel, stride, pads[0], pads[2]
    out_h = (in_h + top + bottom - kh) // sh + 1
    return np.clip(np.arange(out_h) * sh - top + kh, 0, in_h)
