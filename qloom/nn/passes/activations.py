"""Elementwise activations between a layer and the next quantizer, and whether each is
monotone (given its attributes and constant inputs).

A monotone chain of float ops (this table, plus scales, biases and BatchNorm) becomes
thresholds (``qloom.nn.thresholds``; a decreasing one flips them). A chain holding an
activation that is not monotone (HardSwish, GELU, Mish, Abs, a LeakyRelu or PRelu with a
negative slope, ...) cannot: it becomes a lookup table over the quantized input when that
input is narrow (``lookup.py``), and is refused naming the node otherwise.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .attrs import node_attr

__all__ = ["ACTIVATIONS", "non_monotone"]


def _always(node, consts) -> bool:
    return True


def _never(node, consts) -> bool:
    return False


def _alpha_at_least_zero(default: float) -> Callable:
    def monotone(node, consts) -> bool:
        return float(node_attr(node, "alpha", default)) >= 0
    return monotone


def _prelu(node, consts) -> bool:
    slope = consts.get(node.input[1]) if len(node.input) > 1 else None
    return slope is not None and bool(np.all(np.asarray(slope) >= 0))


# ONNX op -> whether it is monotone (non-decreasing or non-increasing) on the whole real
# line, from its attributes and constants. Clip, HardSigmoid (any slope), Selu (any gamma
# with alpha >= 0), Sigmoid, Tanh, ... are; HardSwish, Gelu, Mish and Abs never are.
ACTIVATIONS: dict[str, Callable] = {
    "Relu": _always, "Clip": _always, "HardSigmoid": _always, "Sigmoid": _always,
    "Tanh": _always, "Softplus": _always, "Softsign": _always, "Erf": _always,
    "Celu": _always,                             # alpha > 0 by the ONNX definition
    "LeakyRelu": _alpha_at_least_zero(0.01), "Elu": _alpha_at_least_zero(1.0),
    "Selu": _alpha_at_least_zero(1.67326319217681884765625),
    "ThresholdedRelu": _alpha_at_least_zero(1.0), "PRelu": _prelu,
    "HardSwish": _never, "Gelu": _never, "Mish": _never, "Abs": _never,
}


def non_monotone(nodes, consts):
    """The first node of ``nodes`` that is an activation qloom knows not to be monotone
    with its attributes and constants, or None."""
    for node in nodes:
        check = ACTIVATIONS.get(node.op_type)
        if check is not None and not check(node, consts):
            return node
    return None
