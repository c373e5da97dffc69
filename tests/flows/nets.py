"""Small integer networks built directly in the IR, for compiler tests that should not
depend on the ONNX frontend."""

from __future__ import annotations

import numpy as np

from qloom.nn.dtypes import BIPOLAR, DataType, int_type, uint_type
from qloom.nn.ir import (Add, Concat, Conv, Dense, Flatten, MaxPool, MultiThreshold, Network,
                         TensorInfo)


def _random_weights(rng, shape, w_type: DataType):
    if w_type.bipolar:
        return rng.choice([-1, 1], size=shape).astype(np.int64)
    return rng.integers(w_type.min, w_type.max + 1, size=shape).astype(np.int64)


def _thresholds(rng, lo, hi, channels, out_type: DataType):
    """Random ascending thresholds inside [lo, hi] per channel, random signs."""
    k = 1 if out_type.bipolar else out_type.max - out_type.min
    th = np.sort(rng.integers(lo - 1, hi + 2, size=(channels, k)), axis=1)
    sign = rng.choice([1, -1], size=channels)
    low_code = 0 if out_type.bipolar else out_type.min
    high_code = 1 if out_type.bipolar else out_type.max
    bias = np.where(sign > 0, low_code, high_code)
    return th.astype(np.int64), bias.astype(np.int64), sign.astype(np.int64)


class NetBuilder:
    """Appends layers to a network one at a time, tracking shapes and datatypes."""

    def __init__(self, shape, dtype: DataType, seed=0):
        self.rng = np.random.default_rng(seed)
        self.layers, self.tensors = [], {}
        self.cur = "x"
        self.tensors["x"] = TensorInfo("x", tuple(shape), dtype)

    @property
    def info(self):
        return self.tensors[self.cur]

    def _add(self, layer, shape, dtype):
        self.layers.append(layer)
        self.tensors[layer.output] = TensorInfo(layer.output, tuple(shape), dtype)
        self.cur = layer.output
        return layer.output

    def dense(self, mh, w_type):
        info = self.info
        w = _random_weights(self.rng, (mh, info.shape[-1]), w_type)
        name = f"dense{len(self.layers)}"
        layer = Dense(name, (self.cur,), name, weights=w, w_type=w_type, in_type=info.dtype)
        return self._add(layer, info.shape[:-1] + (mh,), layer.acc_type)

    def conv(self, oc, k, w_type, stride=1, pad=0):
        info = self.info
        h, w_, c = info.shape
        weights = _random_weights(self.rng, (oc, k, k, c), w_type)
        name = f"conv{len(self.layers)}"
        layer = Conv(name, (self.cur,), name, weights=weights, w_type=w_type,
                     in_type=info.dtype, stride=(stride, stride), pads=(pad,) * 4)
        oh, ow = (h + 2 * pad - k) // stride + 1, (w_ + 2 * pad - k) // stride + 1
        return self._add(layer, (oh, ow, oc), layer.acc_type(c))

    def threshold(self, out_type):
        info = self.info
        prod = self.producer()
        if isinstance(prod, Dense):
            lo, hi = prod.acc_range()[0].min(), prod.acc_range()[1].max()
        else:
            lo, hi = info.dtype.min, info.dtype.max
        th, bias, sign = _thresholds(self.rng, lo, hi, info.shape[-1], out_type)
        name = f"thr{len(self.layers)}"
        layer = MultiThreshold(name, (self.cur,), name, thresholds=th, bias=bias, sign=sign,
                               in_type=info.dtype, out_type=out_type)
        return self._add(layer, info.shape, out_type)

    def maxpool(self, k=2, s=2):
        info = self.info
        h, w, c = info.shape
        name = f"pool{len(self.layers)}"
        return self._add(MaxPool(name, (self.cur,), name, kernel=(k, k), stride=(s, s)),
                         ((h - k) // s + 1, (w - k) // s + 1, c), info.dtype)

    def flatten(self):
        info = self.info
        name = f"flat{len(self.layers)}"
        return self._add(Flatten(name, (self.cur,), name),
                         (int(np.prod(info.shape)),), info.dtype)

    def add(self, a, b):
        ta, tb = self.tensors[a], self.tensors[b]
        from qloom.nn.dtypes import smallest_type
        dtype = smallest_type(ta.dtype.min + tb.dtype.min, ta.dtype.max + tb.dtype.max)
        name = f"add{len(self.layers)}"
        return self._add(Add(name, (a, b), name), ta.shape, dtype)

    def concat(self, *tensors):
        """Channels of ``tensors`` (same pixels, same datatype) side by side."""
        infos = [self.tensors[t] for t in tensors]
        name = f"cat{len(self.layers)}"
        shape = infos[0].shape[:-1] + (sum(i.shape[-1] for i in infos),)
        return self._add(Concat(name, tuple(tensors), name), shape, infos[0].dtype)

    def producer(self):
        for layer in self.layers:
            if layer.output == self.cur:
                return layer
        return None

    def network(self, name="testnet") -> Network:
        shape = self.tensors["x"].shape
        return Network(name=name, input_name="x", input_shape=(1,) + shape, input="x",
                       output=self.cur, layers=self.layers, tensors=self.tensors,
                       quantize=lambda x: np.asarray(x, dtype=np.int64),
                       tail=lambda y: y)


def binary_mlp(seed=0):
    b = NetBuilder((64,), BIPOLAR, seed)
    b.dense(32, BIPOLAR)
    b.threshold(BIPOLAR)
    b.dense(16, BIPOLAR)
    b.threshold(BIPOLAR)
    b.dense(10, BIPOLAR)
    return b.network("binary_mlp")


def multibit_mlp(seed=0):
    b = NetBuilder((12,), int_type(4), seed)
    b.dense(8, int_type(3))
    b.threshold(uint_type(3))
    b.dense(6, int_type(2, narrow=True))
    b.threshold(int_type(2))
    b.dense(4, int_type(4))
    return b.network("multibit_mlp")


def residual_mlp(seed=0):
    b = NetBuilder((8,), uint_type(2), seed)
    b.dense(8, int_type(3))
    skip = b.threshold(uint_type(2))
    b.dense(8, int_type(2))
    main = b.threshold(uint_type(2))
    b.add(skip, main)
    b.threshold(uint_type(2))
    b.dense(4, int_type(3))
    return b.network("residual_mlp")


def conv_net(seed=0):
    b = NetBuilder((6, 6, 2), uint_type(2), seed)
    b.conv(4, 3, int_type(2), pad=1)
    b.threshold(uint_type(2))
    b.maxpool(2, 2)
    b.conv(4, 2, int_type(3))
    b.threshold(uint_type(2))
    b.flatten()
    b.dense(3, int_type(2))
    return b.network("conv_net")


def inception_net(seed=0):
    """A first stage's output beside two deeper stages', joined by one three-input Concat:
    the first waits in the concat's input FIFO while the others pass two convolutions."""
    b = NetBuilder((8, 8, 2), uint_type(2), seed)
    b.conv(2, 3, int_type(2), pad=1)
    first = b.threshold(uint_type(2))
    b.conv(2, 3, int_type(2), pad=1)
    second = b.threshold(uint_type(2))
    b.conv(2, 3, int_type(2), pad=1)
    third = b.threshold(uint_type(2))
    b.concat(first, second, third)
    b.flatten()
    b.dense(3, int_type(2))
    return b.network("inception_net")


def random_input(net: Network, n, seed=1):
    info = net.tensors[net.input]
    rng = np.random.default_rng(seed)
    if info.dtype.bipolar:
        return rng.choice([-1, 1], size=(n,) + info.shape).astype(np.int64)
    return rng.integers(info.dtype.min, info.dtype.max + 1, size=(n,) + info.shape)
