"""A float chain that is not monotone in its integer input (a HardSwish, GELU, Mish, Abs,
a LeakyRelu with a negative slope, ...) between a tensor and the next quantizer, as a
lookup table: every input value of the (narrow) input range evaluated once by qonnx,
exactly as ``thresholds.py`` evaluates a monotone chain, and the output value stored per
channel (one row when the channels agree). An input wider than ``MAX_INPUT_BITS`` is
refused naming the node: the table would hold more than 4,096 entries per channel."""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedModelError
from .. import ir
from ..dtypes import smallest_type
from .values import FloatChain, Int

__all__ = ["MAX_INPUT_BITS", "is_narrow", "lower_lookup"]

MAX_INPUT_BITS = 12


def is_narrow(lo: np.ndarray, hi: np.ndarray) -> bool:
    """Whether an input of per-channel range [lo, hi] spans at most 2**MAX_INPUT_BITS
    values (over all channels)."""
    return int(hi.max()) - int(lo.min()) < 1 << MAX_INPUT_BITS


def _refusal(culprit, src: Int, lo, hi) -> UnsupportedModelError:
    bits = smallest_type(int(lo.min()), int(hi.max())).bits
    return UnsupportedModelError(
        f"{culprit.op_type} is not monotone here, so the float arithmetic before the next "
        f"quantizer cannot become thresholds; a lookup table takes an input of at most "
        f"{MAX_INPUT_BITS} bits, and its input '{src.onnx}' spans [{int(lo.min())}, "
        f"{int(hi.max())}] ({bits} bits): quantize that tensor to at most "
        f"{MAX_INPUT_BITS} bits before the {culprit.op_type}", culprit.name)


def lower_lookup(state, node, chain: FloatChain, spec, code_fn, culprit, q_scale) -> Int:
    """The Lookup layer for quantizer ``node`` reading ``chain`` (``culprit``: the node
    that makes it non-monotone); ``code_fn`` maps int64 inputs ``[B, C]`` to output codes."""
    src = chain.source
    lo, hi = state.ranges[src.ir]
    if not is_narrow(lo, hi):
        raise _refusal(culprit, src, lo, hi)
    if chain.pool is not None:
        raise UnsupportedModelError(
            f"a MaxPool before {culprit.op_type} '{culprit.name}', which is not monotone: "
            f"the pool cannot move after a lookup table", chain.pool.name)
    start = int(lo.min())
    span = int(hi.max()) - start + 1
    candidates = np.clip(start + np.arange(span)[:, None], lo[None, :], hi[None, :])
    table = spec.dtype.decode(code_fn(candidates)).T.astype(np.int64)   # [C, span]
    if np.all(table == table[:1]):
        table = table[:1].copy()
    info = state.tensors[src.ir]
    out = node.output[0]
    state.new_tensor(out, info.shape, spec.dtype, q_scale, table.min(axis=1),
                     table.max(axis=1), spec.zero_point)
    state.layers.append(ir.Lookup(name=node.name, inputs=(src.ir,), output=out, table=table,
                                  lo=start, in_type=smallest_type(start, start + span - 1),
                                  out_type=spec.dtype))
    state.onnx_names[out] = node.output[0]
    state.onnx_layouts[out] = src.layout.to_onnx
    return Int(out, node.output[0], src.layout, -spec.zero_point * q_scale, True)
