"""Latency mode: dense layers at one vector per cycle as unrolled constant-weight adder
graphs (``qloom.hw.unrolled``), with the requantization or thresholds that alone read
them, and consecutive such layers chained into one pipeline with no FIFO between them.

The planner folds the mapped engines as usual; realizing its choice
(``mapping.realize``), :func:`unroll` replaces every dense engine folded to one vector per
cycle (``pe = MH``, ``simd = MW``) by an :class:`UnrolledEngine`. Its estimate is the template's own count of the adders,
operations and registers it builds (``UnrolledDesign.features``), calibrated like every
template's.
"""

from __future__ import annotations

from qloom.nn.ir import Dense, MultiThreshold, Requant
from qloom.flows.compile.cost import Family
from qloom.flows.compile.engines.base import BuildOptions, Engine, Fold, pixels

__all__ = ["UnrolledEngine", "unroll", "levels_per_stage", "chain_schedule", "broadcast_fanout",
           "cluster_size"]

# Adder levels between pipeline registers, per family. ECP5 (nextpnr, speed 6), the jet
# tagger's last layer placed and routed alone: 97 MHz at four levels per stage, 165 MHz at
# two, 160 MHz at one (its credit counter then sets the clock); the whole jet tagger at
# four levels was estimated at 38.5 MHz after placement, so two. iCE40 (a slower LUT and
# carry) one.
_LEVELS = {Family.ECP5: 2, Family.GENERIC: 4, Family.ICE40: 1}
# Chains of multi-bit layers (no layer on one-bit inputs), per family: (levels per stage,
# levels after a far read (``UnrolledDesign.far_levels``), readers per register copy). On
# ECP5 three levels per stage but two after a read of a broadcast copy, a broadcast value
# made in its stage's first level, copies per 4 readers. The jet tagger at II 1 on the
# ECP5-85F at a 100 MHz target (clusters of 2): two levels everywhere and copies per 8, 17
# stages, Fmax 79.67 MHz; per 4, 86.3 (default seed), 92.32 and 90.03 (seeds 2, 3 at 115
# MHz; 116.37 once, seed 2 at 100); this, 15 stages, 88.94, 91.86, 82.52, 82.33 (the
# default seed, 3, 4, 5), 26,507 FF against 30,554: two cycles fewer at about the same
# clock. Uniform three levels (12 stages) placed at 68.37 MHz. Popcount chains keep two
# levels and copies per 8: TFC-w1a1 at II 1 met 100 MHz so (104.77 MHz), and this
# schedule took it to 88.72. All these were routed by router2; router1, which qloom now
# uses for designs of logic alone (``qloom.flows.toolchain.synth.router_for``), routed the 15-stage
# jet tagger's default-seed placement at 109.31 MHz (150 ns at 100 MHz) and TFC-w1a1 at
# two levels at 113.01.
_MULTIBIT = {Family.ECP5: (3, 2, 4)}


def levels_per_stage(options: BuildOptions) -> int:
    """Logic levels between register banks for this target (one stage for everything
    without pipelining)."""
    return _LEVELS[options.family] if options.pipeline else 1 << 20


def chain_schedule(layers, options: BuildOptions) -> tuple[int, int | None, int]:
    """Levels per stage, levels after a far read (None: no limit) and readers per register
    copy for an unrolled chain of ``layers`` (``UnrolledLayer``) on this target."""
    from qloom.hw.unrolled import BROADCAST_READERS
    if options.pipeline and options.family in _MULTIBIT \
            and all(layer.in_type.bits > 1 for layer in layers):
        return _MULTIBIT[options.family]
    return levels_per_stage(options), None, BROADCAST_READERS


# Neurons per cluster on ECP5 for a chain over CLUSTER_MIN_LUTS LUT4s (the uncalibrated
# count with products and sums shared across whole layers): its products and sums are then
# shared only within a cluster, so that no adder's nets cross the layer. Fully shared, a
# chain of that size does not route on the ECP5-85F (router2's overused wires stall); the
# smaller the clusters, the fewer overused wires, for a few per cent more cells. The
# measurements are in docs/notes/latency_mode.md.
_CLUSTER = {Family.ECP5: 2}
CLUSTER_MIN_LUTS = 32_768


def cluster_size(layers, options: BuildOptions) -> int | None:
    """Neurons per cluster of an unrolled chain of ``layers`` (``UnrolledLayer``) for this
    target; None: products and sums shared across whole layers."""
    from qloom.hw.unrolled import UnrolledDesign
    return _cluster_of(UnrolledDesign(layers, levels_per_stage(options),
                                      broadcast_fanout(options)), options)


def _cluster_of(shared, options: BuildOptions) -> int | None:
    size = _CLUSTER.get(options.family)
    return size if size and shared.resources()["lut"] > CLUSTER_MIN_LUTS else None


def broadcast_fanout(options: BuildOptions) -> int | None:
    """Readers beyond which a value is read through register copies in a later stage
    (``qloom.hw.unrolled.BROADCAST_READERS``); None without pipelining."""
    from qloom.hw.unrolled import BROADCAST_READERS
    return BROADCAST_READERS if options.pipeline else None


class UnrolledEngine(Engine):
    """A chain of ``(dense, post)`` IR layers (``post`` a Requant, a MultiThreshold or None)
    at one vector per cycle over ``vectors`` vectors per frame."""

    kind = "unrolled"
    layer_types = (Dense,)     # what it unrolls (``mapping.UNROLLED_ENGINES`` from it)
    fold_keys = ("pe", "simd")
    buffers_itself = True      # credits for its output FIFO (qloom.hw.unrolled)
    registered_ports = True    # its inputs are read from registers only (qloom.hw.unrolled)

    def __init__(self, stages, vectors: int, inputs: tuple[str, ...] | None = None):
        self.stages, self.vectors = list(stages), vectors
        names = tuple(n for dense, post in self.stages
                      for n in (dense.name,) + ((post.name,) if post is not None else ()))
        last_dense, last_post = self.stages[-1]
        # ``inputs``: the streams it reads, as the mapping bound them (behind Flatten).
        super().__init__(self.stages[0][0].name, names,
                         tuple(inputs or self.stages[0][0].inputs),
                         (last_post or last_dense).output)
        self._designs = {}

    @classmethod
    def from_layer(cls, layer, net, threshold=None):
        if not isinstance(layer, Dense):
            raise TypeError(f"an unrolled engine implements Dense layers, not {layer.op}")
        return cls([(layer, threshold)], pixels(net.shape_of(layer.inputs[0])))

    def hw_layers(self):
        from qloom.hw.threshold import ThresholdSpec
        from qloom.hw.unrolled import RequantSpec, UnrolledLayer
        layers = []
        for dense, post in self.stages:
            spec = (RequantSpec.from_layer(post) if isinstance(post, Requant) else
                    ThresholdSpec.from_layer(post) if isinstance(post, MultiThreshold) else None)
            layers.append(UnrolledLayer(dense.weights, dense.w_type, dense.in_type, spec))
        return layers

    def design(self, options: BuildOptions):
        """The template's graph, schedule and cost for ``options`` (made once)."""
        from qloom.hw.unrolled import UnrolledDesign
        key = (levels_per_stage(options), broadcast_fanout(options), options.family)
        if key not in self._designs:
            layers = self.hw_layers()
            per, far, copies = chain_schedule(layers, options)
            schedule = dict(copy_readers=copies, far_levels=far)
            design = UnrolledDesign(layers, per, key[1], **schedule)
            size = _cluster_of(design, options)
            if size:
                design = UnrolledDesign(layers, per, key[1], cluster=size, **schedule)
            self._designs[key] = design
        return self._designs[key]

    @property
    def fold(self) -> Fold:
        return Fold(pe=self.stages[-1][0].mh, simd=self.stages[0][0].mw)

    def folds(self):
        return [self.fold]

    def cycles(self, fold):
        return self.vectors

    def features(self, fold, options, dsps=0):
        return [("", self.design(options).features(lut_ram=options.family.target.lut_ram))]

    def latency(self, options: BuildOptions) -> int:
        return self.design(options).latency

    @property
    def in_bits(self) -> int:
        return self.stages[0][0].in_type.bits

    def in_lanes(self, fold):
        return self.fold.simd

    def out_lanes(self, fold):
        return self.fold.pe

    def nodes(self, fold, options, dsps=0):
        from qloom.hw.top import Node
        from qloom.hw.unrolled import UnrolledChain
        design = self.design(options)
        unit = UnrolledChain(layers=self.hw_layers(), levels_per_stage=design.levels_per_stage,
                             fanout=design.fanout, cluster=design.cluster,
                             copy_readers=design.copy_readers, far_levels=design.far_levels)
        return [Node(self.name, unit, self.inputs, self.output)]


def _one_vector_per_cycle(engine, folds) -> bool:
    """Whether ``engine`` is a matrix unit folded to one vector per cycle over a layer
    type the unrolled engine takes (``UnrolledEngine.layer_types``)."""
    from qloom.flows.compile.engines.dense import DenseEngine
    return (isinstance(engine, DenseEngine)
            and type(engine.dense) in UnrolledEngine.layer_types
            and folds[engine.name] == Fold(engine.dense.mh, engine.dense.mw))


def unroll(engines, folds: dict) -> tuple[list, dict]:
    """``engines`` with every dense engine folded to one vector per cycle replaced by an
    unrolled one, which also takes the requantization or threshold engine that alone
    reads it (when that runs at one vector per cycle too) and the next such dense engine
    that alone reads the result; and the folds of the new list."""
    from qloom.flows.compile.engines.requant import RequantEngine
    from qloom.flows.compile.engines.threshold import ThresholdEngine
    readers = {}
    for e in engines:
        for t in e.inputs:
            readers.setdefault(t, []).append(e)

    def sole_reader(tensor):
        found = readers.get(tensor, [])
        return found[0] if len(found) == 1 else None

    def post_of(dense_engine):
        if dense_engine.threshold is not None:
            return None
        r = sole_reader(dense_engine.output)
        if isinstance(r, (RequantEngine, ThresholdEngine)) and \
                folds[r.name].pe == r.channels and r.pixels == dense_engine.vectors:
            return r
        return None

    out, new_folds, taken = [], {}, set()
    for e in engines:
        if e.name in taken:
            continue
        if not _one_vector_per_cycle(e, folds):
            out.append(e)
            new_folds[e.name] = folds[e.name]
            continue
        stages, current = [], e
        while True:
            post = post_of(current)
            stages.append((current.dense, post.layer if post is not None
                           else current.threshold))
            taken.update(x.name for x in (current, post) if x is not None)
            nxt = sole_reader((post or current).output)
            if nxt is None or not _one_vector_per_cycle(nxt, folds) or \
                    nxt.vectors != e.vectors:
                break
            current = nxt
        chain = UnrolledEngine(stages, e.vectors, e.inputs)
        out.append(chain)
        new_folds[chain.name] = chain.fold
    return out, new_folds
