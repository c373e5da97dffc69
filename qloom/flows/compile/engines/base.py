"""What the compiler knows about an engine: which IR layers it implements, its legal
foldings, its ideal cycles per frame and estimated resources for a folding, and how to
build its hardware nodes."""

from __future__ import annotations

import abc
import contextlib
from dataclasses import dataclass, replace

from qloom.errors import QloomError, UnsupportedModelError
from qloom.flows.compile.cost import Family, Resources, calibrated

__all__ = ["Fold", "BuildOptions", "Engine", "LaneEngine", "PixelEngine", "TypedLayer", "ChannelEngine",
           "divisors", "refused_as_unsupported", "identity_needed", "window_needed"]


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@contextlib.contextmanager
def refused_as_unsupported(node: str):
    """A template refusing its parameters here (the ``ValueError`` its constructor raises
    for what it cannot build, e.g. a bipolar input it cannot pad) becomes the
    ``UnsupportedModelError`` naming the layer ``node``: an engine asks its template what
    it takes, when it is made, instead of repeating the template's checks."""
    try:
        yield
    except ValueError as e:
        raise UnsupportedModelError(str(e), node=node) from e


@dataclass(frozen=True, order=True)
class Fold:
    """Parallelism of an engine: ``pe`` output lanes (PE, array columns) and ``simd``
    input lanes (SIMD, array rows). Engines with one lane count use ``pe`` only."""

    pe: int = 1
    simd: int = 1
    # Where a matrix unit's weights go: "" where its memory rule places them
    # (``qloom.flows.compile.engines.dense.memory_styles``), "block" (block RAM) or "logic" when a
    # fold file or the planner chose (``Engine.weight_places``).
    weights: str = ""


@dataclass(frozen=True)
class BuildOptions:
    """Hardware choices the compiler makes for every engine."""

    family: Family = Family.ICE40
    dsp_budget: int | None = None      # multipliers on DSP blocks, whole design
    pipeline: bool = True              # register stages for Fmax (adder trees, memories)
    sprams: int = 0                    # iCE40UP5K SPRAMs weights may use (qloom.hw.spram)


def identity_needed(elements: int):
    """The schedule of an elementwise engine: output element k needs input element k."""
    import numpy as np
    return np.arange(1, elements + 1, dtype=np.int64)


def window_needed(in_shape, out_shape, kernel, stride, pads):
    """The schedule of an engine behind a sliding window (``qloom.hw.swg``): every element
    of an output row needs the input rows of that row's windows whole
    (``input_rows_needed``), and nothing leaves before the frame's first input word."""
    import numpy as np
    from qloom.hw.swg import input_rows_needed
    in_h, in_w, in_c = in_shape
    rows = input_rows_needed(in_h=in_h, kernel=tuple(kernel), stride=tuple(stride),
                             pads=tuple(pads))
    per_row = np.maximum(rows.astype(np.int64) * in_w * in_c, 1)
    return np.repeat(per_row, out_shape[1] * out_shape[2])


def pixels(shape) -> int:
    """Vectors (pixels) in a channels-last tensor: every axis but the last."""
    count = 1
    for d in shape[:-1]:
        count *= d
    return count


class Engine(abc.ABC):
    """An engine implements one or more IR layers (e.g. a Dense with its thresholds)."""

    kind: str = "engine"
    fold_keys: tuple[str, ...] = ("pe",)

    # Whether the engine takes the activation (MultiThreshold) that alone reads its output
    # into itself (see ``qloom.flows.compile.engines.mapping``).
    fuses_thresholds: bool = False

    def __init__(self, name: str, layers: tuple[str, ...], inputs: tuple[str, ...], output: str):
        self.name, self.layers, self.inputs, self.output = name, layers, inputs, output

    @classmethod
    @abc.abstractmethod
    def from_layer(cls, layer, net, threshold=None) -> "Engine":
        """The engine for IR ``layer`` of ``net`` (inputs already rebound by the mapping),
        with the fused ``threshold`` layer for engines that fuse one."""

    @abc.abstractmethod
    def folds(self) -> list[Fold]:
        """Every legal folding, from the most folded (slowest) upwards."""

    @abc.abstractmethod
    def cycles(self, fold: Fold) -> int:
        """Ideal cycles per frame at this folding."""

    def features(self, fold: Fold, options: BuildOptions, dsps: int = 0) -> list:
        """What the templates this engine builds are made of, as ``(suffix, Features)``
        per hardware node (``suffix`` added to the engine's name gives the node's name):
        each template estimates itself (``estimate`` next to its class, see
        ``qloom.hw.estimate``)."""
        raise NotImplementedError(f"{type(self).__name__} has no estimate features")

    def resources(self, fold: Fold, options: BuildOptions, dsps: int = 0) -> Resources:
        """Estimated resources; ``dsps`` multipliers of this engine go on DSP blocks: its
        templates' features, calibrated for the family. Remembered per (fold, options,
        dsps): the planner asks again and again while it searches (each answer builds the
        engine's templates), and the answer depends on nothing else."""
        cache = self.__dict__.setdefault("_resources", {})
        key = (fold, options, dsps)
        if key not in cache:
            total = Resources()
            for _, features in self.features(fold, options, dsps):
                total += calibrated(features, options.family)
            cache[key] = total
        return cache[key]

    def _asked(self, lanes: int):
        """The engine's template for ``lanes`` lanes (its ``unit``), built only to answer
        the planner (cycles, types, estimate), never elaborated."""
        from qloom.hw.estimate import unelaborated
        return unelaborated(self.unit(lanes))

    @abc.abstractmethod
    def nodes(self, fold: Fold, options: BuildOptions, dsps: int = 0) -> list:
        """Hardware nodes (``qloom.hw.top.Node``) implementing the engine."""

    def inner_edges(self, fold: Fold) -> list[tuple[str, str, int, int]]:
        """The streams between the engine's own nodes (a convolution's window stream into
        its matrix unit), which the top builds like every edge: (tensor, reader node's
        name, lanes, bits of a lane) each; none for an engine of one node."""
        return []

    @abc.abstractmethod
    def in_lanes(self, fold: Fold) -> int: ...

    @property
    @abc.abstractmethod
    def in_bits(self) -> int:
        """Bits of one input element."""

    # Whether the engine takes an input whenever it has room for the result and buffers
    # its own results, so that it never stalls for its output: an edge with nothing to
    # buffer from or to it is then one register slice and no FIFO (``EdgeKind.SLICE`` in
    # ``qloom.flows.compile.graph``).
    buffers_itself = False
    # Whether its ports are registered: its input goes into registers with no logic before
    # them, its ready is a register, and its output's valid and payload come from registers
    # through a LUT or two (the unrolled chain's FIFO bypass). At the accelerator's ports
    # such an engine needs no register slice of its own (``EdgeKind.WIRE``).
    registered_ports = False

    def buffered_elements(self) -> int:
        """Input elements the FIFO in front of this engine must hold beyond a skid
        buffer when its producer is another engine (see ``qloom.flows.compile.steps``); the
        buffers of reconvergent paths come on top (``qloom.flows.compile.schedule``)."""
        return 0

    def latency(self, fold: Fold) -> float:
        """Cycles from the last input an output needs to that output, beyond the engine's
        pace (``qloom.flows.compile.schedule``): a matrix unit computes a whole vector before it
        gives any of its outputs; 0 for an engine that passes elements on as they come."""
        return 0

    def _units_latency(self, fold: Fold) -> int:
        """The register stages of the engine's nodes (each template's ``latency``, where
        it states one) and of the edges between them (``schedule.EDGE_LATENCY``), asked
        once per folding of nodes built with the default options, never elaborated."""
        cache = self.__dict__.setdefault("_latency_cache", {})
        if fold not in cache:
            from qloom.hw.estimate import unelaborated
            from qloom.flows.compile.schedule import EDGE_LATENCY
            nodes = self.nodes(fold, BuildOptions())
            cache[fold] = (sum(getattr(unelaborated(n.component), "latency", 0) for n in nodes)
                           + EDGE_LATENCY * (len(nodes) - 1))
        return cache[fold]

    def input_needed(self):
        """The engine's schedule: per input, for every output element of a frame in stream
        order (a numpy array), how many elements of that input it must have taken before
        it can emit that element, counted in single elements (``qloom.flows.compile.schedule``
        rounds to the folding's words). None where no finer schedule is known: then the
        buffers of a reconvergent path through it hold whole frames."""
        return None

    @abc.abstractmethod
    def out_lanes(self, fold: Fold) -> int: ...

    @property
    def out_bits(self) -> int | None:
        """Bits of one output element, where the engine knows them (for the estimate of
        the accelerator's output edge)."""
        return None

    def multipliers(self, fold: Fold) -> int:
        """Multipliers this engine instantiates (candidates for DSP blocks)."""
        return 0

    def multiplier_bits(self) -> int:
        """Operand bits of one multiplier (input bits times weight bits), 0 without any."""
        return 0

    @property
    def engine_name(self) -> str:
        return self.kind

    # The places a fold may put the engine's weights in (``Fold.weights``); none for
    # engines without a weight memory.
    weight_places: tuple[str, ...] = ()

    def fold_json(self, fold: Fold) -> dict:
        values = {"pe": fold.pe, "simd": fold.simd}
        spec = {k: values[k] for k in self.fold_keys}
        if fold.weights:
            spec["weights"] = fold.weights
        return spec

    def parse_fold(self, spec: dict) -> Fold:
        """A folding from a fold-file entry; unknown keys and illegal factors are errors
        naming the layer, the value and what is allowed."""
        if not isinstance(spec, dict):
            raise QloomError(f"fold for layer '{self.name}' must be an object like "
                             f"{self.fold_json(self.folds()[0])}, not {spec!r}")
        keys = list(self.fold_keys) + (["weights"] if self.weight_places else [])
        unknown = sorted(set(spec) - set(keys))
        if unknown:
            raise QloomError(f"fold for layer '{self.name}': unknown key(s) {unknown}; "
                             f"a {self.engine_name} engine takes {keys}")
        weights = spec.get("weights", "")
        if weights and weights not in self.weight_places:
            raise QloomError(f"fold for layer '{self.name}': weights = {weights!r} is not "
                             f"legal; allowed: {list(self.weight_places)}")
        legal = self.folds()
        base = legal[0]
        fold = Fold(pe=spec.get("pe", base.pe), simd=spec.get("simd", base.simd))
        if fold not in legal:
            for key in self.fold_keys:
                value = getattr(fold, key)
                options = sorted({getattr(f, key) for f in legal})
                if value not in options:
                    raise QloomError(f"fold for layer '{self.name}': {key} = {value!r} is "
                                     f"not legal; allowed: {options}")
            raise QloomError(f"fold for layer '{self.name}': {spec} is not a legal folding")
        return replace(fold, weights=weights)


class LaneEngine(Engine):
    """An elementwise engine over channels-last pixels: ``pe`` lanes in and out, a legal
    folding for every divisor of the channel count. Most are one template each:
    ``template(fold, options)`` builds it (``unit(pe)`` unless the template depends on the
    build's options), and the engine's estimate and hardware node are that template's."""

    channels: int

    def folds(self):
        return [Fold(pe) for pe in divisors(self.channels)]

    def unit(self, lanes: int):
        """The engine's template for ``lanes`` lanes."""
        raise NotImplementedError(f"{type(self).__name__} is not one template")

    def template(self, fold: Fold, options: BuildOptions):
        """The template this engine builds at ``fold`` for ``options``."""
        return self.unit(fold.pe)

    def features(self, fold, options, dsps=0):
        from qloom.hw.estimate import unelaborated
        return [("", unelaborated(self.template(fold, options)).estimate(options.family))]

    def nodes(self, fold, options, dsps=0):
        from qloom.hw.top import Node
        return [Node(self.name, self.template(fold, options), self.inputs, self.output)]

    def in_lanes(self, fold):
        return fold.pe

    def out_lanes(self, fold):
        return fold.pe


class PixelEngine(LaneEngine):
    """A lane engine over one ``[in_h, in_w, channels]`` image of ``dtype`` elements
    (pooling, upsampling): the layer, its input's shape and type."""

    def __init__(self, layer, in_shape, dtype):
        super().__init__(layer.name, (layer.name,), layer.inputs, layer.output)
        self.layer, self.dtype = layer, dtype
        self.in_h, self.in_w, self.channels = in_shape

    @classmethod
    def from_layer(cls, layer, net, threshold=None):
        return cls(layer, net.shape_of(layer.inputs[0]), net.tensors[layer.inputs[0]].dtype)

    @property
    def in_bits(self) -> int:
        return self.dtype.bits


class TypedLayer:
    """The element widths of an engine whose ``layer`` states its input and output types
    (``in_type``, ``out_type``): a lookup, requantization or threshold layer."""

    @property
    def in_bits(self) -> int:
        return self.layer.in_type.bits

    @property
    def out_bits(self) -> int:
        return self.layer.out_type.bits


class ChannelEngine(LaneEngine):
    """A lane engine for one per-channel layer (thresholds, requantization) over ``pixels``
    pixels, one word per cycle: a pixel takes ``channels / pe`` cycles."""

    def __init__(self, layer, pixels: int):
        super().__init__(layer.name, (layer.name,), layer.inputs, layer.output)
        self.channels = layer.channels
        self.layer, self.pixels = layer, pixels

    @classmethod
    def from_layer(cls, layer, net, threshold=None):
        return cls(layer, pixels(net.shape_of(layer.inputs[0])))

    def cycles(self, fold):
        return self.pixels * (self.channels // fold.pe)

    def input_needed(self):
        return (identity_needed(self.pixels * self.channels),)
