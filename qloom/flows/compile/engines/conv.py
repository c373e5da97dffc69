"""Convolutions: the sliding window generator feeding a matrix unit (the systolic array
for multi-bit weights and activations, the XNOR or add/subtract MVU for binary ones), with
the following activation's thresholds fused into the matrix unit's output."""

from __future__ import annotations

import functools

from qloom.nn.ir import Conv, MultiThreshold
from qloom.flows.compile.engines.base import Engine, Fold, divisors, window_needed
from qloom.flows.compile.engines.padding import pad_code
from qloom.flows.compile.engines.dense import (WEIGHT_PLACES, datapath_of, dsp_primitive,
                                               fused_threshold_bits, memory_styles,
                                               mvu_config, threshold_spec)

__all__ = ["ConvEngine"]


class ConvEngine(Engine):
    fold_keys = ("pe", "simd")
    fuses_thresholds = True

    def __init__(self, conv: Conv, threshold: MultiThreshold | None, in_shape, out_shape):
        output = threshold.output if threshold is not None else conv.output
        layers = (conv.name,) + ((threshold.name,) if threshold is not None else ())
        super().__init__(conv.name, layers, conv.inputs, output)
        self.conv, self.threshold = conv, threshold
        self.in_h, self.in_w, self.in_c = in_shape
        self.out_h, self.out_w, self.out_c = out_shape
        kh, kw = conv.kernel
        self.mw = kh * kw * self.in_c
        self.systolic = datapath_of(conv.w_type, conv.in_type) == "mac"
        self.pad_code = pad_code(conv)

    @classmethod
    def from_layer(cls, layer, net, threshold=None):
        """A depthwise convolution gets its own engine (``DepthwiseEngine``: K products per
        channel instead of the block-sparse dense form's K*C); every other one this."""
        from qloom.flows.compile.engines.depthwise import DepthwiseEngine, is_depthwise
        if is_depthwise(layer, net.shape_of(layer.inputs[0])[-1]):
            return DepthwiseEngine.from_layer(layer, net, threshold)
        return cls(layer, threshold, net.shape_of(layer.inputs[0]),
                   net.shape_of(layer.output))

    @property
    def kind(self):
        return "conv"

    @property
    def weight_places(self):
        # The systolic array keeps its weights in its cells.
        return () if self.systolic else WEIGHT_PLACES

    @functools.cached_property
    def threshold_bits(self) -> int:
        """Bits per PE lane of the fused thresholds' memory as the MVU builds it (0
        without thresholds; the systolic array's thresholds are a unit of their own)."""
        conv = self.conv
        if self.systolic:
            return 0
        return fused_threshold_bits(conv.dense_weights(self.in_c), conv.w_type,
                                    conv.in_type, self.threshold)

    def styles(self, fold, options):
        """Where the matrix unit's memories go (``memory_styles``)."""
        conv = self.conv
        return memory_styles(self.out_c, self.mw, fold, conv.w_type, conv.in_type,
                             self.threshold_bits, options)

    def systolic_array(self, fold, options, dsps=0):
        """The systolic array this engine builds at ``fold`` for multi-bit weights and
        inputs: ``simd`` rows, ``pe`` columns, ``dsps`` of its multipliers on DSP
        blocks."""
        from qloom.hw.systolic import SystolicArray
        conv = self.conv
        return SystolicArray(weights=conv.dense_weights(self.in_c), w_type=conv.w_type,
                             in_type=conv.in_type, rows=fold.simd, cols=fold.pe,
                             dsp_budget=dsps,
                             dsp_primitive=dsp_primitive(options, conv.w_type, conv.in_type))

    def config(self, fold, options, dsps=0):
        """The configuration of the MVU this engine builds at ``fold`` (not for the
        systolic array)."""
        conv = self.conv
        return mvu_config(weights=conv.dense_weights(self.in_c), w_type=conv.w_type,
                          in_type=conv.in_type, fold=fold, threshold=self.threshold,
                          options=options, dsps=dsps, memories=self.styles(fold, options))

    @property
    def engine_name(self):
        if self.systolic:
            return "swg+systolic"
        return f"swg+mvu_{datapath_of(self.conv.w_type, self.conv.in_type)}"

    def folds(self):
        return [Fold(pe, simd) for pe in divisors(self.out_c) for simd in divisors(self.in_c)]

    def window(self, simd: int):
        """The sliding window's configuration for ``simd`` lanes (made once per ``simd``:
        the planner asks for its cycles at every folding it tries)."""
        from qloom.hw.swg import WindowConfig
        windows = self.__dict__.setdefault("_windows", {})
        if simd not in windows:
            conv = self.conv
            windows[simd] = WindowConfig(
                in_h=self.in_h, in_w=self.in_w, channels=self.in_c, kernel=conv.kernel,
                stride=conv.stride, pads=conv.pads, dtype=conv.in_type, simd=simd,
                pad_code=self.pad_code)
        return windows[simd]

    def cycles(self, fold):
        """The slower of the matrix unit and the window, which takes every input word
        (more than it gives when the stride exceeds the kernel)."""
        unit = self.out_h * self.out_w * (self.out_c // fold.pe) * (self.mw // fold.simd)
        return max(unit, self.window(fold.simd).cycles_per_frame)

    def multipliers(self, fold):
        return fold.pe * fold.simd if self.systolic else 0

    def latency(self, fold):
        return self.cycles(fold) / (self.out_h * self.out_w) + self._units_latency(fold)

    def input_needed(self):
        conv = self.conv
        return (window_needed((self.in_h, self.in_w, self.in_c),
                              (self.out_h, self.out_w, self.out_c), conv.kernel, conv.stride,
                              conv.pads),)

    def multiplier_bits(self):
        return self.conv.in_type.bits * self.conv.w_type.bits

    def features(self, fold, options, dsps=0):
        from qloom.hw import swg
        from qloom.hw.estimate import unelaborated
        from qloom.flows.compile.engines.threshold import thresholding
        family = options.family
        window = swg.estimate(self.window(fold.simd), family)
        if not self.systolic:
            from qloom.hw import mvu
            return [("_swg", window),
                    ("", mvu.estimate(self.config(fold, options, dsps), family))]
        array = unelaborated(self.systolic_array(fold, options, dsps))
        parts = [("_swg", window), ("", array.estimate(family))]
        if self.threshold is not None:
            unit = unelaborated(thresholding(self.threshold, array.acc_type, fold.pe, options))
            parts.append(("_thr", unit.estimate(family)))
        return parts

    @property
    def in_bits(self) -> int:
        return self.conv.in_type.bits

    @property
    def out_bits(self) -> int:
        t = self.threshold
        return t.out_type.bits if t is not None else self.conv.acc_type(self.in_c).bits

    def inner_edges(self, fold):
        edges = [(f"{self.name}_windows", self.name, fold.simd, self.conv.in_type.bits)]
        if self.systolic and self.threshold is not None:
            edges.append((f"{self.name}_acc", f"{self.name}_thr", fold.pe,
                          self.conv.acc_type(self.in_c).bits))
        return edges

    def in_lanes(self, fold):
        return fold.simd

    def out_lanes(self, fold):
        return fold.pe

    def nodes(self, fold, options, dsps=0):
        from qloom.hw.top import Node
        windows = f"{self.name}_windows"
        from qloom.hw.swg import SlidingWindow
        swg = SlidingWindow(self.window(fold.simd))
        spec = threshold_spec(self.threshold)
        if self.systolic:
            unit = self.systolic_array(fold, options, dsps)
        else:
            from qloom.hw.mvu import MVU
            unit = MVU(self.config(fold, options, dsps))
        nodes = [Node(f"{self.name}_swg", swg, self.inputs, windows)]
        if self.systolic and spec is not None:
            from qloom.flows.compile.engines.threshold import thresholding
            acc = f"{self.name}_acc"
            nodes.append(Node(self.name, unit, (windows,), acc))
            nodes.append(Node(f"{self.name}_thr",
                              thresholding(self.threshold, unit.acc_type, fold.pe, options),
                              (acc,), self.output))
        else:
            nodes.append(Node(self.name, unit, (windows,), self.output))
        return nodes
