# amaranth: UnusedElaboratable=no
import numpy as np
import pytest
from amaranth.back import rtlil

from qloom.hw.systolic import SystolicArray
from qloom.nn.dtypes import BIPOLAR, int_type, uint_type
from qloom.sim.pysim import run_stream

from values import random_values, ref_gemm


def check(*, mh, mw, rows, cols, w_type, in_type, vectors=3, stall=0.3, dsp_budget=None,
          seed=0):
    rng = np.random.default_rng(seed)
    weights = random_values(w_type, (mh, mw), rng)
    x = random_values(in_type, (vectors, mw), rng)
    dut = SystolicArray(weights=weights, w_type=w_type, in_type=in_type, rows=rows,
                        cols=cols, dsp_budget=dsp_budget)
    y = ref_gemm(weights, w_type, in_type, x)
    assert dut.out_type.allows(y)
    expect = y.reshape(-1, cols).tolist()
    run = run_stream(dut, in_type.encode(x).reshape(-1, rows).tolist(), len(expect),
                     in_stall=stall, out_stall=stall, seed=seed)
    assert run.outputs == expect
    return dut, run


CORNERS = [
    # mh, mw, rows, cols, w_type, in_type
    (4, 6, 3, 2, int_type(4), uint_type(3)),
    (2, 2, 2, 2, int_type(8), int_type(8)),      # one tile, widest types
    (6, 4, 1, 1, int_type(3), BIPOLAR),          # 1x1 array, bipolar input
    (3, 5, 5, 3, BIPOLAR, int_type(4)),          # rows = MW, cols = MH, bipolar weights
    (9, 6, 2, 3, int_type(2), uint_type(1)),     # 1-bit input, non-power-of-two tiles
    (5, 7, 7, 1, uint_type(3), int_type(5)),     # unsigned weights, one column
]


@pytest.mark.parametrize("mh,mw,rows,cols,w_type,in_type", CORNERS)
def test_systolic_matches_reference_under_stalls(mh, mw, rows, cols, w_type, in_type):
    check(mh=mh, mw=mw, rows=rows, cols=cols, w_type=w_type, in_type=in_type)


@pytest.mark.parametrize("mh,mw,rows,cols,w_type,in_type", CORNERS)
def test_systolic_throughput_and_latency(mh, mw, rows, cols, w_type, in_type):
    vectors = 4
    dut, run = check(mh=mh, mw=mw, rows=rows, cols=cols, w_type=w_type, in_type=in_type,
                     vectors=vectors, stall=0.0)
    words = dut.n_tiles
    # steady state: vectors back to back, one output word per n_tiles*k_tiles cycles
    for v in range(1, vectors):
        assert run.out_cycles[(v + 1) * words - 1] - run.out_cycles[v * words - 1] \
            == dut.cycles_per_vector == (mh // cols) * (mw // rows)
    # the first vector went into an idle array
    assert run.out_cycles[0] - run.in_cycles[dut.k_tiles - 1] == dut.latency


@pytest.mark.parametrize("dsp_budget", [0, 3])
@pytest.mark.parametrize("w_type,in_type", [(int_type(5), int_type(4)),
                                            (uint_type(4), int_type(3)),
                                            (BIPOLAR, uint_type(3))])
def test_systolic_lut_multipliers_are_exact(dsp_budget, w_type, in_type):
    dut, _ = check(mh=4, mw=6, rows=3, cols=2, w_type=w_type, in_type=in_type,
                   dsp_budget=dsp_budget, seed=dsp_budget)
    assert dut.dsp_count == dsp_budget


def test_systolic_dsp_budget_bounds_multipliers():
    weights = np.arange(12).reshape(4, 3) - 6
    for budget, expect in ((None, 6), (2, 2), (0, 0), (100, 6)):
        dut = SystolicArray(weights=weights, w_type=int_type(4), in_type=int_type(4),
                            rows=3, cols=2, dsp_budget=budget)
        assert dut.dsp_count == expect
        assert rtlil.convert(dut).count("cell $mul ") == expect


def test_systolic_properties():
    dut = SystolicArray(weights=np.full((6, 8), -8), w_type=int_type(4), in_type=uint_type(2),
                        rows=4, cols=3)
    assert (dut.mh, dut.mw, dut.rows, dut.cols) == (6, 8, 4, 3)
    assert (dut.n_tiles, dut.k_tiles, dut.cycles_per_vector) == (2, 2, 4)
    assert dut.acc_type == int_type(9)          # 8 * -8 * 3 = -192
    assert dut.out_type == dut.acc_type
    assert dut.latency == 2 + 4 + 3 + 5


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(120))
def test_systolic_random_sweep(seed):
    rng = np.random.default_rng(seed)
    rows, cols = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    w_type = [int_type(8), BIPOLAR, int_type(2), uint_type(4)][seed % 4]
    in_type = [uint_type(8), int_type(3), BIPOLAR, uint_type(1), int_type(8)][seed % 5]
    check(mh=cols * int(rng.integers(1, 5)), mw=rows * int(rng.integers(1, 5)), rows=rows,
          cols=cols, w_type=w_type, in_type=in_type, vectors=4,
          dsp_budget=int(rng.integers(0, rows * cols + 1)), seed=seed)


def test_systolic_rejects_bad_parameters():
    ok = dict(weights=np.zeros((4, 6), dtype=np.int64), w_type=int_type(4),
              in_type=int_type(4), rows=3, cols=2)
    cases = [
        (TypeError, r"w_type must be a qloom DataType, not 'INT4'", dict(w_type="INT4")),
        (TypeError, r"in_type must be a qloom DataType, not None", dict(in_type=None)),
        (TypeError, r"rows must be a positive integer, not 0", dict(rows=0)),
        (TypeError, r"cols must be a positive integer, not 1\.5", dict(cols=1.5)),
        (TypeError, r"dsp_budget must be None or a non-negative integer, not -1",
         dict(dsp_budget=-1)),
        (TypeError, r"weights must be a 2-D integer numpy array, not \[\[1, 2\]\]",
         dict(weights=[[1, 2]])),
        (TypeError, r"weights must be a 2-D integer numpy array",
         dict(weights=np.zeros((4, 6)))),
        (ValueError, r"weights must be values of w_type INT4, in \[-8, 7\]",
         dict(weights=np.full((4, 6), 8))),
        (ValueError, r"MW \(6\) must be divisible by rows \(4\)", dict(rows=4)),
        (ValueError, r"MH \(4\) must be divisible by cols \(3\)", dict(cols=3)),
    ]
    for exc, message, change in cases:
        with pytest.raises(exc, match=message):
            SystolicArray(**{**ok, **change})
