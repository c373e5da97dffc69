"""Fold a float BatchNormalization into the float weights of its neighbouring layer.

Before a float model is quantized (``insert_quantizers``), a BatchNorm right after a
MatMul/Conv (and its bias Add) becomes part of that layer's weights and bias, as hls4ml
folds it: ``s = gamma / sqrt(var + eps)``, ``W' = W * s`` per output channel,
``b' = (b - mean) * s + beta``. The weights are then quantized once, folded, so the
hardware has no BatchNorm at all. A BatchNorm right before a MatMul (a Dense after a
normalized input) folds forward: ``W' = diag(s) W``, ``b' = b + (beta - mean * s) W``.
A BatchNorm anywhere else stays, and gets a result quantizer of its own.

qonnx ``Transformation`` contract; float models only (weights are plain initializers).
"""

from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper
from qonnx.transformation.base import Transformation

__all__ = ["FoldBatchNorm"]


def _bn_affine(model, bn):
    get = model.get_initializer
    gamma, beta, mean, var = (get(t) for t in bn.input[1:5])
    if any(v is None for v in (gamma, beta, mean, var)):
        return None
    eps = next((a.f for a in bn.attribute if a.name == "epsilon"), 1e-5)
    s = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
    return s, beta.astype(np.float64) - mean.astype(np.float64) * s


class FoldBatchNorm(Transformation):
    """Fold each BatchNormalization next to a MatMul/Conv into its weights."""

    def apply(self, model):
        for bn in model.graph.node:
            if bn.op_type != "BatchNormalization" or len(bn.output) != 1:
                continue
            affine = _bn_affine(model, bn)
            if affine is None or bn.output[0] in {o.name for o in model.graph.output}:
                continue
            if self._backward(model, bn, *affine) or self._forward(model, bn, *affine):
                model.graph.node.remove(bn)
                return model, True
        return model, False

    @staticmethod
    def _single_use(model, tensor):
        return (len(model.find_consumers(tensor)) == 1
                and tensor not in {o.name for o in model.graph.output})

    def _backward(self, model, bn, s, shift) -> bool:
        """Linear (+ bias Add) -> BN: scale the weights' output channels."""
        prod = model.find_producer(bn.input[0])
        if prod is None or not self._single_use(model, bn.input[0]):
            return False
        add = None
        if prod.op_type == "Add":
            data = [t for t in prod.input if model.get_initializer(t) is None]
            if len(data) != 1:
                return False
            add, prod = prod, model.find_producer(data[0])
            if prod is None or not self._single_use(model, data[0]):
                return False
        if prod.op_type not in ("MatMul", "Conv"):
            return False
        w = model.get_initializer(prod.input[1])
        if w is None or len(model.get_tensor_shape(bn.input[0]) or []) != (
                2 if prod.op_type == "MatMul" else w.ndim):
            return False
        c = s.size
        if (w.shape[1] if prod.op_type == "MatMul" else w.shape[0]) != c or (
                prod.op_type == "MatMul" and w.ndim != 2):
            return False
        bias = self._bias(model, prod, add, c)
        if bias is None:
            return False
        name, values, shape = bias
        model.set_initializer(name, (values * s + shift).reshape(shape).astype(np.float32))
        per_out = s[None, :] if prod.op_type == "MatMul" else s.reshape(-1, *[1] * (w.ndim - 1))
        model.set_initializer(prod.input[1], (w * per_out).astype(np.float32))
        self._bypass(model, bn)
        return True

    @staticmethod
    def _bias(model, prod, add, c):
        """The layer's bias: (initializer name, float64 [C], shape to write it back in),
        created when the layer has none; None when the Add is no per-channel bias."""
        conv = prod.op_type == "Conv"
        if add is not None:
            name = next((t for t in add.input if model.get_initializer(t) is not None), None)
            if name is None:
                return None
            b = model.get_initializer(name).astype(np.float64)
            per_channel = b.size == c and (b.ndim >= 3 and b.shape[-3] == c if conv
                                           else b.shape[-1] == c)
            if not (per_channel or b.size == 1):
                return None
            shape = b.shape if per_channel else ((1, c, 1, 1) if conv else (c,))
            return name, np.broadcast_to(b.reshape(-1), (c,)).copy(), shape
        name = f"{prod.name}_bias"
        if conv:
            while len(prod.input) < 3:
                prod.input.append("")
            if prod.input[2]:
                return prod.input[2], model.get_initializer(prod.input[2]).astype(
                    np.float64), (c,)
            prod.input[2] = name
            return name, np.zeros(c), (c,)
        out = prod.output[0]
        mid = f"{out}_prebias"
        prod.output[0] = mid
        index = list(model.graph.node).index(prod)
        model.graph.node.insert(index + 1, helper.make_node(
            "Add", [mid, name], [out], name=f"{prod.name}_bias_add"))
        return name, np.zeros(c), (c,)

    def _forward(self, model, bn, s, shift) -> bool:
        """BN -> MatMul (2-D): scale the weights' input rows, move the shift into a bias."""
        users = model.find_consumers(bn.output[0])
        if len(users) != 1 or users[0].op_type != "MatMul" or users[0].input[0] != bn.output[0]:
            return False
        mm = users[0]
        w = model.get_initializer(mm.input[1])
        if w is None or w.ndim != 2 or w.shape[0] != s.size or \
                len(model.get_tensor_shape(bn.input[0]) or []) != 2:
            return False
        w64 = w.astype(np.float64)
        nxt = model.find_consumers(mm.output[0])
        add = nxt[0] if len(nxt) == 1 and nxt[0].op_type == "Add" else None
        bias = self._bias(model, mm, add, w.shape[1])
        if bias is None:
            return False
        name, values, shape = bias
        model.set_initializer(name, (values + shift @ w64).reshape(shape).astype(np.float32))
        model.set_initializer(mm.input[1], (w64 * s[:, None]).astype(np.float32))
        self._bypass(model, bn)
        return True

    @staticmethod
    def _bypass(model, bn):
        """Let the BN's consumers read its input (the caller removes the BN node)."""
        for user in model.find_consumers(bn.output[0]) or []:
            for i, t in enumerate(user.input):
                if t == bn.output[0]:
                    user.input[i] = bn.input[0]
