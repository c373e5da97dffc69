"""Sums shared across neurons on the weights' signed digits (``qloom.hw.digit_cse``)."""

import numpy as np
import pytest

from qloom.hw.csd import AdderGraph, csd
from qloom.hw.digit_cse import shared_digit_terms


def _build(w, lo=-128, hi=127, block=64, max_depth=None):
    g = AdderGraph()
    codes = [g.input(lo, hi) for _ in range(w.shape[1])]
    outs = [g.dot(terms, negative_ok=True)
            for terms in shared_digit_terms(g, codes, w, block, max_depth)]
    return g, codes, outs


def _adders(g, outs):
    return sum(g.nodes[n].op == "add" for n in g._needed(outs))


@pytest.mark.parametrize("shape, block", [((12, 9), 64), ((7, 40), 16), ((1, 5), 64)])
def test_sums_equal_the_matrix_product(shape, block):
    rng = np.random.default_rng(sum(shape) + block)
    w = rng.integers(-63, 64, size=shape) * (rng.random(shape) < 0.8)
    g, codes, outs = _build(w, block=block)
    x = rng.integers(-128, 128, size=(200, shape[1]))
    got = np.stack(g.evaluate({t.node: x[:, j] for j, t in enumerate(codes)}, outs), axis=1)
    assert np.array_equal(got, x @ w.T)


def test_a_recurring_pair_is_one_adder():
    """Eight neurons all ``3 x0 - 5 x1`` at different scales: 3x0 - 5x1 once (x0 + 2x0, then
    minus x1 and 4x1 by two recurring patterns) and nothing per neuron."""
    w = np.array([[3, -5]]) * np.array([[1], [2], [4], [-8], [16], [-1], [2], [1]])
    g, codes, outs = _build(w)
    assert _adders(g, outs) == 3
    # Without anything to share, one adder per digit beyond the first.
    w1 = np.array([[3, -5]])
    g1, _, outs1 = _build(w1)
    assert _adders(g1, outs1) == sum(len(csd(int(c))) for c in w1[0]) - 1


def test_sharing_saves_adders_over_digit_trees():
    rng = np.random.default_rng(3)
    w = rng.integers(-31, 32, size=(32, 16))
    g, _, outs = _build(w)
    digits = sum(max(sum(len(csd(int(c))) for c in row) - 1, 0) for row in w)
    assert _adders(g, outs) < 0.85 * digits


def test_shared_sums_stay_within_the_depth_limit():
    """13 x0 + c x1 over eight neurons: unbounded, 13x0 + 4x1 and 13x0 + 8x1 are shared
    (three adders deep); at depth 2 they are not, and every sum is still exact."""
    w = np.stack([np.full(8, 13), [1, 2, 4, -8, 3, 5, 7, 9]], axis=1)
    x = np.random.default_rng(1).integers(0, 16, size=(40, 2))
    counts = {}
    for depth in (None, 2):
        g, codes, outs = _build(w, 0, 15, max_depth=depth)
        got = g.evaluate({t.node: x[:, j] for j, t in enumerate(codes)}, outs)
        assert np.array_equal(np.stack(got, axis=1), x @ w.T)
        shared = [n for n in g._needed(outs) if g.nodes[n].op == "add"]
        counts[depth] = len(shared)
        if depth is not None:
            assert max(g.nodes[n].depth for n in shared) <= 3     # 2 shared + the tree's
    assert counts == {None: 11, 2: 14}
