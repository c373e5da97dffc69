# amaranth: UnusedElaboratable=no
"""The stream templates as generated Verilog under Icarus (cocotb, ``-g2012``, what a
compiled design runs on), against numpy references.

Amaranth's simulator settles every combinational process at time 0; Icarus in
SystemVerilog mode does not run an ``always @*`` block until one of its inputs changes, and
an X caught that way in a state register never leaves: SystolicArray and MaxPool (its
SlidingWindow) passed every pysim test, then accepted input and never answered as Verilog.
Each template is checked statically (no combinational process that the reset pulse does
not run) and by streaming frames through it with random stalls.
"""

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from qloom.hw.mvu import MVU, MVUConfig
from qloom.hw.pool import MaxPool
from qloom.hw.swg import SlidingWindow, WindowConfig, WindowOrder
from qloom.hw.systolic import SystolicArray
from qloom.nn.dtypes import BIPOLAR, int_type, uint_type
from qloom.nn.ir import im2col
from qloom.nn.ir import MaxPool as MaxPoolLayer
from qloom.sim.rtl_check import (RtlCheckError, comb_processes_without_reset,
                                 run_component_icarus)
from values import random_values, ref_gemm

INT2, INT3, INT4, INT5, INT8 = (int_type(b) for b in (2, 3, 4, 5, 8))
UINT1, UINT3, UINT4 = (uint_type(b) for b in (1, 3, 4))


def ref_windows(codes, kernel, stride, pads, pad_code, simd, order):
    """Expected SlidingWindow words for ``codes[N, H, W, C]``."""
    cols = im2col(codes, kernel, stride, pads, pad_value=pad_code)
    if order is WindowOrder.C_KH_KW:
        n, oh, ow, _ = cols.shape
        cols = cols.reshape(n, oh, ow, kernel[0], kernel[1], codes.shape[-1] // simd, simd)
        cols = cols.transpose(0, 1, 2, 5, 3, 4, 6)
    return cols.reshape(-1, simd).tolist()


class ConditionalReady(wiring.Component):
    """A one-word buffer whose ``i.ready`` is assigned under ``If``: the pattern that
    broke SystolicArray and SlidingWindow as Verilog."""

    def __init__(self):
        super().__init__({"i": In(stream.Signature(8)), "o": Out(stream.Signature(8))})

    def elaborate(self, platform):
        m = Module()
        with m.If(~self.o.valid):
            m.d.comb += self.i.ready.eq(1)
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(self.i.payload)]
        return m


def test_comb_process_check_finds_conditional_assignment():
    text = verilog.convert(ConditionalReady(), name="dut", emit_src=False)
    assert comb_processes_without_reset(text) == [("dut", ["i__ready"])]
    with pytest.raises(RtlCheckError, match=r"ConditionalReady has combinational processes "
                                            r"that only run when an input changes.*i__ready"):
        run_component_icarus(ConditionalReady(), [1, 2], 2)


def test_bench_catches_x_on_a_handshake():
    with pytest.raises(RtlCheckError, match=r"i__ready is [xX] .* at cycle 0"):
        run_component_icarus(ConditionalReady(), [1, 2], 2, strict=False)


SYSTOLIC = [
    # mh, mw, rows, cols, w_type, in_type, dsp_budget
    (4, 6, 3, 2, INT4, UINT3, None),     # 2 x 2 tiles, signed x unsigned
    (2, 2, 2, 2, INT8, INT8, None),      # one tile: constant per-PE weights, no memory
    (6, 4, 1, 1, INT3, BIPOLAR, 0),      # 1 x 1 array, bipolar input, LUT multipliers
    (3, 5, 5, 3, BIPOLAR, INT4, None),   # rows = MW, cols = MH, bipolar weights
    (9, 6, 2, 3, INT2, UINT1, 2),        # 3 x 3 tiles, some DSP PEs
    (5, 7, 7, 1, UINT3, INT5, None),     # unsigned weights, one column
]


@pytest.mark.parametrize("dsp_primitive", [None, "ecp5"])
@pytest.mark.parametrize("mh,mw,rows,cols,w_type,in_type,dsp_budget", SYSTOLIC)
def test_systolic_array_verilog(mh, mw, rows, cols, w_type, in_type, dsp_budget,
                                dsp_primitive):
    """Also with ECP5 DSP blocks (the MULT18X18D model), whose PEs take a cycle more."""
    rng = np.random.default_rng(mh * 100 + mw)
    weights = random_values(w_type, (mh, mw), rng)
    x = random_values(in_type, (3, mw), rng)
    dut = SystolicArray(weights=weights, w_type=w_type, in_type=in_type, rows=rows,
                        cols=cols, dsp_budget=dsp_budget, dsp_primitive=dsp_primitive)
    expect = ref_gemm(weights, w_type, in_type, x).reshape(-1, cols).tolist()
    out = run_component_icarus(dut, in_type.encode(x).reshape(-1, rows).tolist(),
                               len(expect), stall=0.3, seed=mh)
    assert out == expect


POOLS = [
    # h, w, c, kernel, stride, pads, dtype, lanes
    (4, 4, 2, (2, 2), (2, 2), (0, 0, 0, 0), INT8, 1),       # the common 2x2/2, signed
    (5, 5, 2, (3, 3), (2, 2), (0, 0, 0, 0), INT3, 2),       # overlapping windows, odd size
    (3, 3, 1, (3, 3), (1, 1), (0, 0, 0, 0), BIPOLAR, 1),    # K = H, bipolar compares like values
    (4, 4, 6, (2, 2), (1, 1), (0, 0, 0, 0), UINT4, 3),      # stride 1, non-power-of-two lanes
    (1, 9, 2, (1, 3), (1, 2), (0, 1, 0, 1), INT3, 2),       # a lifted 1D pool, padded ("same")
]


@pytest.mark.parametrize("h,w,c,kernel,stride,pads,dtype,lanes", POOLS)
def test_maxpool_verilog(h, w, c, kernel, stride, pads, dtype, lanes):
    rng = np.random.default_rng(h * 10 + c)
    x = random_values(dtype, (2, h, w, c), rng)
    dut = MaxPool(in_h=h, in_w=w, channels=c, kernel=kernel, stride=stride, pads=pads,
                  dtype=dtype, lanes=lanes)
    pooled = MaxPoolLayer("pool", ("x",), "y", kernel=kernel, stride=stride,
                          pads=pads).execute(x)
    expect = dtype.encode(pooled).reshape(-1, lanes).tolist()
    out = run_component_icarus(dut, dtype.encode(x).reshape(-1, lanes).tolist(),
                               len(expect), stall=0.3, seed=c)
    assert out == expect


WINDOWS = [
    # h, w, c, kernel, stride, pads, dtype, simd, pad_code, order
    (4, 4, 1, (3, 3), (1, 1), (0, 0, 0, 0), UINT4, 1, 0, WindowOrder.KH_KW_C),
    (5, 5, 4, (3, 3), (2, 2), (1, 1, 1, 1), INT3, 2, 0, WindowOrder.KH_KW_C),   # pad, stride
    (4, 3, 1, (2, 3), (2, 1), (0, 2, 1, 0), INT4, 1, 5, WindowOrder.KH_KW_C),   # asymmetric
    (5, 4, 4, (2, 2), (2, 2), (0, 0, 0, 0), UINT4, 2, 0, WindowOrder.C_KH_KW),  # pooling
    (5, 5, 3, (3, 3), (1, 2), (1, 0, 1, 2), INT8, 1, 0, WindowOrder.C_KH_KW),   # padded
]


@pytest.mark.parametrize("h,w,c,kernel,stride,pads,dtype,simd,pad_code,order", WINDOWS)
def test_sliding_window_verilog(h, w, c, kernel, stride, pads, dtype, simd, pad_code, order):
    rng = np.random.default_rng(h * 10 + w)
    codes = dtype.encode(random_values(dtype, (2, h, w, c), rng))
    dut = SlidingWindow(WindowConfig(in_h=h, in_w=w, channels=c, kernel=kernel, stride=stride,
                                     pads=pads, dtype=dtype, simd=simd, pad_code=pad_code,
                                     order=order))
    expect = ref_windows(codes, kernel, stride, pads, pad_code, simd, order)
    out = run_component_icarus(dut, codes.reshape(-1, simd).tolist(), len(expect),
                               stall=0.3, seed=w)
    assert out == expect


MVUS = [
    # mh, mw, pe, simd, w_type, in_type, keyword arguments
    (6, 12, 2, 3, INT4, UINT4, {}),
    (6, 12, 3, 4, BIPOLAR, BIPOLAR, {}),
    # ECP5 DSP blocks with their own registers (simulation model), 4 of the 6 lanes
    (6, 12, 2, 3, int_type(16), uint_type(6), {"dsp_primitive": "ecp5", "dsp_budget": 4}),
    (4, 8, 2, 2, int_type(18), uint_type(17), {"dsp_primitive": "ecp5"}),
    (4, 8, 4, 2, uint_type(8), int_type(6), {"dsp_primitive": "ecp5", "dsp_budget": 5}),
]


@pytest.mark.parametrize("mh,mw,pe,simd,w_type,in_type,options", MVUS)
def test_mvu_verilog(mh, mw, pe, simd, w_type, in_type, options):
    rng = np.random.default_rng(pe * 10 + simd)
    weights = random_values(w_type, (mh, mw), rng)
    x = random_values(in_type, (3, mw), rng)

    dut = MVU(MVUConfig(weights=weights, w_type=w_type, in_type=in_type, pe=pe, simd=simd,
                        **options))
    assert dut.dsp_primitive == options.get("dsp_primitive")
    expect = dut.out_type.encode(ref_gemm(weights, w_type, in_type, x)).reshape(-1, pe)
    out = run_component_icarus(dut, in_type.encode(x).reshape(-1, simd).tolist(),
                               len(expect), stall=0.3, seed=pe)
    assert out == expect.tolist()
