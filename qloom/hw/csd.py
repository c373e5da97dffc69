"""Constant multiplication as adder graphs: canonical signed digits (CSD), products of one
input by several constants with shared subexpressions, and sums of such products.

A layer whose weights are constants needs no multiplier: ``c * x`` is a few shifted
copies of ``x`` added or subtracted (the CSD of ``c``), a power of two is a wire, zero is
nothing. Products of one input by equal constants (up to sign and a power of two) are made
once and shared by every neuron that needs them, and the constants of one input are built
from each other where one adder does it (``21x = 5x + (x << 4)`` once ``5x`` exists).

The graph is pure Python (no Amaranth): the hardware template builds one adder per
:class:`Node` and reads its resource estimate and pipeline schedule from the same graph,
and :meth:`AdderGraph.evaluate` is the graph's own bit-exact model for tests.

Values travel as :class:`Term` ``±(node << shift)``: shifts and signs cost nothing until an
adder combines two terms, and every adder is kept in the form ``A ± (B << s)`` with ``A``
positive and unshifted, whose low ``s`` bits are ``A``'s (only the high part is an adder).
Node value ranges are exact for products of one input (tracked as a coefficient of it) and
for sums of distinct inputs; otherwise they are safe interval bounds.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

__all__ = ["csd", "csd_weight", "Term", "Node", "AdderGraph"]


def csd(n: int) -> list[tuple[int, int]]:
    """The canonical signed digits of integer ``n``: ``(shift, ±1)`` pairs, lowest first,
    no two adjacent, with ``n == sum(d << k)``; the fewest nonzero digits of any
    signed-binary form (the non-adjacent form)."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError(f"CSD takes an integer, not {n!r}")
    n, digits, k = int(n), [], 0
    while n:
        if n & 1:
            d = 2 - (n & 3)          # +1 when n = 1 (mod 4), -1 when n = 3 (mod 4)
            digits.append((k, d))
            n -= d
        n >>= 1
        k += 1
    return digits


def csd_weight(n: int) -> int:
    """Nonzero CSD digits of ``n``: one more than the adders a lone ``n * x`` needs."""
    return len(csd(n))


def _odd_part(n: int) -> tuple[int, int]:
    """``(m, k)`` with ``n == m << k`` and ``m`` odd (``n`` nonzero)."""
    k = (n & -n).bit_length() - 1
    return n >> k, k


@dataclass(frozen=True)
class Term:
    """The value ``-(node << shift)`` when ``neg``, else ``node << shift``."""

    node: int
    shift: int = 0
    neg: bool = False

    def __neg__(self) -> "Term":
        return Term(self.node, self.shift, not self.neg)

    def shifted(self, k: int) -> "Term":
        return Term(self.node, self.shift + k, self.neg)


@dataclass(frozen=True)
class Node:
    """One value of the graph.

    ``op`` is ``"input"`` (a lane of the layer's input), ``"const"`` (``value``), ``"add"``
    (the sum of its two ``operands``) or ``"extern"`` (an operation the template defines,
    described by ``info``, over its ``operands``). ``lo``/``hi`` bound the value; ``depth``
    counts logic levels from the inputs (an adder is one, an extern ``info.levels``).
    ``scale`` is ``(input node, coefficient)`` when the value is that multiple of one input.
    """

    op: str
    lo: int
    hi: int
    depth: int = 0
    operands: tuple = ()
    value: int | None = None
    info: object = None
    scale: tuple | None = None

    @property
    def signed(self) -> bool:
        return self.lo < 0

    @property
    def bits(self) -> int:
        """Bits of the narrowest two's complement (or unsigned) word holding the range."""
        if self.lo < 0:
            return max((-self.lo - 1).bit_length(), self.hi.bit_length()) + 1
        return max(1, self.hi.bit_length())


def _term_range(node: Node, t: Term) -> tuple[int, int]:
    lo, hi = node.lo << t.shift, node.hi << t.shift
    return (-hi, -lo) if t.neg else (lo, hi)


@dataclass
class AdderGraph:
    """Nodes in creation order (operands always come first)."""

    nodes: list = field(default_factory=list)
    _consts: dict = field(default_factory=dict, repr=False)
    _sums: dict = field(default_factory=dict, repr=False)     # (a, b) -> the adder node

    def new_scope(self):
        """Sums made from now on are shared only with each other, not with those before
        (a cluster of neurons built apart from the rest, see ``qloom.hw.unrolled``)."""
        self._sums = {}

    def _new(self, node: Node) -> Term:
        self.nodes.append(node)
        return Term(len(self.nodes) - 1)

    def input(self, lo: int, hi: int) -> Term:
        """A new input lane carrying values in ``[lo, hi]``."""
        index = len(self.nodes)
        return self._new(Node("input", int(lo), int(hi), scale=(index, 1)))

    def const(self, value: int) -> Term:
        """A constant; nonzero constants are kept odd and shifted (one node per value)."""
        value = int(value)
        m, k = _odd_part(abs(value)) if value else (0, 0)
        if m not in self._consts:
            self._consts[m] = self._new(Node("const", m, m, value=m)).node
        return Term(self._consts[m], k, value < 0)

    def extern(self, info, operands: tuple, lo: int, hi: int) -> Term:
        """A node the template implements (``info.levels`` deep, see :class:`Node`)."""
        depth = max((self.nodes[t.node].depth for t in operands), default=0) + info.levels
        # Its value is a variable of its own for the ranges of products of it.
        return self._new(Node("extern", int(lo), int(hi), depth, tuple(operands), info=info,
                              scale=(len(self.nodes), 1)))

    def range_of(self, t: Term) -> tuple[int, int]:
        return _term_range(self.nodes[t.node], t)

    def add(self, a: Term, b: Term, *, negative_ok: bool = True) -> Term:
        """A term equal to ``a + b``: one adder ``A ± (B << s)`` (``A`` positive and
        unshifted) whose result may come back negated and shifted. With ``negative_ok``
        false the result is never negated: a difference whose positive side is the
        shifted one becomes one full-width subtraction, two negatives an adder and a
        negation."""
        k = min(a.shift, b.shift)
        a, b = Term(a.node, a.shift - k, a.neg), Term(b.node, b.shift - k, b.neg)
        if b.shift == 0 and (a.shift != 0 or (a.neg and not b.neg)):
            a, b = b, a                         # prefer A unshifted and positive
        outer = False
        if a.neg and b.neg:
            a, b, outer = -a, -b, True
        elif a.neg:                             # -A + (B << s): negate to A - (B << s)
            if negative_ok:
                a, b, outer = -a, -b, True
            else:
                a, b = b, a                     # (B << s) - A, full width
        term = Term(self._sum(a, b).node, k, outer)
        if outer and not negative_ok:
            term = Term(self.negate(Term(term.node)).node, k)
        return term

    def _sum(self, a: Term, b: Term) -> Term:
        """The adder node ``a + b``, made once: sums that recur (the same two terms in
        several neurons) share it."""
        if a.shift == b.shift == 0 and not a.neg and not b.neg and b.node < a.node:
            a, b = b, a
        if (a, b) not in self._sums:
            self._sums[(a, b)] = self._make_sum(a, b)
        return self._sums[(a, b)]

    def _make_sum(self, a: Term, b: Term) -> Term:
        na, nb = self.nodes[a.node], self.nodes[b.node]
        (alo, ahi), (blo, bhi) = _term_range(na, a), _term_range(nb, b)
        lo, hi = alo + blo, ahi + bhi
        scale = None
        if na.scale and nb.scale and na.scale[0] == nb.scale[0]:
            coef = ((-1) ** a.neg * (na.scale[1] << a.shift)
                    + (-1) ** b.neg * (nb.scale[1] << b.shift))
            base = self.nodes[na.scale[0]]
            lo, hi = sorted((coef * base.lo, coef * base.hi))
            scale = (na.scale[0], coef)
        depth = max(n.depth for n in (na, nb) if n.op != "const") + 1 \
            if na.op != "const" or nb.op != "const" else 0
        return self._new(Node("add", lo, hi, depth, (a, b), scale=scale))

    def negate(self, t: Term) -> Term:
        """``-t`` as hardware: ``0 - t`` (an adder), for a result that must be positive."""
        zero = self.const(0)
        return self._sum(zero, -Term(t.node, t.shift, t.neg))

    def products(self, x: Term, constants) -> dict:
        """Terms for ``c * x`` for each nonzero integer ``c`` of ``constants``, sharing
        every odd multiple of ``x`` among constants equal up to sign and a power of two,
        and building each odd multiple with one adder from two built ones where it can
        (shallowest first), else from its CSD digits one adder at a time."""
        built = {1: x}
        odd = sorted({_odd_part(abs(int(c)))[0] for c in constants if c},
                     key=lambda m: (csd_weight(m), m))
        for m in odd:
            self._multiple(m, built, x)
        result = {}
        for c in set(int(c) for c in constants if c):
            m, k = _odd_part(abs(c))
            t = built[m].shifted(k)
            result[c] = -t if c < 0 else t
        return result

    def _one_adder(self, m: int, built: dict):
        """Two built multiples giving ``m`` with one adder, the shallowest such pair."""
        best = None
        for u, tu in built.items():
            # m = u + v << i, m = v << i - u, m = u - v << i (v odd, i >= 1)
            for r, form in ((m - u, "+"), (m + u, "-u"), (u - m, "-v")):
                if r <= 0:
                    continue
                v, i = _odd_part(r)
                if i == 0 or v not in built:
                    continue
                tv = built[v]
                depth = max(self.nodes[tu.node].depth, self.nodes[tv.node].depth)
                if best is None or depth < best[0]:
                    best = (depth, tu, tv.shifted(i), form)
        return best

    def _multiple(self, m: int, built: dict, x: Term) -> Term:
        if m in built:
            return built[m]
        found = self._one_adder(m, built)
        if found is None:
            # Split off the top CSD digit: m = rest ± 2**k with rest odd, built first.
            digits = csd(m)
            k, d = digits[-1]
            rest = m - d * (1 << k)
            self._multiple(abs(rest), built, x)
            found = self._one_adder(m, built)
        _, tu, tv, form = found
        if form == "+":
            t = self.add(tu, tv)
        elif form == "-u":
            t = self.add(-tu, tv)
        else:
            t = self.add(tu, -tv)
        built[m] = t
        return t

    def dot(self, terms, *, negative_ok: bool = False, positional: bool = False) -> Term:
        """The sum of ``terms`` as a tree of adders, always joining the two shallowest
        (then narrowest) terms first, so that products arriving late from deep adder chains
        meet the rest of the sum without lengthening the longest path. ``positional``
        joins equally deep terms in the order given instead (neurons whose terms come
        in the same order then share the sums of equal pairs). An empty sum is the
        constant 0; with ``negative_ok`` false the result is never negated."""
        terms = list(terms)
        if not terms:
            return self.const(0)
        if positional:
            # A constant joins after the terms of the first level, not first.
            last = max(self._key(t)[0] for t in terms)

            def key(t):
                depth = self._key(t)[0]
                return (last if depth < 0 else depth,)
        else:
            key = self._key
        heap = [(key(t), n, t) for n, t in enumerate(terms)]
        heapq.heapify(heap)
        count = len(heap)
        while len(heap) > 1:
            _, _, a = heapq.heappop(heap)
            _, _, b = heapq.heappop(heap)
            t = self.add(a, b, negative_ok=negative_ok or len(heap) > 0)
            heapq.heappush(heap, (key(t), count, t))
            count += 1
        t = heap[0][2]
        if t.neg and not negative_ok:
            t = Term(self.negate(Term(t.node)).node, t.shift)
        return t

    def _key(self, t: Term):
        node = self.nodes[t.node]
        return (node.depth if node.op != "const" else -1, node.bits + t.shift)

    def evaluate(self, inputs: dict, terms) -> list:
        """The values of ``terms`` (numpy int64 arrays) for input node values ``inputs``
        (node index -> array); extern nodes evaluate with ``info.evaluate(*operands)``."""
        values = {}
        needed = self._needed(terms)
        for index in sorted(needed):
            node = self.nodes[index]
            if node.op == "input":
                values[index] = np.asarray(inputs[index], dtype=np.int64)
            elif node.op == "const":
                values[index] = np.int64(node.value)
            else:
                ops = [self._term_value(values, t) for t in node.operands]
                values[index] = ops[0] + ops[1] if node.op == "add" else \
                    node.info.evaluate(*ops)
        return [self._term_value(values, t) for t in terms]

    def _needed(self, terms) -> set:
        needed, stack = set(), [t.node for t in terms]
        while stack:
            index = stack.pop()
            if index not in needed:
                needed.add(index)
                stack += [t.node for t in self.nodes[index].operands]
        return needed

    @staticmethod
    def _term_value(values, t: Term):
        v = values[t.node] << t.shift
        return -v if t.neg else v
