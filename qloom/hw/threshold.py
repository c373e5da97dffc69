"""Multi-threshold activation units (FINN-style), standalone or fused into a matrix-vector unit.

Per channel ``c`` the output code is ``bias[c] + sign[c] * #{k : x >= thresholds[c, k]}``,
exactly as :class:`qloom.nn.ir.MultiThreshold` computes it. A stream of channels-last pixels
arrives as ``C/PE`` words per pixel, word ``j`` lane ``p`` carrying channel ``j*PE + p``.

Two implementations, both taking one word per cycle:

- ``ThresholdMode.PARALLEL`` compares each lane with all ``K`` thresholds at once and counts.
  ``K`` comparators per lane; latency 2 cycles. Best for few thresholds (1-4 bit outputs).
- ``ThresholdMode.BINARY_SEARCH`` searches the sorted thresholds in ``L = ceil(log2(K+1))``
  pipelined stages, one result bit per stage. Stage ``s`` keeps its own memory of the
  ``2**s`` thresholds it can be asked for per channel, so the memories hold ``2**L - 1``
  entries per channel (the thresholds padded with "never crossed") and each lane needs only
  ``L`` comparators instead of ``K``: 8 instead of 255 for 8-bit outputs. The price is
  latency (``(1 + R) L + 2`` cycles: each stage registers its memory's read data ``R``
  times before the compare, ``read_registers``, and the count found is registered before
  it is coded) and ``L`` small memories per lane instead of one wide one.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..nn.dtypes import DataType, smallest_type
from ..nn.ir import MultiThreshold
from .estimate import Features, adder_tree_luts, comparator_luts, memory_cost, use_block_ram
from .mvu_datapath import TREE_LEVELS, tree_sum
from .target import Family
from .types import shape_of
from .weight_mem import RamStyle, pack_layout, pack_words, read_register, rom

__all__ = ["ThresholdSpec", "ThresholdMode", "ThresholdTable", "Thresholding"]


def _int_array(name: str, value, ndim: int) -> np.ndarray:
    if not isinstance(value, np.ndarray) or not np.issubdtype(value.dtype, np.integer):
        raise TypeError(f"{name} must be an integer numpy array, not {value!r}")
    if value.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), not shape {value.shape}")
    array = value.astype(np.int64)
    array.flags.writeable = False
    return array


@dataclass(frozen=True, eq=False)
class ThresholdSpec:
    """The constants of a multi-threshold activation over ``C`` channels: ``thresholds[C, K]``
    ascending along ``K``, ``bias[C]``, ``sign[C]`` of +1/-1, and the output datatype whose
    *code* the result is (for a bipolar output code 0 is -1 and code 1 is +1)."""

    thresholds: np.ndarray
    bias: np.ndarray
    sign: np.ndarray
    out_type: DataType

    def __post_init__(self):
        thresholds = _int_array("Thresholds", self.thresholds, 2)
        bias = _int_array("Bias", self.bias, 1)
        sign = _int_array("Sign", self.sign, 1)
        if not isinstance(self.out_type, DataType):
            raise TypeError(f"Output type must be a qloom DataType, not {self.out_type!r}")
        channels, count = thresholds.shape
        if channels < 1 or count < 1:
            raise ValueError(f"Thresholds must have at least one channel and one threshold, "
                             f"not shape {thresholds.shape}")
        if bias.shape != (channels,) or sign.shape != (channels,):
            raise ValueError(f"Bias {bias.shape} and sign {sign.shape} must have one entry "
                             f"per channel ({channels})")
        if not np.all(np.abs(sign) == 1):
            raise ValueError(f"Sign must hold only +1 and -1, not {np.unique(sign).tolist()}")
        if np.any(np.diff(thresholds, axis=1) < 0):
            channel = int(np.nonzero(np.any(np.diff(thresholds, axis=1) < 0, axis=1))[0][0])
            raise ValueError(f"Thresholds of channel {channel} must be ascending, not "
                             f"{thresholds[channel].tolist()}")
        lo_code, hi_code = self.out_type.encode([self.out_type.min, self.out_type.max])
        lo = np.minimum(bias, bias + sign * count)
        hi = np.maximum(bias, bias + sign * count)
        if lo.min() < lo_code or hi.max() > hi_code:
            raise ValueError(f"Output codes span [{lo.min()}, {hi.max()}], outside the codes "
                             f"[{lo_code}, {hi_code}] of output type {self.out_type}")
        for name, array in (("thresholds", thresholds), ("bias", bias), ("sign", sign)):
            object.__setattr__(self, name, array)

    @classmethod
    def from_layer(cls, layer: MultiThreshold) -> "ThresholdSpec":
        return cls(thresholds=layer.thresholds, bias=layer.bias, sign=layer.sign,
                   out_type=layer.out_type)

    @property
    def channels(self) -> int:
        return self.thresholds.shape[0]

    @property
    def num_thresholds(self) -> int:
        return self.thresholds.shape[1]

    def reference(self, x: np.ndarray) -> np.ndarray:
        """Output codes for integer values ``x[..., C]`` (numpy reference)."""
        count = (np.asarray(x)[..., None] >= self.thresholds).sum(axis=-1)
        return self.bias + self.sign * count


class ThresholdMode(enum.Enum):
    PARALLEL = "parallel"
    BINARY_SEARCH = "binary_search"


# From this many thresholds per channel on, the pipelined binary search (one comparator
# and a small memory per step) is smaller than comparing against all of them at once.
SEARCH_FROM = 31


def compare_register(thresholds: int, family=None) -> bool:
    """Whether the parallel compares are registered before they are counted: when the
    count is deeper than ``TREE_LEVELS`` adder levels (15 thresholds compared, counted and
    coded in one cycle: 90.7 MHz on the ECP5-85F, 28.1 MHz on the UP5K), on the ECP5
    (``family``) whenever there is a count at all (3 thresholds of UNSW-NB15's last layer
    compared, counted and coded in one cycle: 119 MHz, 16 carry and LUT levels), and on the
    iCE40 always (a single compare's carry chain into the matrix unit's output queue, placed
    apart on a UP5K 75% full, was TFC-w1a1 --fold auto's path: 11 levels and 12.7 ns of
    routing, 50.3 MHz)."""
    return (thresholds > 1 << TREE_LEVELS or (family is Family.ECP5 and thresholds > 1)
            or family is Family.ICE40)


def search_read_registers(family=None) -> int:
    """Registers after each binary-search stage's memory read: two on the ECP5, where the
    first moves into the block RAM (qloom.flows.toolchain.ecp5_outreg) and the second takes the route
    from the block to the compare off the compare's cycle (UNSW-NB15's 255-threshold
    layer: block RAM -> pair select -> compare, 145.7 MHz at 150), one elsewhere."""
    return 2 if family is Family.ECP5 else 1


def mode_for(thresholds: int) -> ThresholdMode:
    """The cheaper mode for ``thresholds`` thresholds per channel."""
    return ThresholdMode.BINARY_SEARCH if thresholds >= SEARCH_FROM else ThresholdMode.PARALLEL


class ThresholdTable:
    """A spec's constants laid out for ``pe`` lanes, for inputs carried as *codes* ``q`` in
    ``[lo, hi]`` standing for the values ``scale * q + offset`` (``scale`` 1 or 2: plain
    integers, bipolar codes, or the popcount of an XNOR datapath).

    Thresholds become code thresholds ``ceil((T - offset) / scale)`` clipped to
    ``[lo, hi + 1]``, which decide exactly the same comparisons on ``[lo, hi]`` with the
    narrowest comparators. Uniform biases and signs become constants instead of memory.
    """

    def __init__(self, spec: ThresholdSpec, pe: int, *, lo: int, hi: int,
                 scale: int = 1, offset: int = 0, register_compares: bool | None = None):
        self.spec, self.pe, self.lo, self.hi = spec, pe, lo, hi
        self._register_compares = (compare_register(spec.num_thresholds)
                                   if register_compares is None else register_compares)
        self.folds = spec.channels // pe
        shifted = spec.thresholds - offset
        self.thresholds = np.clip(-(-shifted // scale), lo, hi + 1)
        self.t_shape = shape_of(smallest_type(self.thresholds.min(), self.thresholds.max()))
        self.count_shape = unsigned(spec.num_thresholds.bit_length())
        fields = {}
        if np.any(spec.bias != spec.bias[0]):
            fields["bias"] = shape_of(smallest_type(spec.bias.min(), spec.bias.max()))
        if np.any(spec.sign != spec.sign[0]):
            fields["neg"] = unsigned(1)
        self.meta_layout = data.StructLayout(fields) if fields else None

    def _rows(self, per_channel):
        return [[per_channel(j * self.pe + p) for p in range(self.pe)]
                for j in range(self.folds)]

    def _meta(self, c):
        meta = {}
        if "bias" in self.meta_layout.members:
            meta["bias"] = int(self.spec.bias[c])
        if "neg" in self.meta_layout.members:
            meta["neg"] = int(self.spec.sign[c] < 0)
        return meta

    def parallel_words(self) -> tuple:
        """The parallel mode's ``C/PE`` words (one per fold) packed as unsigned integers,
        each lane (``lane_bits``, lane 0 lowest) holding its channel's code thresholds and
        bias/sign; and the lane layout to view them with."""
        lane = {"t": data.ArrayLayout(self.t_shape, self.spec.num_thresholds)}
        if self.meta_layout is not None:
            lane["meta"] = self.meta_layout
        layout = data.ArrayLayout(data.StructLayout(lane), self.pe)
        words = self._rows(lambda c: {"t": self.thresholds[c].tolist(),
                                      **({"meta": self._meta(c)} if self.meta_layout else {})})
        return pack_layout(layout, words), layout

    def parallel_memory(self, ram_style: RamStyle) -> tuple:
        """A memory of the ``parallel_words``; and the lane layout to view a read port's
        data with."""
        words, layout = self.parallel_words()
        return rom(layout, words, ram_style), layout

    def meta_memory(self, ram_style: RamStyle = RamStyle.AUTO) -> tuple:
        """A memory of ``C/PE`` words of per-lane bias/sign (only when not uniform)."""
        layout = data.ArrayLayout(self.meta_layout, self.pe)
        return rom(layout, pack_layout(layout, self._rows(self._meta)), ram_style), layout

    @property
    def meta_bits(self) -> int:
        """Bits of a lane's bias/sign in the memories (0 when uniform)."""
        return 0 if self.meta_layout is None else self.meta_layout.size

    @property
    def lane_bits(self) -> int:
        """Bits of a lane's word in the parallel mode's memory."""
        return self.spec.num_thresholds * self.t_shape.width + self.meta_bits

    def compares(self, x, t_row):
        """One bit per threshold of the lane's ``t_row``: whether the code ``x`` reaches it."""
        return Cat(*[x >= t_row[k] for k in range(self.spec.num_thresholds)])

    def count(self, x, t_row):
        """How many of a lane's thresholds ``t_row`` the code ``x`` reaches."""
        return self.count_bits(self.compares(x, t_row))

    def count_bits(self, bits):
        """The thresholds reached, from ``compares``' bits."""
        return tree_sum([bits[k] for k in range(self.spec.num_thresholds)])

    @property
    def compare_register(self) -> bool:
        """Whether the compares get a register before the count (``compare_register``)."""
        return self._register_compares

    def counted(self, m, x_rows, t_rows, metas, name: str, enable=1):
        """Per lane the count of thresholds reached by ``x_rows[p]`` in ``t_rows[p]``
        and its ``metas[p]``, with the compares registered (when ``enable``) in between
        when ``compare_register`` (the metas returned are then registered too, one cycle
        late like the counts): ``(counts, metas)``."""
        bits = [self.compares(x, t) for x, t in zip(x_rows, t_rows)]
        if self.compare_register:
            regs = [Signal(len(b), name=f"{name}_crossed{p}") for p, b in enumerate(bits)]
            with m.If(enable):
                m.d.sync += [r.eq(b) for r, b in zip(regs, bits)]
            bits = regs
            if self.meta_layout is not None:
                held = [Signal(self.meta_layout, name=f"{name}_meta{p}")
                        for p in range(len(metas))]
                with m.If(enable):
                    m.d.sync += [h.eq(meta) for h, meta in zip(held, metas)]
                metas = held
        return [self.count_bits(b) for b in bits], metas

    def code(self, count, meta=None):
        """The output code for ``count`` crossed thresholds with a lane's ``meta``."""
        fields = self.meta_layout.members if self.meta_layout is not None else {}
        bias = meta.bias if "bias" in fields else Const(int(self.spec.bias[0]))
        if "neg" in fields:
            return bias + Mux(meta.neg, -count, count)
        return bias - count if self.spec.sign[0] < 0 else bias + count


class Thresholding(wiring.Component):
    """A stream of channels-last pixels in (codes of ``in_type``), ``pe`` channels per word,
    out the codes of ``spec.out_type``. One global stall moves the pipeline, so ``i.ready``
    depends combinationally on ``o.ready``. ``latency`` is the number of cycles from a word
    being taken at ``i`` to its result being taken at ``o`` with ``o.ready`` held high.
    ``ram_style`` places the threshold memories, or, given a ``family``, each memory goes
    where :func:`qloom.hw.estimate.use_block_ram` puts it for that family (block RAM or
    LUTs: the choice the estimate counts); ``compare_register`` registers the compares
    before the count (None: ``compare_register``'s rule without a family).
    """

    def __init__(self, *, spec: ThresholdSpec, in_type: DataType, pe: int,
                 mode: ThresholdMode = ThresholdMode.PARALLEL,
                 ram_style: RamStyle = RamStyle.AUTO, compare_register: bool | None = None,
                 read_registers: int = 1, family: Family | None = None):
        if not isinstance(spec, ThresholdSpec):
            raise TypeError(f"Threshold spec must be a ThresholdSpec, not {spec!r}")
        if not isinstance(in_type, DataType):
            raise TypeError(f"Input type must be a qloom DataType, not {in_type!r}")
        if not isinstance(pe, int) or isinstance(pe, bool) or pe < 1:
            raise TypeError(f"PE count must be a positive integer, not {pe!r}")
        if not isinstance(mode, ThresholdMode):
            raise TypeError(f"Threshold mode must be a ThresholdMode, not {mode!r}")
        if not isinstance(ram_style, RamStyle):
            raise TypeError(f"RAM style must be a RamStyle, not {ram_style!r}")
        if compare_register is not None and not isinstance(compare_register, bool):
            raise TypeError(f"Compare register must be a bool or None, not "
                            f"{compare_register!r}")
        if read_registers not in (1, 2) or isinstance(read_registers, bool):
            raise TypeError(f"Read registers must be 1 or 2, not {read_registers!r}")
        if family is not None and not isinstance(family, Family):
            raise TypeError(f"Family must be a Family or None, not {family!r}")
        if spec.channels % pe:
            raise ValueError(f"Channel count ({spec.channels}) must be divisible by "
                             f"PE ({pe})")
        self._spec, self._in_type, self._pe = spec, in_type, pe
        self._mode, self._ram_style, self._reads = mode, ram_style, read_registers
        self._family = family
        scale, offset = (2, -1) if in_type.bipolar else (1, 0)
        lo, hi = in_type.encode([in_type.min, in_type.max])
        self._table = ThresholdTable(spec, pe, lo=int(lo), hi=int(hi), scale=scale,
                                     offset=offset, register_compares=compare_register)
        self._stages = max(1, math.ceil(math.log2(spec.num_thresholds + 1)))
        # The binary search's thresholds, padded up to 2**L - 1 with one no code reaches.
        never = self._table.hi + 1
        self._padded = np.full((spec.channels, 2 ** self._stages - 1), never, dtype=np.int64)
        self._padded[:, :spec.num_thresholds] = self._table.thresholds
        self._search_shape = shape_of(smallest_type(self._padded.min(), never))
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(shape_of(in_type), pe))),
            "o": Out(stream.Signature(data.ArrayLayout(shape_of(spec.out_type), pe))),
        })

    @property
    def spec(self) -> ThresholdSpec:
        return self._spec

    @property
    def channels(self) -> int:
        return self._spec.channels

    @property
    def pe(self) -> int:
        return self._pe

    @property
    def mode(self) -> ThresholdMode:
        return self._mode

    @property
    def cycles_per_word(self) -> int:
        """Steady-state cycles per input word: both modes are fully pipelined."""
        return 1

    @property
    def search_stages(self) -> int:
        """``ceil(log2(K + 1))``: the pipeline stages of the binary search."""
        return self._stages

    @property
    def latency(self) -> int:
        if self._mode is ThresholdMode.PARALLEL:
            return 2 + self._table.compare_register
        return (1 + self._reads) * self._stages + 2

    def _memories(self) -> list[tuple[str, int, int]]:
        """Every memory the unit builds: (name, depth, width)."""
        table, pe, folds = self._table, self._pe, self._table.folds
        if self._mode is ThresholdMode.PARALLEL:
            return [("thresholds", folds, pe * table.lane_bits)]
        width = self._search_shape.width
        memories = [(f"stage{s}_lane{p}", folds * 2 ** max(0, s - 1), width * (2 if s else 1))
                    for s in range(self._stages) for p in range(pe)]
        if table.meta_bits:
            memories.append(("meta", folds, pe * table.meta_bits))
        return memories

    def _style(self, depth: int, width: int) -> RamStyle:
        if self._family is None:
            return self._ram_style
        return (RamStyle.BLOCK if use_block_ram(depth, width, self._family)
                else RamStyle.DISTRIBUTED)

    def estimate(self, family: Family) -> Features:
        """The resources (:class:`qloom.hw.estimate.Features`), both modes taking one word
        per cycle (the binary search is pipelined); its memories where the unit puts them
        (where the family's rule does when the unit was not given a family)."""
        f = Features("threshold")
        lanes, in_bits, k = self._pe, shape_of(self._in_type).width, self._spec.num_thresholds
        for name, depth, width in self._memories():
            block = None if self._family is None else self._style(depth, width) is RamStyle.BLOCK
            f.add_memory("stages" if name.startswith("stage") else name,
                         memory_cost(depth, width, family, block=block))
        if self._mode is ThresholdMode.BINARY_SEARCH:
            steps, reads = self._stages, self._reads
            f.add("lut", "search", lanes * steps * (comparator_luts(in_bits) + steps))
            # Per stage and lane: the word and count bits held once more than the read
            # data is registered.
            f.add("ff", "search", lanes * steps * ((1 + reads) * (in_bits + steps)
                                                   + reads * in_bits))
            f.add("ff", "found", lanes * steps + 1)
            f.add("lut", "control", 30)
            f.add("ff", "control", 10)
            # From stage 1 on the thresholds are read in pairs, chosen by a mux after the
            # read.
            f.add("lut", "pairs", lanes * (steps - 1) * self._search_shape.width)
            return f
        f.add("lut", "compare", lanes * (k * comparator_luts(in_bits)
                                         + adder_tree_luts(k, 1)))
        f.add("ff", "lanes", lanes * (in_bits + self._spec.out_type.bits))
        if self._table.compare_register:
            f.add("ff", "crossed", lanes * k)
        f.add("lut", "control", 20)
        f.add("ff", "control", 10)
        return f

    def elaborate(self, platform):
        m = Module()
        # The whole pipeline moves when the output register is free or being emptied.
        advance = Signal()
        m.d.comb += [advance.eq(~self.o.valid | self.o.ready), self.i.ready.eq(advance)]
        take = self.i.valid & advance
        fold = Signal(range(self._table.folds))
        with m.If(take):
            m.d.sync += fold.eq(Mux(fold == self._table.folds - 1, 0, fold + 1))
        if self._mode is ThresholdMode.PARALLEL:
            self._elaborate_parallel(m, advance, take, fold)
        else:
            self._elaborate_search(m, advance, take, fold)
        return m

    def _elaborate_parallel(self, m, advance, take, fold):
        table = self._table
        (_, depth, width), = self._memories()
        mem, layout = table.parallel_memory(self._style(depth, width))
        m.submodules.thresholds = mem
        port = mem.read_port()
        m.d.comb += [port.addr.eq(fold), port.en.eq(advance)]
        rows = layout(port.data)
        x = Signal.like(self.i.payload)
        valid = Signal()
        with m.If(advance):
            m.d.sync += [valid.eq(take), x.eq(self.i.payload)]
        metas = [rows[p].meta if table.meta_layout is not None else None
                 for p in range(self._pe)]
        counts, metas = table.counted(m, [x[p] for p in range(self._pe)],
                                      [rows[p].t for p in range(self._pe)], metas, "parallel",
                                      enable=advance)
        if table.compare_register:
            crossed_valid = Signal()
            with m.If(advance):
                m.d.sync += crossed_valid.eq(valid)
            valid = crossed_valid
        with m.If(advance):
            m.d.sync += self.o.valid.eq(valid)
            for p in range(self._pe):
                m.d.sync += self.o.payload[p].eq(table.code(counts[p], metas[p]))

    def _search_memories(self, m, advance):
        """Per stage ``s`` and lane ``p`` a memory of the ``2**s`` thresholds per fold that
        stage ``s`` may compare with: the one at ``j`` once the bits found so far put the
        count in ``[j * 2**(L-s), (j+1) * 2**(L-s))``. From stage 1 on they are kept in
        pairs, the two that stage ``s - 1``'s bit chooses between, at address ``fold *
        2**(s-1) + j // 2``: so a stage's memory is addressed by the bits found before the
        previous stage (registers), read while that stage compares, and the pair chosen
        after the read (the previous compare -> address -> block RAM was UNSW-NB15's ECP5
        critical path, 125 MHz). Returns per stage and lane ``(port, thresholds)``, a
        list of one threshold (stage 0) or of the pair."""
        table, pe, stages = self._table, self._pe, self._stages
        padded, t_shape = self._padded, self._search_shape
        width = t_shape.width
        ports = []
        for s in range(stages):
            span, first = 2 ** (stages - s), 2 ** (stages - 1 - s) - 1
            ks = [[k] for k in range(2 ** s)] if s == 0 else \
                [[2 * j, 2 * j + 1] for j in range(2 ** (s - 1))]
            lane_ports = []
            for p in range(pe):
                init = [[padded[j * pe + p, k * span + first] for k in pair]
                        for j in range(table.folds) for pair in ks]
                mem = rom(unsigned(width * len(ks[0])), pack_words(init, width),
                          self._style(len(init), width * len(ks[0])))
                m.submodules[f"stage{s}_lane{p}"] = mem
                port = mem.read_port()
                m.d.comb += port.en.eq(advance)
                lane_ports.append(port)
            ports.append(lane_ports)
        return ports, t_shape

    def _elaborate_search(self, m, advance, take, fold):
        table, pe, stages = self._table, self._pe, self._stages
        ports, t_shape = self._search_memories(m, advance)
        m.d.comb += [ports[0][p].addr.eq(fold) for p in range(pe)]
        if table.meta_layout is not None:
            meta_mem, meta_layout = table.meta_memory(
                self._style(table.folds, pe * table.meta_bits))
            m.submodules.meta = meta_mem
            meta_port = meta_mem.read_port()
            m.d.comb += [meta_port.addr.eq(fold), meta_port.en.eq(advance)]
        # Stage s+1 holds a word, its fold and the count bits found by stages 0..s-1 for
        # two cycles: the first while stage s's memory is read, the second with the read
        # data registered (a memory's read data straight into the compare was the
        # critical path: a deep LUT ROM on the ECP5, 15 ns, or a block RAM's 5.8 ns
        # clock-to-out), and a third with it registered again when ``read_registers`` is
        # 2 (``search_read_registers``); it compares with stage s's threshold (the one of
        # the pair read that stage s-1's bit chooses) and addresses stage s+1's memory
        # with the bits found before it.
        valid, x, folds, counts, meta = take, self.i.payload, fold, [Const(0, stages)] * pe, None

        def hold(name, value, like=None):
            reg = Signal.like(like if like is not None else value, name=name)
            with m.If(advance):
                m.d.sync += reg.eq(value)
            return reg

        for s in range(stages):
            for half in "abc"[:1 + self._reads]:
                valid = hold(f"valid{s + 1}{half}", valid)
                x = hold(f"x{s + 1}{half}", x, self.i.payload)
                folds = hold(f"fold{s + 1}{half}", folds, fold)
                counts = [hold(f"count{s + 1}{half}_{p}", counts[p], Signal(stages))
                          for p in range(pe)]
                if table.meta_layout is not None:
                    if s == 0 and half == "a":
                        meta = meta_layout(meta_port.data)
                    else:
                        meta = hold(f"meta{s + 1}{half}", meta, Signal(meta_layout))
            data = [read_register(m, ports[s][p].data, advance, f"data{s + 1}_{p}")
                    for p in range(pe)]
            if self._reads == 2:
                data = [hold(f"data{s + 1}r_{p}", d) for p, d in enumerate(data)]
            valid_r, x_r, fold_r, count_r = valid, x, folds, counts
            bit = stages - 1 - s
            counts = []
            for p in range(pe):
                pair = [data[p].word_select(k, t_shape.width) for k in range(len(data[p])
                                                                           // t_shape.width)]
                pair = [t.as_signed() if t_shape.signed else t for t in pair]
                threshold = pair[0] if s == 0 else Mux(count_r[p][bit + 1], pair[1], pair[0])
                found = Signal(stages, name=f"found{s + 1}_{p}")
                m.d.comb += found.eq(count_r[p] | ((x_r[p] >= threshold) << bit))
                if s + 1 < stages:
                    m.d.comb += ports[s + 1][p].addr.eq(Cat(count_r[p][bit + 1:], fold_r))
                counts.append(found)
            valid, x, folds = valid_r, x_r, fold_r
        # The count found is registered before it is coded: the last compare, the sign and
        # the bias in one cycle were three carry chains (UNSW-NB15 on the ECP5: 119 MHz).
        valid = hold("valid_found", valid)
        counts = [hold(f"found_{p}", counts[p]) for p in range(pe)]
        if meta is not None:
            meta = hold("meta_found", meta, Signal(meta_layout))
        with m.If(advance):
            m.d.sync += self.o.valid.eq(valid)
            for p in range(pe):
                lane_meta = meta[p] if meta is not None else None
                m.d.sync += self.o.payload[p].eq(table.code(counts[p], lane_meta))
