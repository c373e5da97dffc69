"""Sums shared across the neurons of a constant-weight layer, found on the weights' signed
digits (common subexpression elimination over a whole matrix).

Every weight ``w[h, j]`` is its canonical signed digits, so neuron ``h`` is a sum of
signed, shifted inputs ``±(x_j << k)``. A *pattern* is two such digits with a fixed
offset and relative sign, ``x_a ± (x_b << d)``, wherever it occurs (any neuron, any shift
of the pair, ``a == b`` too, which is a product ``(1 ± 2**d) x_a``). The pattern that
occurs most often becomes one adder and a new variable; its occurrences are replaced by
the variable, shifted and signed; the counts are updated and the next pattern taken,
until none occurs twice. Each neuron then adds what is left of its digits as an adder
tree (``AdderGraph.dot``). Patterns may hold variables made before, so the shared sums
grow into trees of their own.

On the jet tagger's four layers, each searched whole with no depth limit, it needed
16-24% fewer adders than products of one input by one constant shared across the layer
(``AdderGraph.products``) and trees over them; the chain at II 1 (clusters of 2) went from
53,437 to 45,260 LUT4s by the estimate, 47,687 to 41,790 in Yosys. It is the classic
greedy method for multiple constant multiplication (Hartley, 1996), which da4ml's
solver also builds on; here a shared sum may be only ``MAX_DEPTH`` adders deep, so that
the sharing does not lengthen the pipeline.
"""

from __future__ import annotations

import heapq
from collections import Counter

import numpy as np

from .csd import AdderGraph, Term, csd

__all__ = ["shared_digit_terms"]


def _key(x: tuple, y: tuple) -> tuple:
    """The pattern of digits ``x = (var, shift, sign)`` and ``y``: ``(a, b, d, s)`` for
    ``x_a + s * (x_b << d)`` (``(a, shift) < (b, shift)``, ``d >= 0``)."""
    if (x[0], x[1]) > (y[0], y[1]):
        x, y = y, x
    return (x[0], y[0], y[1] - x[1], x[2] * y[2])


class _Neuron:
    """One neuron's digits ``{(var, shift): sign}`` and their pattern counts."""

    def __init__(self, digits: dict):
        self.digits = digits
        self.patterns = Counter()
        items = list(digits.items())
        for i, ((va, ka), da) in enumerate(items):
            for (vb, kb), db in items[i + 1:]:
                self.patterns[_key((va, ka, da), (vb, kb, db))] += 1

    def _pairs(self, digit: tuple):
        v, k = digit
        d = self.digits[digit]
        for (u, j), e in self.digits.items():
            if (u, j) != digit:
                yield _key((v, k, d), (u, j, e))

    def remove(self, digit: tuple, total: Counter) -> None:
        for key in self._pairs(digit):
            self.patterns[key] -= 1
            total[key] -= 1
        del self.digits[digit]

    def insert(self, digit: tuple, sign: int, total: Counter) -> list:
        """Add ``sign * (var << shift)``; returns the patterns whose count grew."""
        if digit in self.digits:
            # x + x = x << 1 (or 0): the pair folds into one digit, a free wire.
            other = self.digits[digit]
            self.remove(digit, total)
            if other == sign:
                return self.insert((digit[0], digit[1] + 1), sign, total)
            return []
        self.digits[digit] = sign
        grown = list(self._pairs(digit))
        for key in grown:
            self.patterns[key] += 1
            total[key] += 1
        return grown

    def occurrences(self, key: tuple) -> list:
        """Disjoint pairs of digits matching pattern ``key``: ``[(first, second, sign)]``."""
        a, b, d, s = key
        used, found = set(), []
        for (v, k), sign in sorted(self.digits.items()):
            if v != a or (v, k) in used:
                continue
            other = (b, k + d)
            if other in used or other == (v, k) or self.digits.get(other) != sign * s:
                continue
            used |= {(v, k), other}
            found.append(((v, k), other, sign))
        return found


# Inputs whose digits are searched together. The search counts every pair of a neuron's
# digits, about 4.5 * inputs * neurons * BLOCK pattern updates for weights of three digits:
# a 490x64 layer searched whole took 216 s, in blocks of 64 inputs a few seconds. The jet
# tagger's layers (16 to 64 inputs) are searched whole.
BLOCK = 64
# Adders a shared sum may be deep above the layer's inputs. Unbounded, the search made
# chains of sums of sums: the jet tagger at II 1 (clusters of 2, three levels per stage,
# two after a far read) took 16 pipeline stages instead of 15; at 2 it takes 15, for 1.6%
# more LUT4s (estimate 45,260 against 44,566, and 53,437 without the search).
MAX_DEPTH = 2


def shared_digit_terms(g: AdderGraph, codes: list, weights: np.ndarray,
                       block: int = BLOCK, max_depth: int | None = MAX_DEPTH) -> list:
    """Each neuron's terms (to add with ``g.dot``) for ``weights[MH, MW]`` over input
    terms ``codes``, the sums shared across neurons built in ``g``; the inputs are
    searched in blocks of ``block``, and a shared sum is at most ``max_depth`` adders
    above the deepest input (None: any)."""
    weights = np.asarray(weights)
    out = [[] for _ in range(weights.shape[0])]
    for start in range(0, weights.shape[1], block):
        part = _shared(g, codes[start:start + block], weights[:, start:start + block],
                       max_depth)
        for terms, more in zip(out, part):
            terms += more
    return out


def _shared(g: AdderGraph, codes: list, weights: np.ndarray,
            max_depth: int | None) -> list:
    variables = list(codes)
    neurons = []
    for row in weights:
        digits = {}
        for j, c in enumerate(row):
            for k, d in csd(int(c)):
                digits[(j, k)] = d
        neurons.append(_Neuron(digits))
    base = max((g.nodes[t.node].depth for t in codes), default=0)
    total = Counter()
    for n in neurons:
        total.update(n.patterns)
    # A max-heap of (count, pattern) with stale entries skipped when popped.
    heap = [(-c, key) for key, c in total.items() if c > 1]
    heapq.heapify(heap)
    while heap:
        count, key = heapq.heappop(heap)
        if -count != total[key]:
            if total[key] > 1:
                heapq.heappush(heap, (-total[key], key))
            continue
        if total[key] < 2:
            break
        a, b, d, s = key
        if max_depth is not None and max(g.nodes[variables[a].node].depth,
                                         g.nodes[variables[b].node].depth) >= base + max_depth:
            continue        # too deep: the pattern is left to the neurons' trees
        second = variables[b].shifted(d)
        new = g.add(variables[a], second if s > 0 else -second)
        v = len(variables)
        variables.append(new)
        grown = set()
        for n in neurons:
            if n.patterns[key] <= 0:
                continue
            for first, other, sign in n.occurrences(key):
                n.remove(first, total)
                n.remove(other, total)
                grown.update(n.insert((v, first[1]), sign, total))
        for g_key in grown:
            if total[g_key] > 1:
                heapq.heappush(heap, (-total[g_key], g_key))
        if total[key] > 1:
            heapq.heappush(heap, (-total[key], key))
    out = []
    for n in neurons:
        terms = []
        for (v, k), sign in sorted(n.digits.items()):
            t = variables[v].shifted(k)
            terms.append(t if sign > 0 else -t)
        out.append(terms)
    return out
