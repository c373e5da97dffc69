"""The engine graph of a plan: every stream between the planned engines and what the
accelerator top builds on it, made once per plan by the planner (``Plan.graph``).

An edge runs from the engine writing a tensor (or the accelerator's input) to an engine
reading it (or the accelerator's output), keyed ``(tensor, reader)`` (reader
``"output"``: the accelerator's output). It is built as one of three things
(``qloom.hw.top.AcceleratorTop``): a FIFO holding ``elements`` beyond the skid buffers at
its ends, on the wider side of any width conversion; one register slice (``SLICE``), where
an end buffers for itself, the reader buffers nothing in front of it and both sides have
the same lanes; or a plain connection (``WIRE``), a slice at the accelerator's ports whose
engine has registered ports. RTL emission (the top's ``edge_elements``, ``slices`` and
``wires``), the edges' estimates, the manifest's registered input and the report's skip
buffers all read this one graph.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from types import MappingProxyType

from qloom.hw.top import edge_depth, estimate_edge
from qloom.flows.compile.cost import Resources, calibrated
from qloom.flows.compile.engines.base import Engine
from qloom.flows.compile.schedule import SkipBuffer, skip_buffers

__all__ = ["EdgeKind", "GraphEdge", "EngineGraph"]


class EdgeKind(enum.Enum):
    FIFO = "fifo"      # skid buffers, a FIFO and any width conversion
    SLICE = "slice"    # one register slice
    WIRE = "wire"      # a plain connection at the accelerator's ports


@dataclass(frozen=True)
class GraphEdge:
    """One stream between engines, or from the accelerator's input (``producer`` None) or
    to its output (``reader`` None): ``elements`` its FIFO holds beyond the skid buffers
    (what the reader takes at once, ``Engine.buffered_elements``, plus what the short
    branch of a reconvergent path holds, ``qloom.flows.compile.schedule.skip_buffers``; 0 at the
    accelerator's ports), and what the top builds on it (``kind``)."""

    tensor: str
    producer: Engine | None
    reader: Engine | None
    src_lanes: int
    dst_lanes: int
    elements: int
    kind: EdgeKind

    @property
    def key(self) -> tuple[str, str]:
        return (self.tensor, "output" if self.reader is None else self.reader.name)

    @property
    def between_engines(self) -> bool:
        return self.producer is not None and self.reader is not None

    @property
    def lanes(self) -> int:
        """Lanes of the FIFO's words: it sits on the wider side."""
        return max(self.src_lanes, self.dst_lanes)


def _streams(engines, folds):
    """(tensor, producer, reader, src_lanes, dst_lanes) of every edge: per engine its
    inputs, then its output when nothing else reads it (the accelerator's output)."""
    producers = {e.output: e for e in engines}
    read = {t for e in engines for t in e.inputs}
    for e in engines:
        for t in e.inputs:
            p = producers.get(t)
            dst = e.in_lanes(folds[e.name])
            yield t, p, e, p.out_lanes(folds[p.name]) if p else dst, dst
        if e.output not in read:
            lanes = e.out_lanes(folds[e.name])
            yield e.output, e, None, lanes, lanes


def _kind(producer, reader, elements, src_lanes, dst_lanes) -> EdgeKind:
    ends = [end for end in (producer, reader) if end is not None]
    if not (any(end.buffers_itself for end in ends) and elements == 0
            and src_lanes == dst_lanes):
        return EdgeKind.FIFO
    if len(ends) == 1 and ends[0].registered_ports:
        return EdgeKind.WIRE
    return EdgeKind.SLICE


@dataclass(frozen=True, eq=False)
class EngineGraph:
    """The planned engines (in topological order), their folds, their edges (in the order
    ``_streams`` gives them) and the skip buffers of reconvergent paths."""

    engines: tuple
    folds: MappingProxyType
    edges: tuple[GraphEdge, ...]
    skips: tuple[SkipBuffer, ...]

    @classmethod
    def build(cls, engines, folds) -> "EngineGraph":
        engines = tuple(engines)
        skips = tuple(skip_buffers(engines, folds))
        extra = {(s.tensor, s.reader): s.elements for s in skips}
        edges = []
        for tensor, producer, reader, src, dst in _streams(engines, folds):
            elements = 0
            if producer is not None and reader is not None:
                elements = reader.buffered_elements() + extra.get((tensor, reader.name), 0)
            edges.append(GraphEdge(tensor, producer, reader, src, dst, elements,
                                   _kind(producer, reader, elements, src, dst)))
        return cls(engines, MappingProxyType(dict(folds)), tuple(edges), skips)

    @property
    def edge_elements(self) -> dict:
        """Per edge between engines, the elements its FIFO holds beyond the skid buffers
        (the top's ``edge_elements``)."""
        return {x.key: x.elements for x in self.edges if x.between_engines}

    @property
    def fifos(self) -> dict:
        """Per edge between engines: (words, lanes) of its FIFO (``qloom.hw.top.edge_depth``);
        the accelerator's input has none planned (the host sets the pace)."""
        return {x.key: (edge_depth(x.elements, x.lanes), x.lanes)
                for x in self.edges if x.between_engines}

    @property
    def slices(self) -> frozenset:
        """The edges built as one register slice or a wire (the top's ``slices``)."""
        return frozenset(x.key for x in self.edges if x.kind is not EdgeKind.FIFO)

    @property
    def wires(self) -> frozenset:
        """The edges built as a plain connection (the top's ``wires``)."""
        return frozenset(x.key for x in self.edges if x.kind is EdgeKind.WIRE)

    def port_lanes(self, input: str, output: str) -> tuple[int, int]:
        """Lanes of the accelerator's ``input`` and ``output`` streams: those of the first
        engine reading the input and of the engine writing the output."""
        first = next(e for e in self.engines if input in e.inputs)
        last = next(e for e in self.engines if e.output == output)
        return first.in_lanes(self.folds[first.name]), last.out_lanes(self.folds[last.name])

    @property
    def registered_input(self) -> bool:
        """Whether the accelerator's input stream is one wire into an engine with
        registered ports: its ready is then a register and its input goes into registers
        only, so the host link feeds it with no skid buffer (``qloom.hw.link.Link``, the
        manifest's ``input.registered``)."""
        inputs = [x for x in self.edges if x.producer is None]
        return len(inputs) == 1 and inputs[0].kind is EdgeKind.WIRE

    def features(self, options) -> dict:
        """The edges' estimate features (``qloom.hw.top.estimate_edge``) charged to the
        engine they feed: every edge between engines, the top-level input's, the output's
        (charged to the engine writing it) and those between an engine's own nodes
        (``Engine.inner_edges``); a wire costs nothing."""
        parts = {e.name: [] for e in self.engines}
        for x in self.edges:
            if x.kind is EdgeKind.WIRE:
                continue
            if x.reader is None:
                if x.producer.out_bits is None:
                    continue
                owner, bits = x.producer, x.producer.out_bits
            else:
                owner, bits = x.reader, x.reader.in_bits
            reader = "out" if x.reader is None else x.reader.name
            parts[owner.name].append((f"@{x.tensor}_to_{reader}", estimate_edge(
                src_lanes=x.src_lanes, dst_lanes=x.dst_lanes, bits=bits,
                elements=x.elements, family=options.family,
                fifo=x.kind is EdgeKind.FIFO)))
        for e in self.engines:
            for tensor, reader, lanes, bits in e.inner_edges(self.folds[e.name]):
                parts[e.name].append((f"@{tensor}_to_{reader}", estimate_edge(
                    src_lanes=lanes, dst_lanes=lanes, bits=bits, elements=0,
                    family=options.family)))
        return parts

    def resources(self, options) -> dict:
        """Estimated edges (FIFOs, skid buffers, width converters) per engine they feed."""
        cost = {}
        for name, parts in self.features(options).items():
            cost[name] = Resources()
            for _, features in parts:
                cost[name] += calibrated(features, options.family)
        return cost

    def skip_rows(self) -> list[dict]:
        """The skip FIFOs as the report lists them: the edge, the fork, and the words,
        lanes and bits of the FIFO holding the skip path's elements
        (``qloom.hw.top.edge_depth``, on the wider side of the edge)."""
        by_key = {x.key: x for x in self.edges}
        rows = []
        for s in self.skips:
            edge = by_key[(s.tensor, s.reader)]
            words = edge_depth(s.elements, edge.lanes)
            rows.append({"tensor": s.tensor, "reader": s.reader, "fork": s.fork,
                         "elements": s.elements, "words": words, "lanes": edge.lanes,
                         "bits": words * edge.lanes * edge.reader.in_bits})
        return rows
