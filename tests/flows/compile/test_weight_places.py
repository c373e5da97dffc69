"""Where a matrix unit's weights go is part of its folding (``Fold.weights``): a fold file
may put them in block RAM or in logic, the estimate and the built unit agree on it, and
``--fold auto`` moves weight memories out of block RAM when a plan would take more than
``ROOMY_SHARE`` of the device's blocks (``qloom.flows.compile.plan.spare_block_ram``)."""

import json

import numpy as np
import pytest

from qloom.errors import QloomError
from qloom.flows.compile.steps import CompileConfig, run_steps
from qloom.flows.compile.cost import Family, Resources
from qloom.flows.compile.engines.base import BuildOptions, Fold
from qloom.flows.compile.engines.conv import ConvEngine
from qloom.flows.compile.plan import ROOMY_SHARE, plan_for_cycles, spare_block_ram
from qloom.nn.dtypes import BIPOLAR, int_type
from qloom.nn.ir import Conv

from nets import NetBuilder

ECP5 = BuildOptions(family=Family.ECP5)


def wide_mlp():
    """Two binary layers whose weights the memory rule puts in block RAM when folded."""
    b = NetBuilder((256,), BIPOLAR, seed=3)
    b.dense(256, BIPOLAR)
    b.threshold(BIPOLAR)
    b.dense(128, BIPOLAR)
    b.threshold(BIPOLAR)
    return b.network("wide_mlp")


def _fold(**entries):
    return {"dense0": {"pe": 8, "simd": 32}, "dense2": {"pe": 8, "simd": 32}, **entries}


def test_fold_file_places_the_weights_and_the_report_gives_it_back(tmp_path):
    cfg = dict(board="ulx3s-85f")
    rule = run_steps(wide_mlp(), CompileConfig(fold=_fold(), **cfg), until="fold").plan
    assert rule.folds["dense0"].weights == "" and rule.resources["dense0"].bram > 0
    logic = run_steps(wide_mlp(), CompileConfig(
        fold=_fold(dense0={"pe": 8, "simd": 32, "weights": "logic"}), **cfg),
        until="fold").plan
    assert logic.folds["dense0"] == Fold(8, 32, "logic")
    assert logic.fold_file["dense0"] == {"pe": 8, "simd": 32, "weights": "logic"}
    assert logic.fold_file["dense2"] == {"pe": 8, "simd": 32}
    # The weights' blocks are gone, their LUTs there instead; the other layer is untouched.
    assert logic.resources["dense0"].bram < rule.resources["dense0"].bram
    assert logic.resources["dense0"].lut > rule.resources["dense0"].lut
    assert logic.resources["dense2"] == rule.resources["dense2"]
    # The fold file the report gives rebuilds the same plan.
    path = tmp_path / "fold.json"
    path.write_text(json.dumps(logic.fold_file))
    again = run_steps(wide_mlp(), CompileConfig(fold=str(path), **cfg), until="fold").plan
    assert again.folds == logic.folds and again.resources == logic.resources


@pytest.mark.parametrize("entry, message", [
    ({"pe": 8, "simd": 32, "weights": "spram"},
     r"layer 'dense0': weights = 'spram' is not legal; allowed: \['block', 'logic'\]"),
    ({"pe": 8, "weights": 1}, r"weights = 1 is not legal"),
])
def test_fold_file_weights_errors_name_layer_and_value(entry, message):
    with pytest.raises(QloomError, match=message):
        run_steps(wide_mlp(), CompileConfig(fold=_fold(dense0=entry)), until="fold")


def test_layers_without_a_weight_memory_take_no_weights_key():
    b = NetBuilder((8, 8, 4), int_type(4), seed=1)
    b.conv(4, 3, int_type(4))          # multi-bit: the systolic array holds its weights
    with pytest.raises(QloomError, match=r"unknown key\(s\) \['weights'\]"):
        run_steps(b.network(), CompileConfig(fold={"conv0": {"pe": 2, "weights": "logic"}}),
                  until="fold")


def _engines():
    return run_steps(wide_mlp(), CompileConfig(board="ulx3s-85f"), until="map").engines


def test_spare_block_ram_moves_the_cheapest_weights_until_within_the_share():
    engines = _engines()
    plan = plan_for_cycles(engines, 256, ECP5)
    blocks = plan.total.bram
    assert blocks > 4
    # A device where the plan's blocks are just over the share, LUTs aplenty.
    budget = Resources(lut=10 ** 6, ff=10 ** 6, dsp=0, bram=int(blocks / ROOMY_SHARE) - 1)
    moved = spare_block_ram(engines, plan, budget, lambda need: need.fits(budget), ECP5)
    assert moved.total.bram <= ROOMY_SHARE * budget.bram < blocks
    assert [f.weights for f in moved.folds.values()].count("logic") >= 1
    assert moved.cycles == plan.cycles and moved.total.lut > plan.total.lut
    # The foldings otherwise stay what they were.
    assert {n: (f.pe, f.simd) for n, f in moved.folds.items()} == \
        {n: (f.pe, f.simd) for n, f in plan.folds.items()}


def test_spare_block_ram_leaves_a_plan_alone_when_no_move_keeps_luts_within_the_share():
    engines = _engines()
    plan = plan_for_cycles(engines, 256, ECP5)
    tight = Resources(lut=int(plan.total.lut / ROOMY_SHARE) + 1, ff=10 ** 6, dsp=0,
                      bram=plan.total.bram)
    assert spare_block_ram(engines, plan, tight, lambda need: need.fits(tight), ECP5) is plan
    roomy = Resources(lut=10 ** 6, ff=10 ** 6, dsp=0, bram=2 * plan.total.bram)
    assert spare_block_ram(engines, plan, roomy, lambda need: need.fits(roomy), ECP5) is plan


@pytest.mark.parametrize("weights", ["", "block", "logic"])
@pytest.mark.parametrize("options", [ECP5, BuildOptions(family=Family.ICE40, sprams=4)],
                         ids=["ecp5", "up5k"])
def test_conv_estimate_and_built_unit_place_the_weights_alike(weights, options):
    """The estimate and the unit built read one choice (``ConvEngine.styles``): block RAM,
    logic, or (iCE40UP5K, by the rule) SPRAM."""
    rng = np.random.default_rng(5)
    oc, ic = 64, 64
    conv = Conv("c", ("x",), "y", weights=rng.choice([-1, 1], size=(oc, 3, 3, ic)),
                w_type=BIPOLAR, in_type=BIPOLAR)
    engine = ConvEngine(conv, None, (6, 6, ic), (4, 4, oc))
    fold = Fold(4, 8, weights)
    unit = {n.name: n.component for n in engine.nodes(fold, options)}["c"]
    features = dict(engine.features(fold, options))[""]
    spram = "load" in unit.signature.members
    assert (features.spram > 0) == spram
    assert unit.weights_block == (weights == "block" or (not weights and features.bram
                                                         + features.spram > 0))
    if weights == "logic":
        assert not unit.weights_block and features.spram == 0
    if not weights and options.sprams:
        assert spram, "by the rule, 1,152 x 32 bits go to SPRAM on the UP5K"
