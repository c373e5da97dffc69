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


def jet_tagger(tail=("Softmax",), w_scale=2.0 ** -5, a_scale=2.0 ** -6, seed=0,
               float_bias=True):
    """A jet-tagger-shaped MLP as QKeras -> QONNX writes it: a float input [1, 16] read by
    the first MatMul (no input quantizer), dense layers 64-32-32-5 with 6-bit weights and
    biases (``quantized_bits(6, 0)``: scale 2**-5) and 6-bit ReLU activations
    (``quantized_relu(6)``: scale 2**-6); the last MatMul has a float bias Add (or a
    quantized one) and then the ``tail`` ops (Softmax, Sigmoid, LogSoftmax)."""
    g = GraphBuilder()
    rng = np.random.default_rng(seed)
    x = g.input([1, 16], name="global_in")
    sizes = (16, 64, 32, 32, 5)
    for i in range(4):
        w = rng.normal(0, 0.4, (sizes[i], sizes[i + 1])).astype(np.float32)
        x = g.node("MatMul", [x, g.quant(g.const(w), w_scale, 6)])
        b = rng.normal(0, 0.5, sizes[i + 1]).astype(np.float32)
        last = i == 3
        x = g.node("Add", [x, g.const(b) if last and float_bias
                           else g.quant(g.const(b), w_scale, 6)])
        if not last:
            x = g.quant(g.node("Relu", [x]), a_scale, 6, signed=False)
    for op in tail:
        x = g.node(op, [x], axis=1) if op in ("Softmax", "LogSoftmax") else g.node(op, [x])
    return g.model(x)


def jet_inputs(n, seed=1, scale=2.0 ** -10):
    """Jet features on the fixed-point input grid qloom uses for a float input (INT16,
    2**-10), where ``Network.execute`` is qonnx on the same inputs."""
    x = np.random.default_rng(seed).normal(0, 1.5, (n, 16))
    return (np.round(x / scale) * scale).astype(np.float32)


def segmentation_net(nhwc_output=False, quantized_output=False, seed=0):
    """A small conv net whose output is an image ([1, 2, 8, 8], or [1, 8, 8, 2] when the
    graph ends with a Transpose to channels-last as Keras models do): a segmentation map."""
    g = GraphBuilder()
    rng = np.random.default_rng(seed)
    x = g.quant(g.input([1, 3, 8, 8]), 0.25, 4, signed=False)
    w = rng.normal(0, 1, (4, 3, 3, 3)).astype(np.float32)
    x = g.node("Conv", [x, g.quant(g.const(w), 0.25, 4, narrow=True)], kernel_shape=[3, 3],
               pads=[1] * 4)
    x = g.quant(g.node("Relu", [x]), 0.5, 4, signed=False)
    w = rng.normal(0, 1, (2, 4, 1, 1)).astype(np.float32)
    x = g.node("Conv", [x, g.quant(g.const(w), 0.25, 4, narrow=True)], kernel_shape=[1, 1])
    if quantized_output:
        x = g.quant(x, 0.5, 4)
    if nhwc_output:
        x = g.node("Transpose", [x], perm=[0, 2, 3, 1])
    return g.model(x)


def segmentation_inputs(n, seed=1):
    return np.random.default_rng(seed).uniform(0, 3, (n, 3, 8, 8)).astype(np.float32)


def monotone_activations_cnn(seed=0):
    """A conv net whose activations are the monotone kinds other converters write between
    quantizers, each absorbed into thresholds: LeakyRelu (slope 0.1), per-channel PRelu
    after a depthwise convolution, Elu, a decreasing HardSigmoid, and Sigmoid after a dense
    layer; [1, 3, 8, 8] in, 5 scores out."""
    g = GraphBuilder()
    rng = np.random.default_rng(seed)

    def weights(shape, scale=0.125):
        return g.quant(g.const(rng.normal(0, 1.5, shape).astype(np.float32) * scale), scale, 4,
                       narrow=True)

    def bias(c):
        return g.const(rng.normal(0, 0.3, (1, c, 1, 1)).astype(np.float32))

    x = g.quant(g.input([1, 3, 8, 8]), 0.25, 4, signed=True)
    x = g.node("Add", [g.node("Conv", [x, weights((6, 3, 3, 3))], kernel_shape=[3, 3],
                              pads=[1] * 4), bias(6)])
    x = g.quant(g.node("LeakyRelu", [x], alpha=0.1), 0.25, 4)
    x = g.node("Conv", [x, weights((6, 1, 3, 3))], kernel_shape=[3, 3], group=6)
    slopes = g.const(np.array([0.5, 0.25, 0.0, 2.0, 0.125, 1.0], np.float32).reshape(6, 1, 1))
    x = g.quant(g.node("PRelu", [x, slopes]), 0.25, 4)
    x = g.node("Conv", [x, weights((4, 6, 1, 1))], kernel_shape=[1, 1])
    x = g.quant(g.node("Elu", [g.node("Add", [x, bias(4)])], alpha=0.7), 0.125, 5)
    x = g.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = g.node("Conv", [x, weights((4, 4, 1, 1))], kernel_shape=[1, 1])
    x = g.quant(g.node("HardSigmoid", [x], alpha=-0.7, beta=0.5), 0.0625, 4, signed=False)
    x = g.node("Flatten", [x], axis=1)
    x = g.node("MatMul", [x, weights((36, 8), 0.5)])
    x = g.quant(g.node("Sigmoid", [x]), 2.0 ** -4, 4, signed=False)
    return g.model(g.node("MatMul", [x, weights((8, 5))]))


def monotone_activations_inputs(n, seed=1):
    return np.random.default_rng(seed).normal(0, 0.8, (n, 3, 8, 8)).astype(np.float32)
