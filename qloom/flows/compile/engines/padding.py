"""What a sliding window pads a convolution's input with, shared by the convolution
engines (the matrix-unit one and the depthwise one)."""

from __future__ import annotations

from qloom.errors import UnsupportedModelError
from qloom.nn.ir import Conv

__all__ = ["pad_code"]


def pad_code(conv: Conv) -> int:
    """The code the sliding window pads ``conv``'s input with: its pad value's. A padded
    input whose type has no such value (0 is no bipolar value) is refused."""
    if any(conv.pads) and not conv.in_type.allows(conv.pad_value):
        raise UnsupportedModelError(
            f"a padded convolution of a {conv.in_type} input: its pad value "
            f"{conv.pad_value} is no {conv.in_type} value", node=conv.name)
    return int(conv.in_type.encode(conv.pad_value))
