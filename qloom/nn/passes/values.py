"""What an ONNX tensor means during lowering (see ``lower_to_network``), and how an ONNX
tensor's element order maps to the channels-last IR."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Layout", "PLAIN", "NCHW", "NHWC", "image_layout", "flat_layout", "Int",
           "FloatChain", "Prefix"]


@dataclass(frozen=True)
class Layout:
    """How an ONNX tensor's elements map to the channels-last IR tensor.

    - ``plain``: the IR tensor is the ONNX tensor (the last axis is the channel axis).
    - ``image``: a 4-D ONNX tensor whose IR tensor is its transpose by ``perm`` (over the
      axes after the batch): NCHW is ``(1, 2, 0)``, NHWC ``(0, 1, 2)``; also a 3-D network
      input the host lays out transposed (``perm`` of two axes). Layers that read
      images (Conv, pools) need the NCHW meaning: IR ``[H, W, C]``.
    - ``flat``: a 2-D ONNX tensor flattened from an image of ONNX shape ``dims``; the IR
      tensor is that image transposed by ``perm`` and flattened. ``perm == (0, 1, 2)`` is
      the plain order and is spelled ``PLAIN``.

    Transposes and reshapes between these are free (no element moves in the IR) as long as
    the IR order stays the same: ``order`` says which ONNX element sits at each IR position.
    """

    kind: str = "plain"                     # "plain", "image" or "flat"
    perm: tuple[int, int, int] = (0, 1, 2)
    dims: tuple[int, int, int] = (0, 0, 0)  # for "flat": the ONNX image dims (no batch)

    def to_ir(self, x: np.ndarray) -> np.ndarray:
        if self.kind == "image":
            return np.transpose(x, (0,) + tuple(p + 1 for p in self.perm))
        if self.kind == "flat":
            img = x.reshape(-1, *self.dims)
            return np.transpose(img, (0,) + tuple(p + 1 for p in self.perm)).reshape(
                x.shape[0], -1)
        return x

    def to_onnx(self, x: np.ndarray) -> np.ndarray:
        inverse = tuple(int(i) + 1 for i in np.argsort(self.perm))
        if self.kind == "image":
            return np.transpose(x, (0,) + inverse)
        if self.kind == "flat":
            ir_dims = tuple(self.dims[p] for p in self.perm)
            return np.transpose(x.reshape(-1, *ir_dims), (0,) + inverse).reshape(
                x.shape[0], -1)
        return x

    def ir_shape(self, onnx_shape) -> tuple[int, ...]:
        """The IR shape (no batch) of an ONNX tensor of ``onnx_shape`` (with batch)."""
        shape = tuple(onnx_shape[1:])
        if self.kind == "image":
            return tuple(shape[p] for p in self.perm)
        if self.kind == "flat":
            return (int(np.prod(shape)),)
        return shape

    def order(self, onnx_shape) -> np.ndarray:
        """The ONNX element index (row-major, no batch) at each IR position."""
        index = np.arange(int(np.prod(onnx_shape[1:])), dtype=np.int64).reshape(
            1, *onnx_shape[1:])
        return self.to_ir(index).ravel()

    def channel_axis(self, rank: int) -> int:
        """The ONNX axis (with batch) holding the IR's channel (last) axis."""
        if self.kind == "image":
            return self.perm[-1] + 1
        return rank - 1

    @property
    def is_nchw(self) -> bool:
        return self.kind == "image" and self.perm == (1, 2, 0)


PLAIN = Layout()
NCHW = Layout("image", (1, 2, 0))
NHWC = Layout("image", (0, 1, 2))


def image_layout(perm) -> Layout:
    return Layout("image", tuple(int(p) for p in perm))


def flat_layout(perm, dims) -> Layout:
    perm = tuple(int(p) for p in perm)
    return PLAIN if perm == (0, 1, 2) else Layout("flat", perm, tuple(int(d) for d in dims))


@dataclass
class Int:
    ir: str                     # the IR tensor
    onnx: str                   # the ONNX tensor it stands for
    layout: Layout
    offset: np.ndarray          # float offset per channel (0 for quantizer outputs without
                                # a zero point; -zero_point * scale with one)
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
