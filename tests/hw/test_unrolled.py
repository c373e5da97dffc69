# amaranth: UnusedElaboratable=no
"""Unrolled constant-weight chains against the IR's layer executors, in Amaranth simulation
under backpressure; their schedule (full rate, latency) and their estimate against the
adders and registers actually built."""

import inspect
import re

import numpy as np
import pytest
from amaranth.back import rtlil

from qloom.hw import unrolled
from qloom.hw.threshold import ThresholdSpec
from qloom.hw.unrolled import RequantSpec, UnrolledChain, UnrolledDesign, UnrolledLayer
from qloom.hw.unrolled_ops import RequantOp
from qloom.nn.dtypes import BIPOLAR, TERNARY, int_type, uint_type
from qloom.nn.ir import Dense, MultiThreshold, Requant, Rounding
from qloom.sim.pysim import run_stream


def ref_chain(ir_layers, x):
    """Values through the IR layers' own ``execute``."""
    for layer in ir_layers:
        x = layer.execute(x)
    return x


def _dense(name, w, w_type, in_type):
    return Dense(name, ("x",), "y", weights=w, w_type=w_type, in_type=in_type)


def _requant(name, rng, channels, shift, rounding, in_type, out_type, lo=None, hi=None):
    return Requant(name, ("y",), "z", bias=rng.integers(-60, 60, size=channels), shift=shift,
                   rounding=rounding, lo=max(0, out_type.min) if lo is None else lo,
                   hi=out_type.max if hi is None else hi,
                   in_type=in_type, out_type=out_type)


def _thresholds(name, rng, channels, k, in_type, out_type, lo, hi, signs=False):
    t = np.sort(rng.integers(lo, hi, size=(channels, k)), axis=1)
    sign = rng.choice([-1, 1], size=channels) if signs else np.ones(channels, dtype=np.int64)
    bias = np.where(sign < 0, k, 0) + (out_type.encode([out_type.min])[0] if signs else 0)
    return MultiThreshold(name, ("y",), "z", thresholds=t, bias=bias, sign=sign,
                          in_type=in_type, out_type=out_type)


def _hw(dense, post=None):
    spec = (RequantSpec.from_layer(post) if isinstance(post, Requant) else
            ThresholdSpec.from_layer(post) if isinstance(post, MultiThreshold) else None)
    return UnrolledLayer(dense.weights, dense.w_type, dense.in_type, spec)


def _codes(dtype, values):
    return dtype.encode(values) if dtype.bipolar else values


def _run(ir_layers, hw_layers, x, *, per=2, stall=0.3, fanout=unrolled.BROADCAST_READERS,
         cluster=None, copy_readers=unrolled.COPY_READERS, far_levels=None):
    dut = UnrolledChain(layers=hw_layers, levels_per_stage=per, fanout=fanout,
                        cluster=cluster, copy_readers=copy_readers, far_levels=far_levels)
    first, last = hw_layers[0].in_type, hw_layers[-1].out_type
    words = [list(map(int, w)) for w in _codes(first, x)]
    run = run_stream(dut, words, len(words), in_stall=stall, out_stall=stall, seed=3)
    want = _codes(last, ref_chain(ir_layers, x))
    got = np.array(run.outputs)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(dut.design.evaluate(_codes(first, x)), want)
    return dut, run


@pytest.mark.parametrize("rounding", list(Rounding))
def test_multibit_chain_with_requant_bit_exact_under_backpressure(rounding):
    rng = np.random.default_rng(1)
    i6, u4 = int_type(6), uint_type(4)
    d0 = _dense("d0", rng.integers(-32, 32, size=(7, 5)), i6, int_type(8))
    r0 = _requant("r0", rng, 7, 4, rounding, d0.acc_type, u4)
    d1 = _dense("d1", rng.integers(-32, 32, size=(3, 7)) * (rng.random((3, 7)) < 0.6), i6, u4)
    x = rng.integers(-128, 128, size=(30, 5))
    _run([d0, r0, d1], [_hw(d0, r0), _hw(d1)], x)


def test_binary_chain_popcounts_with_thresholds():
    """Bipolar weights and inputs (XNOR-popcount layers) with one threshold each."""
    rng = np.random.default_rng(2)
    d0 = _dense("d0", rng.choice([-1, 1], size=(9, 11)), BIPOLAR, BIPOLAR)
    t0 = _thresholds("t0", rng, 9, 1, d0.acc_type, BIPOLAR, -4, 5)
    d1 = _dense("d1", rng.choice([-1, 1], size=(4, 9)), BIPOLAR, BIPOLAR)
    x = rng.choice([-1, 1], size=(25, 11))
    _run([d0, t0, d1], [_hw(d0, t0), _hw(d1)], x)


@pytest.mark.parametrize("w_type, in_type", [(TERNARY, uint_type(3)), (int_type(1), int_type(4)),
                                             (int_type(4), uint_type(1))])
def test_select_datapaths_with_multi_thresholds(w_type, in_type):
    """Ternary and one-bit weights, one-bit inputs; three thresholds with mixed signs."""
    rng = np.random.default_rng(3)
    w = rng.integers(w_type.min, w_type.max + 1, size=(6, 10))
    d0 = _dense("d0", w, w_type, in_type)
    lo, hi = (int(v) for v in (w.clip(None, 0).sum(1).min() * in_type.max,
                               w.clip(0, None).sum(1).max() * in_type.max))
    t0 = _thresholds("t0", rng, 6, 3, d0.acc_type, int_type(3), lo, hi + 1, signs=True)
    x = rng.integers(in_type.min, in_type.max + 1, size=(25, 10))
    _run([d0, t0], [_hw(d0, t0)], x, per=1)


def test_zero_rows_and_columns_and_powers_of_two():
    """A neuron with only zero weights is its constant; a dead input is never read."""
    w = np.array([[0, 0, 0], [4, 0, -8], [1, 0, -1], [-32, 0, 16]])
    d0 = _dense("d0", w, int_type(6), int_type(5))
    x = np.random.default_rng(4).integers(-16, 16, size=(12, 3))
    dut, _ = _run([d0], [_hw(d0)], x, per=3)
    assert dut.design.counts()["adders"] == 3      # one per neuron with two weights


@pytest.mark.parametrize("per", [1, 2, 5])
def test_one_vector_per_cycle_and_latency(per):
    rng = np.random.default_rng(5)
    d0 = _dense("d0", rng.integers(-20, 20, size=(8, 12)), int_type(6), uint_type(6))
    x = rng.integers(0, 64, size=(40, 12))
    dut, run = _run([d0], [_hw(d0)], x, per=per, stall=0, fanout=None)   # no broadcast
    assert np.all(np.diff(run.in_cycles) == 1) and np.all(np.diff(run.out_cycles) == 1)
    assert run.out_cycles[0] - run.in_cycles[0] == dut.latency
    depth = max(dut.design.graph.nodes[t.node].depth for t in dut.design.outputs)
    # The input register (the chain's port is read by registers only), then the levels.
    assert dut.latency == 1 + -(-depth // per)


@pytest.mark.parametrize("per", [1, 2, 3])
@pytest.mark.parametrize("signed", [False, True])
def test_half_even_requant_is_two_levels_a_bank_may_split(per, signed):
    """A half-even requantization is the quotient's low bits, the tie flag and the clamp's
    compares, then the select: one level each, so a register bank may close between them
    and the latency is the graph's depth in stages, with no level lost to aligning it.
    Ties at odd quotients inside the range, at a narrow range's odd ``lo`` and past an
    even ``hi`` all occur, for signed and unsigned clamps read by a next layer."""
    rng = np.random.default_rng(9)
    w = rng.integers(-4, 5, size=(6, 4)) if signed else rng.integers(-3, 7, size=(6, 4))
    d0 = _dense("d0", w, int_type(4), uint_type(4))
    out = int_type(4) if signed else uint_type(4)
    r0 = _requant("r0", rng, 6, 4, Rounding.HALF_EVEN, d0.acc_type, out,
                  lo=-7 if signed else None, hi=None if signed else 14)
    x = rng.integers(0, 16, size=(500, 4))
    v = x @ d0.weights.T + r0.bias + 8                       # the sum with the offset
    q, tie = v >> 4, (v & 15) == 0
    fix = tie & (q % 2 == 1)
    assert np.any(fix & (q > r0.lo) & (q <= r0.hi))
    assert np.any(fix & (q == (r0.lo if signed else r0.hi + 1)))
    d1 = _dense("d1", rng.integers(-8, 8, size=(3, 6)), int_type(4), out)
    dut, _ = _run([d0, r0, d1], [_hw(d0, r0), _hw(d1)], x, per=per, fanout=None)
    d = dut.design
    depth = max(d.graph.nodes[t.node].depth for t in d.outputs)
    assert dut.latency == 1 + -(-depth // per)
    ops = [n for n in d.stage if isinstance(d.graph.nodes[n].info, RequantOp)]
    assert len(ops) == 6 and all(d.graph.nodes[n].info.half_even for n in ops)
    if per == 2:
        assert any(d.stage[n] < d.last_use[n] for n in ops)       # a bank closed between


@pytest.mark.parametrize("per, copy_readers", [(1, 4), (3, 3)])
def test_broadcast_values_are_read_from_register_copies(per, copy_readers):
    """Inputs read by more than ``fanout`` nodes (their products for many distinct weights)
    are read in a later stage, each group of up to ``copy_readers`` readers from a register
    copy of its own; the chain stays bit exact under backpressure and counts the copies."""
    rng = np.random.default_rng(8)
    d0 = _dense("d0", rng.integers(-31, 32, size=(24, 4)), int_type(6), uint_type(5))
    x = rng.integers(0, 32, size=(30, 4))
    dut, _ = _run([d0], [_hw(d0)], x, per=per, fanout=4, copy_readers=copy_readers)
    d, plain = dut.design, UnrolledDesign([_hw(d0)], per, None)
    for t in d.inputs:
        readers = [r for (r, n) in d.taps if n == t.node]
        assert len(readers) > 4 and all(d.stage[r] >= 1 for r in readers)
        groups = {d.taps[(r, t.node)][1] for r in readers}
        assert groups == set(range(-(-len(readers) // copy_readers)))
    copies = d.copy_registers()
    assert copies and not plain.copy_registers() and plain.stages <= d.stages
    assert d.counts()["register_bits"] - sum(d.registers(n) * d.graph.nodes[n].bits
                                             for n in d.stage) == \
        sum(d.graph.nodes[n].bits for n, _, _ in copies)
    assert _rtlil_counts(dut)[1] == d.counts()["register_bits"]


@pytest.mark.parametrize("far", [1, 2])
def test_far_reads_leave_the_rest_of_their_stage_to_the_net(far):
    """With ``far_levels``, logic after a read of a broadcast copy or an input register
    ends within ``far`` levels of its stage's start, and a broadcast value is made in its
    stage's first level; the chain stays bit exact under backpressure."""
    rng = np.random.default_rng(9)
    i6, u4 = int_type(6), uint_type(4)
    d0 = _dense("d0", rng.integers(-31, 32, size=(12, 6)), i6, uint_type(5))
    r0 = _requant("r0", rng, 12, 4, Rounding.HALF_EVEN, d0.acc_type, u4)
    d1 = _dense("d1", rng.integers(-31, 32, size=(10, 12)), i6, u4)
    x = rng.integers(0, 32, size=(40, 6))
    hw = [_hw(d0, r0), _hw(d1)]
    per = 3
    dut, _ = _run([d0, r0, d1], hw, x, per=per, fanout=4, far_levels=far)
    d, free = dut.design, UnrolledDesign(hw, per, 4)
    g = d.graph
    broadcast = {n for _, n in d.taps}
    assert broadcast & {t.node for t in d.inputs} and broadcast - {t.node for t in d.inputs}
    far_path = set()
    for n in sorted(d.stage):
        node = g.nodes[n]
        if node.op == "input":
            continue
        levels = 1 if node.op == "add" else node.info.levels
        first = d.end[n] - levels - d.stage[n] * per          # its first level in the stage
        if n in broadcast:
            assert first == 0
        ops = [t.node for t in node.operands if t.node in d.stage]
        if any((m in broadcast or g.nodes[m].op == "input") and d.stage[m] < d.stage[n]
               and first == 0 for m in ops) or any(m in far_path and d.stage[m] == d.stage[n]
                                                   for m in ops):
            far_path.add(n)
            assert d.end[n] - d.stage[n] * per <= far
    assert far_path and d.stages >= free.stages


def _rtlil_counts(dut):
    """Adders/subtractors written by ``UnrolledChain._adder`` and pipeline register bits,
    read from the RTLIL Amaranth emits."""
    text = rtlil.convert(dut)
    lines, start = inspect.getsourcelines(UnrolledChain._adder)
    span = range(start, start + len(lines))
    adders = 0
    for cell in re.finditer(r'attribute \\src "[^"]*unrolled\.py:(\d+)"\s+cell \$(add|sub) ',
                            text):
        adders += int(cell.group(1)) in span
    regs = sum(int(w) for w, q in re.findall(
        r"cell \$dff \S+\s+parameter \\WIDTH (\d+)\s+parameter \\CLK_POLARITY 1\s+"
        r"connect \\D [^\n]+\s+connect \\CLK [^\n]+\s+connect \\Q \\(n\d+_r\d+)", text))
    return adders, regs


@pytest.mark.parametrize("per", [1, 3])
def test_estimate_counts_what_is_built(per):
    rng = np.random.default_rng(6)
    w = rng.integers(-40, 40, size=(10, 9)) * (rng.random((10, 9)) < 0.7)
    d0 = _dense("d0", w, int_type(7), int_type(6))
    r0 = _requant("r0", rng, 10, 3, Rounding.HALF_UP, d0.acc_type, uint_type(5))
    dut = UnrolledChain(layers=[_hw(d0, r0)], levels_per_stage=per)
    counts = dut.design.counts()
    adders, regs = _rtlil_counts(dut)
    assert adders == counts["adders"]
    assert regs == counts["register_bits"]
    r = dut.design.resources()
    assert r["lut"] >= counts["adder_luts"] + counts["extern_luts"] and r["dsp"] == 0


def test_shared_products_and_sums_are_made_once():
    """Sums recurring across neurons and digits are made once (``digit_cse``)."""
    w = np.full((8, 2), 13)
    d = UnrolledDesign([UnrolledLayer(w, int_type(6), uint_type(4))], 3)
    # 13 = 16 - 4 + 1: the pattern x0 + x1 recurs at every digit, so 13 * (x0 + x1):
    # one adder for the sum, two for 13 times it, shared by all eight neurons.
    assert d.counts()["adders"] == 1 + 2
    w[:, 1] = [1, 2, 4, -8, 3, 5, 7, 9]
    d = UnrolledDesign([UnrolledLayer(w, int_type(6), uint_type(4))], 3)
    # 13x0 (two adders), x1 times 3, 5, 7, 9 (one each), one sum per neuron: a shared
    # 13x0 + 4x1 would be three adders deep, past digit_cse.MAX_DEPTH.
    assert d.counts()["adders"] == 2 + 4 + 8
    rng = np.random.default_rng(0)
    x = rng.integers(0, 16, size=(50, 2))
    got = d.graph.evaluate({t.node: x[:, j] for j, t in enumerate(d.inputs)}, d.outputs)
    assert np.array_equal(np.stack(got, axis=1), x @ w.T)


def _dependents(d: UnrolledDesign) -> dict:
    """For each node, the outputs (by index) whose value it enters."""
    deps = {}
    for h, t in enumerate(d.outputs):
        stack = [t.node]
        while stack:
            n = stack.pop()
            if h not in deps.setdefault(n, set()):
                deps[n].add(h)
                stack += [o.node for o in d.graph.nodes[n].operands]
    return deps


@pytest.mark.parametrize("one_bit", [False, True])
def test_clusters_share_products_and_sums_only_within(one_bit):
    """With ``cluster``, neurons share products, sums and lookup tables only within their
    group of ``cluster`` neurons: no adder or table enters outputs of two groups, and the
    chain stays bit exact under backpressure."""
    rng = np.random.default_rng(12)
    base = rng.integers(-12, 12, size=(4, 7)) * (rng.random((4, 7)) < 0.8)
    w = np.vstack([base, base[::-1], base[:2]])      # neurons of other groups alike
    in_type = BIPOLAR if one_bit else uint_type(4)
    d0 = _dense("d0", w, int_type(5), in_type)
    x = rng.integers(0, 2, size=(30, 7)) * 2 - 1 if one_bit else rng.integers(0, 16,
                                                                             size=(30, 7))
    dut, _ = _run([d0], [_hw(d0)], x, cluster=4)
    d, whole = dut.design, UnrolledDesign([_hw(d0)], 2, cluster=None)
    assert sorted(h for c in d.clusters[0] for h in c) == list(range(10))
    assert [len(c) for c in d.clusters[0]] == [4, 4, 2] and whole.clusters == [[tuple(range(10))]]
    group = {h: k for k, c in enumerate(d.clusters[0]) for h in c}
    for design in (d, whole):
        crossing = [n for n, hs in _dependents(design).items()
                    if design.graph.nodes[n].op in ("add", "extern")
                    and len({group[h] for h in hs}) > 1]
        assert bool(crossing) is (design is whole)
    size = [c["adders"] + c["externs"] for c in (d.counts(), whole.counts())]
    assert size[0] > size[1]


def test_clusters_pair_neurons_that_share_products():
    """Clusters of two pair the neurons whose weights share odd parts (one product adder
    per input and odd weight in a cluster), not neighbours: fewer adders, bit exact."""
    rng = np.random.default_rng(5)
    a = rng.choice([3, 5, 7, 11, 13], size=(4, 6))
    w = np.vstack([a, -2 * a])                      # rows k and k + 4 alike
    d0 = _dense("d0", w, int_type(6), int_type(6))
    x = rng.integers(-32, 32, size=(30, 6))
    dut, _ = _run([d0], [_hw(d0)], x, cluster=2)
    assert sorted(dut.design.clusters[0]) == [(k, k + 4) for k in range(4)]
    assert dut.design.counts()["adders"] < _neighbour_pairs_adders(_hw(d0))


def test_pairs_share_sums_of_proportional_weights():
    """The two neurons of a cluster share the sum over the inputs where one's weights are
    the other's times the same ``±2**k`` (``digit_cse``): built once, shifted (and
    negated) for the other."""
    w = np.array([[3, 5, 7, 1, 0, 2], [6, 10, 14, 2, 9, -4]])
    d0 = _dense("d0", w, int_type(5), int_type(6))
    x = np.random.default_rng(2).integers(-32, 32, size=(30, 6))
    dut, _ = _run([d0], [_hw(d0)], x, cluster=2)
    # 3x0, 5x1, 7x2 (an adder each); x3 + 3x0 and 5x1 + 7x2 shared, doubled for neuron 1
    # (the whole sum would be three adders deep, past digit_cse.MAX_DEPTH: 10 adders
    # then); neuron 0 adds 2x5 and the two sums, neuron 1 builds 9x4 - 4x5 (two adders)
    # and adds the two.
    assert dut.design.counts()["adders"] == 3 + 2 + 2 + 4


def _neighbour_pairs_adders(layer):
    """Adders of ``layer`` with neighbouring neurons paired (each pair built alone)."""
    total = 0
    for h in range(0, layer.mh, 2):
        part = UnrolledLayer(layer.weights[h:h + 2], layer.w_type, layer.in_type)
        total += UnrolledDesign([part], 2, cluster=None).counts()["adders"]
    return total


def test_one_bit_inputs_with_multibit_weights_use_shared_lookup_tables():
    """One-bit inputs whose weights are not all ±m (no popcount): a lookup table per
    group of four inputs and weight pattern, shared by the neurons with that pattern (or
    its negation)."""
    w = np.array([[1, -1, 1, 1], [-1, 1, -1, -1], [1, 1, 1, 1], [1, -1, 1, 1]]) * [3, 1, 1, 1]
    d = UnrolledDesign([UnrolledLayer(w, int_type(3), BIPOLAR)], 3)
    assert d.counts()["externs"] == 2


@pytest.mark.parametrize("kwargs, error, message", [
    ({"weights": np.zeros((2, 2))}, TypeError, r"Weights must be an integer numpy array"),
    ({"weights": np.zeros((0, 2), dtype=int)}, ValueError, r"non-empty \[MH, MW\] matrix"),
    ({"weights": np.full((2, 2), 9)}, ValueError, r"outside INT4 \[-8, 7\]"),
    ({"post": "relu"}, TypeError, r"must be a RequantSpec, a ThresholdSpec or None"),
    ({"in_type": "INT4"}, TypeError, r"Input type must be a qloom DataType"),
])
def test_layer_validation(kwargs, error, message):
    args = dict(weights=np.ones((2, 2), dtype=int), w_type=int_type(4), in_type=int_type(4))
    args.update(kwargs)
    with pytest.raises(error, match=message):
        UnrolledLayer(**args)


def test_chain_validation():
    a = UnrolledLayer(np.ones((3, 2), dtype=int), int_type(4), int_type(4))
    b = UnrolledLayer(np.ones((2, 4), dtype=int), int_type(4), int_type(4))
    with pytest.raises(ValueError, match=r"Layer 1 takes 4 inputs, but layer 0 gives 3"):
        UnrolledDesign([a, b], 2)
    c = UnrolledLayer(np.ones((2, 3), dtype=int), int_type(4), int_type(4))
    with pytest.raises(ValueError, match=r"Layer 1 takes INT4 inputs, but layer 0 gives INT"):
        UnrolledDesign([a, c], 2)
    with pytest.raises(TypeError, match=r"Levels per stage must be a positive integer, not 0"):
        UnrolledDesign([a], 0)
    with pytest.raises(TypeError, match=r"Readers per copy must be a positive integer, not 0"):
        UnrolledDesign([a], 2, copy_readers=0)
    with pytest.raises(TypeError, match=r"Levels after a far read must be None or an integer "
                                        r"from 1 to the levels per stage \(2\), not 3"):
        UnrolledDesign([a], 2, far_levels=3)
    with pytest.raises(ValueError, match=r"at least one layer"):
        UnrolledDesign([], 2)
    with pytest.raises(ValueError, match=r"Clamp range \[0, 16\] must lie within UINT4"):
        RequantSpec(np.zeros(2, dtype=int), 1, Rounding.FLOOR, 0, 16, uint_type(4))


def test_only_sums_of_variables_are_kept_signals():
    """Sums of two variables are kept signals (no multi-operand sums in LUTs); the
    requantizations and sums with a constant are not (ABC9 joined kept signals of one
    function; docs/notes/traps.md)."""
    rng = np.random.default_rng(9)
    w = rng.integers(-20, 20, size=(6, 5))
    d0 = _dense("d0", w, int_type(6), int_type(6))
    r0 = _requant("r0", rng, 6, 3, Rounding.HALF_EVEN, d0.acc_type, int_type(4))
    dut = UnrolledChain(layers=[_hw(d0, r0)], levels_per_stage=2)
    g = dut.design.graph
    text = rtlil.convert(dut)
    kept = set(re.findall(r"attribute \\keep 1\s+wire width \d+ (?:signed )?\\n(\d+)\n", text))
    for n in dut.design.stage:
        node = g.nodes[n]
        if node.op == "input":
            continue
        with_const = any(g.nodes[t.node].op == "const" for t in node.operands)
        variables = node.op == "add" and not with_const
        assert (str(n) in kept) == variables, (n, node.op, node.info)
    assert any(isinstance(g.nodes[n].info, RequantOp) for n in dut.design.stage)


@pytest.mark.slow
def test_jet_tagger_layer_maps_with_abc9_at_the_first_try(tmp_path):
    """The jet tagger's third layer unrolled (sums shared on signed digits) through
    synth_ecp5: ABC9's netlist has no net with several drivers, so no fallback runs."""
    pytest.importorskip("qonnx")
    import warnings
    from pathlib import Path
    import qloom
    from qloom.flows.toolchain.synth import synthesize
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = qloom.load(Path(__file__).resolve().parents[2] / "examples" / "models" /
                         "jettagging_w6a6.onnx")
    dense = [layer for layer in net.layers if layer.op == "Dense"][2]
    post = net.layers[net.layers.index(dense) + 1]
    layer = UnrolledLayer(dense.weights, dense.w_type, dense.in_type,
                          RequantSpec.from_layer(post))
    dut = UnrolledChain(layers=[layer], levels_per_stage=3, far_levels=2, copy_readers=4)
    r = synthesize(dut, family="ecp5", build_dir=tmp_path, progress=False)
    assert not list(tmp_path.glob("*.retry.ys")) and not list(tmp_path.glob("*.classic.ys"))
    assert r.lut > 0
