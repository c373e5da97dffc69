"""Map the integer network onto engines: one engine per layer, with each activation's
thresholds fused into the matrix unit in front of it (unless it has so many thresholds
that a separate binary-search unit is smaller), and Flatten layers dissolved (the
stream order is already the flattened order)."""

from __future__ import annotations

from ...errors import UnsupportedModelError
from ...nn.ir import (Add, AvgPool, Conv, Dense, Flatten, MaxPool, MultiThreshold, Network,
                      Requant)
from .add import AddEngine
from .avgpool import AvgPoolEngine
from .conv import ConvEngine
from .dense import DenseEngine
from .pool import PoolEngine
from .requant import RequantEngine
from .threshold import SEARCH_FROM, ThresholdEngine

__all__ = ["map_network"]


def map_network(net: Network) -> tuple[list, str, str]:
    """Engines in topological order, plus the network's input and output tensor names
    after dissolving Flatten layers."""
    alias = {}

    def real(tensor):
        while tensor in alias:
            tensor = alias[tensor]
        return tensor

    readers = {}
    for layer in net.layers:
        for t in layer.inputs:
            readers.setdefault(t, []).append(layer)

    def fusable(layer):
        """The MultiThreshold that alone reads ``layer``'s output, if any."""
        users = readers.get(layer.output, [])
        if len(users) == 1 and isinstance(users[0], MultiThreshold) and \
                layer.output != net.output and users[0].num_thresholds < SEARCH_FROM:
            return users[0]
        return None

    engines, fused = [], set()
    for layer in net.layers:
        if layer.name in fused:
            continue
        inputs = tuple(real(t) for t in layer.inputs)
        shape_in = net.shape_of(layer.inputs[0])
        if isinstance(layer, Flatten):
            alias[layer.output] = inputs[0]
            continue
        if isinstance(layer, Dense):
            thr = fusable(layer)
            engine = DenseEngine(_rebind(layer, inputs), thr, _pixels(shape_in))
        elif isinstance(layer, Conv):
            thr = fusable(layer)
            engine = ConvEngine(_rebind(layer, inputs), thr, shape_in,
                                net.shape_of(layer.output))
        elif isinstance(layer, MultiThreshold):
            thr = None
            engine = ThresholdEngine(_rebind(layer, inputs), _pixels(shape_in))
        elif isinstance(layer, Requant):
            thr = None
            engine = RequantEngine(_rebind(layer, inputs), _pixels(shape_in))
        elif isinstance(layer, MaxPool):
            thr = None
            engine = PoolEngine(_rebind(layer, inputs), shape_in,
                                net.tensors[layer.inputs[0]].dtype)
        elif isinstance(layer, AvgPool):
            thr = None
            engine = AvgPoolEngine(_rebind(layer, inputs), shape_in,
                                   net.tensors[layer.inputs[0]].dtype)
        elif isinstance(layer, Add):
            thr = None
            a, b = (net.tensors[t].dtype for t in layer.inputs)
            engine = AddEngine(_rebind(layer, inputs), shape_in, a, b)
        else:
            raise UnsupportedModelError(
                f"no hardware engine for {layer.op} layers yet; supported: Dense, Conv, "
                f"MultiThreshold, Requant, MaxPool, AvgPool, Add, Flatten", node=layer.name)
        if thr is not None:
            fused.add(thr.name)
        engines.append(engine)
    return engines, real(net.input), real(net.output)


def _pixels(shape) -> int:
    """Vectors (pixels) in a channels-last tensor: every axis but the last."""
    count = 1
    for d in shape[:-1]:
        count *= d
    return count


def _rebind(layer, inputs):
    """``layer`` reading ``inputs`` (after Flatten aliases are resolved)."""
    if tuple(layer.inputs) == tuple(inputs):
        return layer
    import dataclasses
    return dataclasses.replace(layer, inputs=tuple(inputs))
