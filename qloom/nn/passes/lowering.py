"""The lowering registry's entry type: how one ONNX op enters the integer network.

``lower_to_network.LOWERINGS`` maps every op qloom lowers to one ``Lowering``; an op with
a lowering of its own (pooling, Concat) defines its entries beside its code, so adding an
op is its file plus one line in that table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Lowering"]


@dataclass(frozen=True)
class Lowering:
    """``lower(state, node, data)`` builds the node's layers on the walk's
    ``LoweringState`` (``data``: the meanings of its non-constant inputs) and returns
    whether it did (False: the walk treats the node as float arithmetic, or refuses it);
    ``becomes`` is what the op becomes (every "not supported" message quotes it);
    ``refusal(node)``, if given, is why the op cannot be lowered where the walk refuses it
    (instead of the generic message)."""

    lower: Callable
    becomes: str
    refusal: Callable | None = None
