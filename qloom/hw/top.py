"""The accelerator top level: engines wired into a streaming dataflow graph.

``AcceleratorTop`` takes engine components (anything with stream ports ``i``/``o``, or
``i_a``/``i_b``/``o`` for two-input engines) and the tensors they read and write, and wires
them: a duplicator where a tensor feeds two engines, a FIFO on every edge, width
converters where the producer's lane count differs from the consumer's, and skid buffers at
both ends of every edge; an edge next to an engine that buffers its own results (the
planner's ``slices``) is one skid buffer. Its own ports
carry frames: payloads are ``{"data": ArrayLayout(elem, lanes), "last": 1}``; ``last`` is
generated on the output's final word of each frame (the input's ``last`` is accepted and
not needed: engines count their frames).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .dup import Duplicate
from .estimate import Features, ram_cost
from .fifo import StreamFIFO, fifo_registered_read, fifo_storage
from .skid import SkidBuffer, skid_cost
from .spram import SpiSignature, SpramLoader
from .weight_mem import RamStyle
from .width import WidthConverter

__all__ = ["Node", "AcceleratorTop", "frame_layout", "edge_depth", "estimate_edge"]


# The shallowest StreamFIFO that takes and gives one word every cycle (depth 2 is a
# SyncFIFOBuffered that moves a word every other cycle).
_FULL_RATE_DEPTH = 3


def edge_depth(elements: int, lanes: int) -> int:
    """Words of an edge's FIFO holding ``elements`` elements in words of ``lanes``."""
    return max(_FULL_RATE_DEPTH, math.ceil(elements / lanes))


def _width_steps(a: int, b: int) -> list[int]:
    """The lane counts an edge converts ``a`` lanes through to reach ``b``."""
    if a == b:
        return []
    return [b] if (a % b == 0 or b % a == 0) else [math.gcd(a, b), b]


def estimate_edge(*, src_lanes: int, dst_lanes: int, bits: int, elements: int,
                  family, fifo: bool = True) -> Features:
    """The resources of one edge as ``AcceleratorTop._edge`` builds it
    (:class:`qloom.hw.estimate.Features`): a skid buffer at each end (two words and a
    mux each), the FIFO on the wider side (its storage, output register and counters)
    and the width converters between; without ``fifo`` one skid buffer."""
    f = Features("edge")
    lanes = max(src_lanes, dst_lanes)
    width = lanes * bits
    for end in (src_lanes, dst_lanes) if fifo else (src_lanes,):
        ff, lut = skid_cost(end * bits)
        f.add("ff", "skid", ff)
        f.add("lut", "skid", lut)
        f.add("lut", "skid_control", 4)    # the flags' logic, whatever the width
    if not fifo:
        return f
    depth = edge_depth(elements, lanes)
    registered = fifo_registered_read(depth, width, family)
    block = fifo_storage(depth, width, family) is RamStyle.BLOCK
    f.add_memory("fifo", ram_cost(depth - 1 - registered, width, family, block=block))
    # The output register (and the read register, which an ECP5 block holds itself).
    f.add("ff", "fifo_out", width)
    f.add("lut", "fifo_control", 8)
    # Its pointers' increments and wraps and the level's step.
    f.add("lut", "fifo_pointers", 3 * depth.bit_length())
    f.add("ff", "fifo_control", 2 * depth.bit_length())
    lanes_in = src_lanes
    for out in _width_steps(src_lanes, dst_lanes):
        # Widening gathers into a register; narrowing selects a part of its input (a mux
        # and the part counter, no storage).
        f.add("ff", "width", out * bits if out > lanes_in else (lanes_in // out).bit_length())
        f.add("lut", "width", max(lanes_in, out) * bits)
        lanes_in = out
    return f


def frame_layout(elem_shape, lanes: int) -> data.StructLayout:
    """Payload of the top-level ports: ``lanes`` elements plus the frame's ``last`` flag."""
    return data.StructLayout({"data": data.ArrayLayout(elem_shape, lanes), "last": 1})


@dataclass(frozen=True, eq=False)
class Node:
    """One unit of the dataflow graph. ``inputs`` are tensor names, bound to the
    component's port ``i`` (one input) or ``i_a``/``i_b`` (two inputs). ``engine``: the
    planner's engine it belongs to (an engine may build several nodes), by whose name the
    planner's engine graph keys the edges into it (``qloom.flows.compile.graph.EngineGraph``);
    None: its own name."""

    name: str
    component: wiring.Component
    inputs: tuple[str, ...]
    output: str
    engine: str | None = None

    @property
    def reader(self) -> str:
        """The name edges into this node are keyed by."""
        return self.engine or self.name

    def input_ports(self):
        if len(self.inputs) == 1:
            return [getattr(self.component, "i")]
        return [getattr(self.component, "i_a"), getattr(self.component, "i_b")]


def _array(port) -> data.ArrayLayout:
    layout = port.payload.shape()
    if not isinstance(layout, data.ArrayLayout):
        raise TypeError(f"engine port payloads must be data.ArrayLayout, not {layout!r}")
    return layout


class AcceleratorTop(wiring.Component):
    """Streams whole frames through a graph of engines.

    Parameters
    ----------
    nodes : engines in topological order.
    input, output : the graph's input and output tensor names.
    in_lanes : lanes of the top-level input port (the element shape is the first
        consumer's); ``out_lanes`` likewise for the output.
    in_words, out_words : words per frame on the top-level ports.
    edge_elements : elements the FIFO of an edge ``(tensor, reader)`` (``Node.reader``)
        must hold beyond a skid buffer (a vector a matrix unit takes at once, a residual's
        skip path); every FIFO is at least 3 deep (a buffered FIFO of depth 2 moves at
        half rate).
    slices : edges ``(tensor, reader)`` (reader ``"output"``: the top's output) built as
        one skid buffer and no FIFO, where an end buffers for itself
        (``qloom.flows.compile.graph.EngineGraph.slices``); they carry no elements and convert no width.
    wires : slice edges at the top's ports built as a plain connection, where the engine's
        ports are registered (``qloom.flows.compile.graph.EngineGraph.wires``).
    family : the FPGA family (a ``qloom.hw.target.Family``) the FIFOs are built for
        (``fifo_registered_read``); None: for none in particular.
    """

    def __init__(self, *, nodes, input: str, output: str, in_lanes: int, out_lanes: int,
                 in_words: int, out_words: int, edge_elements=None, slices=(), wires=(),
                 family=None):
        self.nodes = list(nodes)
        if not self.nodes:
            raise ValueError("an accelerator needs at least one engine")
        self.input, self.output = input, output
        self.in_words, self.out_words = in_words, out_words
        self.edge_elements = dict(edge_elements or {})
        self.slices, self.wires = frozenset(slices), frozenset(wires)
        if not self.wires <= self.slices:
            raise ValueError(f"edges {sorted(self.wires - self.slices)} are wires but not "
                             f"slices")
        inner = [e for e in self.wires if e[0] != input and e[1] != "output"]
        if inner:
            raise ValueError(f"edges {sorted(inner)} are wires but not at the top's ports")
        buffered = [e for e in self.slices if self.edge_elements.get(e, 0)]
        if buffered:
            raise ValueError(f"edges {sorted(buffered)} buffer elements, so they need a FIFO")
        self.family = family
        consumers = self._consumers()
        if input not in consumers:
            raise ValueError(f"no engine reads the input tensor {input!r}")
        producers = {n.output: n for n in self.nodes}
        if output not in producers:
            raise ValueError(f"no engine writes the output tensor {output!r}")
        edges = {(t, node.reader) for t, readers in consumers.items() for node, _ in readers}
        unknown = (set(self.edge_elements) | self.slices) - edges - {(output, "output")}
        if unknown:
            raise ValueError(f"edges {sorted(unknown)} are not edges of the graph "
                             f"(tensor, reader): {sorted(edges)}")
        in_elem = _array(consumers[input][0][1]).elem_shape
        out_elem = _array(producers[output].component.o).elem_shape
        self.in_layout = frame_layout(in_elem, in_lanes)
        self.out_layout = frame_layout(out_elem, out_lanes)
        # Engines with weights in SPRAM (a ``load`` port) are loaded from the SPI flash
        # at start-up through the top's ``flash`` port (qloom.hw.spram).
        self.spram_nodes = [n for n in self.nodes if "load" in n.component.signature.members]
        members = {"i": In(stream.Signature(self.in_layout)),
                   "o": Out(stream.Signature(self.out_layout))}
        if self.spram_nodes:
            members["flash"] = Out(SpiSignature())
        super().__init__(members)

    def flash_image(self) -> list[int]:
        """The 16-bit words the flash must hold at ``qloom.hw.spram.FLASH_OFFSET`` (empty
        without SPRAM weights)."""
        return [w for n in self.spram_nodes for w in n.component.spram_image()]

    def _consumers(self):
        consumers = {}
        for node in self.nodes:
            for tensor, port in zip(node.inputs, node.input_ports()):
                consumers.setdefault(tensor, []).append((node, port))
        return consumers

    def _edge(self, m, name, src, dst_layout, elements, fifo=True, wire=False):
        """A FIFO holding at least ``elements`` elements plus width conversion, from stream
        ``src`` to a stream of ``dst_layout``; returns the final stream (an interface to
        connect to the consumer). The FIFO sits on the wider side, so that what it holds
        reaches the consumer at one word per cycle. Without ``fifo``: one skid buffer;
        a ``wire``: ``src`` itself."""
        src_layout = _array(src)
        a, b = src_layout.length, dst_layout.length
        if wire:
            return src

        def skid(stream_in, layout, suffix):
            unit = SkidBuffer(shape=layout)
            m.submodules[f"{name}_{suffix}"] = unit
            wiring.connect(m, stream_in, unit.i)
            return unit.o

        if not fifo:
            if a != b:
                raise ValueError(f"edge {name} converts {a} lanes to {b}, so it needs a FIFO")
            return skid(src, src_layout, "skid")
        # Skid buffers at both ends cut the producer's and the consumer's combinational
        # ready chains (engines stall globally) off the FIFO's.
        src = skid(src, src_layout, "skid_in")

        def fifo(stream_in, layout, suffix, depth):
            width = data.Layout.cast(layout).size
            unit = StreamFIFO(shape=layout, depth=depth,
                              registered_read=fifo_registered_read(depth, width, self.family),
                              ram_style=fifo_storage(depth, width, self.family))
            m.submodules[f"{name}_{suffix}"] = unit
            wiring.connect(m, stream_in, unit.i)
            return unit.o

        def convert(stream_in):
            lanes_in = a
            for k, lanes in enumerate(_width_steps(a, b)):
                conv = WidthConverter(elem_shape=src_layout.elem_shape, in_lanes=lanes_in,
                                      out_lanes=lanes)
                m.submodules[f"{name}_width{k}"] = conv
                wiring.connect(m, stream_in, conv.i)
                stream_in, lanes_in = conv.o, lanes
            return stream_in

        if a == b:
            out = fifo(src, src_layout, "fifo", edge_depth(elements, a))
        elif b > a:
            # Widening: assemble words first, then buffer whole consumer words.
            out = fifo(convert(src), dst_layout, "fifo", edge_depth(elements, b))
        else:
            # Narrowing: buffer producer words; the converter splits the FIFO's output
            # register in place and the skid buffer behind it registers the parts (a FIFO
            # there made FIFO -> converter -> FIFO the iCE40 critical path).
            out = convert(fifo(src, src_layout, "fifo", edge_depth(elements, a)))
        return skid(out, dst_layout, "skid_out")

    def elaborate(self, platform):
        m = Module()
        consumers = self._consumers()

        # The top-level input, without its `last` flag, as the source of the input tensor.
        src = stream.Signature(self.in_layout["data"].shape).create()
        m.d.comb += [src.payload.eq(self.i.payload.data), src.valid.eq(self.i.valid),
                     self.i.ready.eq(src.ready)]
        sources = {self.input: src}

        for node in self.nodes:
            m.submodules[node.name] = node.component
        if self.spram_nodes:
            m.submodules.spram_loader = loader = SpramLoader(
                images=[n.component.spram_image() for n in self.spram_nodes],
                blocks=[n.component.load.signature.blocks for n in self.spram_nodes])
            wiring.connect(m, loader.flash, wiring.flipped(self.flash))
            for k, n in enumerate(self.spram_nodes):
                wiring.connect(m, getattr(loader, f"load{k}"), n.component.load)
        for node in [None] + self.nodes:
            tensor = self.input if node is None else node.output
            stream_out = sources[tensor] if node is None else node.component.o
            readers = consumers.get(tensor, [])
            if tensor == self.output:
                readers = readers + [("output", None)]
            taps = [stream_out]
            if len(readers) > 1:
                taps = []
                for k in range(len(readers) - 1):
                    dup = Duplicate(shape=_array(stream_out))
                    m.submodules[f"{tensor}_dup{k}"] = dup
                    wiring.connect(m, stream_out, dup.i)
                    taps.append(dup.o0)
                    stream_out = dup.o1
                taps.append(stream_out)
            for (reader, port), tap in zip(readers, taps):
                key = (tensor, "output" if port is None else reader.reader)
                elements = self.edge_elements.get(key, 0)
                fifo, wire = key not in self.slices, key in self.wires
                if port is None:
                    self._output(m, self._edge(m, f"{tensor}_to_out", tap,
                                               self.out_layout["data"].shape, elements, fifo,
                                               wire))
                else:
                    edge = self._edge(m, f"{tensor}_to_{reader.name}", tap, _array(port),
                                      elements, fifo, wire)
                    wiring.connect(m, edge, port)
        return m

    def _output(self, m, sink_src):
        count = Signal(range(max(2, self.out_words)))
        last = Signal()
        m.d.comb += [last.eq(count == self.out_words - 1),
                     self.o.payload.data.eq(sink_src.payload),
                     self.o.payload.last.eq(last),
                     self.o.valid.eq(sink_src.valid),
                     sink_src.ready.eq(self.o.ready)]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += count.eq(0 if self.out_words == 1 else (count + 1))
            with m.If(last):
                m.d.sync += count.eq(0)
