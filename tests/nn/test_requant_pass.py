"""ThresholdsToRequant: many-level thresholds become shift-and-round requantization only
where the two are equal on the whole input range."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from qloom.nn.dtypes import int_type, uint_type
from qloom.nn.ir import MultiThreshold, Network, Requant, Rounding, TensorInfo, round_shift
from qloom.nn.passes.thresholds_to_requant import ThresholdsToRequant


def threshold_net(thresholds, in_type, out_type):
    c, k = thresholds.shape
    layer = MultiThreshold("act", ("x",), "y", thresholds=thresholds,
                           bias=np.full(c, out_type.min), sign=np.ones(c, dtype=np.int64),
                           in_type=in_type, out_type=out_type)
    tensors = {"x": TensorInfo("x", (c,), in_type), "y": TensorInfo("y", (c,), out_type)}
    return Network("t", "x", (1, c), "x", "y", [layer], tensors, quantize=lambda x: x,
                   tail=lambda y: y)


def thresholds_of(fn, lo, hi, levels):
    """Exact thresholds of a nondecreasing integer function on [lo, hi]: the least x with
    fn(x) >= level, hi + 1 for never."""
    xs = np.arange(lo, hi + 1)
    ys = fn(xs)
    return np.array([xs[np.argmax(ys >= lv)] if np.any(ys >= lv) else hi + 1 for lv in levels])


@settings(max_examples=60, deadline=None, derandomize=True)
@given(shift=st.integers(0, 6), rounding=st.sampled_from(list(Rounding)),
       bits=st.integers(3, 6), seed=st.integers(0, 2 ** 16))
def test_requant_found_and_exact(shift, rounding, bits, seed):
    rng = np.random.default_rng(seed)
    in_type, out_type = int_type(10), uint_type(bits)
    offsets = rng.integers(-300, 300, size=3)
    levels = np.arange(out_type.min + 1, out_type.max + 1)
    th = np.stack([thresholds_of(
        lambda x, b=b: np.clip(round_shift(x + b, shift, rounding), out_type.min, out_type.max),
        in_type.min, in_type.max, levels) for b in offsets])
    net, changed = ThresholdsToRequant().apply(threshold_net(th, in_type, out_type))
    assert changed and isinstance(net.layers[0], Requant)
    x = np.arange(in_type.min, in_type.max + 1)[:, None].repeat(3, axis=1)
    before = threshold_net(th, in_type, out_type)
    np.testing.assert_array_equal(net.execute_int(x), before.execute_int(x))


def test_irregular_thresholds_stay():
    th = np.sort(np.random.default_rng(0).integers(-500, 500, size=(2, 15)), axis=1)
    net, changed = ThresholdsToRequant().apply(threshold_net(th, int_type(10), uint_type(4)))
    assert not changed and isinstance(net.layers[0], MultiThreshold)


def test_few_levels_stay_thresholds():
    th = np.array([[0, 4, 8]])
    net, changed = ThresholdsToRequant().apply(threshold_net(th, int_type(6), uint_type(2)))
    assert not changed


def test_jet_tagger_activations_become_requant(load_example):
    net = load_example("jettagging_w6a6", warn=False)
    ops = {l.name: l for l in net.layers}
    for name in ("Quant_8", "Quant_9", "Quant_10"):
        assert isinstance(ops[name], Requant)
        assert ops[name].rounding is Rounding.HALF_EVEN   # qonnx's ROUND
    plain = load_example("jettagging_w6a6", warn=False, requant=False)
    assert isinstance({l.name: l for l in plain.layers}["Quant_8"], MultiThreshold)
    x = np.random.default_rng(1).integers(-4000, 4000, size=(200, 16))
    np.testing.assert_array_equal(net.execute_int(x), plain.execute_int(x))
