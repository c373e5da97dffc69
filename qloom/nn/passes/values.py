"""What an ONNX tensor means during lowering (see ``lower_to_network``), and how an ONNX
tensor's element order maps to the channels-last IR."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Layout", "PLAIN", "NCHW", "Int", "FloatChain", "Prefix"]


@dataclass(frozen=True)
class Layout:
    """How an ONNX tensor's elements map to the channels-last IR tensor."""

    kind: str = "plain"                  # "plain", "nchw" or "flat_chw"
    chw: tuple[int, int, int] = (0, 0, 0)  # for "flat_chw": the flattened [C, H, W]

    def to_ir(self, x: np.ndarray) -> np.ndarray:
        if self.kind == "nchw":
            return np.moveaxis(x, 1, -1)
        if self.kind == "flat_chw":
            c, h, w = self.chw
            return np.moveaxis(x.reshape(-1, c, h, w), 1, -1).reshape(x.shape[0], -1)
        return x

    def to_onnx(self, x: np.ndarray) -> np.ndarray:
        if self.kind == "nchw":
            return np.moveaxis(x, -1, 1)
        if self.kind == "flat_chw":
            c, h, w = self.chw
            return np.moveaxis(x.reshape(-1, h, w, c), -1, 1).reshape(x.shape[0], -1)
        return x


PLAIN = Layout()
NCHW = Layout("nchw")


@dataclass
class Int:
    ir: str                     # the IR tensor
    onnx: str                   # the ONNX tensor it stands for
    layout: Layout
    offset: np.ndarray          # float offset per channel (0 for quantizer outputs)
    quantized: bool             # a quantizer output (or exact reshuffling of one)


@dataclass
class FloatChain:
    source: Int
    nodes: list = field(default_factory=list)
    pool: object = None           # a MaxPool node to move after the thresholds
    blocker: object = None        # first node that is not threshold-foldable


@dataclass
class Prefix:
    nodes: list = field(default_factory=list)
    alpha: float = 1.0            # the prefix as the scalar affine alpha * x + beta
    beta: float = 0.0
    affine: bool = True           # False once an op is not a scalar affine / shape op
    blocker: object = None


