"""qonnx's channels-last domain (``qonnx.custom_op.channels_last``), as qonnx's
``ConvertToChannelsLastAndClean`` writes it: Conv, MaxPool and BatchNormalization whose
data tensors are ``[N, H, W, C]`` and whose Conv weights are ``[OC, KH, KW, IC/group]``.
qonnx executes each by transposing its inputs to the standard op's channels-first order,
running the standard op and transposing back; qloom reads them with that meaning. An
``[N, H, W, C]`` ONNX tensor is the IR tensor itself (layout ``NHWC``), so these ops need no
reordering in hardware; the graph input and output keep the layout the model gives them.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...errors import UnsupportedModelError
from .values import NCHW, NHWC, Layout

__all__ = ["DOMAIN", "is_channels_last", "domain_ops", "image_layout_of", "weights_oihw",
           "check_node", "check_required_attributes"]

DOMAIN = "qonnx.custom_op.channels_last"


def is_channels_last(node) -> bool:
    return node.domain == DOMAIN


@lru_cache(maxsize=1)
def domain_ops() -> tuple[str, ...]:
    """The ops qonnx defines in its channels-last domain (from qonnx's registry)."""
    from qonnx.custom_op.registry import get_ops_in_domain
    return tuple(sorted(op for op, _ in get_ops_in_domain(DOMAIN)))


def image_layout_of(node) -> Layout:
    """The layout of the ONNX image tensors an image op (Conv, pool) reads and writes."""
    return NHWC if is_channels_last(node) else NCHW


def weights_oihw(node, values: np.ndarray) -> np.ndarray:
    """A Conv's weight-shaped array in the standard ``[OC, IC/group, KH, KW]`` order."""
    if is_channels_last(node) and values.ndim == 4:
        return np.transpose(values, (0, 3, 1, 2))
    return values


def check_required_attributes(node, version: int) -> None:
    """qonnx's channels-last ops require attributes the standard ops default (``strides``,
    ``dilations``, ``pads``, ``group``; ``epsilon``, ``momentum``): qonnx cannot read the
    node without them."""
    from qonnx.custom_op.registry import getCustomOp
    given = {a.name for a in node.attribute}
    types = getCustomOp(node, onnx_opset_version=version).get_nodeattr_types()
    missing = [name for name, spec in types.items() if spec[1] and name not in given]
    if missing:
        raise UnsupportedModelError(
            f"channels-last {node.op_type} without the attribute"
            f"{'s' if len(missing) > 1 else ''} {', '.join(missing)}: qonnx requires "
            f"{', '.join(sorted(types))} on this op", node.name)


def check_node(node, rank: int) -> None:
    """What qloom reads of a channels-last node beyond the standard op's schema: 2-D
    images only (qonnx also defines ``[N, W, C]``), and no ``auto_pad`` (qonnx's shape
    inference for these ops reads ``pads`` alone, so it would disagree with execution)."""
    if not is_channels_last(node):
        return
    if node.op_type in ("Conv", "MaxPool") and rank != 4:
        raise UnsupportedModelError(
            f"channels-last {node.op_type} of a rank-{rank} tensor: qloom reads 2-D images "
            f"[N, H, W, C] only", node.name)
    for a in node.attribute:
        if a.name == "auto_pad" and a.s not in (b"", b"NOTSET"):
            raise UnsupportedModelError(
                f"channels-last {node.op_type} with auto_pad {a.s.decode(errors='replace')}: "
                f"qonnx's channels-last ops read explicit pads only; write pads instead",
                node.name)

