"""Reading an ONNX node's attributes, in one place for every pass."""

from __future__ import annotations

from onnx import helper

__all__ = ["node_attr"]


def node_attr(node, name: str, default):
    """The value of attribute ``name`` of ``node`` (strings decoded), or ``default``."""
    for a in node.attribute:
        if a.name == name:
            value = helper.get_attribute_value(a)
            return value.decode() if isinstance(value, bytes) else value
    return default
