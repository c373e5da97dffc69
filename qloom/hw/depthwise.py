"""Depthwise convolution: each channel convolved with its own ``KH x KW`` kernel.

Lowered as a dense matrix, a depthwise layer would be block-sparse: ``C`` times more
weights and cycles than it needs (FINN's VVAU answers the same problem). This unit reads
the sliding window in channel-word-major order (``WindowOrder.C_KH_KW``): for every output
pixel, for every word of ``lanes`` channels, the ``K = KH*KW`` words of that channel group
follow each other. Each lane multiplies its channel's element by its channel's weight for
that kernel position and accumulates over the ``K`` words; after the ``K``-th the lanes'
exact sums leave as one word. So a pixel's output is ``C/lanes`` words in channel order,
as every other engine expects, and a frame takes ``OH*OW * C/lanes * K`` cycles.

Products are LUT logic (partial products of the narrower operand, or a select for binary,
bipolar and ternary operands; ``qloom.hw.mvu_datapath``): a depthwise layer has few lanes
and the DSP blocks are better spent on the matrix units.
"""

import numpy as np
from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..nn.dtypes import DataType, smallest_type
from ..nn.ir import accumulator_range
from .mvu_datapath import (Datapath, is_select_type, multiply, select_datapath,
                           select_product, value_of)
from .estimate import Features, lut_multiplier_luts, memory_cost
from .types import shape_of

__all__ = ["DepthwiseMAC"]


class DepthwiseMAC(wiring.Component):
    """``i``: ``ArrayLayout(shape_of(in_type), lanes)`` window words in (c-word, kh, kw)
    order -> ``o``: ``ArrayLayout(shape_of(acc_type), lanes)``, one word per channel word.

    ``weights``: integer array ``[C, K]`` (channel, kernel position in (kh, kw) order) of
    ``w_type`` values. Registered output; one input word per cycle.
    """

    def __init__(self, *, weights: np.ndarray, w_type: DataType, in_type: DataType,
                 lanes: int):
        for name, dtype in (("w_type", w_type), ("in_type", in_type)):
            if not isinstance(dtype, DataType):
                raise TypeError(f"{name} must be a qloom DataType, not {dtype!r}")
        if not isinstance(weights, np.ndarray) or weights.ndim != 2 or \
                not np.issubdtype(weights.dtype, np.integer):
            raise TypeError(f"weights must be a 2-D integer numpy array [C, K], not "
                            f"{weights!r}")
        if not isinstance(lanes, int) or isinstance(lanes, bool) or lanes < 1:
            raise TypeError(f"Lane count must be a positive integer, not {lanes!r}")
        channels, k = weights.shape
        if channels % lanes:
            raise ValueError(f"channels ({channels}) must be divisible by lanes ({lanes})")
        if not w_type.allows(weights):
            raise ValueError(f"weights hold values outside {w_type}")
        self._weights = weights.astype(np.int64)
        self._w_type, self._in_type, self._lanes = w_type, in_type, lanes
        self._datapath = select_datapath(w_type, in_type)
        lo, hi = accumulator_range(self._weights, in_type)
        self._acc_type = smallest_type(min(0, int(lo.min())), max(0, int(hi.max())))
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(shape_of(in_type), lanes))),
            "o": Out(stream.Signature(data.ArrayLayout(shape_of(self._acc_type), lanes))),
        })

    @property
    def acc_type(self) -> DataType:
        return self._acc_type

    @property
    def kernel_words(self) -> int:
        return self._weights.shape[1]

    @property
    def channel_words(self) -> int:
        return self._weights.shape[0] // self._lanes

    def cycles_per_pixel(self) -> int:
        """Input words (cycles) per output pixel."""
        return self.channel_words * self.kernel_words

    def estimate(self, family) -> Features:
        """Resources (:class:`qloom.hw.estimate.Features`): per lane its product (a LUT
        multiplier, a select or an XNOR, as ``_product`` builds it) and accumulator, the
        weight ROM in logic (read combinationally) and the counters."""
        ib, wb = shape_of(self._in_type).width, shape_of(self._w_type).width
        acc = shape_of(self._acc_type).width
        f = Features("depthwise")
        product = {Datapath.XNOR_POPCOUNT: 2, Datapath.ADD_SUB: max(ib, wb) + 1}.get(
            self._datapath, lut_multiplier_luts(ib, wb))
        f.add("lut", "lanes", self._lanes * (product + acc))
        f.add("ff", "lanes", self._lanes * 2 * acc)
        rom = memory_cost(self.channel_words * self.kernel_words, self._lanes * wb, family,
                          block=False)
        f.add("lut", "weights", rom.lut)
        f.add("lut", "control", 20)
        f.add("ff", "control", 20)
        return f

    def _table(self) -> list:
        """The ROM: at ``cw * K + k`` the weight codes of lanes ``cw*lanes ...``."""
        codes = self._w_type.encode(self._weights)
        rows = []
        for cw in range(self.channel_words):
            for k in range(self.kernel_words):
                rows.append([int(c) for c in codes[cw * self._lanes:(cw + 1) * self._lanes, k]])
        return rows

    def _product(self, x, w):
        if self._datapath is Datapath.XNOR_POPCOUNT:
            return Mux(x == w, 1, -1)
        if self._datapath is Datapath.ADD_SUB:
            if is_select_type(self._w_type):
                return select_product(w, self._w_type, value_of(x, self._in_type))
            return select_product(x, self._in_type, value_of(w, self._w_type))
        return multiply(value_of(x, self._in_type), value_of(w, self._w_type), dsp=False)

    def elaborate(self, platform):
        m = Module()
        K, CW = self.kernel_words, self.channel_words
        w_layout = data.ArrayLayout(shape_of(self._w_type), self._lanes)
        m.submodules.weights = rom = Memory(shape=w_layout, depth=CW * K, init=self._table())
        port = rom.read_port(domain="comb")
        k, cw = Signal(range(K)), Signal(range(CW))
        m.d.comb += port.addr.eq(cw * K + k)
        acc = [Signal(shape_of(self._acc_type), name=f"acc{lane}")
               for lane in range(self._lanes)]
        take = Signal()
        m.d.comb += [self.i.ready.eq(~self.o.valid | self.o.ready),
                     take.eq(self.i.valid & self.i.ready)]
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(take):
            for lane in range(self._lanes):
                total = Mux(k == 0, 0, acc[lane]) + \
                    self._product(self.i.payload[lane], port.data[lane])
                m.d.sync += acc[lane].eq(total)
                with m.If(k == K - 1):
                    m.d.sync += self.o.payload[lane].eq(total)
            with m.If(k == K - 1):
                m.d.sync += [self.o.valid.eq(1), k.eq(0),
                             cw.eq(Mux(cw == CW - 1, 0, cw + 1))]
            with m.Else():
                m.d.sync += k.eq(k + 1)
        return m
