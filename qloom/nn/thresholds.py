"""Exact thresholds for the float arithmetic between two quantizers.

Between one quantizer and the next, a model does float arithmetic on an integer
accumulator ``a`` (scales, biases, BatchNorm, ReLU, then a quantizer). Per channel that is
a monotone step function ``code(a)``. ``derive_thresholds`` finds, by vectorized bisection
over the accumulator's exact range, the smallest ``a`` reaching each output level, so that
``MultiThreshold`` reproduces ``code`` bit for bit; it then checks the result (exhaustively
when the range is small, at every threshold and random points otherwise) and refuses
non-monotone chains.

``FloatFunction`` runs a piece of the model's own graph with qonnx's ``execute_onnx``, so
that the float arithmetic (float32, node by node through onnxruntime and qonnx's custom
ops) is the very arithmetic qonnx performs on the whole model.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper

from ..errors import UnsupportedModelError
from .dtypes import DataType, smallest_type

__all__ = ["FloatFunction", "ThresholdSet", "derive_thresholds", "NotMonotoneError"]


class NotMonotoneError(UnsupportedModelError):
    """The float arithmetic before a quantizer is not monotone in the accumulator."""

# Ops whose per-frame result does not depend on the batch size (applied per element, or
# along a non-batch axis). Reshape is made batch-safe by rewriting its target shape.
_BATCH_SAFE = {
    "Add", "Sub", "Mul", "Div", "BatchNormalization", "Relu", "Clip", "LeakyRelu", "Sigmoid",
    "Tanh", "Identity", "Neg", "Abs", "Max", "Min", "Floor", "Ceil", "Round", "Exp", "Log",
    "Sqrt", "Pow", "Softmax", "LogSoftmax", "ArgMax", "ArgMin", "Flatten", "Reshape",
    "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Transpose",
    "Quant", "IntQuant", "BipolarQuant", "Trunc", "MultiThreshold", "Erf", "HardSigmoid",
    "PRelu", "Elu", "Selu", "Celu", "Softplus", "Softsign", "ThresholdedRelu", "HardSwish",
    "Gelu", "Mish",
}
_AXIS_OPS = {"Softmax", "LogSoftmax", "ArgMax", "ArgMin", "Flatten"}
_EXEC_CHUNK = 4096  # frames per execute_onnx call


class FloatFunction:
    """A sub-graph of a model (``nodes``, constants in ``consts``) from one tensor to another,
    executed by qonnx on a batch of frames.

    ``in_shape``/``out_shape`` are the tensors' shapes in the model (batch dimension 1). A
    call takes ``[N, *in_shape[1:]]`` float32 frames and returns ``[N, *out_shape[1:]]``;
    elementwise sub-graphs also accept other shapes that broadcast against their constants
    (threshold derivation feeds ``[N, C, 1, 1]`` candidates to a convolution's chain).
    ``shape_of`` gives the model's shape of any tensor (used to make Reshape batch-safe).
    """

    def __init__(self, nodes, consts: dict, input_name: str, output_name: str,
                 shape_of: Callable[[str], list], opsets):
        self.input_name = input_name
        self.output_name = output_name
        self.in_shape = tuple(shape_of(input_name))
        self.out_shape = tuple(shape_of(output_name))
        self.op_types = tuple(n.op_type for n in nodes)
        self._nodes = [self._batch_safe(n, consts, shape_of) for n in nodes]
        self._consts = consts
        self._opsets = list(opsets)
        self._batched = all(self._node_is_batch_safe(n) for n in nodes)
        self._models = {}

    @staticmethod
    def _node_is_batch_safe(node) -> bool:
        if node.op_type not in _BATCH_SAFE:
            return False
        if node.op_type in _AXIS_OPS:
            axis = next((helper.get_attribute_value(a) for a in node.attribute
                         if a.name == "axis"), 1 if node.op_type == "Flatten" else -1)
            return axis != 0
        return True

    @staticmethod
    def _batch_safe(node, consts, shape_of):
        """Reshape with a literal batch of 1 becomes ``[-1, *out_shape[1:]]``."""
        if node.op_type != "Reshape" or node.input[1] not in consts:
            return node
        target = [-1] + list(shape_of(node.output[0]))[1:]
        name = f"{node.output[0]}__qloom_shape"
        consts[name] = np.array(target, dtype=np.int64)
        new = onnx.NodeProto()
        new.CopyFrom(node)
        new.input[1] = name
        return new

    def _model(self, shape: tuple):
        from qonnx.core.modelwrapper import ModelWrapper

        from .passes.infer_shapes import InferShapes
        if shape not in self._models:
            used = {t for node in self._nodes for t in node.input}
            inits = [onnx.numpy_helper.from_array(np.asarray(v), k)
                     for k, v in self._consts.items() if k in used]
            inp = helper.make_tensor_value_info(self.input_name, TensorProto.FLOAT, list(shape))
            out = helper.make_tensor_value_info(self.output_name, TensorProto.FLOAT, None)
            graph = helper.make_graph(self._nodes, "qloom_subgraph", [inp], [out], inits)
            model = ModelWrapper(helper.make_model(graph, opset_imports=self._opsets))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._models[shape] = model.transform(InferShapes())
        return self._models[shape]

    def _run(self, x: np.ndarray) -> np.ndarray:
        from qonnx.core.onnx_exec import execute_onnx
        if not self._nodes:
            return x
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = execute_onnx(self._model(x.shape), {self.input_name: x})
        return np.asarray(out[self.output_name])

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float32)
        if not self._batched:
            return np.concatenate([self._run(x[i:i + 1]) for i in range(x.shape[0])])
        parts = [self._run(x[i:i + _EXEC_CHUNK]) for i in range(0, x.shape[0], _EXEC_CHUNK)]
        return np.concatenate(parts) if parts else np.zeros((0, *self.out_shape[1:]))


@dataclass(frozen=True)
class ThresholdSet:
    """Thresholds reproducing a per-channel step function: ``code = bias + sign * count``."""

    thresholds: np.ndarray  # int64 [C, K], ascending
    bias: np.ndarray        # int64 [C]
    sign: np.ndarray        # int64 [C]
    in_type: DataType       # holds the accumulator range and every threshold

    def codes(self, a: np.ndarray) -> np.ndarray:
        count = (a[..., None] >= self.thresholds).sum(axis=-1)
        return self.bias + self.sign * count


def _bisect(code_fn, lo, hi, targets, increasing):
    """Per (channel c, level k): min a in [lo_c, hi_c + 1] with code(a) >= target
    (increasing) or code(a) <= target (decreasing); hi_c + 1 means "never"."""
    c, k = targets.shape
    left = np.repeat(lo[:, None], k, axis=1)
    right = np.repeat(hi[:, None] + 1, k, axis=1)
    while np.any(left < right):
        mid = (left + right) // 2
        code = code_fn(mid.T).T          # rows of the batch are levels, columns channels
        ok = np.where(increasing[:, None], code >= targets, code <= targets)
        right = np.where((left < right) & ok, mid, right)
        left = np.where((left < right) & ~ok, mid + 1, left)
    return left


def _from_table(table, lo, hi, targets, increasing):
    """What ``_bisect`` finds, read from the codes of every accumulator value (``table``,
    row r holding ``min(lo + r, hi)``): per channel, the first value reaching each target
    (``hi + 1``: never). Assumes monotone codes; the caller checks that."""
    out = np.empty(targets.shape, dtype=np.int64)
    for c in range(lo.size):
        rows = int(hi[c] - lo[c]) + 1
        codes = table[:rows, c] if increasing[c] else -table[:rows, c]
        want = targets[c] if increasing[c] else -targets[c]
        out[c] = lo[c] + np.searchsorted(np.maximum.accumulate(codes), want, side="left")
    return out


def _check_points(lo, hi, thresholds, rng, exhaustive_limit):
    """Accumulator values at which the thresholds are verified, ``[B, C]``."""
    span = int((hi - lo).max()) + 1
    if span * lo.size <= exhaustive_limit:
        return np.minimum(lo[None, :] + np.arange(span)[:, None], hi[None, :])
    pts = [lo[None, :], hi[None, :],
           np.clip(thresholds.T, lo, hi), np.clip(thresholds.T - 1, lo, hi),
           rng.integers(lo, hi + 1, size=(1024, lo.size))]
    return np.concatenate(pts)


def derive_thresholds(code_fn: Callable[[np.ndarray], np.ndarray], lo, hi,
                      out_type: DataType, *, node: str,
                      exhaustive_limit: int = 1 << 21, seed: int = 0) -> ThresholdSet:
    """Thresholds for ``code_fn`` (int64 accumulators ``[B, C]`` -> output codes ``[B, C]``)
    over the per-channel accumulator range ``[lo, hi]``.

    Raises ``UnsupportedModelError`` naming ``node`` when the function is not monotone.
    """
    lo = np.asarray(lo, dtype=np.int64)
    hi = np.asarray(hi, dtype=np.int64)
    code_min, code_max = out_type.encode(out_type.min), out_type.encode(out_type.max)
    k = int(code_max - code_min)
    span = int((hi - lo).max()) + 1
    exhaustive = span * lo.size <= exhaustive_limit
    if exhaustive:      # one evaluation of every accumulator value serves all below
        pts = np.minimum(lo[None, :] + np.arange(span)[:, None], hi[None, :])
        table = code_fn(pts)
        ends = np.stack([table[0], table[hi - lo, np.arange(lo.size)]])
    else:
        ends = code_fn(np.stack([lo, hi]))
    increasing = ends[1] >= ends[0]
    bias = np.where(increasing, code_min, code_max).astype(np.int64)
    sign = np.where(increasing, 1, -1).astype(np.int64)
    targets = bias[:, None] + sign[:, None] * np.arange(1, k + 1)[None, :]
    if exhaustive:
        thresholds = _from_table(table, lo, hi, targets, increasing)
    else:
        thresholds = _bisect(code_fn, lo, hi, targets, increasing)
    in_type = smallest_type(min(lo.min(), thresholds.min()), max(hi.max(), thresholds.max()))
    result = ThresholdSet(thresholds.astype(np.int64), bias, sign, in_type)
    if not exhaustive:
        pts = _check_points(lo, hi, thresholds, np.random.default_rng(seed), exhaustive_limit)
        table = code_fn(pts)
    bad = np.argwhere(table != result.codes(pts))
    if bad.size:
        row, ch = bad[0]
        raise NotMonotoneError(
            f"the float arithmetic before this quantizer is not monotone in the accumulator "
            f"(channel {ch}, accumulator {pts[row, ch]}); only monotone chains (scales, "
            f"biases, BatchNormalization, ReLU, clipping) can become thresholds", node)
    return result
