"""The integer network: a small typed IR whose execution is the hardware's specification.

Tensors are channels-last and carry integer *values* (bipolar as -1/+1) in int64 numpy
arrays with a leading batch dimension. Every layer reads named tensors and writes one.
Layers are frozen dataclasses built once by the frontend; the hardware side consumes them.

Conventions (the contract with ``qloom.hw`` and ``qloom.flows``):

- ``Dense``: ``weights[MH, MW]`` (output channel, input element). Applied to the last axis,
  so a ``[N, H, W, MW]`` input is a per-pixel dense layer. Output is the exact accumulator.
- ``Conv``: ``weights[OC, KH, KW, IC/groups]``; input ``[N, H, W, IC]`` padded by
  ``pads`` (top, left, bottom, right) with ``pad_value`` (0, or the zero point of an
  asymmetric input: the value that means float 0); windows are read in (kh, kw, c) order,
  which is the order the sliding window generator emits them in. Grouped (depthwise)
  convolutions: output channel ``o`` reads input channels of group ``o // (OC/groups)``.
- ``MultiThreshold``: per channel ``c`` of the last axis,
  ``code = bias[c] + sign[c] * #{k : x >= thresholds[c, k]}`` and the output value is
  ``out_type.decode(code)`` (for bipolar outputs code 0 is -1, code 1 is +1).
  Thresholds are ascending along ``k``.
- ``Requant``: per channel ``c``, ``code = clip(round((x + bias[c]) / 2**shift), lo, hi)``
  with ``rounding`` one of ``Rounding`` (half-even is qonnx's ROUND); the output value is
  the code. An exact, cheaper stand-in for a MultiThreshold with many levels.
- ``Lookup``: per channel ``c``, ``out = table[c % rows, x - lo]`` (a non-monotone
  activation over a narrow input; ``rows`` is 1 when every channel shares the table).
- ``MaxPool``: ``kernel`` (KH, KW) windows with ``stride`` (SH, SW) on ``[N, H, W, C]``
  padded by ``pads`` (top, left, bottom, right) with a value below every input (ONNX's
  -inf: each window holds one input pixel at least); a 1D pool is lifted to a height of 1,
  kernel ``(1, K)``.
- ``AvgPool``: the exact per-channel sum over ``kernel`` (KH, KW) windows with ``stride``
  and zero padding ``pads`` (top, left, bottom, right) on ``[N, H, W, C]``; a global
  average pool is the window of the whole image. The average's ``1 / (KH*KW)`` is not
  computed here: it lives in the output tensor's scale and the next quantizer's thresholds
  (or shift) absorb it, so the integer result stays exact.
- ``Upsample``: nearest-neighbour upsampling of ``[N, H, W, C]`` by integer factors
  ``scale`` (SH, SW): output pixel ``(r, c)`` is input pixel ``(r // SH, c // SW)``.
- ``Add``: exact elementwise sum of two tensors of one shape.
- ``IntMul``: every element times a positive integer ``factor`` (aligns a residual branch
  to the other branch's finer scale: ``s_a = factor * s_b``).
- ``Concat``: the inputs' channels one after the other (last axis); the other axes agree.
- ``Flatten``: ``[N, H, W, C]`` -> ``[N, H*W*C]``, or any reshape to ``shape`` that keeps
  the elements in order; free in hardware (stream order is unchanged).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import QloomError
from .dtypes import DataType, smallest_type

__all__ = ["TensorInfo", "Layer", "Dense", "Conv", "MultiThreshold", "Requant", "Rounding",
           "Lookup",
           "MaxPool", "AvgPool", "Upsample", "Add", "IntMul", "Concat", "Flatten", "Network", "im2col", "round_shift",
           "window_sum_type", "accumulator_range"]


@dataclass(frozen=True, eq=False)
class TensorInfo:
    """An integer tensor: shape without the batch dimension, datatype, and the float scale
    (scalar or per last-axis channel) and integer zero point that map its integer value to
    the model's float value: ``float = (value - zero_point) * scale`` (a zero point comes
    from an asymmetric quantizer; accumulators carry it in their offsets instead)."""

    name: str
    shape: tuple[int, ...]
    dtype: DataType
    scale: np.ndarray = field(default_factory=lambda: np.ones(1, dtype=np.float64))
    zero_point: int = 0


@dataclass(frozen=True, eq=False)
class Layer:
    name: str
    inputs: tuple[str, ...]
    output: str

    op = "Layer"

    def execute(self, *xs: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def macs(self, in_shapes, out_shape) -> int:
        return 0

    def output_range(self, net: Network) -> tuple[np.ndarray, np.ndarray]:
        """Per output channel, the least and greatest value this layer can output (its
        datatype's range unless the layer knows better): what an activation after it is
        fitted on (``qloom.nn.passes.thresholds_to_requant``)."""
        info = net.tensors[self.output]
        channels = info.shape[-1]
        return (np.full(channels, info.dtype.min, dtype=np.int64),
                np.full(channels, info.dtype.max, dtype=np.int64))

    @property
    def weight_bits(self) -> int:
        return 0


def accumulator_range(weights2d: np.ndarray,
                      in_type: DataType) -> tuple[np.ndarray, np.ndarray]:
    """Per output row, the exact min and max of ``weights2d @ x`` over x in ``in_type``."""
    pos = np.clip(weights2d, 0, None)
    neg = np.clip(weights2d, None, 0)
    lo = pos.sum(axis=1) * in_type.min + neg.sum(axis=1) * in_type.max
    hi = pos.sum(axis=1) * in_type.max + neg.sum(axis=1) * in_type.min
    return lo.astype(np.int64), hi.astype(np.int64)


@dataclass(frozen=True, eq=False)
class Dense(Layer):
    weights: np.ndarray = None     # int64 [MH, MW]
    w_type: DataType = None
    in_type: DataType = None

    op = "Dense"

    @property
    def mw(self) -> int:
        return self.weights.shape[1]

    @property
    def mh(self) -> int:
        return self.weights.shape[0]

    def acc_range(self):
        return accumulator_range(self.weights, self.in_type)

    def output_range(self, net):
        return self.acc_range()

    @property
    def acc_type(self) -> DataType:
        lo, hi = self.acc_range()
        return smallest_type(lo.min(), hi.max())

    def execute(self, x):
        return np.matmul(x, self.weights.T)

    def macs(self, in_shapes, out_shape):
        return int(np.prod(out_shape)) * self.mw

    @property
    def weight_bits(self):
        return self.weights.size * self.w_type.bits


def im2col(x: np.ndarray, kernel, stride, pads, pad_value: int = 0) -> np.ndarray:
    """``[N, H, W, C]`` -> ``[N, OH, OW, KH*KW*C]`` windows in (kh, kw, c) order."""
    kh, kw = kernel
    sh, sw = stride
    top, left, bottom, right = pads
    x = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=pad_value)
    n, h, w, c = x.shape
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    cols = np.empty((n, oh, ow, kh, kw, c), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, :, i, j, :] = x[:, i:i + sh * oh:sh, j:j + sw * ow:sw, :]
    return cols.reshape(n, oh, ow, kh * kw * c)


@dataclass(frozen=True, eq=False)
class Conv(Layer):
    weights: np.ndarray = None     # int64 [OC, KH, KW, IC/groups]
    w_type: DataType = None
    in_type: DataType = None
    stride: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    groups: int = 1
    pad_value: int = 0

    op = "Conv"

    @property
    def kernel(self) -> tuple[int, int]:
        return self.weights.shape[1], self.weights.shape[2]

    @property
    def out_channels(self) -> int:
        return self.weights.shape[0]

    def dense_weights(self, in_channels: int) -> np.ndarray:
        """The conv as a dense matrix over (kh, kw, c) windows: ``[OC, KH*KW*IC]``.
        Grouped (depthwise) convs become block-sparse matrices with zeros off the groups."""
        oc, kh, kw, icg = self.weights.shape
        if self.groups == 1:
            return self.weights.reshape(oc, kh * kw * icg)
        full = np.zeros((oc, kh, kw, in_channels), dtype=np.int64)
        ocg = oc // self.groups
        for g in range(self.groups):
            full[g * ocg:(g + 1) * ocg, :, :, g * icg:(g + 1) * icg] = \
                self.weights[g * ocg:(g + 1) * ocg]
        return full.reshape(oc, kh * kw * in_channels)

    def acc_range(self, in_channels: int):
        return accumulator_range(self.dense_weights(in_channels), self.in_type)

    def output_range(self, net):
        return self.acc_range(net.shape_of(self.inputs[0])[-1])

    def acc_type(self, in_channels: int) -> DataType:
        lo, hi = self.acc_range(in_channels)
        return smallest_type(lo.min(), hi.max())

    @property
    def depthwise(self) -> bool:
        """One input channel per group (MobileNet's and DS-CNN's depthwise convolutions)."""
        return self.groups > 1 and self.weights.shape[3] == 1

    def execute(self, x):
        cols = im2col(x, self.kernel, self.stride, self.pads, self.pad_value)
        return np.matmul(cols, self.dense_weights(x.shape[-1]).T)

    def macs(self, in_shapes, out_shape):
        oc, kh, kw, icg = self.weights.shape
        return int(np.prod(out_shape)) * kh * kw * icg

    @property
    def weight_bits(self):
        return self.weights.size * self.w_type.bits


@dataclass(frozen=True, eq=False)
class MultiThreshold(Layer):
    thresholds: np.ndarray = None  # int64 [C, K], ascending along K
    bias: np.ndarray = None        # int64 [C]
    sign: np.ndarray = None        # int64 [C], +1 or -1
    in_type: DataType = None
    out_type: DataType = None

    op = "MultiThreshold"

    @property
    def channels(self) -> int:
        return self.thresholds.shape[0]

    @property
    def num_thresholds(self) -> int:
        return self.thresholds.shape[1]

    def execute(self, x):
        count = (x[..., None] >= self.thresholds).sum(axis=-1)
        return self.out_type.decode(self.bias + self.sign * count)

    @property
    def weight_bits(self):
        return self.thresholds.size * self.in_type.bits


class Rounding(enum.Enum):
    HALF_EVEN = "half_even"   # numpy's round, qonnx's ROUND
    HALF_UP = "half_up"       # ties towards +infinity
    FLOOR = "floor"
    CEIL = "ceil"


def round_shift(y: np.ndarray, shift: int, rounding: Rounding) -> np.ndarray:
    """``round(y / 2**shift)`` for integers ``y``, exactly, in the given rounding mode."""
    y = np.asarray(y, dtype=np.int64)
    if shift == 0:
        return y
    q, rem = y >> shift, y & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    if rounding is Rounding.FLOOR:
        return q
    if rounding is Rounding.CEIL:
        return q + (rem != 0)
    if rounding is Rounding.HALF_UP:
        return q + (rem >= half)
    return q + ((rem > half) | ((rem == half) & (q & 1 == 1)))


@dataclass(frozen=True, eq=False)
class Requant(Layer):
    bias: np.ndarray = None        # int64 [C]
    shift: int = 0
    rounding: Rounding = Rounding.HALF_EVEN
    lo: int = 0
    hi: int = 0
    in_type: DataType = None
    out_type: DataType = None

    op = "Requant"

    @property
    def channels(self) -> int:
        return self.bias.shape[0]

    def execute(self, x):
        return np.clip(round_shift(x + self.bias, self.shift, self.rounding), self.lo, self.hi)

    @property
    def weight_bits(self):
        return self.bias.size * self.in_type.bits


@dataclass(frozen=True, eq=False)
class Lookup(Layer):
    table: np.ndarray = None       # int64 [C, span] output values (one row: every channel)
    lo: int = 0                    # the input value of column 0
    in_type: DataType = None
    out_type: DataType = None

    op = "Lookup"

    @property
    def span(self) -> int:
        return self.table.shape[1]

    def execute(self, x):
        index = np.asarray(x, dtype=np.int64) - self.lo
        if index.size and (index.min() < 0 or index.max() >= self.span):
            raise QloomError(f"{self.name}: input outside the lookup table's range "
                             f"[{self.lo}, {self.lo + self.span - 1}]")
        rows = np.broadcast_to(np.arange(x.shape[-1]) % self.table.shape[0], index.shape)
        return self.table[rows, index]

    def output_range(self, net):
        lo, hi = self.table.min(axis=1), self.table.max(axis=1)
        channels = net.tensors[self.output].shape[-1]
        return (np.broadcast_to(lo, (channels,)).copy(), np.broadcast_to(hi, (channels,)).copy())

    @property
    def weight_bits(self):
        return self.table.size * self.out_type.bits


@dataclass(frozen=True, eq=False)
class MaxPool(Layer):
    kernel: tuple[int, int] = (2, 2)
    stride: tuple[int, int] = (2, 2)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)

    op = "MaxPool"

    def execute(self, x):
        top, left, bottom, right = self.pads
        x = np.pad(np.asarray(x, dtype=np.int64), ((0, 0), (top, bottom), (left, right), (0, 0)),
                   constant_values=np.iinfo(np.int64).min)
        n, h, w, c = x.shape
        (kh, kw), (sh, sw) = self.kernel, self.stride
        oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
        out = np.full((n, oh, ow, c), np.iinfo(np.int64).min, dtype=np.int64)
        for i in range(kh):
            for j in range(kw):
                out = np.maximum(out, x[:, i:i + sh * oh:sh, j:j + sw * ow:sw, :])
        return out


def window_sum_type(in_type: DataType, count: int) -> DataType:
    """The datatype of a sum of ``count`` values of ``in_type`` (zero padding included:
    every type's range holds 0)."""
    return smallest_type(count * in_type.min, count * in_type.max)


@dataclass(frozen=True, eq=False)
class AvgPool(Layer):
    kernel: tuple[int, int] = (2, 2)
    stride: tuple[int, int] = (2, 2)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)

    op = "AvgPool"

    @property
    def divisor(self) -> int:
        """What the model divides each window sum by (``count_include_pad``)."""
        return self.kernel[0] * self.kernel[1]

    def is_global(self, in_shape) -> bool:
        """Whether the window is the whole (unpadded) image: one output pixel."""
        return tuple(self.kernel) == tuple(in_shape[:2]) and not any(self.pads)

    def sum_type(self, in_type: DataType) -> DataType:
        return window_sum_type(in_type, self.divisor)

    def output_range(self, net):
        # Zero padding keeps every window sum inside [count*min, count*max].
        dtype = net.tensors[self.inputs[0]].dtype
        channels = net.shape_of(self.output)[-1]
        return (np.full(channels, self.divisor * dtype.min, dtype=np.int64),
                np.full(channels, self.divisor * dtype.max, dtype=np.int64))

    def execute(self, x):
        n, h, w, c = x.shape
        top, left, bottom, right = self.pads
        x = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)))
        (kh, kw), (sh, sw) = self.kernel, self.stride
        oh, ow = (x.shape[1] - kh) // sh + 1, (x.shape[2] - kw) // sw + 1
        out = np.zeros((n, oh, ow, c), dtype=np.int64)
        for i in range(kh):
            for j in range(kw):
                out += x[:, i:i + sh * oh:sh, j:j + sw * ow:sw, :]
        return out


@dataclass(frozen=True, eq=False)
class Upsample(Layer):
    scale: tuple[int, int] = (2, 2)

    op = "Upsample"

    def execute(self, x):
        return np.repeat(np.repeat(x, self.scale[0], axis=1), self.scale[1], axis=2)


@dataclass(frozen=True, eq=False)
class Add(Layer):
    op = "Add"

    def execute(self, a, b):
        return a + b


@dataclass(frozen=True, eq=False)
class IntMul(Layer):
    factor: int = 1

    op = "IntMul"

    def execute(self, x):
        return x * self.factor


@dataclass(frozen=True, eq=False)
class Concat(Layer):
    op = "Concat"

    def execute(self, *xs):
        return np.concatenate(xs, axis=-1)


@dataclass(frozen=True, eq=False)
class Flatten(Layer):
    shape: tuple[int, ...] | None = None    # None: flatten to one axis

    op = "Flatten"

    def execute(self, x):
        return x.reshape(x.shape[0], *(self.shape or (-1,)))


@dataclass(eq=False)
class Network:
    """An integer network plus its host-side float edges.

    ``quantize(x)`` maps float model inputs to the integer input tensor (the "prefix": the
    model's own ops up to and including its input quantizer, executed as qonnx does);
    ``tail(y)`` maps the float value of the output tensor (``value * scale``) to the model's
    float outputs (the ops after the last integer tensor). Both are documented in
    ``tail_ops``/``prefix_ops`` as the op types they contain.
    """

    name: str
    input_name: str                 # the ONNX graph input
    input_shape: tuple[int, ...]    # the ONNX graph input shape with batch dimension 1
    input: str                      # the integer input tensor
    output: str                     # the integer output tensor (the hardware boundary)
    layers: list[Layer]
    tensors: dict[str, TensorInfo]
    quantize: Callable[[np.ndarray], np.ndarray]
    tail: Callable[[np.ndarray], np.ndarray]
    prefix_ops: tuple[str, ...] = ()
    tail_ops: tuple[str, ...] = ()
    input_scale: np.ndarray = None  # float input = (value - zero_point) * scale, where affine
    input_zero_point: np.ndarray = None
    # integer tensor -> name of the quantized ONNX tensor holding (value - zero_point) *
    # scale, for checks; and how to lay the IR tensor out as that ONNX tensor (a function
    # of [N, ...] arrays; channels-last to NCHW for 4-D tensors when absent)
    onnx_names: dict[str, str] = field(default_factory=dict)
    onnx_layouts: dict[str, Callable] = field(default_factory=dict)
    # whether ``execute`` equals qonnx's execute_onnx bit for bit (on inputs on the input
    # grid), and how the host computes the tail (``qloom.nn.passes.tail``)
    tail_exact: bool = True
    tail_note: str = ""
    output_shape: tuple[int, ...] = ()  # the ONNX graph output's shape with batch 1, any rank

    def layer(self, name: str) -> Layer:
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise QloomError(f"no layer named {name!r}; layers are "
                         f"{', '.join(l.name for l in self.layers)}")

    def producer(self, tensor: str) -> Layer | None:
        for layer in self.layers:
            if layer.output == tensor:
                return layer
        return None

    def execute_int(self, x_int: np.ndarray, *, all_tensors: bool = False):
        """Run the integer network on integer input values ``[N, ...]`` (the shape of the
        integer input tensor). Returns the output tensor, or every tensor by name."""
        info = self.tensors[self.input]
        x_int = np.asarray(x_int)
        if x_int.shape[1:] != tuple(info.shape):
            raise QloomError(f"integer input must have shape [N, {', '.join(map(str, info.shape))}]"
                             f", not {list(x_int.shape)}")
        if not info.dtype.allows(x_int):
            raise QloomError(f"integer input holds values outside {info.dtype} "
                             f"[{info.dtype.min}, {info.dtype.max}]")
        env = {self.input: x_int.astype(np.int64)}
        for layer in self.layers:
            env[layer.output] = layer.execute(*(env[t] for t in layer.inputs)).astype(np.int64)
        return env if all_tensors else env[self.output]

    def dequantize(self, y_int: np.ndarray) -> np.ndarray:
        info = self.tensors[self.output]
        return ((y_int - info.zero_point) * info.scale).astype(np.float32)

    def outputs(self, y_int: np.ndarray) -> np.ndarray:
        """The model's float outputs ``[N, *model output shape]`` (any rank, in the model's
        own layout) from the integer output values ``[N, ...]`` the hardware emits: the
        host tail applied."""
        y_int = np.asarray(y_int)
        shape = tuple(self.tensors[self.output].shape)
        return self.tail(self.dequantize(y_int.reshape(y_int.shape[0], *shape)))

    def execute(self, x: np.ndarray) -> np.ndarray:
        """Float in, float out: identical in meaning to the original model."""
        return self.outputs(self.execute_int(self.quantize(x)))

    def shape_of(self, tensor: str) -> tuple[int, ...]:
        return tuple(self.tensors[tensor].shape)
