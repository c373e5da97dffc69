"""Canonical signed digits and constant-multiplication adder graphs, against plain integer
arithmetic (property tests: every product equals ``c * x``, every sum the dot product)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from qloom.hw.csd import AdderGraph, csd, csd_weight

ints = st.integers(min_value=-(1 << 40), max_value=1 << 40)


@given(ints)
def test_csd_digits_sum_to_n_and_are_non_adjacent(n):
    digits = csd(n)
    assert sum(d << k for k, d in digits) == n
    shifts = [k for k, _ in digits]
    assert all(b - a >= 2 for a, b in zip(shifts, shifts[1:])), digits
    assert all(d in (1, -1) for _, d in digits)


@given(st.integers(min_value=1, max_value=1 << 20))
def test_csd_is_no_heavier_than_binary(n):
    assert csd_weight(n) <= bin(n).count("1")


@pytest.mark.parametrize("n, weight", [(0, 0), (1, 1), (7, 2), (15, 2), (21, 3), (-3, 2),
                                       (32, 1)])
def test_csd_weights(n, weight):
    assert csd_weight(n) == weight


def test_csd_refuses_non_integers():
    with pytest.raises(TypeError, match=r"CSD takes an integer, not 1.5"):
        csd(1.5)


def _check_range(g, term, values):
    lo, hi = g.range_of(term)
    assert lo <= values.min() and values.max() <= hi


@settings(max_examples=60, deadline=None)
@given(consts=st.lists(st.integers(min_value=-300, max_value=300), min_size=1, max_size=24),
       lo=st.integers(min_value=-1000, max_value=0), span=st.integers(min_value=0, max_value=2000))
def test_products_equal_constant_times_input(consts, lo, span):
    g = AdderGraph()
    x = g.input(lo, lo + span)
    products = g.products(x, consts)
    xs = np.arange(lo, lo + span + 1, dtype=np.int64)
    nonzero = sorted({c for c in consts if c})
    values = g.evaluate({x.node: xs}, [products[c] for c in nonzero])
    for c, v in zip(nonzero, values):
        np.testing.assert_array_equal(v, c * xs)
        _check_range(g, products[c], v)
        # A product of one input by a constant: its range is exact.
        assert g.range_of(products[c]) == tuple(sorted((c * lo, c * (lo + span))))
    assert 0 not in products


@settings(max_examples=30, deadline=None)
@given(consts=st.lists(st.integers(min_value=-64, max_value=63), min_size=1, max_size=30))
def test_equal_odd_parts_share_one_node(consts):
    g = AdderGraph()
    x = g.input(0, 255)
    products = g.products(x, consts)
    by_odd = {}
    for c, t in products.items():
        odd = abs(c) >> ((abs(c) & -abs(c)).bit_length() - 1)
        by_odd.setdefault(odd, set()).add(t.node)
    assert all(len(nodes) == 1 for nodes in by_odd.values())
    # Each odd multiple costs at most one adder once its parts exist: never more adders
    # than nonzero CSD digits beyond the first, summed over the distinct odd constants.
    adders = sum(1 for n in g.nodes if n.op == "add")
    assert adders <= sum(csd_weight(o) - 1 for o in by_odd)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_dot_products_equal_matrix_product(data):
    mh = data.draw(st.integers(1, 6))
    mw = data.draw(st.integers(1, 8))
    w = np.array(data.draw(st.lists(st.integers(-40, 40), min_size=mh * mw,
                                    max_size=mh * mw))).reshape(mh, mw)
    bias = data.draw(st.lists(st.integers(-500, 500), min_size=mh, max_size=mh))
    lo = data.draw(st.integers(-20, 5))
    g = AdderGraph()
    xs = [g.input(lo, lo + 30) for _ in range(mw)]
    products = [g.products(xs[j], w[:, j]) for j in range(mw)]
    outs = []
    for h in range(mh):
        terms = [products[j][int(w[h, j])] for j in range(mw) if w[h, j]]
        if bias[h]:
            terms.append(g.const(bias[h]))
        outs.append(g.dot(terms))
    assert not any(t.neg for t in outs), "a sum is never left negated"
    rng = np.random.default_rng(0)
    x = rng.integers(lo, lo + 31, size=(50, mw))
    values = g.evaluate({t.node: x[:, j] for j, t in enumerate(xs)}, outs)
    want = x @ w.T + np.array(bias)
    for h, v in enumerate(values):
        np.testing.assert_array_equal(np.broadcast_to(v, (50,)), want[:, h])
        if g.nodes[outs[h].node].op != "const":
            _check_range(g, outs[h], np.asarray(v))


def test_adders_keep_the_unshifted_operand_first():
    """Every adder is A ± (B << s) with A positive and unshifted (only the high part of it
    is a carry chain), except the full-width subtraction that keeps a result positive."""
    g = AdderGraph()
    x = g.input(-100, 100)
    for c in range(-70, 71):
        g.products(x, [c])
    for node in g.nodes:
        if node.op == "add":
            a, b = node.operands
            assert a.shift == 0 or b.shift == 0
            assert not (a.neg and b.neg)


def test_dot_joins_shallow_terms_first():
    """A deep product meets the sum of the shallow ones last: the tree adds one level."""
    g = AdderGraph()
    xs = [g.input(0, 15) for _ in range(8)]
    deep = g.products(xs[0], [0b1010101010101])[0b1010101010101]
    shallow = [xs[j] for j in range(1, 8)]
    depth_deep = g.nodes[deep.node].depth
    total = g.dot(shallow + [deep])
    assert g.nodes[total.node].depth == max(depth_deep, 3) + 1
