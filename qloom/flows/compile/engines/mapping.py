"""Map the integer network onto engines: one engine per layer, with each activation's
thresholds fused into the matrix unit in front of it (unless it has so many thresholds
that a separate binary-search unit is smaller), and Flatten layers dissolved (the
stream order is already the flattened order)."""

from __future__ import annotations

from qloom.errors import UnsupportedModelError
from qloom.nn.ir import (Add, AvgPool, Concat, Conv, Dense, Flatten, IntMul, Lookup, MaxPool,
                         MultiThreshold, Network, Requant, Upsample)
from qloom.flows.compile.engines.add import AddEngine
from qloom.flows.compile.engines.avgpool import AvgPoolEngine
from qloom.flows.compile.engines.concat import ConcatEngine
from qloom.flows.compile.engines.conv import ConvEngine
from qloom.flows.compile.engines.dense import DenseEngine
from qloom.flows.compile.engines.int_mul import IntMulEngine
from qloom.flows.compile.engines.lookup import LookupEngine
from qloom.flows.compile.engines.pool import PoolEngine
from qloom.flows.compile.engines.requant import RequantEngine
from qloom.flows.compile.engines.threshold import SEARCH_FROM, ThresholdEngine
from qloom.flows.compile.engines.unrolled import UnrolledEngine, unroll
from qloom.flows.compile.engines.upsample import UpsampleEngine

__all__ = ["ENGINES", "UNROLLED_ENGINES", "map_network", "realize", "supported_layers"]

# IR layer type -> the engine that implements it: adding a layer type is one line here
# (and the engine's ``from_layer``). Flatten has no engine: the stream order is already
# the flattened order.
ENGINES = {Dense: DenseEngine, Conv: ConvEngine, MultiThreshold: ThresholdEngine,
           Requant: RequantEngine, MaxPool: PoolEngine, AvgPool: AvgPoolEngine,
           Add: AddEngine, IntMul: IntMulEngine, Concat: ConcatEngine, Lookup: LookupEngine,
           Upsample: UpsampleEngine}

# IR layer type -> the engine implementing it at one vector per cycle with its weights
# built into the logic (latency mode), which ``realize`` puts in place of the engine
# above when the planner folds the layer that far.
UNROLLED_ENGINES = {kind: UnrolledEngine for kind in UnrolledEngine.layer_types}


def supported_layers() -> list[str]:
    """The IR layer types the compiler maps, for messages."""
    return sorted([kind.__name__ for kind in ENGINES] + [Flatten.__name__])


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
        if isinstance(layer, Flatten):
            alias[layer.output] = inputs[0]
            continue
        engine_class = ENGINES.get(type(layer))
        if engine_class is None:
            raise UnsupportedModelError(
                f"no hardware engine for {layer.op} layers yet; supported: "
                f"{', '.join(supported_layers())}", node=layer.name)
        threshold = fusable(layer) if engine_class.fuses_thresholds else None
        # Made from the layer as the network has it (its input shapes are the reshaped
        # ones), then reading the streams behind any dissolved Flatten.
        engine = engine_class.from_layer(layer, net, threshold)
        engine.inputs = inputs
        if threshold is not None:
            fused.add(threshold.name)
        engines.append(engine)
    return engines, real(net.input), real(net.output)


def realize(engines, folds: dict) -> tuple[list, dict]:
    """The engines that implement ``engines`` (``map_network``'s) at the planner's
    ``folds``, and their folds: each engine itself, except dense layers folded to one
    vector per cycle, which become unrolled chains (``unrolled.unroll``)."""
    return unroll(engines, folds)
