"""QONNX models laid out as other tools write them, built with onnx.helper and shared by
the frontend and compiler tests: the QONNX model zoo's keyword-spotting MLP (a
[1, 1, 10, 49] input flattened into a 490-input MatMul) and its relatives."""

from __future__ import annotations

import numpy as np

from graph_builder import GraphBuilder


def quant_weights(g, rows, cols, seed, scale=0.125, bits=4):
    w = np.random.default_rng(seed).normal(0, 1, (rows, cols)).astype(np.float32)
    return g.quant(g.const(w), scale, bits, narrow=True)


def flatten(g, x, how, shape):
    """``x`` of ONNX ``shape`` flattened to [1, prod] by ``how``: "flatten" (Flatten axis
    1), "reshape" (Reshape to [1, prod]) or "reshape-1" (Reshape to [-1, prod])."""
    if how == "flatten":
        return g.node("Flatten", [x], axis=1)
    size = int(np.prod(shape[1:]))
    return g.node("Reshape", [x, g.const(np.array([1 if how == "reshape" else -1, size]),
                                         np.int64)])


def mlp_head(g, x, features, seed=1):
    """The dense layers after the flatten: ``features`` -> 16 (ReLU, 4 bits) -> 5."""
    x = g.quant(g.node("Relu", [g.node("MatMul", [x, quant_weights(g, features, 16, seed)])]),
                0.5, 4, signed=False)
    return g.node("MatMul", [x, quant_weights(g, 16, 5, seed + 1)])


def kws_mlp(shape=(1, 1, 10, 49), how="reshape", transpose=None, before_quant=False):
    """The keyword-spotting MLP's layout: an input of ``shape`` (8-bit quantized), an
    optional Transpose, flattened into a dense layer."""
    g = GraphBuilder()
    x = g.input(list(shape))
    if before_quant:
        x = g.quant(flatten(g, x, how, shape), 0.25, 8)
    else:
        x = g.quant(x, 0.25, 8)
        flat_shape = shape
        if transpose is not None:
            x = g.node("Transpose", [x], perm=list(transpose))
            flat_shape = tuple(shape[p] for p in transpose)
        x = flatten(g, x, how, flat_shape)
    return g.model(mlp_head(g, x, int(np.prod(shape[1:]))))
