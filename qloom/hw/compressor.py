"""Popcount compressor trees for unrolled layers over one-bit inputs (binary, ternary and
XNOR layers), built into an :class:`qloom.hw.csd.AdderGraph`.

A neuron of such a layer sums its one-bit inputs with weights ``±m`` (zero weights
dropped): ``sum(u_j * b_j) = m * popcount(b_j XOR [u_j < 0]) - m * #negative``. An XNOR
with a constant weight is an inversion, so the whole neuron is a popcount of (possibly
inverted) input bits, and this module builds popcounts as cheaply as a LUT4 fabric allows:

* **Shared tables.** The inputs are cut into groups of three; the popcount of a group
  under one sign pattern (``x ⊕ s``, zeros dropped) is two LUT3 outputs (values 0..3), made
  once for every neuron with that pattern on that group. A group of a layer with 64
  neurons has at most 26 patterns, so the tables cost a few hundredths of a LUT4 per
  synapse.
* **Packed carry chains.** Each neuron adds its table values pairwise over rounds
  (``a + b + r``: two operands and one input bit ``r`` as the carry-in), a carry-chain
  position per result bit. Yosys leaves adders of four bits or less to ABC, which maps
  them into LUTs at two to four times the cost of a carry chain (a 3+3+1-bit add measured
  16 LUT4s on ECP5, a 6+6+1-bit one 4 CCU2C), and the narrow first rounds are exactly such
  adders. So the segments of one round (of all neurons) are packed side by side into one
  wide addition: each segment's top position (its carry out) holds the next segment's
  carry-in bit ``r`` in both operands, where ``r + r + carry`` leaves the carry as the sum
  bit and passes ``r`` on as the next segment's carry-in (no carry crosses a segment).
  An input bit thus rides for free in a position the segment needs anyway, and every
  round is carry chains of full two-LUT cells.
* Segments equal across neurons (the same two operands and the same carry-in) are made
  once.
* **Difference form.** A neuron with no zero weight among the layer's inputs counts only
  its smaller sign set ``S``: with ``P`` the popcount of all the inputs (made once for
  the layer) and ``Q`` that of the inputs in ``S``, its sum is ``m * (P - 2Q)`` when
  ``S`` is its negative weights and ``m * (2Q - P)`` when its positive ones, one
  subtraction. ``S`` holds at most half the inputs, the tables over it are subsets of a
  group (no inversions, shared the same way), and the tree shrinks accordingly: a 64x64
  binary layer from 0.88 chain positions per synapse to 0.50, TFC-w1a1's 784x64 layer
  estimated at 0.69 LUT4 per synapse instead of 0.99, for one more adder level. Below
  ``DIFFERENCE_MIN`` inputs the subtraction costs about what it saves.

* **Mesh.** A layer with more than ``MESH_MIN`` synapses is built as blocks: columns of
  ``BLOCK_NEURONS`` neurons (at most ``MESH_COLUMNS`` columns, more neurons each in a
  wider layer) by slices of about ``BLOCK_INPUTS`` inputs. A block's tables
  are shared within it only; each neuron adds its blocks' counts down its column,
  neighbouring slices first; and each column reads the input lanes from the column before
  it through a register (a hop: a stage later). So no net crosses the layer: input bits
  pass from column to column and counts from slice to slice. Fully shared, each neuron
  read a few hundred values that neurons all over the layer also read (TFC-w1a1's 784x64
  layer), a crossbar that nextpnr could not route on the ECP5-85F. The mesh costs about a
  quarter more LUT4s (tables shared by fewer neurons, a count per block) and a stage per
  column.

The first round of a 64-input neuron adds 0..3 + 0..3 + 1 bit (7 synapses in three chain
positions), then 0..7 + 0..7 + 1 (15 synapses in four), and so on, so a neuron costs about
0.9 chain positions (LUT4s) per synapse before sharing. The per-layer choice of how many
inputs stay single bits (carry-ins) and how many go into tables follows from the tree:
one carry-in per segment.
"""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Array, Cat, Const, Signal, Value

from .csd import AdderGraph, Term

__all__ = ["popcount_terms", "chain_luts", "ge_constant", "ge_constant_luts",
           "CHAIN_POSITIONS", "GROUP"]

GROUP = 3
# Inputs from which a neuron without zero weights is built in difference form.
DIFFERENCE_MIN = 16
# Carry-chain positions per packed addition: about as long as the widest adders of a
# multi-bit layer (the jet tagger's first layer: 24 bits), so that a packed chain is no
# slower than a level of those. Longer chains save little: TFC-w1a1 is estimated at 57.9k
# LUT4 with chains of 16 positions, 56.4k with 24, 56.3k with 32.
CHAIN_POSITIONS = 24
# A layer with more synapses than this is built as a mesh of blocks of about
# BLOCK_NEURONS neurons by BLOCK_INPUTS inputs (see the module documentation): on the
# ECP5-85F, TFC-w1a1's 64x64 layers (4,096 synapses) fully shared are no routing problem,
# its 784x64 layer (50,176) was one until it became a mesh.
MESH_MIN = 16384
BLOCK_NEURONS = 8
BLOCK_INPUTS = 96
# Columns at most (each a stage later than the one before): a layer of more neurons has
# more of them per column.
MESH_COLUMNS = 8


def chain_luts(positions: int) -> int:
    """LUT4s of one addition ``positions`` bits wide as Yosys builds it: ECP5 carry chains
    of CCU2C cells of two positions (two LUT4s each); four bits or fewer go to ABC, which
    builds them from LUTs at about two LUT4s a bit. Against ``synth_ecp5`` (adders kept
    apart, see ``UnrolledChain``): the jet tagger's last layer 1,107 cells estimated,
    1,096 built."""
    if positions <= 4:
        return 2 * positions
    return 2 * -(-positions // 2)


def ge_constant_luts(width: int) -> int:
    """LUT4s of :func:`ge_constant` on a ``width``-bit value."""
    return 1 + max(0, -(-(width - 4) // 3))


def ge_constant(m, v: Value, t: int, name: str) -> Value:
    """``v >= t`` for a constant ``t`` as a ripple of LUT4s: the lowest four bits of ``v``
    in the first, three more and the previous result in each next one. Each result is a
    kept signal, so that Yosys maps every step to one LUT4: as a comparison it makes a
    carry chain (a LUT4 per bit, plus rounding), and ABC would fold the whole function into
    a LUT7 (ECP5: five LUT4s for a 7-bit compare against two)."""
    v = Value.cast(v)
    width = len(v)
    u = v.as_unsigned()
    if v.shape().signed:                # offset binary: order-preserving
        u = u ^ (1 << (width - 1))
        t += 1 << (width - 1)
    if t <= 0:
        return Const(1, 1)
    if t >= 1 << width:
        return Const(0, 1)
    step = min(4, width)
    ge = u[:step] >= (t & ((1 << step) - 1))
    k = 0
    while step < width:
        keep = Signal(name=f"{name}_ge{k}", attrs={"keep": 1})
        m.d.comb += keep.eq(ge)
        top = min(width, step + 3)
        chunk, want = u[step:top], (t >> step) & ((1 << (top - step)) - 1)
        ge = (chunk > want) | ((chunk == want) & keep)
        step, k = top, k + 1
    return ge


def _bits(n: int) -> int:
    return max(1, int(n).bit_length())


class _TableOp:
    """``sum(b_k XOR s_k)`` over the operands' bits (``s_k`` 0 or 1): one LUT per result
    bit (a group of at most four inputs)."""

    levels = 1

    def __init__(self, signs: tuple):
        self.signs = signs
        self.hi = len(signs)
        self.table = [sum(((i >> k) & 1) ^ s for k, s in enumerate(signs))
                      for i in range(1 << len(signs))]
        self.luts = _bits(self.hi)

    def evaluate(self, *bits):
        return sum((np.asarray(b) & 1) ^ s for b, s in zip(bits, self.signs))

    def build(self, *bits) -> Value:
        index = Cat(*[Value.cast(b).as_unsigned()[0] for b in bits])
        return Array([Const(v, _bits(self.hi)) for v in self.table])[index]


class _NotOp:
    """An inverted input bit (one LUT, shared by every neuron that needs it)."""

    levels, luts = 1, 1

    def evaluate(self, b):
        return 1 - (np.asarray(b) & 1)

    def build(self, b) -> Value:
        return ~Value.cast(b).as_unsigned()[0]


class _BitOp:
    """The bit of a signed one-bit lane (values -1/0): a wire."""

    levels, luts = 0, 0

    def evaluate(self, b):
        return np.asarray(b) & 1

    def build(self, b) -> Value:
        return Value.cast(b).as_unsigned()[0]


class _HopOp:
    """Its operand one pipeline stage later: the operand's register, read into a register
    of its own (the scheduler gives it a stage, ``hop``); a mesh's input lanes pass from
    column to column through these."""

    levels, luts, hop = 0, 0, True

    def evaluate(self, v):
        return np.asarray(v)

    def build(self, v) -> Value:
        return Value.cast(v)


class _ChainOp:
    """Segments ``a_k + b_k + r_k`` side by side in one addition (see the module
    documentation). ``layout`` is, per segment, ``(a width, b width, has r, positions)``;
    the operands come as ``a_0, b_0, [r_0], a_1, ...``. Its value is the whole sum, the
    segments' results at ``offsets``."""

    levels = 1

    def __init__(self, layout: list):
        self.layout = layout
        self.offsets = []
        off = 0
        for *_, positions in layout:
            self.offsets.append(off)
            off += positions
        self.positions = off
        self.luts = chain_luts(off)

    def _words(self, values, zero, cat_a, cat_b):
        """The two addends and the carry-in built from ``values`` with the given
        constructors (numpy integers for ``evaluate``, Amaranth values for ``build``)."""
        values = list(values)
        a_parts, b_parts, carry_in = [], [], zero
        segments = []
        for wa, wb, has_r, positions in self.layout:
            a, b = values.pop(0), values.pop(0)
            r = values.pop(0) if has_r else None
            segments.append((a, b, r, positions))
        for k, (a, b, r, positions) in enumerate(segments):
            if k == 0 and r is not None:
                carry_in = r
            # The top position carries the next segment's carry-in in both addends.
            nxt = segments[k + 1][2] if k + 1 < len(segments) else None
            a_parts.append((a, positions - 1, nxt))
            b_parts.append((b, positions - 1, nxt))
        return cat_a(a_parts), cat_b(b_parts), carry_in

    def evaluate(self, *values):
        def word(parts):
            total, off = np.int64(0), 0
            for v, width, top in parts:
                total = total + ((np.asarray(v, dtype=np.int64) & ((1 << width) - 1)) << off)
                if top is not None:
                    total = total + ((np.asarray(top, dtype=np.int64) & 1) << (off + width))
                off += width + 1
            return total
        a, b, cin = self._words(values, np.int64(0), word, word)
        mask = (1 << self.positions) - 1
        return (a + b + (np.asarray(cin, dtype=np.int64) & 1)) & mask

    def build(self, *values) -> Value:
        def word(parts):
            bits = []
            for v, width, top in parts:
                v = Value.cast(v).as_unsigned()
                bits.append(v[:width])
                if len(v) < width:
                    bits.append(Const(0, width - len(v)))
                bits.append(Value.cast(top).as_unsigned()[0] if top is not None
                            else Const(0, 1))
            return Cat(*bits)
        a, b, cin = self._words(values, Const(0, 1), word, word)
        # One addition with a one-bit third term: Yosys makes it the chain's carry-in.
        return (a + b + Value.cast(cin).as_unsigned()[0])[:self.positions]


class _SliceOp:
    """One segment's result out of a packed addition (wires only)."""

    levels, luts = 0, 0

    def __init__(self, offset: int, width: int):
        self.offset, self.width = offset, width

    def evaluate(self, v):
        return (np.asarray(v, dtype=np.int64) >> self.offset) & ((1 << self.width) - 1)

    def build(self, v) -> Value:
        return Value.cast(v).as_unsigned()[self.offset:self.offset + self.width]


def _signed_weights(u: np.ndarray):
    """``(m[MH], negative[MH, MW], nonzero[MH, MW])`` when every neuron's nonzero weights
    are ``±m`` with ``m`` a power of two, else None."""
    nonzero = u != 0
    mags = np.where(nonzero, np.abs(u), 0)
    m = mags.max(axis=1)
    if np.any(nonzero & (mags != m[:, None])) or np.any((m & (m - 1)) != 0):
        return None
    return m, u < 0, nonzero


def _raw_count(n: int) -> int:
    """Inputs of an ``n``-input neuron kept as single bits: one carry-in per segment of
    a pairwise tree over the tables of the others (``t`` tables, ``t - 1`` segments)."""
    t = max(1, -(-(n + 1) // (GROUP + 1)))
    return max(0, n - GROUP * t)


class _Builder:
    """The popcount terms of one layer, sharing tables, inverted bits and segments."""

    def __init__(self, g: AdderGraph, codes: list):
        self.g, self.codes = g, codes
        self.tables, self.nots, self.segments = {}, {}, {}

    def bit(self, j: int, neg: bool) -> Term:
        if (j, neg) not in self.nots:
            if neg:
                op = _NotOp()
            elif self.g.nodes[self.codes[j].node].signed:
                op = _BitOp()
            else:
                return self.codes[j]
            self.nots[(j, neg)] = self.g.extern(op, (self.codes[j],), 0, 1)
        return self.nots[(j, neg)]

    def table(self, js: tuple, signs: tuple) -> tuple:
        key = (js, signs)
        if key not in self.tables:
            op = _TableOp(signs)
            self.tables[key] = self.g.extern(op, tuple(self.codes[j] for j in js), 0, op.hi)
        return self.tables[key], len(js)

    def leaves(self, groups, raw, neg_row, nz_row):
        """(operands as (term, max), carry-in bits) of one neuron."""
        operands, bits = [], []
        for js in groups:
            used = tuple(j for j in js if nz_row[j])
            if len(used) >= 2:
                operands.append(self.table(used, tuple(int(neg_row[j]) for j in used)))
            elif used:
                bits.append(self.bit(used[0], bool(neg_row[used[0]])))
        bits += [self.bit(j, bool(neg_row[j])) for j in raw if nz_row[j]]
        # More single bits than segments to carry them: three of them make a table.
        while bits and len(bits) > max(0, len(operands) - 1):
            if len(bits) == 1 and not operands:
                break
            take, bits = bits[:GROUP], bits[GROUP:]
            if len(take) == 1:
                operands.append((take[0], 1))
                continue
            op = _TableOp((0,) * len(take))
            operands.append((self.g.extern(op, tuple(take), 0, op.hi), op.hi))
        return operands, bits


def popcount_terms(g: AdderGraph, codes: list, u: np.ndarray):
    """Terms and offsets ``[(term, offset)]`` per neuron with ``value(term) + offset ==
    sum_j u[h, j] * codes[j]`` for one-bit ``codes`` (Terms of 0/1 nodes), built as shared
    tables and packed carry chains, neurons without zero weights in difference form (a
    term that may be negative, offset 0); None when some neuron's nonzero weights are not all
    ``±m`` with ``m`` a power of two (the caller then uses general lookup tables)."""
    found = _signed_weights(np.asarray(u, dtype=np.int64))
    if found is None:
        return None
    m, negative, nonzero = found
    read = nonzero.any(axis=0)
    used = np.nonzero(read)[0].tolist()
    rows, difference = _rows(negative, nonzero, read, len(used))
    if len(used) * len(m) > MESH_MIN:
        counts = _mesh(g, codes, rows, used, len(m))
    else:
        counts = _count(g, codes, rows, used)
    terms = []
    for h in range(len(m)):
        t, offset = counts[h], -int(m[h]) * int(negative[h].sum())
        if h in difference:
            everything, twice = counts[-1], counts[h].shifted(1)
            if difference[h]:                   # P - 2 Q
                t = g.add(everything, -twice, negative_ok=False)
            else:                               # 2 Q - P
                t = g.add(twice, -everything, negative_ok=False)
            offset = 0
        shift = int(m[h]).bit_length() - 1 if m[h] else 0
        terms.append((t.shifted(shift) if m[h] else g.const(0), offset))
    return terms


def _count(g: AdderGraph, codes: list, rows: list, used: list) -> list:
    """The popcount term of each row over the inputs ``used``, its tables shared among
    the rows."""
    n_raw = _raw_count(len(used))
    table_inputs = used[:len(used) - n_raw]
    raw = used[len(used) - n_raw:]
    groups = [tuple(table_inputs[k:k + GROUP]) for k in range(0, len(table_inputs), GROUP)]
    b = _Builder(g, codes)
    return _reduce(g, b, [b.leaves(groups, raw, *row) for row in rows])


def _mesh(g: AdderGraph, codes: list, rows: list, used: list, neurons: int) -> list:
    """The popcount terms of a large layer as a mesh of blocks (see the module
    documentation): columns of ``BLOCK_NEURONS`` neurons (the first also counts ``P``, the
    row after the neurons, when there is one), each reading the inputs one hop after the
    column before it; slices of about ``BLOCK_INPUTS`` inputs, each neuron's counts over
    them added pairwise, neighbouring slices first."""
    n_columns = min(MESH_COLUMNS, -(-neurons // BLOCK_NEURONS))
    per = -(-neurons // n_columns)
    columns = [list(range(k, min(k + per, neurons))) for k in range(0, neurons, per)]
    columns[0] += list(range(neurons, len(rows)))
    n_slices = -(-len(used) // BLOCK_INPUTS)
    size = -(-len(used) // (n_slices * GROUP)) * GROUP
    slices = [used[k:k + size] for k in range(0, len(used), size)]
    lanes = list(codes)
    partial = [[] for _ in rows]
    for c, members in enumerate(columns):
        if c:
            lanes = list(lanes)
            for j in used:
                lanes[j] = g.extern(_HopOp(), (lanes[j],), *g.range_of(lanes[j]))
        for inputs in slices:
            counts = _count(g, lanes, [rows[h] for h in members], inputs)
            for h, t in zip(members, counts):
                if g.nodes[t.node].op != "const":      # no input of the slice
                    partial[h].append(t)
    result = []
    for parts in partial:
        while len(parts) > 1:       # neighbouring slices first
            parts = [g.add(*parts[k:k + 2], negative_ok=False) if k + 1 < len(parts)
                     else parts[k] for k in range(0, len(parts), 2)]
        result.append(parts[0] if parts else g.const(0))
    return result


def _rows(negative, nonzero, read, n_used: int):
    """Per neuron the bits its popcount inverts and the bits it counts, and ``difference``:
    neuron -> whether it counts its negative weights, for the neurons in difference form
    (see the module documentation: their smaller sign set, none inverted); then, when
    there are such neurons, a last row for ``P``, the popcount of all inputs."""
    positive = nonzero & ~negative
    none = np.zeros(len(read), dtype=bool)
    rows, difference = [], {}
    for h in range(len(negative)):
        n_neg, n_pos = int(negative[h].sum()), int(positive[h].sum())
        if n_used >= DIFFERENCE_MIN and min(n_neg, n_pos) and not np.any(read & ~nonzero[h]):
            difference[h] = n_neg <= n_pos
            rows.append((none, negative[h] if difference[h] else positive[h]))
        else:
            rows.append((negative[h], nonzero[h]))
    if difference:
        rows.append((none, read))
    return rows, difference


def _reduce(g: AdderGraph, b: _Builder, work: list) -> list:
    """The popcount term of each row's leaves (``_Builder.leaves``): pairwise sums over
    rounds, each round packed into carry chains (``_pack``)."""
    rounds = 0
    while True:
        rounds += 1
        pending = []                            # (row, a, b, r) of this round
        for h, (operands, bits) in enumerate(work):
            if len(operands) + bool(bits) <= 1 and not (operands and bits):
                continue
            operands.sort(key=lambda o: o[1])
            if len(operands) == 1:              # one operand and carry-ins left
                pending.append((h, operands[0], (g.const(0), 0), bits.pop(0)))
                work[h] = ([], bits)
                continue
            k = 0
            while k + 1 < len(operands):
                # Carry-ins go to the later rounds first: the first round's segments
                # without one are more often equal across neurons (made once).
                later = len(operands) // 2 - 1 + len(operands) % 2
                r = bits.pop(0) if bits and (rounds > 1 or len(bits) > later) else None
                pending.append((h, operands[k], operands[k + 1], r))
                k += 2
            work[h] = (operands[k:], bits)
        if not pending:
            break
        for h, term_max in _pack(g, b, pending):
            work[h][0].append(term_max)
    return [operands[0][0] if operands else bits[0] if bits else g.const(0)
            for operands, bits in work]


def _pack(g: AdderGraph, b: _Builder, pending: list) -> list:
    """Segments of one round, made once each and packed into chains of at most
    ``CHAIN_POSITIONS`` positions; returns ``(neuron, (term, max))`` per pending entry."""
    unique, order = {}, []
    canonical = []
    for h, (ta, ma), (tb, mb), r in pending:
        if (tb.node, tb.shift, tb.neg) < (ta.node, ta.shift, ta.neg):
            (ta, ma), (tb, mb) = (tb, mb), (ta, ma)     # a + b and b + a: one segment
        canonical.append((h, (ta, ma), (tb, mb), r))
        key = (ta, tb, r)
        if key not in b.segments and key not in unique:
            high = ma + mb + (r is not None)
            positions = max(_bits(high), _bits(ma) + 1, _bits(mb) + 1)
            unique[key] = (ta, ma, tb, mb, r, high, positions)
            order.append(key)
    chains, current, used = [], [], 0
    for key in order:
        positions = unique[key][-1]
        if current and used + positions > CHAIN_POSITIONS:
            chains.append(current)
            current, used = [], 0
        current.append(key)
        used += positions
    if current:
        chains.append(current)
    for keys in chains:
        layout, operands = [], []
        for key in keys:
            ta, ma, tb, mb, r, high, positions = unique[key]
            layout.append((_bits(ma), _bits(mb), r is not None, positions))
            operands += [ta, tb] + ([r] if r is not None else [])
        op = _ChainOp(layout)
        chain = g.extern(op, tuple(operands), 0, (1 << op.positions) - 1)
        for key, offset in zip(keys, op.offsets):
            high = unique[key][5]
            s = _SliceOp(offset, _bits(high))
            b.segments[key] = (g.extern(s, (chain,), 0, high), high)
    return [(h, b.segments[(ta, tb, r)]) for h, (ta, ma), (tb, mb), r in canonical]
