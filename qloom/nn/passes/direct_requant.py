"""A wide quantizer after float arithmetic as a shift-and-round ``Requant``, found directly.

A 16-bit result quantizer (a float model at ``fixed<16,6>``) has 65,535 levels: the
threshold route (one bisection per level and channel, then ``ThresholdsToRequant``) would
store and search 65,535 thresholds per channel. When the accumulator's scale and the
quantizer's are powers of two a shift apart, the function is
``clip(round((a + b_c) / 2**shift))`` if it is a requantization at all. This module finds
the per-channel offset ``b_c`` from one bisected boundary per channel and proves the
candidate equal to the float function (evaluated in float32 exactly as qonnx runs it) at
every one of its level boundaries ``t`` and ``t - 1`` on each channel's accumulator range,
plus both ends. A monotone function that agrees with a step function at both sides of
each step equals it everywhere between; monotonicity is what the threshold route assumes
too, and random points check it here as there. Anything that does not match returns None.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import DataType
from ..ir import Requant, Rounding, round_shift
from .thresholds_to_requant import _boundaries

__all__ = ["direct_requant", "DIRECT_LEVELS"]

# From this many thresholds per channel on, a requantization is looked for directly.
DIRECT_LEVELS = 1024
# float32 holds integers below 2**24 exactly: qonnx's float arithmetic on the accumulator
# (power-of-two scales) is exact while |accumulator + bias| stays below this.
_EXACT = 1 << 24
_CHUNK = 4096           # boundary rows evaluated per call of the float function


def _shift(in_scale, out_scale) -> int | None:
    """``log2(out_scale / in_scale)`` when it is one non-negative integer for all channels."""
    ratio = np.unique(np.asarray(out_scale, np.float64) / np.asarray(in_scale, np.float64))
    if ratio.size != 1 or not ratio[0] >= 1:
        return None
    mant, exp = np.frexp(ratio[0])
    return int(exp - 1) if mant == 0.5 else None


def _first_step(code_fn, lo, hi, start):
    """Per channel, the least a in [lo, hi + 1] with code(a) > start (hi + 1: never)."""
    left, right = lo.copy(), hi + 1
    while np.any(left < right):
        mid = (left + right) // 2
        up = code_fn(mid[None, :])[0] > start
        right = np.where((left < right) & up, mid, right)
        left = np.where((left < right) & ~up, mid + 1, left)
    return left


def _agrees(code_fn, layer: Requant, lo, hi, rng) -> bool:
    """Whether ``layer`` equals ``code_fn`` at every step of ``layer`` on [lo, hi]."""
    def same(points):
        points = np.clip(points, lo, hi)
        return np.array_equal(code_fn(points), layer.execute(points))

    r_lo = layer.execute(lo[None, :])[0]
    r_hi = layer.execute(hi[None, :])[0]
    if not same(np.stack([lo, hi])) or not same(rng.integers(lo, hi + 1, (1024, lo.size))):
        return False
    top = int(r_hi.max()) + 1
    for start in range(int(r_lo.min()) + 1, top, _CHUNK):
        levels = np.arange(start, min(start + _CHUNK, top), dtype=np.int64)
        t = _boundaries(levels, layer.shift, layer.rounding)[:, None] - layer.bias[None, :]
        if not (same(t) and same(t - 1)):
            return False
    return True


def direct_requant(code_fn, lo, hi, in_scale, out_scale, out_type: DataType, *, name,
                   inputs, output, in_type: DataType, seed: int = 0) -> Requant | None:
    """The ``Requant`` equal to ``code_fn`` (int64 accumulators ``[B, C]`` -> codes) on the
    per-channel range ``[lo, hi]``, or None when there is none with power-of-two scales."""
    shift = _shift(in_scale, out_scale)
    if shift is None or out_type.bipolar or in_type.bipolar:
        return None
    lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
    hi_full = hi
    ends = code_fn(np.stack([lo, hi]))
    if np.any(ends[1] < ends[0]):
        return None
    code_lo, code_hi = int(ends[0].min()), int(ends[1].max())
    # search the step inside the window where float32 holds the accumulator exactly
    w_lo, w_hi = np.maximum(lo, -(_EXACT >> 1)), np.minimum(hi, _EXACT >> 1)
    if np.any(w_lo > w_hi):
        return None
    start = code_fn(w_lo[None, :])[0]
    t = _first_step(code_fn, w_lo, w_hi, start)
    hi = w_hi      # a channel without a step in the window: constant there
    rng = np.random.default_rng(seed)
    for rounding in Rounding:
        if shift == 0 and rounding is not Rounding.FLOOR:
            continue
        # the least y with round_shift(y) >= start + 1, moved onto the bisected step t
        y = _boundaries(start + 1, shift, rounding)
        moving = t <= hi
        bias = np.where(moving, y - t, 0)
        if not np.all(moving):      # a constant channel: any offset giving its one code
            bias = np.where(moving, bias, _boundaries(start, shift, rounding) - w_lo)
        layer = Requant(name, inputs, output, bias=bias.astype(np.int64), shift=shift,
                        rounding=rounding, lo=code_lo, hi=code_hi, in_type=in_type,
                        out_type=out_type)
        # verified where qonnx's float32 arithmetic is exact: |a + bias| < 2**24
        room = _EXACT - 1 - np.abs(layer.bias)
        v_lo, v_hi = np.maximum(lo, -room), np.minimum(np.asarray(hi_full), room)
        if np.all(v_lo <= v_hi) and _agrees(code_fn, layer, v_lo, v_hi, rng):
            return layer
    return None
