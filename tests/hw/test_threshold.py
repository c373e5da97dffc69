# amaranth: UnusedElaboratable=no
import numpy as np
import pytest
from amaranth.hdl import Fragment, Shape

from qloom.hw.estimate import Family
from qloom.hw.threshold import ThresholdMode, ThresholdSpec, Thresholding, compare_register
from qloom.nn.dtypes import BINARY, BIPOLAR, int_type, uint_type
from qloom.nn.ir import MultiThreshold
from qloom.sim.pysim import run_stream

INT2, INT4, INT8, INT16 = (int_type(b) for b in (2, 4, 8, 16))
UINT2, UINT4, UINT8 = (uint_type(b) for b in (2, 4, 8))


def random_values(dtype, size, rng):
    if dtype.bipolar:
        return rng.choice([-1, 1], size=size)
    return rng.integers(dtype.min, dtype.max + 1, size=size)


def random_spec(rng, channels, count, in_type, out_type, *, mixed=True):
    """Sorted thresholds over (a bit beyond) the input range, with repeats; +1/-1 signs
    and varied biases when ``mixed``, else the plain ``code = count``."""
    thresholds = np.sort(rng.integers(in_type.min - 2, in_type.max + 3,
                                      size=(channels, count)), axis=1)
    code_lo, code_hi = (int(c) for c in out_type.encode([out_type.min, out_type.max]))
    if not mixed:
        return ThresholdSpec(thresholds=thresholds, bias=np.full(channels, code_lo),
                             sign=np.ones(channels, dtype=np.int64), out_type=out_type)
    sign = rng.choice([-1, 1], size=channels)
    bias = np.where(sign > 0, rng.integers(code_lo, code_hi - count + 1, size=channels),
                    rng.integers(code_lo + count, code_hi + 1, size=channels))
    return ThresholdSpec(thresholds=thresholds, bias=bias, sign=sign, out_type=out_type)


def ref_threshold(spec, in_type, x):
    """The integer IR's MultiThreshold on ``x[N, C]``: output values."""
    return MultiThreshold("act", ("x",), "y", thresholds=spec.thresholds, bias=spec.bias,
                          sign=spec.sign, in_type=in_type, out_type=spec.out_type).execute(x)


def rtl_threshold(dut, in_type, x, **run_options):
    codes = in_type.encode(x).reshape(-1, dut.pe).tolist()
    run = run_stream(dut, codes, len(codes), **run_options)
    out = np.array(run.outputs, dtype=np.int64).reshape(x.shape)
    return dut.spec.out_type.decode(out), run


# (channels, K, PE, in_type, out_type, mixed bias/sign)
CASES = {
    "pe1-binary-out": (3, 1, 1, INT4, BINARY, False),
    "pe=c-2bit": (4, 3, 4, INT8, INT2, True),
    "non-pow2-folds": (6, 3, 2, INT8, UINT2, True),
    "bipolar-in-bipolar-out": (4, 1, 2, BIPOLAR, BIPOLAR, True),
    "4bit-out": (4, 15, 2, UINT8, UINT4, True),
    "16bit-in": (3, 7, 3, INT16, int_type(3), True),
}


@pytest.mark.parametrize("compare_register", [None, True, False])
@pytest.mark.parametrize("mode", ThresholdMode)
@pytest.mark.parametrize("case", CASES)
def test_threshold_bit_exact_under_stalls(case, mode, compare_register):
    """Also with the compare register forced on and off (the ECP5 registers a count of 2
    or more thresholds, qloom.hw.threshold.compare_register)."""
    channels, count, pe, in_type, out_type, mixed = CASES[case]
    rng = np.random.default_rng(3)
    spec = random_spec(rng, channels, count, in_type, out_type, mixed=mixed)
    dut = Thresholding(spec=spec, in_type=in_type, pe=pe, mode=mode,
                       compare_register=compare_register)
    if mode is ThresholdMode.PARALLEL:
        registered = count > 4 if compare_register is None else compare_register
        assert dut.latency == 2 + registered
    x = random_values(in_type, (8, channels), rng)
    out, _ = rtl_threshold(dut, in_type, x, in_stall=0.3, out_stall=0.3, seed=5)
    np.testing.assert_array_equal(out, ref_threshold(spec, in_type, x))
    out, run = rtl_threshold(dut, in_type, x)
    np.testing.assert_array_equal(out, ref_threshold(spec, in_type, x))
    assert dut.cycles_per_word == 1
    assert np.diff(run.out_cycles).tolist() == [1] * (len(run.out_cycles) - 1)
    assert [o - i for o, i in zip(run.out_cycles, run.in_cycles)] == \
        [dut.latency] * len(run.in_cycles)


@pytest.mark.parametrize("reads", [1, 2])
def test_binary_search_8bit_every_input(reads):
    """255 thresholds per channel, every INT8 input value once per channel; each stage's
    read data registered once or twice (``search_read_registers``)."""
    rng = np.random.default_rng(4)
    spec = random_spec(rng, 2, 255, INT8, UINT8, mixed=False)
    dut = Thresholding(spec=spec, in_type=INT8, pe=2, mode=ThresholdMode.BINARY_SEARCH,
                       read_registers=reads)
    assert dut.search_stages == 8 and dut.latency == (1 + reads) * 8 + 2
    x = np.stack([np.arange(-128, 128), rng.permutation(np.arange(-128, 128))], axis=1)
    out, _ = rtl_threshold(dut, INT8, x, in_stall=0.2, out_stall=0.2)
    np.testing.assert_array_equal(out, ref_threshold(spec, INT8, x))
    out, run = rtl_threshold(dut, INT8, x)
    np.testing.assert_array_equal(out, ref_threshold(spec, INT8, x))
    assert [o - i for o, i in zip(run.out_cycles, run.in_cycles)] == \
        [dut.latency] * len(run.in_cycles)


def test_search_read_registers_by_family():
    from qloom.hw.estimate import Family
    from qloom.hw.threshold import search_read_registers
    assert (search_read_registers(Family.ECP5), search_read_registers(Family.ICE40)) == (2, 1)
    spec = random_spec(np.random.default_rng(0), 2, 3, INT8, UINT8, mixed=False)
    with pytest.raises(TypeError, match=r"Read registers must be 1 or 2, not 3"):
        Thresholding(spec=spec, in_type=INT8, pe=1, read_registers=3)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ThresholdMode)
@pytest.mark.parametrize("count,out_type", [(1, BIPOLAR), (2, INT2), (63, UINT8),
                                            (127, INT8), (255, UINT8)])
@pytest.mark.parametrize("pe", [1, 3])
def test_threshold_sweep(mode, count, out_type, pe):
    rng = np.random.default_rng(count + pe)
    channels = 6
    spec = random_spec(rng, channels, count, INT8, out_type, mixed=out_type != BIPOLAR)
    dut = Thresholding(spec=spec, in_type=INT8, pe=pe, mode=mode)
    x = random_values(INT8, (40, channels), rng)
    out, _ = rtl_threshold(dut, INT8, x, in_stall=0.3, out_stall=0.3, seed=count)
    np.testing.assert_array_equal(out, ref_threshold(spec, INT8, x))


@pytest.mark.parametrize("count,stages", [(1, 1), (2, 2), (3, 2), (4, 3), (15, 4), (16, 5),
                                          (255, 8)])
def test_search_stages(count, stages):
    spec = ThresholdSpec(thresholds=np.zeros((1, count), dtype=np.int64),
                         bias=np.zeros(1, dtype=np.int64), sign=np.ones(1, dtype=np.int64),
                         out_type=uint_type(9))
    dut = Thresholding(spec=spec, in_type=INT8, pe=1, mode=ThresholdMode.BINARY_SEARCH)
    assert (dut.search_stages, dut.latency, dut.cycles_per_word) == (stages, 2 * stages + 2, 1)


def test_spec_reference_and_from_layer():
    layer = MultiThreshold("act", ("x",), "y", thresholds=np.array([[0, 2], [-1, 5]]),
                           bias=np.array([-2, 1]), sign=np.array([1, -1]),
                           in_type=INT4, out_type=INT2)
    spec = ThresholdSpec.from_layer(layer)
    assert (spec.channels, spec.num_thresholds) == (2, 2)
    x = np.array([[-3, -3], [0, 0], [2, 5], [7, 7]])
    np.testing.assert_array_equal(spec.reference(x), INT2.encode(layer.execute(x)))
    with pytest.raises(ValueError):
        spec.thresholds[0, 0] = 9  # frozen: the arrays are read-only copies


def spec_args(**changes):
    args = dict(thresholds=np.array([[0, 1], [2, 3]]), bias=np.array([0, 0]),
                sign=np.array([1, 1]), out_type=UINT2)
    return {**args, **changes}


@pytest.mark.parametrize("changes,error,match", [
    ({"thresholds": [[0, 1]]}, TypeError,
     r"Thresholds must be an integer numpy array, not \[\[0, 1\]\]"),
    ({"bias": np.zeros(2)}, TypeError, r"Bias must be an integer numpy array"),
    ({"sign": np.array([[1, 1]])}, ValueError, r"Sign must have 1 dimension\(s\), not shape"),
    ({"out_type": "UINT2"}, TypeError, r"Output type must be a qloom DataType, not 'UINT2'"),
    ({"thresholds": np.zeros((2, 0), dtype=np.int64)}, ValueError,
     r"Thresholds must have at least one channel and one threshold, not shape \(2, 0\)"),
    ({"bias": np.array([0, 0, 0])}, ValueError,
     r"Bias \(3,\) and sign \(2,\) must have one entry per channel \(2\)"),
    ({"sign": np.array([1, 0])}, ValueError, r"Sign must hold only \+1 and -1, not \[0, 1\]"),
    ({"thresholds": np.array([[0, 1], [3, 2]])}, ValueError,
     r"Thresholds of channel 1 must be ascending, not \[3, 2\]"),
    ({"bias": np.array([0, 2])}, ValueError,
     r"Output codes span \[0, 4\], outside the codes \[0, 3\] of output type UINT2"),
    ({"sign": np.array([1, -1])}, ValueError,
     r"Output codes span \[-2, 2\], outside the codes \[0, 3\] of output type UINT2"),
])
def test_spec_validation(changes, error, match):
    with pytest.raises(error, match=match):
        ThresholdSpec(**spec_args(**changes))


@pytest.mark.parametrize("changes,error,match", [
    ({"spec": None}, TypeError, r"Threshold spec must be a ThresholdSpec, not None"),
    ({"in_type": "INT4"}, TypeError, r"Input type must be a qloom DataType, not 'INT4'"),
    ({"pe": 0}, TypeError, r"PE count must be a positive integer, not 0"),
    ({"pe": 3}, ValueError, r"Channel count \(2\) must be divisible by PE \(3\)"),
    ({"mode": "parallel"}, TypeError,
     r"Threshold mode must be a ThresholdMode, not 'parallel'"),
    ({"ram_style": "block"}, TypeError, r"RAM style must be a RamStyle, not 'block'"),
    ({"compare_register": 1}, TypeError, r"Compare register must be a bool or None, not 1"),
])
def test_thresholding_validation(changes, error, match):
    args = dict(spec=ThresholdSpec(**spec_args()), in_type=INT4, pe=1)
    with pytest.raises(error, match=match):
        Thresholding(**{**args, **changes})


def test_compare_register_rule():
    """Over 4 thresholds everywhere; on the ECP5 from 2 (one threshold has no count); on
    the iCE40 always."""
    assert [compare_register(k) for k in (1, 2, 4, 5)] == [False, False, False, True]
    assert [compare_register(k, Family.ECP5) for k in (1, 2, 4, 5)] == [False, True, True, True]
    assert [compare_register(k, Family.ICE40) for k in (1, 2, 4, 5)] == [True, True, True, True]


@pytest.mark.parametrize("family", [Family.ICE40, Family.ECP5])
@pytest.mark.parametrize("mode,count", [(ThresholdMode.BINARY_SEARCH, 255),
                                        (ThresholdMode.PARALLEL, 3)])
def test_memories_are_where_the_estimate_counts_them(monkeypatch, family, mode, count):
    """Given a family, every memory the unit builds is in block RAM or in LUTs by the
    family's rule, and the estimate counts exactly those blocks (UNSW-NB15's 64-channel,
    255-threshold layer: Yosys chose block RAM for all 8 stages where the estimate had
    counted the small ones as LUTs, 42 blocks against 39). The search's thresholds are
    clipped to the input's range, one bit wider than the input's (INT9: [-256, 256])."""
    from qloom.hw import threshold
    from qloom.hw.estimate import bram_count, use_block_ram
    from qloom.hw.weight_mem import RamStyle
    built = []

    def rom(shape, init, ram_style=RamStyle.AUTO):
        built.append((len(init), Shape.cast(shape).width, ram_style))
        return real_rom(shape, init, ram_style)
    real_rom = threshold.rom
    monkeypatch.setattr(threshold, "rom", rom)
    rng = np.random.default_rng(count)
    spec = random_spec(rng, 64, count, int_type(9), uint_type(8) if count > 3 else INT4)
    dut = Thresholding(spec=spec, in_type=int_type(9), pe=1, mode=mode, family=family)
    Fragment.get(dut, None)
    styles = {RamStyle.BLOCK: True, RamStyle.DISTRIBUTED: False}
    assert built and all(styles[style] == use_block_ram(depth, width, family)
                         for depth, width, style in built)
    assert dut.estimate(family).bram == sum(bram_count(depth, width, family)
                                            for depth, width, style in built
                                            if style is RamStyle.BLOCK)
    if mode is ThresholdMode.BINARY_SEARCH:
        assert [w for _, w, _ in built[:2]] == [10, 20]      # stage 0, then pairs


def test_search_with_a_family_and_mixed_signs_is_exact():
    """Memories placed by the family (the bias/sign memory too) give the same results."""
    rng = np.random.default_rng(7)
    spec = random_spec(rng, 4, 63, INT8, UINT8)
    dut = Thresholding(spec=spec, in_type=INT8, pe=2, mode=ThresholdMode.BINARY_SEARCH,
                       read_registers=2, family=Family.ECP5)
    x = random_values(INT8, (30, 4), rng)
    out, _ = rtl_threshold(dut, INT8, x, in_stall=0.3, out_stall=0.3)
    np.testing.assert_array_equal(out, ref_threshold(spec, INT8, x))
