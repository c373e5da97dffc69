"""The planner's view of a matrix-vector unit agrees with the template it builds: datapath,
multiplier lanes, DSP blocks used and cycles, over many pairs of datatypes (issue 11: one
truth per hardware decision; the engine asks ``qloom.hw.mvu_datapath.select_datapath``)."""

import numpy as np
import pytest

from qloom.flows.compile.engines.base import BuildOptions, Fold
from qloom.flows.compile.engines.dense import DenseEngine, datapath_of
from qloom.hw.mvu import MVU, MVUConfig
from qloom.hw.mvu_datapath import Datapath
from qloom.nn.dtypes import BINARY, BIPOLAR, TERNARY, int_type, uint_type
from qloom.nn.ir import Dense

TYPES = [BIPOLAR, BINARY, TERNARY, int_type(1), int_type(2), int_type(3), int_type(4),
         int_type(8), int_type(4, narrow=True), uint_type(1), uint_type(2), uint_type(4),
         uint_type(8)]
SUFFIX = {Datapath.XNOR_POPCOUNT: "xnor", Datapath.ADD_SUB: "addsub", Datapath.MAC: "mac"}
MH, MW = 4, 6


def _weights(w_type, rng):
    if w_type.bipolar:
        return rng.choice([-1, 1], size=(MH, MW)).astype(np.int64)
    return rng.integers(w_type.min, w_type.max + 1, size=(MH, MW)).astype(np.int64)


@pytest.mark.parametrize("w_type", TYPES, ids=str)
@pytest.mark.parametrize("in_type", TYPES, ids=str)
def test_engine_and_template_agree(w_type, in_type):
    rng = np.random.default_rng(len(str(w_type)) * 31 + len(str(in_type)))
    weights = _weights(w_type, rng)
    dense = Dense("d", ("x",), "y", weights=weights, w_type=w_type, in_type=in_type)
    engine = DenseEngine(dense, None, vectors=1)
    fold = Fold(2, 3)
    for budget in (0, 3, None):
        unit = MVU(MVUConfig(weights=weights, w_type=w_type, in_type=in_type, pe=fold.pe,
                   simd=fold.simd, dsp_budget=budget))
        assert datapath_of(w_type, in_type) == SUFFIX[unit.datapath]
        assert engine.engine_name == f"mvu_{SUFFIX[unit.datapath]}"
        multipliers = engine.multipliers(fold)
        assert multipliers == (fold.pe * fold.simd if unit.datapath is Datapath.MAC else 0)
        # The plan gives an engine at most its multipliers in DSP blocks; the unit uses
        # exactly what it is given, and none without multipliers.
        planned = multipliers if budget is None else min(budget, multipliers)
        assert unit.dsp_count == planned
        resources = engine.resources(fold, BuildOptions(dsp_budget=budget), planned)
        assert resources.dsp == planned
        assert engine.cycles(fold) == unit.cycles_per_vector == (MH // 2) * (MW // 3)


def test_every_ir_layer_type_has_an_engine_or_a_reason():
    """The registry is the one list of what compiles; its message is generated from it."""
    import qloom.nn.ir as ir
    from qloom.flows.compile.engines.mapping import ENGINES, supported_layers
    layer_types = {cls for cls in vars(ir).values()
                   if isinstance(cls, type) and issubclass(cls, ir.Layer) and cls is not ir.Layer}
    assert layer_types - set(ENGINES) <= {ir.Flatten}
    assert supported_layers() == sorted([k.__name__ for k in ENGINES] + ["Flatten"])
    from qloom.flows.compile.engines.base import Engine
    for engine in ENGINES.values():      # each says how it is made from its layer
        assert engine.from_layer.__func__ is not Engine.from_layer.__func__, engine


@pytest.mark.parametrize("w_type", TYPES, ids=str)
@pytest.mark.parametrize("in_type", TYPES, ids=str)
def test_conv_engine_and_its_templates_agree(w_type, in_type):
    """A convolution's engine and the nodes it builds: the matrix unit it names (systolic
    array or MVU of the template's datapath), its DSP blocks (features, plan and the built
    unit), and the sliding window's share of the cycles."""
    from qloom.flows.compile.engines.conv import ConvEngine
    from qloom.hw.swg import SlidingWindow
    from qloom.hw.systolic import SystolicArray
    from qloom.nn.ir import Conv
    rng = np.random.default_rng(len(str(w_type)) * 17 + len(str(in_type)))
    oc, ic, size = 4, 2, 4
    weights = (rng.choice([-1, 1], size=(oc, 3, 3, ic)) if w_type.bipolar else
               rng.integers(w_type.min, w_type.max + 1, size=(oc, 3, 3, ic))).astype(np.int64)
    conv = Conv("c", ("x",), "y", weights=weights, w_type=w_type, in_type=in_type)
    engine = ConvEngine(conv, None, (size, size, ic), (size - 2, size - 2, oc))
    fold = Fold(2, 2)
    for budget in (0, 3, None):
        multipliers = engine.multipliers(fold)
        planned = multipliers if budget is None else min(budget, multipliers)
        options = BuildOptions(dsp_budget=budget, pipeline=False)
        nodes = {n.name: n.component for n in engine.nodes(fold, options, planned)}
        unit, window = nodes["c"], nodes["c_swg"]
        assert isinstance(window, SlidingWindow)
        if isinstance(unit, SystolicArray):
            assert engine.engine_name == "swg+systolic"
            assert multipliers == fold.pe * fold.simd
        else:
            assert engine.engine_name == f"swg+mvu_{SUFFIX[unit.datapath]}"
            assert multipliers == (fold.pe * fold.simd if unit.datapath is Datapath.MAC else 0)
        assert unit.dsp_count == planned
        features = dict(engine.features(fold, options, planned))
        assert features[""].dsp == planned and features["_swg"].dsp == 0
        assert set(features) <= set(n[len("c"):] for n in nodes)
        assert engine.resources(fold, options, planned).dsp == planned
        # The matrix unit sets the pace: a window's words per output pixel are its cycles.
        pixels = window.out_h * window.out_w
        assert engine.cycles(fold) == pixels * (oc // fold.pe) * (9 * ic // fold.simd)
        assert window.out_words_per_frame == pixels * 9 * ic // fold.simd
