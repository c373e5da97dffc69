"""Every engine agrees with the templates it builds, over many datatypes (issue 11: one
truth per hardware decision). The dense and convolution engines are checked in
``test_engine_agreement.py`` (here only a strided convolution's pace); here the others:
thresholds, requantization, max pooling, average pooling (windowed and global), add,
constant multiply, concat, the unrolled dense engine and the depthwise convolution.

For each, the engine is made from a small layer and its nodes are built (not elaborated)
at two foldings where it has them, and

- its cycles per frame are the built template's;
- its DSP blocks (estimate and resources) are the ones the built units use;
- every part of its estimate names a node it builds, and equals that template's own
  estimate (its ``estimate(family)``, or its module's ``estimate`` given the parameters
  the unit was built with);
- the element widths it reports (``in_bits``, ``out_bits``) are the template's lanes.

Where a datatype cannot be built (a template refuses it, or a padded bipolar input has no
pad code) the engine refuses it when it is made, with an ``UnsupportedModelError`` naming
the layer: not a template's ``ValueError`` later, nor hardware that computes otherwise."""

import numpy as np
import pytest
from amaranth.hdl import Shape

from qloom.errors import UnsupportedModelError
from qloom.flows.compile.engines.base import BuildOptions, Fold
from qloom.hw.estimate import Family, calibrated, unelaborated
from qloom.nn.dtypes import BINARY, BIPOLAR, TERNARY, int_type, smallest_type, uint_type
from qloom.nn.ir import (Add, AvgPool, Concat, Conv, Dense, IntMul, MaxPool, MultiThreshold,
                         Network, Requant, Rounding, TensorInfo, Upsample)

# Sixteen distinct datatypes (BINARY is UINT1 and TERNARY is INT2N, so neither is repeated):
# bipolar, 1-bit, narrow and plain signed, unsigned, powers of two and not.
TYPES = [BIPOLAR, BINARY, TERNARY, int_type(1), int_type(2), int_type(3), int_type(4),
         int_type(5), int_type(8), int_type(4, narrow=True), int_type(8, narrow=True),
         uint_type(2), uint_type(3), uint_type(4), uint_type(6), uint_type(8)]
FAMILIES = [Family.ICE40, Family.ECP5]
FOLDS = [Fold(1), Fold(2)]


def test_the_datatypes_are_many_and_distinct():
    assert len(set(TYPES)) == len(TYPES) >= 12


def _rng(*types):
    return np.random.default_rng(sum(map(ord, "".join(map(str, types)))))


def _values(dtype, shape, rng):
    if dtype.bipolar:
        return rng.choice([-1, 1], size=shape).astype(np.int64)
    return rng.integers(dtype.min, dtype.max + 1, size=shape).astype(np.int64)


def _lane_bits(port) -> int:
    """Bits of one lane of a stream port's ``ArrayLayout`` payload."""
    return Shape.cast(port.payload.shape().elem_shape).width


def _built(engine, fold, options, dsps=0) -> dict:
    """The engine's nodes by name: their components, built and never elaborated (after
    checking its inner edges against them)."""
    nodes = engine.nodes(fold, options, dsps)
    check_inner_edges(engine, fold, nodes)
    return {n.name: unelaborated(n.component) for n in nodes}


def check_inner_edges(engine, fold, nodes):
    """``Engine.inner_edges`` (which the plan estimates) are the streams the top builds
    between the engine's own nodes: each tensor one node writes and another reads, with
    its reader, lanes and lane bits, the same on both ports (no width conversion)."""
    writers = {n.output: n for n in nodes}
    streams = []
    for n in nodes:
        for tensor, port in zip(n.inputs, n.input_ports()):
            if tensor in writers:
                layout = port.payload.shape()
                assert writers[tensor].component.o.payload.shape() == layout
                streams.append((tensor, n.name, layout.length, _lane_bits(port)))
    assert sorted(engine.inner_edges(fold)) == sorted(streams)


def _parts(engine, fold, options, nodes, dsps=0) -> dict:
    """The engine's estimate by node, after checking that every part names a node it
    builds, carries that node's DSP blocks, and equals the template's own estimate where
    the template has one; and that the resources' DSP blocks are the units'."""
    parts = engine.features(fold, options, dsps)
    names = [engine.name + suffix for suffix, _ in parts]
    assert len(set(names)) == len(names)
    assert set(names) <= set(nodes), f"estimate parts {names} for nodes {sorted(nodes)}"
    for suffix, features in parts:
        unit = nodes[engine.name + suffix]
        assert features.dsp == getattr(unit, "dsp_count", 0)
        if hasattr(unit, "estimate"):
            assert features == unit.estimate(options.family)
    used = sum(getattr(unit, "dsp_count", 0) for unit in nodes.values())
    assert engine.resources(fold, options, dsps).dsp == used
    return {suffix: features for suffix, features in parts}


def _network(layers, tensors, output) -> Network:
    """A network of ``layers`` over ``tensors`` (``name -> (shape, dtype)``), input ``x``."""
    infos = {name: TensorInfo(name, shape, dtype) for name, (shape, dtype) in tensors.items()}
    return Network(name="n", input_name="x", input_shape=(1,) + tensors["x"][0], input="x",
                   output=output, layers=list(layers), tensors=infos,
                   quantize=lambda x: x, tail=lambda y: y)


# --- Per-channel units ---------------------------------------------------------------------

@pytest.mark.parametrize("levels", [3, 31], ids=["parallel", "binary_search"])
@pytest.mark.parametrize("in_type", TYPES, ids=str)
def test_threshold_engine_and_its_template_agree(in_type, levels):
    from qloom.flows.compile.engines.threshold import ThresholdEngine
    from qloom.hw import threshold
    channels, pixels = 4, 6
    rng = _rng(in_type, levels)
    out_type = uint_type(levels.bit_length())
    thresholds = np.sort(rng.integers(in_type.min - 1, in_type.max + 2,
                                      size=(channels, levels)), axis=1)
    layer = MultiThreshold("t", ("x",), "y", thresholds=thresholds,
                           bias=np.zeros(channels, dtype=np.int64),
                           sign=np.ones(channels, dtype=np.int64),
                           in_type=in_type, out_type=out_type)
    engine = ThresholdEngine(layer, pixels)
    for family in FAMILIES:
        options = BuildOptions(family=family)
        for fold in FOLDS:
            nodes = _built(engine, fold, options)
            unit = nodes["t"]
            assert engine.mode is unit.mode
            assert engine.cycles(fold) == \
                pixels * (unit.channels // unit.pe) * unit.cycles_per_word
            parts = _parts(engine, fold, options, nodes)
            assert parts[""] == unit.estimate(family)
            # The registers the estimate counts are the ones the unit has (its latency).
            if unit.mode is threshold.ThresholdMode.PARALLEL:
                assert ("crossed" in parts[""].ff) == (unit.latency == 3)
            else:
                reads = threshold.search_read_registers(family)
                assert unit.latency == (1 + reads) * unit.search_stages + 2
            assert engine.multipliers(fold) == 0
            assert (engine.in_bits, engine.out_bits) == (_lane_bits(unit.i), _lane_bits(unit.o))


def _requant_layer(in_type, rng, channels):
    return Requant("r", ("x",), "y", bias=rng.integers(-3, 4, size=channels), shift=1,
                   rounding=Rounding.HALF_EVEN, lo=0, hi=7, in_type=in_type,
                   out_type=uint_type(3))


@pytest.mark.parametrize("in_type", TYPES, ids=str)
def test_requant_engine_and_its_template_agree(in_type):
    from qloom.flows.compile.engines.requant import RequantEngine
    from qloom.hw import requant
    channels, pixels = 4, 6
    layer = _requant_layer(in_type, _rng(in_type), channels)
    if in_type.bipolar:
        # The requantizer adds offsets to integers; a bipolar input is refused, naming the
        # layer, when the engine is made.
        with pytest.raises(UnsupportedModelError, match="node 'r'.*bipolar"):
            RequantEngine(layer, pixels)
        return
    engine = RequantEngine(layer, pixels)
    for family in FAMILIES:
        options = BuildOptions(family=family)
        for fold in FOLDS:
            nodes = _built(engine, fold, options)
            unit = nodes["r"]
            # One word per cycle (``Requantizer``: four stages behind one stall).
            assert engine.cycles(fold) == pixels * unit.channels // unit.lanes
            parts = _parts(engine, fold, options, nodes)
            assert parts[""] == unit.estimate(family)
            assert unit.block_table == requant.table_in_block_ram(
                channels=unit.channels, lanes=unit.lanes, width=unit.width, family=family)
            assert (engine.in_bits, engine.out_bits) == (_lane_bits(unit.i), _lane_bits(unit.o))


def test_requant_is_never_made_for_a_bipolar_input():
    """The pass that turns many-level thresholds into requantization keeps the thresholds
    of a bipolar input, which the threshold engine takes."""
    from qloom.nn.passes.thresholds_to_requant import MIN_LEVELS, ThresholdsToRequant
    channels, levels = 2, MIN_LEVELS
    layer = MultiThreshold("t", ("x",), "y",
                           thresholds=np.tile(np.arange(levels) - levels // 2, (channels, 1)),
                           bias=np.zeros(channels, dtype=np.int64),
                           sign=np.ones(channels, dtype=np.int64),
                           in_type=BIPOLAR, out_type=uint_type(3))
    net = _network([layer], {"x": ((channels,), BIPOLAR), "y": ((channels,), uint_type(3))},
                   "y")
    integer = _network([layer], {"x": ((channels,), int_type(4)),
                                 "y": ((channels,), uint_type(3))}, "y")
    assert ThresholdsToRequant().apply(integer)[1]       # an integer input is requantized
    assert not ThresholdsToRequant().apply(net)[1]


# --- Pools -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", TYPES, ids=str)
def test_maxpool_engine_and_its_template_agree(dtype):
    from qloom.flows.compile.engines.pool import PoolEngine
    from qloom.hw.pool import MaxPool as PoolUnit
    engine = PoolEngine(MaxPool("mp", ("x",), "y", kernel=(2, 2), stride=(2, 2)), (4, 6, 4),
                        dtype)
    for family in FAMILIES:
        options = BuildOptions(family=family)
        for fold in FOLDS:
            nodes = _built(engine, fold, options)
            unit = nodes["mp"]
            assert isinstance(unit, PoolUnit)
            assert engine.cycles(fold) == unit.cycles_per_frame
            assert engine.features(fold, options) == [("", unit.estimate(family))]
            assert engine.resources(fold, options).dsp == 0
            assert engine.multipliers(fold) == 0
            assert engine.in_bits == _lane_bits(unit.i) == _lane_bits(unit.o)


@pytest.mark.parametrize("dtype", TYPES, ids=str)
def test_upsample_engine_and_its_template_agree(dtype):
    from qloom.flows.compile.engines.upsample import UpsampleEngine
    from qloom.hw.upsample import Upsample as UpsampleUnit
    engine = UpsampleEngine(Upsample("up", ("x",), "y", scale=(2, 3)), (3, 5, 4), dtype)
    for family in FAMILIES:
        options = BuildOptions(family=family)
        for fold in FOLDS:
            unit = _built(engine, fold, options)["up"]
            assert isinstance(unit, UpsampleUnit) and unit.scale == (2, 3)
            assert engine.cycles(fold) == unit.cycles_per_frame
            assert engine.features(fold, options) == [("", unit.estimate(family))]
            assert engine.resources(fold, options).dsp == 0
            assert engine.in_bits == engine.out_bits == _lane_bits(unit.i) == _lane_bits(unit.o)
            # the schedule the planner sizes skip buffers with is the template's, per element
            assert np.array_equal(engine.input_needed()[0], UpsampleUnit(
                in_h=3, in_w=5, channels=4, scale=(2, 3), dtype=dtype,
                lanes=1).input_words_needed())


def test_maxpool_estimate_parts_name_its_nodes():
    from qloom.flows.compile.engines.pool import PoolEngine
    engine = PoolEngine(MaxPool("mp", ("x",), "y", kernel=(2, 2), stride=(2, 2)), (4, 6, 4),
                        uint_type(2))
    options = BuildOptions()
    _parts(engine, Fold(1), options, _built(engine, Fold(1), options))


AVGPOOLS = {  # name: (kernel, stride, pads) over a 4 x 6 input
    "windowed": ((2, 2), (2, 2), (0, 0, 0, 0)),
    "padded": ((3, 3), (2, 2), (1, 1, 1, 1)),
    "global": ((4, 6), (1, 1), (0, 0, 0, 0)),
}


@pytest.mark.parametrize("pooling", sorted(AVGPOOLS))
@pytest.mark.parametrize("dtype", TYPES, ids=str)
def test_avgpool_engine_and_its_template_agree(dtype, pooling):
    from qloom.flows.compile.engines.avgpool import AvgPoolEngine
    from qloom.hw.avgpool import GlobalAvgPool
    kernel, stride, pads = AVGPOOLS[pooling]
    layer = AvgPool("ap", ("x",), "y", kernel=kernel, stride=stride, pads=pads)
    if dtype.bipolar and any(pads):
        # 0 is no bipolar value: the template cannot pad, and the engine says so.
        with pytest.raises(UnsupportedModelError, match="node 'ap'.*bipolar"):
            AvgPoolEngine(layer, (4, 6, 4), dtype)
        return
    engine = AvgPoolEngine(layer, (4, 6, 4), dtype)
    for family in FAMILIES:
        options = BuildOptions(family=family)
        for fold in FOLDS:
            nodes = _built(engine, fold, options)
            unit = nodes["ap"]
            assert isinstance(unit, GlobalAvgPool) == (pooling == "global")
            assert engine.kind == ("global_avgpool" if pooling == "global" else "avgpool")
            assert engine.cycles(fold) == unit.cycles_per_frame
            assert set(_parts(engine, fold, options, nodes)) == {""}
            assert engine.in_bits == _lane_bits(unit.i)
            # The sums are of the IR tensor's type.
            assert unit.acc_type == layer.sum_type(dtype)
            assert _lane_bits(unit.o) == unit.acc_type.bits


# --- Elementwise units ----------------------------------------------------------------------

@pytest.mark.parametrize("b_type", TYPES, ids=str)
@pytest.mark.parametrize("a_type", TYPES, ids=str)
def test_add_engine_and_its_template_agree(a_type, b_type):
    from qloom.flows.compile.engines.add import AddEngine
    from qloom.hw.add import ElementwiseAdd
    shape = (3, 4)
    engine = AddEngine(Add("a", ("x", "s"), "y"), shape, a_type, b_type)
    for family in FAMILIES:
        options = BuildOptions(family=family)
        for fold in FOLDS:
            nodes = _built(engine, fold, options)
            unit = nodes["a"]
            assert isinstance(unit, ElementwiseAdd)
            # One word of each input per cycle.
            assert engine.cycles(fold) == 3 * 4 // unit.lanes
            parts = _parts(engine, fold, options, nodes)
            assert set(parts) == {""}
            # The estimate's output registers are the unit's output lanes.
            assert parts[""].ff["lanes"] == unit.lanes * _lane_bits(unit.o)
            assert (_lane_bits(unit.i_a), _lane_bits(unit.i_b)) == (a_type.bits, b_type.bits)
            assert engine.in_bits == max(_lane_bits(unit.i_a), _lane_bits(unit.i_b))
            assert unit.out_type == smallest_type(a_type.min + b_type.min,
                                                  a_type.max + b_type.max)


@pytest.mark.parametrize("factor", [1, 4, 5])
@pytest.mark.parametrize("in_type", TYPES, ids=str)
def test_int_mul_engine_and_its_template_agree(in_type, factor):
    from qloom.flows.compile.engines.int_mul import IntMulEngine
    from qloom.hw.int_mul import ConstMul
    shape = (3, 4)
    engine = IntMulEngine(IntMul("m", ("x",), "y", factor=factor), shape, in_type)
    for family in FAMILIES:
        options = BuildOptions(family=family)
        for fold in FOLDS:
            nodes = _built(engine, fold, options)
            unit = nodes["m"]
            assert isinstance(unit, ConstMul) and unit.factor == factor
            assert engine.cycles(fold) == 3 * 4 // fold.pe     # one word per cycle
            # Shifts and adds, never a multiplier.
            assert engine.multipliers(fold) == 0
            assert engine.resources(fold, options).dsp == 0
            assert engine.in_bits == _lane_bits(unit.i)
            assert unit.out_type == smallest_type(in_type.min * factor, in_type.max * factor)


def _concat_type(types):
    """The output type the frontend gives a Concat (``qloom.nn.passes.concat``)."""
    if all(t == types[0] for t in types):
        return types[0]
    return smallest_type(min(t.min for t in types), max(t.max for t in types))


@pytest.mark.parametrize("b_type", TYPES, ids=str)
@pytest.mark.parametrize("a_type", TYPES, ids=str)
def test_concat_engine_and_its_templates_agree(a_type, b_type):
    from qloom.flows.compile.engines.concat import ConcatEngine
    from qloom.hw.concat import ChannelConcat
    pixels, widths = 6, (4, 2, 6)
    types = [a_type, b_type, a_type]
    layer = Concat("cat", ("x0", "x1", "x2"), "y")
    shapes = [(2, 3, w) for w in widths]
    if a_type.bipolar != b_type.bipolar:
        # The frontend refuses this Concat; an engine made for it says why, naming it.
        with pytest.raises(UnsupportedModelError, match="node 'cat'.*BIPOLAR"):
            ConcatEngine(layer, shapes, types, _concat_type(types))
        return
    engine = ConcatEngine(layer, shapes, types, _concat_type(types))
    for family in FAMILIES:
        options = BuildOptions(family=family)
        for fold in FOLDS:
            nodes = _built(engine, fold, options)
            assert set(nodes) == {"cat_1", "cat"}
            assert all(isinstance(unit, ChannelConcat) for unit in nodes.values())
            # The last unit passes every channel word of a pixel, one per cycle.
            assert engine.cycles(fold) == pixels * nodes["cat"].words_per_pixel
            assert engine.resources(fold, options).dsp == 0
            inputs = [nodes["cat_1"].i_a, nodes["cat_1"].i_b, nodes["cat"].i_b]
            assert [_lane_bits(port) for port in inputs] == [t.bits for t in types]
            assert engine.in_bits == max(_lane_bits(port) for port in inputs)
            assert _lane_bits(nodes["cat"].o) == engine.out_type.bits


# --- Weighted engines ------------------------------------------------------------------------

@pytest.mark.parametrize("w_type", TYPES, ids=str)
@pytest.mark.parametrize("in_type", TYPES, ids=str)
def test_unrolled_engine_and_its_template_agree(in_type, w_type):
    """The dense engine folded to one vector per cycle becomes the unrolled engine, whose
    cycles, latency and resources are its chain's."""
    from qloom.flows.compile.engines.dense import DenseEngine
    from qloom.flows.compile.engines.mapping import UNROLLED_ENGINES
    from qloom.flows.compile.engines.unrolled import UnrolledEngine, unroll
    from qloom.hw.unrolled import UnrolledChain
    mh, mw, vectors = 3, 4, 5
    dense = Dense("d", ("x",), "y", weights=_values(w_type, (mh, mw), _rng(in_type, w_type)),
                  w_type=w_type, in_type=in_type)
    assert UNROLLED_ENGINES[Dense] is UnrolledEngine
    folded = DenseEngine(dense, None, vectors)
    (engine,), folds = unroll([folded], {"d": Fold(mh, mw)})
    assert isinstance(engine, UnrolledEngine) and folds == {"d": engine.fold}
    assert engine.folds() == [Fold(mh, mw)]
    fold = engine.fold
    assert engine.cycles(fold) == folded.cycles(fold) == vectors
    for family in FAMILIES:
        for pipeline in (True, False):
            options = BuildOptions(family=family, pipeline=pipeline)
            nodes = _built(engine, fold, options)
            chain = nodes["d"]
            assert isinstance(chain, UnrolledChain)
            # A whole vector in and out per word, one word per cycle.
            assert chain.i.payload.shape().length == engine.in_lanes(fold) == mw
            assert chain.o.payload.shape().length == engine.out_lanes(fold) == mh
            assert engine.latency(options) == chain.latency
            # The chain's features, through the calibration like every template's.
            r = calibrated(chain.design.features(lut_ram=family is not Family.ICE40), family)
            resources = engine.resources(fold, options)
            assert (resources.lut, resources.ff, resources.dsp) == (r.lut, r.ff, r.dsp)
            assert resources.dsp == engine.multipliers(fold) == 0
            assert engine.in_bits == _lane_bits(chain.i)
            assert _lane_bits(chain.o) == dense.acc_type.bits


def _depthwise(w_type, in_type, channels=4, size=5, kernel=3, stride=1, pads=None):
    rng = _rng(w_type, in_type)
    pads = pads if pads is not None else (0,) * 4 if in_type.bipolar else (1,) * 4
    weights = _values(w_type, (channels, kernel, kernel, 1), rng)
    conv = Conv("dw", ("x",), "y", weights=weights, w_type=w_type, in_type=in_type,
                stride=(stride, stride), pads=pads, groups=channels)
    out = (size + pads[0] + pads[2] - kernel) // stride + 1
    return conv, (size, size, channels), (out, out, channels)


@pytest.mark.parametrize("w_type", TYPES, ids=str)
@pytest.mark.parametrize("in_type", TYPES, ids=str)
def test_depthwise_engine_and_its_templates_agree(in_type, w_type):
    from qloom.flows.compile.engines.conv import ConvEngine
    from qloom.flows.compile.engines.depthwise import DepthwiseEngine
    from qloom.hw import swg
    from qloom.hw.depthwise import DepthwiseMAC
    conv, in_shape, out_shape = _depthwise(w_type, in_type)
    acc_type = conv.acc_type(in_shape[-1])
    rng = _rng(in_type, w_type, "thr")
    thr = MultiThreshold("dw_t", ("y",), "z",
                         thresholds=np.sort(rng.integers(acc_type.min, acc_type.max + 1,
                                                         size=(in_shape[-1], 3)), axis=1),
                         bias=np.zeros(in_shape[-1], dtype=np.int64),
                         sign=np.ones(in_shape[-1], dtype=np.int64),
                         in_type=acc_type, out_type=uint_type(2))
    net = _network([conv, thr], {"x": (in_shape, in_type), "y": (out_shape, acc_type),
                                 "z": (out_shape, uint_type(2))}, "z")
    # The mapping's convolution engine hands a depthwise layer to its own engine.
    for threshold_layer in (None, thr):
        engine = ConvEngine.from_layer(conv, net, threshold_layer)
        assert isinstance(engine, DepthwiseEngine)
        assert engine.engine_name == "swg+depthwise"
        for family in FAMILIES:
            options = BuildOptions(family=family)
            for fold in FOLDS:
                nodes = _built(engine, fold, options)
                window, unit = nodes["dw_swg"], nodes["dw"]
                assert isinstance(unit, DepthwiseMAC)
                assert set(nodes) == {"dw_swg", "dw"} | ({"dw_thr"} if threshold_layer else set())
                # The pace is the slower of the window stream and the unit's words.
                pixels = window.out_h * window.out_w
                assert (window.out_h, window.out_w) == out_shape[:2]
                assert engine.cycles(fold) == max(window.cycles_per_frame,
                                                  pixels * unit.cycles_per_pixel())
                parts = _parts(engine, fold, options, nodes)
                assert set(parts) == {"_swg", ""} | ({"_thr"} if threshold_layer else set())
                assert parts["_swg"] == swg.estimate(window.config, family)
                assert (window.config.in_h, window.config.in_w,
                        window.config.channels) == in_shape
                if threshold_layer is not None:
                    t = nodes["dw_thr"]
                    assert parts["_thr"] == t.estimate(family)
                    assert _lane_bits(t.i) == _lane_bits(unit.o)
                assert unit.acc_type == acc_type        # the IR tensor's type
                assert engine.multipliers(fold) == 0
                assert engine.in_bits == _lane_bits(window.i) == _lane_bits(unit.i)


@pytest.mark.parametrize("in_type", TYPES, ids=str)
def test_strided_convolutions_are_paced_by_their_window(in_type):
    """A window stream thinner than its input (a 1x1 kernel at stride 2, as a residual
    network's downsampling shortcut) is paced by the input: a convolution engine's cycles
    are its slower node's."""
    from qloom.flows.compile.engines.conv import ConvEngine
    from qloom.flows.compile.engines.depthwise import DepthwiseEngine
    conv, in_shape, out_shape = _depthwise(int_type(3), in_type, size=6, kernel=1, stride=2,
                                           pads=(0, 0, 0, 0))
    engine = DepthwiseEngine(conv, None, in_shape, out_shape)
    options = BuildOptions(family=Family.ECP5)
    for fold in FOLDS:
        nodes = _built(engine, fold, options)
        window, unit = nodes["dw_swg"], nodes["dw"]
        pixels = window.out_h * window.out_w
        assert engine.cycles(fold) == window.in_words_per_frame > \
            pixels * unit.cycles_per_pixel()
    weights = _values(int_type(3), (2, 1, 1, 4), _rng(in_type))
    dense = Conv("c", ("x",), "y", weights=weights, w_type=int_type(3), in_type=in_type,
                 stride=(2, 2))
    engine = ConvEngine(dense, None, in_shape, out_shape[:2] + (2,))
    for fold in (Fold(2, 1), Fold(2, 2)):
        nodes = _built(engine, fold, options, engine.multipliers(fold))
        window, unit = nodes["c_swg"], nodes["c"]
        pixels = window.out_h * window.out_w
        assert engine.cycles(fold) == window.in_words_per_frame > \
            pixels * unit.cycles_per_vector


def test_padded_bipolar_convolutions_are_refused():
    """0 is no bipolar value: a padded convolution of a bipolar input has no pad code (the
    window would pad with code 0, the value -1); both convolution engines refuse it."""
    from qloom.flows.compile.engines.conv import ConvEngine
    from qloom.flows.compile.engines.depthwise import DepthwiseEngine
    conv, in_shape, out_shape = _depthwise(int_type(3), BIPOLAR, pads=(1, 1, 1, 1))
    with pytest.raises(UnsupportedModelError, match="node 'dw'.*BIPOLAR"):
        DepthwiseEngine(conv, None, in_shape, out_shape)
    dense_conv = Conv("c", ("x",), "y", weights=np.ones((2, 3, 3, 4), dtype=np.int64),
                      w_type=int_type(3), in_type=BIPOLAR, pads=(1, 1, 1, 1))
    with pytest.raises(UnsupportedModelError, match="node 'c'.*BIPOLAR"):
        ConvEngine(dense_conv, None, in_shape, (5, 5, 2))


@pytest.mark.parametrize("w_type,in_type", [(int_type(4), int_type(4)), (BIPOLAR, BIPOLAR),
                                            (TERNARY, uint_type(2))], ids=str)
def test_convolution_inner_edges(w_type, in_type):
    """A convolution's window stream into its matrix unit, and (systolic array: the
    thresholds are a unit of their own) its sums into the thresholds, are the inner edges
    the plan estimates, with and without thresholds."""
    from qloom.flows.compile.engines.conv import ConvEngine
    rng = _rng(w_type, in_type, "conv")
    oc, ic, size = 4, 2, 4
    conv = Conv("c", ("x",), "y", weights=_values(w_type, (oc, 3, 3, ic), rng),
                w_type=w_type, in_type=in_type)
    acc_type = conv.acc_type(ic)
    thr = MultiThreshold("c_t", ("y",), "z",
                         thresholds=np.sort(rng.integers(acc_type.min, acc_type.max + 1,
                                                         size=(oc, 3)), axis=1),
                         bias=np.zeros(oc, dtype=np.int64), sign=np.ones(oc, dtype=np.int64),
                         in_type=acc_type, out_type=uint_type(2))
    for threshold in (None, thr):
        engine = ConvEngine(conv, threshold, (size, size, ic), (size - 2, size - 2, oc))
        for fold in (engine.folds()[0], engine.folds()[-1]):
            nodes = _built(engine, fold, BuildOptions(family=Family.ECP5))
            assert len(engine.inner_edges(fold)) == len(nodes) - 1


def test_concat_of_four_inputs_inner_edges():
    """Three units join four inputs; the two partial concatenations are inner edges."""
    from qloom.flows.compile.engines.concat import ConcatEngine
    widths = (2, 4, 2, 6)
    layer = Concat("cat", ("x0", "x1", "x2", "x3"), "y")
    engine = ConcatEngine(layer, [(2, 3, w) for w in widths], [uint_type(2)] * 4, uint_type(2))
    for fold in (Fold(1), Fold(2)):
        nodes = _built(engine, fold, BuildOptions(family=Family.ICE40))
        assert sorted(nodes) == ["cat", "cat_1", "cat_2"]
        assert [t for t, *_ in engine.inner_edges(fold)] == ["cat_part1", "cat_part2"]


@pytest.mark.parametrize("rows", [1, 4])
@pytest.mark.parametrize("out_type", TYPES, ids=str)
def test_lookup_engine_and_its_template_agree(out_type, rows):
    from qloom.flows.compile.engines.lookup import LookupEngine
    from qloom.hw.estimate import use_block_ram
    from qloom.hw.lookup import LookupTable
    from qloom.nn.ir import Lookup
    shape = (3, 4)
    table = _values(out_type, (rows, 64), _rng(out_type))
    layer = Lookup("l", ("x",), "y", table=table, lo=-32, in_type=int_type(7),
                   out_type=out_type)
    engine = LookupEngine(layer, shape)
    for family in FAMILIES:
        options = BuildOptions(family=family)
        for fold in FOLDS:
            unit = _built(engine, fold, options)["l"]
            assert isinstance(unit, LookupTable) and unit.lanes == fold.pe
            assert engine.cycles(fold) == 3 * 4 // fold.pe      # one word per cycle
            assert engine.in_bits == _lane_bits(unit.i) == 7
            assert engine.out_bits == _lane_bits(unit.o) == out_type.bits
            assert unit.depth == 64 * (1 if rows == 1 else 4 // fold.pe)
            assert unit.block == use_block_ram(unit.depth, out_type.bits, family)
            assert engine.resources(fold, options) == \
                calibrated(unit.estimate(family), family)
            assert engine.multipliers(fold) == 0
