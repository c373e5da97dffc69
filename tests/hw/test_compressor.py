# amaranth: UnusedElaboratable=no
"""Popcount compressor trees (qloom.hw.compressor): the graph's sums against numpy for
binary, ternary and sparse weights; packed carry chains as built (one addition per chain,
segments that never carry into each other); hardware bit exact under backpressure; and
the cost the tree is there for (under one chain position per synapse)."""

import inspect
import re

import numpy as np
import pytest
from amaranth.back import rtlil
from amaranth.hdl import Cat, Module, Signal, signed, unsigned
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st

from qloom.hw import compressor
from qloom.hw.compressor import _ChainOp, popcount_terms
from qloom.hw.csd import AdderGraph
from qloom.hw.threshold import ThresholdSpec
from qloom.hw.unrolled import UnrolledChain, UnrolledDesign, UnrolledLayer
from qloom.nn.dtypes import BIPOLAR, TERNARY, int_type, uint_type
from qloom.sim.pysim import run_stream


def _graph_sums(u, bits, signed_lanes=()):
    """``u @ values`` through the popcount graph (lanes in ``signed_lanes`` carry -b)."""
    g = AdderGraph()
    codes = [g.input(-1, 0) if j in signed_lanes else g.input(0, 1) for j in range(u.shape[1])]
    sign = np.array([-1 if j in signed_lanes else 1 for j in range(u.shape[1])])
    found = popcount_terms(g, codes, u * sign)
    assert found is not None
    values = bits * sign
    out = g.evaluate({t.node: values[:, j] for j, t in enumerate(codes)},
                     [t for t, _ in found])
    got = np.stack([np.broadcast_to(v, bits.shape[:1]) + off
                    for v, (_, off) in zip(out, found)], axis=-1)
    return g, got


def _check_dot_product(mh, mw, m, sparsity, seed):
    rng = np.random.default_rng(seed)
    u = m * rng.choice([-1, 1], size=(mh, mw)) * (rng.random((mh, mw)) >= sparsity)
    bits = rng.integers(0, 2, size=(16, mw))
    signed = set(rng.choice(mw, size=mw // 3, replace=False).tolist())
    _, got = _graph_sums(u, bits, signed)
    values = bits * np.array([-1 if j in signed else 1 for j in range(mw)])
    np.testing.assert_array_equal(got, values @ u.T)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 40), st.sampled_from([1, 2, 4]),
       st.floats(0, 0.8), st.integers(0, 2**32 - 1))
def test_popcount_graph_equals_the_dot_product(mh, mw, m, sparsity, seed):
    _check_dot_product(mh, mw, m, sparsity, seed)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 9), st.integers(2, 40), st.sampled_from([1, 2]),
       st.floats(0, 0.6), st.integers(0, 2**32 - 1))
def test_mesh_graph_equals_the_dot_product(mh, mw, m, sparsity, seed):
    """The same sums built as a mesh of blocks of 3 neurons by 9 inputs, in at most two
    columns (more neurons per column beyond six)."""
    with pytest.MonkeyPatch.context() as mp:
        for name, value in (("MESH_MIN", 0), ("BLOCK_NEURONS", 3), ("BLOCK_INPUTS", 9),
                            ("DIFFERENCE_MIN", 4), ("MESH_COLUMNS", 2)):
            mp.setattr(compressor, name, value)
        _check_dot_product(mh, mw, m, sparsity, seed)


def test_extreme_inputs_and_zero_rows():
    """All ones and all zeros (every segment at its maximum: no carry may cross into the
    next segment of a chain); a neuron without weights is 0."""
    rng = np.random.default_rng(1)
    u = rng.choice([-1, 1], size=(7, 64))
    u[3] = 0
    bits = np.array([[1] * 64, [0] * 64, [1, 0] * 32])
    _, got = _graph_sums(u, bits)
    np.testing.assert_array_equal(got, bits @ u.T)
    _, got = _graph_sums(np.abs(u), bits)                   # all positive: sums reach 64
    np.testing.assert_array_equal(got, bits @ np.abs(u).T)


def test_other_weights_are_left_to_lookup_tables():
    g = AdderGraph()
    codes = [g.input(0, 1) for _ in range(3)]
    assert popcount_terms(g, codes, np.array([[1, -2, 1]])) is None    # mixed magnitudes
    assert popcount_terms(g, codes, np.array([[3, -3, 0]])) is None    # not a power of two


def test_chain_segments_keep_their_carries():
    """Three segments side by side: each top position holds the next segment's carry-in
    in both addends, so every segment sums exactly, at its maximum too."""
    op = _ChainOp([(2, 2, True, 3), (3, 3, True, 4), (1, 1, False, 2)])
    assert op.offsets == [0, 3, 7] and op.positions == 9 and op.luts == 10
    for a0, b0, r0, a1, b1, r1, a2, b2 in [(3, 3, 1, 7, 7, 1, 1, 1), (0, 0, 0, 0, 0, 0, 0, 0),
                                           (3, 2, 0, 5, 7, 1, 1, 0)]:
        v = int(op.evaluate(a0, b0, r0, a1, b1, r1, a2, b2))
        assert [(v >> o) & ((1 << w) - 1) for o, w in ((0, 3), (3, 4), (7, 2))] == \
            [a0 + b0 + r0, a1 + b1 + r1, a2 + b2]


def _binary_layer(rng, mh, mw, post=True, w_type=BIPOLAR, in_type=BIPOLAR):
    if w_type == TERNARY:
        w = rng.integers(-1, 2, size=(mh, mw))
    else:
        w = rng.choice([-1, 1], size=(mh, mw))
    spec = None
    if post:
        t = rng.integers(-mw // 4, mw // 4 + 1, size=(mh, 1))
        spec = ThresholdSpec(thresholds=t, bias=np.zeros(mh, dtype=int),
                             sign=np.ones(mh, dtype=int), out_type=BIPOLAR)
    return UnrolledLayer(w, w_type, in_type, spec)


def _values(layer, x):
    """Reference: the dense sum and its threshold, as codes of the output type."""
    v = (2 * x - 1) if layer.in_type.bipolar else x
    acc = v @ layer.weights.T
    if layer.post is None:
        return acc
    return (acc >= layer.post.thresholds[:, 0]).astype(int)


@pytest.mark.parametrize("w_type, in_type", [(BIPOLAR, BIPOLAR), (TERNARY, uint_type(1))])
def test_hardware_bit_exact_under_backpressure(w_type, in_type):
    rng = np.random.default_rng(2)
    layers = [_binary_layer(rng, 12, 40, w_type=w_type, in_type=in_type),
              _binary_layer(rng, 5, 12, post=False)]
    dut = UnrolledChain(layers=layers, levels_per_stage=2)
    x = rng.integers(0, 2, size=(30, 40))
    want = _values(layers[1], _values(layers[0], x))
    run = run_stream(dut, [list(map(int, r)) for r in x], len(x), in_stall=0.3,
                     out_stall=0.3, seed=5)
    np.testing.assert_array_equal(np.array(run.outputs), want)
    np.testing.assert_array_equal(dut.design.evaluate(x), want)


def test_chains_in_the_rtlil_are_the_estimates():
    """One addition per packed chain in the emitted RTLIL, as many as the estimate
    counts, each as wide as its positions."""
    rng = np.random.default_rng(3)
    dut = UnrolledChain(layers=[_binary_layer(rng, 16, 64)], levels_per_stage=3)
    g = dut.design.graph
    chains = [g.nodes[n].info for n in dut.design.stage
              if isinstance(g.nodes[n].info, _ChainOp)]
    text = rtlil.convert(dut)
    lines, start = inspect.getsourcelines(_ChainOp.build)
    span = range(start, start + len(lines))
    adds = [int(w) for line, w in re.findall(
        r'attribute \\src "[^"]*compressor\.py:(\d+)"\s+cell \$add \S+\s+'
        r'(?:parameter \\\w+ \S+\s+)*?parameter \\Y_WIDTH (\d+)', text) if int(line) in span]
    # a + b, then + carry-in: two $add cells per chain before Yosys merges them.
    assert len(adds) == 2 * len(chains)
    assert max(op.positions for op in chains) <= compressor.CHAIN_POSITIONS


def test_under_one_chain_position_per_synapse(monkeypatch):
    """A 64x64 binary layer: carry-chain positions under 0.9 per synapse with every input
    counted (tables shared by pattern, at most 8 per group of three), under 0.55 in
    difference form (each neuron counts its smaller sign set, about half the inputs, and
    subtracts twice that from the popcount of all of them), no chain narrower than a full
    cell."""
    def build():
        d = UnrolledDesign([_binary_layer(np.random.default_rng(4), 64, 64, post=False)], 4)
        g = d.graph
        infos = [g.nodes[n].info for n in d.stage if g.nodes[n].op == "extern"]
        chains = [i for i in infos if isinstance(i, _ChainOp)]
        assert all(c.positions >= 5 for c in chains[:-1])
        tables = [i for i in infos if type(i).__name__ == "_TableOp"]
        return d.counts()["adders"], sum(c.positions for c in chains), tables

    adders, positions, _ = build()
    assert positions < 0.55 * 64 * 64
    monkeypatch.setattr(compressor, "DIFFERENCE_MIN", 10**9)
    plain_adders, plain_positions, tables = build()
    assert len(tables) <= 8 * -(-64 // compressor.GROUP)
    assert plain_positions < 0.9 * 64 * 64
    assert adders <= plain_adders + 64             # P - 2Q or 2Q - P, one per neuron


@pytest.mark.parametrize("shape", [unsigned(3), unsigned(7), signed(6), unsigned(10)])
def test_ge_constant_against_every_value_and_threshold(shape):
    """The LUT ripple compare, for every input value and every threshold from below the
    range to above it."""
    lo, hi = (-(1 << (shape.width - 1)), (1 << (shape.width - 1)) - 1) if shape.signed \
        else (0, (1 << shape.width) - 1)
    thresholds = list(range(lo - 1, hi + 3, max(1, (hi - lo) // 40)))
    m = Module()
    v = Signal(shape)
    outs = Signal(len(thresholds))
    m.d.comb += outs.eq(Cat(*[compressor.ge_constant(m, v, t, f"c{k}")
                              for k, t in enumerate(thresholds)]))
    sim = Simulator(m)

    async def bench(ctx):
        for x in range(lo, hi + 1):
            ctx.set(v, x)
            got = ctx.get(outs)
            assert [(got >> k) & 1 for k in range(len(thresholds))] == \
                [int(x >= t) for t in thresholds], x

    sim.add_testbench(bench)
    sim.run()
    assert compressor.ge_constant_luts(7) == 2 and compressor.ge_constant_luts(10) == 3


def test_mesh_blocks_read_their_own_column(monkeypatch):
    """A 24x60 layer as a mesh of 8-neuron columns and 20-input slices: each column reads
    the inputs one hop (a register stage) after the column before it, every table and
    carry-in of a column reads its own column's lanes only, and the hardware is bit exact
    under backpressure."""
    for name, value in (("MESH_MIN", 0), ("BLOCK_NEURONS", 8), ("BLOCK_INPUTS", 20)):
        monkeypatch.setattr(compressor, name, value)
    rng = np.random.default_rng(6)
    layers = [_binary_layer(rng, 24, 60), _binary_layer(rng, 5, 24, post=False)]
    dut = UnrolledChain(layers=layers, levels_per_stage=2)
    d = dut.design
    g = d.graph
    hop = {}                                    # node -> its column (inputs: 0)
    for t in d.inputs:
        hop[t.node] = 0
    for n, node in enumerate(g.nodes):
        if isinstance(node.info, compressor._HopOp):
            (t,) = node.operands
            hop[n] = hop[t.node] + 1
            assert d.stage[n] == d.stage.get(t.node, 0) + 1
    assert sum(1 for c in hop.values() if c) == 60 * 2        # three columns
    for n in d.stage:
        node = g.nodes[n]
        if isinstance(node.info, (compressor._TableOp, compressor._NotOp)):
            read = {hop[t.node] for t in node.operands if t.node in hop}
            assert len(read) <= 1
    x = rng.integers(0, 2, size=(30, 60))
    want = _values(layers[1], _values(layers[0], x))
    run = run_stream(dut, [list(map(int, r)) for r in x], len(x), in_stall=0.3,
                     out_stall=0.3, seed=7)
    np.testing.assert_array_equal(np.array(run.outputs), want)
    np.testing.assert_array_equal(d.evaluate(x), want)


def test_mesh_columns_are_capped(monkeypatch):
    """A layer of many neurons keeps at most MESH_COLUMNS columns (each a hop, a stage,
    later than the one before): 200 neurons in 8 columns, inputs seven hops deep."""
    monkeypatch.setattr(compressor, "MESH_MIN", 0)
    rng = np.random.default_rng(8)
    d = UnrolledDesign([_binary_layer(rng, 200, 30)], 2)
    hops = [n for n in d.stage if isinstance(d.graph.nodes[n].info, compressor._HopOp)]
    assert len(hops) == 30 * (compressor.MESH_COLUMNS - 1)
    x = rng.integers(0, 2, size=(20, 30))
    np.testing.assert_array_equal(d.evaluate(x), _values(d.layers[0], x))
