"""A small U-Net in QONNX (onnx.helper): two levels of 3x3 convolutions with ReLU quantized to
4 bits, a MaxPool down, a nearest Resize x2 up, a Concat skip from before the MaxPool, and a
1x1 convolution to a 2-channel map. Power-of-two scales keep qonnx's float sums exact."""

from __future__ import annotations

import numpy as np

from graph_builder import GraphBuilder

__all__ = ["unet_model", "unet_inputs"]


def unet_model(h: int = 16, w: int = 16, seed: int = 0, opset: int = 13):
    g, rng = GraphBuilder(), np.random.default_rng(seed)

    def conv(x, cin, cout, k=3):
        wq = g.quant(g.const(rng.integers(-7, 8, (cout, cin, k, k)).astype(np.float32) / 8),
                     0.125, 4, signed=True, narrow=True)
        return g.node("Conv", [x, wq], kernel_shape=[k, k], pads=[k // 2] * 4)

    def act(x):
        return g.quant(g.node("Relu", [x]), 0.5, 4, signed=False)

    x = g.quant(g.input([1, 3, h, w]), 0.25, 4, signed=False)
    skip = act(conv(x, 3, 4))
    down = g.node("MaxPool", [skip], kernel_shape=[2, 2], strides=[2, 2])
    mid = act(conv(down, 4, 8))
    scales = g.const(np.array([1, 1, 2, 2], np.float32))
    up = g.node("Resize", [mid, "", scales], mode="nearest")
    cat = g.node("Concat", [up, skip], axis=1)
    dec = act(conv(cat, 12, 4))
    out = g.quant(conv(dec, 4, 2, k=1), 1.0, 8, signed=True)
    return g.model(out, opset=opset)


def unet_inputs(n: int, h: int = 16, w: int = 16, seed: int = 1):
    return np.random.default_rng(seed).uniform(0, 4, (n, 3, h, w)).astype(np.float32)


def separable_unet_model(size: int = 256, levels: int = 4, base: int = 8, seed: int = 0,
                         opset: int = 13):
    """The realistic-size U-Net: ``levels`` levels of a depthwise 3x3 and a pointwise 1x1
    convolution (LeakyRelu of slope 1/8 quantized to signed 4 bits after each, as Keras
    U-Nets write it), MaxPool down, nearest Resize x2 up,
    a Concat skip per level, and a 1x1 convolution to a 2-channel map; ``base`` channels at
    the top level, doubled per level down."""
    g, rng = GraphBuilder(), np.random.default_rng(seed)

    def weights(cout, cin, k):
        w = rng.integers(-7, 8, (cout, cin, k, k)).astype(np.float32) / 8
        return g.quant(g.const(w), 0.125, 4, signed=True, narrow=True)

    def act(x):
        return g.quant(g.node("LeakyRelu", [x], alpha=0.125), 0.5, 4, signed=True)

    def block(x, cin, cout):
        x = act(g.node("Conv", [x, weights(cin, 1, 3)], kernel_shape=[3, 3], pads=[1] * 4,
                       group=cin))
        return act(g.node("Conv", [x, weights(cout, cin, 1)], kernel_shape=[1, 1]))

    x = g.quant(g.input([1, 3, size, size]), 0.25, 4, signed=False)
    skips, cin = [], 3
    for level in range(levels - 1):
        cout = base << level
        x = block(x, cin, cout)
        skips.append((x, cout))
        x = g.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
        cin = cout
    x = block(x, cin, base << (levels - 1))
    cin = base << (levels - 1)
    for skip, channels in reversed(skips):
        up = g.node("Resize", [x, "", g.const(np.array([1, 1, 2, 2], np.float32))],
                    mode="nearest")
        x = block(g.node("Concat", [up, skip], axis=1), cin + channels, channels)
        cin = channels
    out = g.quant(g.node("Conv", [x, weights(2, cin, 1)], kernel_shape=[1, 1]), 1.0, 8,
                  signed=True)
    return g.model(out, opset=opset)
