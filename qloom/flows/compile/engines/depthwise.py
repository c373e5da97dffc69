"""Depthwise convolutions (one input channel per group, as many outputs as inputs): the
sliding window in channel-word-major order feeding the depthwise unit (``K`` products per
channel, not the ``K*C`` of the block-sparse dense form), with the following activation's
thresholds after it. Cycles and widths come from the template."""

from __future__ import annotations

from qloom.nn.ir import Conv, MultiThreshold
from qloom.flows.compile.engines.base import Engine, Fold, divisors, window_needed
from qloom.flows.compile.engines.padding import pad_code

__all__ = ["DepthwiseEngine", "is_depthwise"]


def is_depthwise(conv: Conv, in_channels: int) -> bool:
    """Whether ``conv`` is a plain depthwise convolution (a channel multiplier of 1)."""
    return conv.depthwise and conv.groups == in_channels == conv.out_channels


class DepthwiseEngine(Engine):
    fold_keys = ("pe",)
    fuses_thresholds = True
    kind = "depthwise"

    def __init__(self, conv: Conv, threshold: MultiThreshold | None, in_shape, out_shape):
        output = threshold.output if threshold is not None else conv.output
        layers = (conv.name,) + ((threshold.name,) if threshold is not None else ())
        super().__init__(conv.name, layers, conv.inputs, output)
        self.conv, self.threshold = conv, threshold
        self.in_h, self.in_w, self.channels = in_shape
        self.out_h, self.out_w, _ = out_shape
        kh, kw = conv.kernel
        self.k = kh * kw
        self.pad_code = pad_code(conv)
        self._cycles = {}           # lanes -> cycles per frame, asked once

    @classmethod
    def from_layer(cls, layer, net, threshold=None):
        return cls(layer, threshold, net.shape_of(layer.inputs[0]), net.shape_of(layer.output))

    @property
    def engine_name(self):
        return "swg+depthwise"

    def unit(self, lanes: int):
        from qloom.hw.depthwise import DepthwiseMAC
        conv = self.conv
        return DepthwiseMAC(weights=conv.weights.reshape(self.channels, self.k),
                            w_type=conv.w_type, in_type=conv.in_type, lanes=lanes)

    def folds(self):
        return [Fold(pe) for pe in divisors(self.channels)]

    def window(self, lanes: int):
        """The sliding window's configuration for ``lanes`` lanes, in channel-word-major
        order."""
        from qloom.hw.swg import WindowConfig, WindowOrder
        conv = self.conv
        return WindowConfig(in_h=self.in_h, in_w=self.in_w, channels=self.channels,
                            kernel=conv.kernel, stride=conv.stride, pads=conv.pads,
                            dtype=conv.in_type, simd=lanes, pad_code=self.pad_code,
                            order=WindowOrder.C_KH_KW)

    def latency(self, fold):
        return self.cycles(fold) / (self.out_h * self.out_w) + self._units_latency(fold)

    def input_needed(self):
        conv = self.conv
        return (window_needed((self.in_h, self.in_w, self.channels),
                              (self.out_h, self.out_w, self.channels), conv.kernel,
                              conv.stride, conv.pads),)

    def cycles(self, fold):
        """The slower of the unit and the window, which takes every input word (more than
        it gives when the stride exceeds the kernel)."""
        if fold.pe not in self._cycles:
            unit = self.out_h * self.out_w * self._asked(fold.pe).cycles_per_pixel()
            self._cycles[fold.pe] = max(unit, self.window(fold.pe).cycles_per_frame)
        return self._cycles[fold.pe]

    def features(self, fold, options, dsps=0):
        """The sliding window's, the unit's and the thresholds' estimates, each from its
        template (the thresholds in the parallel mode ``nodes`` builds them in)."""
        from qloom.hw import swg
        from qloom.hw.estimate import unelaborated
        from qloom.flows.compile.engines.threshold import thresholding
        family = options.family
        unit = self._asked(fold.pe)
        parts = [("_swg", swg.estimate(self.window(fold.pe), family)),
                 ("", unit.estimate(family))]
        if self.threshold is not None:
            parts.append(("_thr", unelaborated(thresholding(
                self.threshold, unit.acc_type, fold.pe, options)).estimate(family)))
        return parts

    @property
    def in_bits(self) -> int:
        return self.conv.in_type.bits

    def inner_edges(self, fold):
        edges = [(f"{self.name}_windows", self.name, fold.pe, self.conv.in_type.bits)]
        if self.threshold is not None:
            edges.append((f"{self.name}_acc", f"{self.name}_thr", fold.pe,
                          self._asked(fold.pe).acc_type.bits))
        return edges

    def in_lanes(self, fold):
        return fold.pe

    def out_lanes(self, fold):
        return fold.pe

    def nodes(self, fold, options, dsps=0):
        from qloom.hw.top import Node
        from qloom.hw.swg import SlidingWindow
        from qloom.flows.compile.engines.dense import threshold_spec
        windows = f"{self.name}_windows"
        swg = SlidingWindow(self.window(fold.pe))
        unit = self.unit(fold.pe)
        nodes = [Node(f"{self.name}_swg", swg, self.inputs, windows)]
        spec = threshold_spec(self.threshold)
        if spec is None:
            nodes.append(Node(self.name, unit, (windows,), self.output))
        else:
            from qloom.flows.compile.engines.threshold import thresholding
            acc = f"{self.name}_acc"
            nodes.append(Node(self.name, unit, (windows,), acc))
            nodes.append(Node(f"{self.name}_thr",
                              thresholding(self.threshold, unit.acc_type, fold.pe, options),
                              (acc,), self.output))
        return nodes
