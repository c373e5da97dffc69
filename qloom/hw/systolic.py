"""Weight-stationary systolic array for GEMM-shaped work: a matrix ``W[MH, MW]`` times a
stream of input vectors, on ``rows x cols`` multiply-accumulate processing elements.

Stream contract (the same as the matrix-vector unit's): a vector of ``MW`` input elements
arrives as ``MW/rows`` words of ``rows`` lanes (word ``k`` lane ``r`` = element
``k*rows + r``); its ``MH`` outputs leave as ``MH/cols`` words of ``cols`` lanes (word ``n``
lane ``c`` = output ``n*cols + c``), each the exact accumulator ``W @ values(x)``.

Dataflow. The matrix is cut into ``cols x rows`` tiles ``(n, k)``; processing element
``(r, c)`` holds ``W[n*cols + c, k*rows + r]`` of every tile in a small local memory,
indexed by the tile number ``t = n*(MW/rows) + k`` that travels with the data. An input
vector is stored once in a double-buffered vector buffer and streamed ``MH/cols`` times,
one word (one K-tile) per cycle, tile after tile. Lane ``r`` is delayed ``r`` cycles (input
skew) and moves right one column per cycle; partial sums move down one row per cycle. A PE
registers its product before adding it, so its paths are one multiply or one add (the two in
one cycle ran the ECP5-85F bench at 116.8 MHz). At the bottom, each column accumulates its
``MW/rows`` K-tile sums; the columns' results are re-aligned (output de-skew) and written
into an output FIFO.

The array itself never stalls: a word whose K-tile completes an output word is issued only
when the output FIFO has room reserved for it (credits), so backpressure on ``o`` stops the
issue of work, not the pipeline. Steady state: one input word per cycle into the array,
``cycles_per_vector = (MH/cols) * (MW/rows)``.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
import numpy as np

from ..nn.dtypes import DataType, smallest_type
from ..nn.ir import accumulator_range
from .dsp import Ecp5Multiplier, check_dsp_primitive
from .estimate import Features
from .fifo import StreamFIFO
from .types import shape_of
from .weight_mem import delayed

__all__ = ["SystolicArray"]


def _lut_multiply(w, x):
    """``w * x`` as shift-and-add of partial products (kept out of DSP blocks); when ``w``
    is signed, its top bit weighs ``-2**(width-1)``."""
    shape = w.shape()
    total = 0
    for bit in range(shape.width):
        partial = Mux(w[bit], x << bit, 0)
        negative = shape.signed and bit == shape.width - 1
        total = total - partial if negative else total + partial
    return total


class _ProcessingElement(wiring.Component):
    """One MAC stage. ``x_in``/``t_in`` (input value and tile number) arrive registered from
    the left and leave registered to the right one cycle later; the weight of tile ``t_in``
    is read from local memory, the product ``w * x_in`` registered two cycles after ``x_in``
    arrives and ``psum_out = psum_in + product`` one cycle later. ``psum_in`` must be the
    ``psum_out`` of the PE above."""

    def __init__(self, *, weights, w_shape, x_shape, t_shape, acc_shape, use_dsp,
                 dsp_primitive=False):
        self._weights = [int(w) for w in weights]
        self._w_shape, self._use_dsp = w_shape, use_dsp
        self._dsp_primitive = dsp_primitive
        super().__init__({
            "x_in": In(x_shape), "t_in": In(t_shape), "psum_in": In(acc_shape),
            "x_out": Out(x_shape), "t_out": Out(t_shape), "psum_out": Out(acc_shape),
        })

    def elaborate(self, platform):
        m = Module()
        weight = Signal(self._w_shape)
        if len(self._weights) == 1:
            m.d.comb += weight.eq(self._weights[0])
        else:
            m.submodules.weights = mem = Memory(shape=self._w_shape, depth=len(self._weights),
                                                init=self._weights)
            port = mem.read_port()
            m.d.comb += [port.addr.eq(self.t_in), weight.eq(port.data)]
        x_delayed = Signal.like(self.x_in)
        m.d.sync += [self.x_out.eq(self.x_in), self.t_out.eq(self.t_in),
                     x_delayed.eq(self.x_in)]
        product_reg = Signal(self.psum_out.shape(), reset_less=True)
        if self._dsp_primitive and self._use_dsp:
            # The block's own input and output registers: the product two cycles later.
            m.submodules.dsp = block = Ecp5Multiplier(weight.shape(), x_delayed.shape())
            m.d.comb += [block.a.eq(weight), block.b.eq(x_delayed), block.ce.eq(1),
                         product_reg.eq(block.p)]
        else:
            product = (weight * x_delayed if self._use_dsp
                       else _lut_multiply(weight, x_delayed))
            m.d.sync += product_reg.eq(product)
            if self._dsp_primitive:
                # Another register, to match the array's DSP blocks (two cycles).
                late = Signal.like(product_reg, reset_less=True)
                m.d.sync += late.eq(product_reg)
                product_reg = late
        m.d.sync += self.psum_out.eq(self.psum_in + product_reg)
        return m


class SystolicArray(wiring.Component):
    """``i``: ``ArrayLayout(shape_of(in_type), rows)`` -> ``o``:
    ``ArrayLayout(shape_of(acc_type), cols)``; see the module docstring.

    ``dsp_budget`` caps the PEs whose multiplier is written as ``*`` (mapped to DSP blocks
    by synthesis); the others use shift-and-add logic. ``None``: every PE uses ``*``.
    ``dsp_primitive="ecp5"`` puts those multipliers on MULT18X18D blocks with their own
    registers (``qloom.hw.dsp``; written as ``*``, Yosys bypasses them and the block's
    multiply set the ECP5 bench at 136.6 MHz), every PE then taking a cycle more.
    """

    def __init__(self, *, weights: np.ndarray, w_type: DataType, in_type: DataType,
                 rows: int, cols: int, dsp_budget: int | None = None,
                 dsp_primitive: str | None = None):
        for name, dtype in (("w_type", w_type), ("in_type", in_type)):
            if not isinstance(dtype, DataType):
                raise TypeError(f"{name} must be a qloom DataType, not {dtype!r}")
        for name, value in (("rows", rows), ("cols", cols)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise TypeError(f"{name} must be a positive integer, not {value!r}")
        if dsp_budget is not None and (not isinstance(dsp_budget, int)
                                       or isinstance(dsp_budget, bool) or dsp_budget < 0):
            raise TypeError(f"dsp_budget must be None or a non-negative integer, "
                            f"not {dsp_budget!r}")
        if (not isinstance(weights, np.ndarray) or weights.ndim != 2
                or not np.issubdtype(weights.dtype, np.integer)):
            raise TypeError(f"weights must be a 2-D integer numpy array, not {weights!r}")
        if not w_type.allows(weights):
            raise ValueError(f"weights must be values of w_type {w_type}, in "
                             f"[{w_type.min}, {w_type.max}]")
        check_dsp_primitive(dsp_primitive, [("w_type", w_type), ("in_type", in_type)])
        mh, mw = weights.shape
        if mw % rows:
            raise ValueError(f"MW ({mw}) must be divisible by rows ({rows})")
        if mh % cols:
            raise ValueError(f"MH ({mh}) must be divisible by cols ({cols})")
        self._weights = weights.astype(np.int64)
        self._w_type, self._in_type = w_type, in_type
        self._rows, self._cols = rows, cols
        self._dsp_count = rows * cols if dsp_budget is None else min(dsp_budget, rows * cols)
        self._dsp_primitive = dsp_primitive if self._dsp_count else None
        lo, hi = accumulator_range(self._weights, in_type)
        self._acc_type = smallest_type(lo.min(), hi.max())
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(shape_of(in_type), rows))),
            "o": Out(stream.Signature(data.ArrayLayout(shape_of(self._acc_type), cols))),
        })

    mh = property(lambda self: self._weights.shape[0])
    mw = property(lambda self: self._weights.shape[1])
    rows = property(lambda self: self._rows)
    cols = property(lambda self: self._cols)
    acc_type = property(lambda self: self._acc_type)
    out_type = property(lambda self: self._acc_type)
    dsp_count = property(lambda self: self._dsp_count)

    @property
    def k_tiles(self) -> int:
        return self.mw // self._rows

    @property
    def n_tiles(self) -> int:
        return self.mh // self._cols

    @property
    def cycles_per_vector(self) -> int:
        return self.n_tiles * self.k_tiles

    @property
    def latency(self) -> int:
        """Cycles from the transfer of a vector's last input word to the transfer of its
        first output word, on an idle array with ``o`` ready: ``k_tiles`` to issue the
        vector's words for output word 0 (the first one the cycle after the bank fills),
        ``rows + cols + 2`` through the skewed array (a PE takes three cycles: weight read,
        multiply, add; one more with ECP5 DSP blocks, whose product takes two), one in the
        column accumulator and two through the output FIFO."""
        return self.k_tiles + self._rows + self._cols + 5 + self._pe_extra

    @property
    def _fifo_depth(self) -> int:
        # enough credits to cover the issue -> FIFO -> credit round trip at full rate
        return -(-(self._rows + self._cols + 9 + self._pe_extra) // self.k_tiles) + 1

    def estimate(self, family) -> Features:
        """The array's resources on ``family`` (:class:`qloom.hw.estimate.Features`): per
        PE a multiplier (a DSP block for ``dsp_count`` of them, shift-and-add logic for the
        rest), an adder and its partial-sum and operand registers; the weight memory; the
        skew registers."""
        from .estimate import lut_multiplier_luts, memory_cost
        rows, cols, dsps = self._rows, self._cols, self._dsp_count
        w_bits, in_bits, acc_bits = self._w_type.bits, self._in_type.bits, self._acc_type.bits
        f = Features("systolic")
        pes = rows * cols
        f.add("lut", "multiplier", (pes - dsps) * lut_multiplier_luts(in_bits, w_bits))
        f.add("lut", "adder", pes * acc_bits)
        f.add("ff", "pe_registers", pes * (2 * acc_bits + in_bits))
        if self._dsp_primitive is not None:
            # The second product register of the PEs without a block (``dsp_primitive``).
            f.add("ff", "pe_registers", (pes - dsps) * acc_bits)
        f.add("ff", "skew", rows * in_bits * (rows - 1) // 2
              + cols * acc_bits * (cols - 1) // 2)
        f.add("lut", "control", 40)
        f.add("ff", "control", 30)
        f.dsp = dsps
        f.add_memory("weights", memory_cost(self.cycles_per_vector, pes * w_bits, family))
        return f

    @property
    def _pe_extra(self) -> int:
        """Cycles a PE takes beyond three: one with ECP5 DSP blocks (``dsp_primitive``)."""
        return int(self._dsp_primitive is not None)

    def elaborate(self, platform):
        m = Module()
        rows, cols, kt, nt = self._rows, self._cols, self.k_tiles, self.n_tiles
        tiles = kt * nt
        acc_shape = shape_of(self._acc_type)
        x_shape = signed(2) if self._in_type.bipolar else shape_of(self._in_type)
        w_shape = signed(2) if self._w_type.bipolar else shape_of(self._w_type)

        # Input vector buffer: two banks of `kt` words, loaded from `i`, each streamed
        # `nt` times by the feeder.
        m.submodules.vectors = vectors = Memory(shape=self.i.payload.shape(), depth=2 * kt,
                                                init=[])
        wp, rp = vectors.write_port(), vectors.read_port()
        full = Signal(2)
        load_bank, load_k = Signal(), Signal(range(kt))
        m.d.comb += [
            self.i.ready.eq(~full.bit_select(load_bank, 1)),
            wp.addr.eq(Mux(load_bank, kt, 0) + load_k),
            wp.data.eq(self.i.payload),
            wp.en.eq(self.i.valid & self.i.ready),
        ]
        with m.If(wp.en):
            m.d.sync += load_k.eq(load_k + 1)
            with m.If(load_k == kt - 1):
                m.d.sync += [load_k.eq(0), load_bank.eq(~load_bank)]

        # Output FIFO with credits: a word completing an output word issues only with room
        fifo_depth = self._fifo_depth
        m.submodules.out_fifo = out_fifo = StreamFIFO(shape=self.o.payload.shape(),
                                                      depth=fifo_depth)
        wiring.connect(m, out_fifo.o, wiring.flipped(self.o))
        credits = Signal(range(fifo_depth + 1), init=fifo_depth)

        # Feeder: issue (n, k) words of the full bank, k fastest.
        feed_bank, feed_k = Signal(), Signal(range(kt))
        feed_n, feed_t = Signal(range(nt)), Signal(range(tiles))
        last_k = feed_k == kt - 1
        issue = Signal()
        m.d.comb += [
            issue.eq(full.bit_select(feed_bank, 1) & (~last_k | (credits != 0))),
            rp.addr.eq(Mux(feed_bank, kt, 0) + feed_k),
        ]
        with m.If(issue):
            m.d.sync += [feed_k.eq(feed_k + 1), feed_t.eq(feed_t + 1)]
            with m.If(last_k):
                m.d.sync += [feed_k.eq(0), feed_n.eq(feed_n + 1)]
                with m.If(feed_n == nt - 1):
                    m.d.sync += [feed_n.eq(0), feed_t.eq(0), feed_bank.eq(~feed_bank)]
        # Whole-signal assignments (Verilog `assign`): a conditional or partial one becomes
        # an `always @*` block that Icarus in SystemVerilog mode may never run, and its X
        # would stick in `full`.
        loaded = Signal(2)
        freed = Signal(2)
        load_done = wp.en & (load_k == kt - 1)
        feed_done = issue & last_k & (feed_n == nt - 1)
        m.d.comb += [loaded.eq(Cat(load_done & ~load_bank, load_done & load_bank)),
                     freed.eq(Cat(feed_done & ~feed_bank, feed_done & feed_bank))]
        m.d.sync += full.eq((full | loaded) & ~freed)
        m.d.sync += credits.eq(credits - (issue & last_k) + (self.o.valid & self.o.ready))

        # Stage 0 (the cycle after issue): the buffered word (read port latency), its tile
        # number and the control bits (valid, first and last K-tile).
        t0 = Signal.like(feed_t)
        ctrl_layout = data.StructLayout({"valid": 1, "first": 1, "last": 1})
        ctrl0 = Signal(ctrl_layout)
        m.d.sync += [t0.eq(feed_t), ctrl0.valid.eq(issue), ctrl0.first.eq(feed_k == 0),
                     ctrl0.last.eq(last_k)]
        x0 = [Signal(x_shape, name=f"x0_{r}") for r in range(rows)]
        for r in range(rows):
            lane = rp.data[r]
            m.d.comb += x0[r].eq(Mux(lane, 1, -1) if self._in_type.bipolar else lane)

        # Input skew: lane r enters row r after r registers, with its tile number.
        pes = [[None] * cols for _ in range(rows)]
        for r in range(rows):
            for c in range(cols):
                pe = _ProcessingElement(
                    weights=[self._weights[n * cols + c, k * rows + r]
                             for n in range(nt) for k in range(kt)],
                    w_shape=w_shape, x_shape=x_shape, t_shape=t0.shape(),
                    acc_shape=acc_shape, use_dsp=r * cols + c < self._dsp_count,
                    dsp_primitive=self._dsp_primitive is not None)
                m.submodules[f"pe_{r}_{c}"] = pes[r][c] = pe
                if c == 0:
                    m.d.comb += [pe.x_in.eq(delayed(m, x0[r], r, f"skew{r}_x")),
                                 pe.t_in.eq(delayed(m, t0, r, f"skew{r}_t"))]
                else:
                    m.d.comb += [pe.x_in.eq(pes[r][c - 1].x_out),
                                 pe.t_in.eq(pes[r][c - 1].t_out)]
                if r > 0:
                    m.d.comb += pe.psum_in.eq(pes[r - 1][c].psum_out)

        # Bottom: column c's K-tile sum is in psum_out of the last row `rows + 2 + c` cycles
        # after stage 0. Accumulate over K-tiles, then delay column c by `cols - 1 - c`.
        results = Signal(self.o.payload.shape())
        out_valid = None
        for c in range(cols):
            ctrl = Signal(ctrl_layout, name=f"ctrl_bottom{c}")
            m.d.comb += ctrl.eq(delayed(m, ctrl0, rows + 2 + self._pe_extra + c, f"ctrl{c}"))
            acc = Signal(acc_shape, name=f"acc{c}")
            done = Signal(acc_shape, name=f"done{c}")
            done_valid = Signal(name=f"done_valid{c}")
            total = Mux(ctrl.first, 0, acc) + pes[rows - 1][c].psum_out
            m.d.sync += done_valid.eq(ctrl.valid & ctrl.last)
            with m.If(ctrl.valid):
                m.d.sync += acc.eq(total)
                with m.If(ctrl.last):
                    m.d.sync += done.eq(total)
            m.d.comb += results[c].eq(delayed(m, done, cols - 1 - c, f"deskew{c}"))
            if c == cols - 1:
                out_valid = done_valid
        m.d.comb += [out_fifo.i.payload.eq(results), out_fifo.i.valid.eq(out_valid)]
        return m
