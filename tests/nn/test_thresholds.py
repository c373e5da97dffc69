"""Threshold derivation on synthetic step functions (no ONNX involved)."""

import numpy as np
import pytest

from qloom.errors import UnsupportedModelError
from qloom.nn.dtypes import BIPOLAR, int_type, uint_type
from qloom.nn.thresholds import derive_thresholds


def _quant(gain, bias, dtype):
    """code(a) = clip(round(gain * a + bias)) per channel, as float32 like qonnx."""
    gain, bias = np.float32(gain), np.float32(bias)

    def code(a):
        y = np.round(a.astype(np.float32) * gain + bias)
        if dtype.bipolar:
            return dtype.encode(np.where(a * gain + bias >= 0, 1, -1))
        return dtype.encode(np.clip(y, dtype.min, dtype.max).astype(np.int64))
    return code


@pytest.mark.parametrize("dtype", [uint_type(2), int_type(3), int_type(4, narrow=True), BIPOLAR])
@pytest.mark.parametrize("lo, hi", [(-50, 50), (-3, 0), (-40000, 70000)])
def test_reproduces_step_function(dtype, lo, hi):
    gain = np.array([0.1, -0.07, 0.0, 3.0, -0.0001], dtype=np.float32)
    bias = np.array([0.5, 1.25, 2.0, -0.5, 0.0], dtype=np.float32)
    code = _quant(gain, bias, dtype)
    lo_c, hi_c = np.full(5, lo), np.full(5, hi)
    ts = derive_thresholds(code, lo_c, hi_c, dtype, node="n")
    a = np.linspace(lo, hi, 2001).round().astype(np.int64)[:, None].repeat(5, axis=1)
    assert np.array_equal(ts.codes(a), code(a))
    ends = code(np.stack([lo_c, hi_c]))
    assert np.all(ts.sign[ends[1] > ends[0]] == 1) and np.all(ts.sign[ends[1] < ends[0]] == -1)
    assert ts.thresholds.shape == (5, dtype.encode(dtype.max) - dtype.encode(dtype.min))
    assert ts.in_type.min <= lo and ts.in_type.max >= hi


def test_non_monotone_is_refused():
    def code(a):
        return np.clip(np.abs(a) // 10, 0, 3)
    with pytest.raises(UnsupportedModelError, match=r"node 'q': .* not monotone .*channel 0"):
        derive_thresholds(code, np.array([-40]), np.array([40]), uint_type(2), node="q")


def test_non_monotone_found_in_large_range():
    def code(a):   # monotone except a wide dip, found by the random checks
        c = np.clip(a // 100000, 0, 3)
        return np.where((a > 500000) & (a < 700000), 0, c)
    with pytest.raises(UnsupportedModelError, match="not monotone"):
        derive_thresholds(code, np.array([0]), np.array([10 ** 6]), uint_type(2), node="q",
                          exhaustive_limit=16)
