"""Which neurons of an unrolled layer share adders (``qloom.hw.unrolled``): clusters of
neurons alike in their weights, and the LUT4 cost of one adder that both the clustering
and the layer's estimate count."""

from __future__ import annotations

import numpy as np

from .compressor import chain_luts
from .csd import AdderGraph, Node

__all__ = ["cluster_groups", "add_luts", "passthrough"]


def passthrough(g: AdderGraph, node: Node) -> int:
    """Low bits of adder ``node`` = A ± (B << s) that are A's own (``s`` when A is
    positive, unshifted and wider than ``s``), outside its carry chain."""
    a, b = node.operands
    if a.shift == 0 and not a.neg and b.shift > 0 and g.nodes[a.node].bits > b.shift:
        return b.shift
    return 0


def add_luts(g: AdderGraph, node: Node) -> int:
    """LUT4s of one adder (its bits outside the passthrough; see ``chain_luts``)."""
    return chain_luts(node.bits - passthrough(g, node))


def _proportional(w, a: int, b: int) -> list:
    """The inputs (two or more) where neuron ``a``'s weights are ``b``'s times the same
    ``±2**k`` or the reverse, per ratio: ``[((negative, k, a's the larger), inputs)]``."""
    classes = {}
    for j in range(w.shape[1]):
        wa, wb = int(w[a, j]), int(w[b, j])
        if not wa or not wb:
            continue
        big, small = max(abs(wa), abs(wb)), min(abs(wa), abs(wb))
        if big % small or (big // small) & (big // small - 1):
            continue
        key = ((wa < 0) != (wb < 0), (big // small).bit_length() - 1, abs(wa) > abs(wb))
        classes.setdefault(key, []).append(j)
    return [(key, inputs) for key, inputs in sorted(classes.items()) if len(inputs) > 1]


def cluster_groups(weights: np.ndarray, size: int, inputs: list,
                   proportional: bool = True) -> list[tuple]:
    """The neurons (rows of ``weights``) grouped into clusters of ``size`` (the last one
    may be smaller) that share the most product adders, counted as one product per input
    and distinct odd weight (``AdderGraph.products``: neurons whose weights on an input
    have the same odd part, up to sign and a power of two, share it), a measure of how
    much the cluster's sums on signed digits (``digit_cse``) can share. Greedy:
    size 2 takes the pairs of largest saving first; larger sizes grow each cluster from
    the first neuron left by the neuron that adds the fewest adders; with ``proportional``
    a pair also counts the adders of the sums over the inputs where one's weights are the
    other's times the same ``±2**k`` (which ``digit_cse`` shares). ``inputs``:
    the input nodes (their ranges set the products' widths)."""
    mh, mw = weights.shape
    costs = {}

    def cost(j: int, constants) -> int:
        """LUT4s of the products of input ``j`` by ``constants`` (their odd parts)."""
        key = (inputs[j].lo, inputs[j].hi, frozenset(
            abs(int(c)) >> ((int(c) & -int(c)).bit_length() - 1) for c in constants if c))
        if key not in costs:
            g = AdderGraph()
            g.products(g.input(key[0], key[1]), sorted(key[2]))
            costs[key] = sum(add_luts(g, n) for n in g.nodes if n.op == "add")
        return costs[key]

    def added(group, h) -> int:
        """Product LUT4s that neuron ``h`` adds to ``group``."""
        return sum(cost(j, [weights[k, j] for k in group] + [weights[h, j]])
                   - cost(j, [weights[k, j] for k in group]) for j in range(mw))

    def sums(a, b) -> int:
        """LUT4s of the adders the pair's proportional weights save, each about as wide
        as its input times the smaller weight."""
        if not proportional:
            return 0
        small = np.minimum(np.abs(weights[a]), np.abs(weights[b]))
        return sum(chain_luts(max(1, inputs[j].bits + int(small[j]).bit_length() - 1))
                   for _, js in _proportional(weights, a, b) for j in js[1:])

    free = list(range(mh))
    if size == 2:
        alone = [added((), h) for h in range(mh)]
        pairs = sorted(((alone[b] - added((a,), b) + sums(a, b), a, b) for a in range(mh)
                        for b in range(a + 1, mh)), key=lambda p: (-p[0], p[1], p[2]))
        taken, groups = set(), []
        for _, a, b in pairs:
            if a not in taken and b not in taken:
                taken |= {a, b}
                groups.append((a, b))
        groups += [(h,) for h in free if h not in taken]
        return sorted(groups)
    groups = []
    while free:
        group = [free.pop(0)]
        while free and len(group) < size:
            best = min(free, key=lambda h: (added(group, h), h))
            free.remove(best)
            group.append(best)
        groups.append(tuple(group))
    return groups
