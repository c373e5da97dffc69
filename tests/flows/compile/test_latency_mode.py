"""Latency mode: the planner puts unrolled constant-weight engines in place of dense
engines at one vector per cycle (``--latency``, a fold-file entry, or a frame rate that
needs it), the compiled top stays bit exact under backpressure at one frame per cycle,
and the report's estimate is the template's."""

from pathlib import Path

import numpy as np
import pytest

from qloom.errors import QloomError
from qloom.flows.compile.steps import CompileConfig, run_steps
from qloom.flows.compile.engines.base import BuildOptions
from qloom.flows.compile.engines.unrolled import (UnrolledEngine, broadcast_fanout,
                                                  chain_schedule, cluster_size, levels_per_stage)
from qloom.hw.unrolled import UnrolledChain, UnrolledDesign
from qloom.nn.dtypes import int_type, uint_type

from nets import binary_mlp, conv_net, multibit_mlp, random_input
from test_top import rtl_run

MODELS = Path(__file__).resolve().parents[3] / "examples" / "models"


def _kinds(state):
    return [e.engine_name for e in state.engines]


def test_latency_chains_every_dense_layer_into_one_engine():
    state = run_steps(multibit_mlp(), CompileConfig(latency=True), until="fold")
    assert _kinds(state) == ["unrolled"]
    (engine,) = state.engines
    assert engine.layers == ("dense0", "thr1", "dense2", "thr3", "dense4")
    assert state.plan.how == "latency" and state.plan.ideal_ii_cycles == 1
    # The plan's estimate is the template's own count.
    design = engine.design(state.options)
    assert state.plan.resources[engine.name].lut >= design.resources()["lut"]
    assert state.plan.resources[engine.name].dsp == 0


def test_default_plan_keeps_folded_matrix_units():
    state = run_steps(binary_mlp(), CompileConfig(), until="fold")
    assert "unrolled" not in _kinds(state)


def test_fold_file_entry_at_one_vector_per_cycle_unrolls_that_layer():
    net = multibit_mlp()
    fold = {"dense2": {"pe": 6, "simd": 8}}
    state = run_steps(net, CompileConfig(fold=fold), until="fold")
    kinds = dict(zip([e.name for e in state.engines], _kinds(state)))
    assert kinds["dense2"] == "unrolled" and kinds["dense0"].startswith("mvu")
    unrolled = next(e for e in state.engines if isinstance(e, UnrolledEngine))
    assert unrolled.layers == ("dense2", "thr3"), "with the threshold fused into it"
    # The plan's choice (and so a later fold file) names the layers mapping offered.
    assert state.plan.choice["dense2"].pe == 6


def test_high_frame_rate_plans_unrolled_layers():
    state = run_steps(multibit_mlp(), CompileConfig(target_fps=100e6, clock_mhz=100),
                      until="fold")
    assert _kinds(state) == ["unrolled"]


def test_latency_and_target_fps_conflict():
    with pytest.raises(QloomError, match=r"--latency and --target-fps both choose the "
                                         r"folding; give one"):
        run_steps(binary_mlp(), CompileConfig(latency=True, target_fps=1e6), until="fold")


def test_levels_per_stage_follow_the_family_and_pipeline_option():
    from qloom.flows.compile.cost import Family
    assert levels_per_stage(BuildOptions(family=Family.ECP5)) > \
        levels_per_stage(BuildOptions(family=Family.ICE40))
    assert levels_per_stage(BuildOptions(pipeline=False)) > 1000
    assert broadcast_fanout(BuildOptions()) and broadcast_fanout(BuildOptions(pipeline=False)) \
        is None


def test_chain_schedule_multibit_chains_on_ecp5_only():
    """Multi-bit chains on ECP5: three levels per stage, two after a far read, copies per
    4 readers; popcount chains and other families: the family's levels, no far limit,
    copies per BROADCAST_READERS; the engine builds the design so."""
    from qloom.flows.compile.cost import Family
    from qloom.hw.unrolled import BROADCAST_READERS, UnrolledLayer
    multi = [UnrolledLayer(np.ones((3, 4), dtype=int), int_type(4), int_type(4))]
    binary = [UnrolledLayer(np.ones((3, 4), dtype=int), int_type(4), uint_type(1))]
    ecp5, ice40 = BuildOptions(family=Family.ECP5), BuildOptions(family=Family.ICE40)
    assert chain_schedule(multi, ecp5) == (3, 2, 4)
    assert chain_schedule(binary, ecp5) == (levels_per_stage(ecp5), None, BROADCAST_READERS)
    assert chain_schedule(multi, ice40) == (levels_per_stage(ice40), None, BROADCAST_READERS)
    assert chain_schedule(multi, BuildOptions(family=Family.ECP5, pipeline=False))[1] is None
    state = run_steps(multibit_mlp(), CompileConfig(latency=True, board="ulx3s-85f"),
                      until="fold")
    (engine,) = [e for e in state.engines if isinstance(e, UnrolledEngine)]
    d = engine.design(state.options)
    assert (d.levels_per_stage, d.far_levels, d.copy_readers) == (3, 2, 4)


@pytest.mark.parametrize("make", [multibit_mlp, binary_mlp,
                                  pytest.param(conv_net, marks=pytest.mark.slow)])
def test_latency_mode_top_bit_exact_under_backpressure(make):
    net = make()
    x = random_input(net, 12)
    got, state, _ = rtl_run(net, x, CompileConfig(latency=True), stall=0.3)
    np.testing.assert_array_equal(got, net.execute_int(x).reshape(12, -1))
    assert "unrolled" in _kinds(state)


def test_latency_mode_top_takes_one_frame_per_cycle():
    net = multibit_mlp()
    x = random_input(net, 30)
    got, state, run = rtl_run(net, x, CompileConfig(latency=True))
    np.testing.assert_array_equal(got, net.execute_int(x).reshape(30, -1))
    assert np.all(np.diff(run.in_cycles) == 1) and np.all(np.diff(run.out_cycles) == 1)
    chain = next(n.component for n in state.top.nodes if isinstance(n.component, UnrolledChain))
    # The chain alone: it buffers its results itself and its ports are registered, so
    # the top's input and output edges are plain connections.
    assert run.out_cycles[0] - run.in_cycles[0] == chain.latency
    assert not any("fifo" in name or "skid" in name for name in _submodule_names(state.top))


def _submodule_names(top):
    from amaranth.hdl import Fragment
    return [sub[1] for sub in Fragment.get(top, None).subfragments]


def test_jet_tagger_latency_plan():
    pytest.importorskip("qonnx")
    state = run_steps(str(MODELS / "jettagging_w6a6.onnx"),
                      CompileConfig(latency=True, board="ulx3s-85f"), until="fold")
    (engine,) = state.engines
    assert engine.engine_name == "unrolled" and len(engine.layers) == 7
    total = state.plan.total
    assert total.dsp == 0 and state.board.fits(total)


def test_large_chains_on_ecp5_share_products_within_clusters():
    """On ECP5 a chain over ``CLUSTER_MIN_LUTS`` shares products and sums only within
    clusters of neurons (routability); small chains, each of the jet tagger's layers
    alone and other families share them across whole layers, and the built chain is the
    estimated one."""
    pytest.importorskip("qonnx")
    from qloom.flows.compile.cost import Family
    from qloom.flows.compile.engines.unrolled import CLUSTER_MIN_LUTS
    state = run_steps(str(MODELS / "jettagging_w6a6.onnx"),
                      CompileConfig(latency=True, board="ulx3s-85f"), until="fold")
    (engine,) = state.engines
    ecp5 = engine.design(state.options)
    ice40 = engine.design(BuildOptions(family=Family.ICE40))
    assert ecp5.cluster and ice40.cluster is None
    shared = UnrolledDesign(engine.hw_layers(), ecp5.levels_per_stage, ecp5.fanout)
    assert shared.resources()["lut"] > CLUSTER_MIN_LUTS
    assert ecp5.resources()["lut"] > shared.resources()["lut"]
    (node,) = engine.nodes(engine.fold, state.options)
    assert node.component.design.cluster == ecp5.cluster
    assert cluster_size(engine.hw_layers(), state.options) == ecp5.cluster
    assert all(cluster_size([layer], state.options) is None for layer in engine.hw_layers())
    small = run_steps(multibit_mlp(), CompileConfig(latency=True, board="ulx3s-85f"),
                      until="fold")
    for e in small.engines:
        if isinstance(e, UnrolledEngine):
            assert e.design(small.options).cluster is None


def test_unrolled_engine_from_a_dense_layer():
    net = multibit_mlp()
    dense = net.layer("dense4")
    engine = UnrolledEngine.from_layer(dense, net)
    fold = engine.folds()[0]
    assert (fold.pe, fold.simd) == (dense.mh, dense.mw) and engine.cycles(fold) == 1
    assert engine.inputs == dense.inputs and engine.output == dense.output
    with pytest.raises(TypeError, match=r"an unrolled engine implements Dense layers, not "
                                        r"MultiThreshold"):
        UnrolledEngine.from_layer(net.layer("thr3"), net)


def test_report_fold_file_rebuilds_the_folding(tmp_path):
    """report.json's ``fold_file`` given back to --fold makes the same design, unrolled
    chains included (the chain's own ``fold`` is no layer's folding)."""
    import json
    from qloom.flows.compile.steps import compile_model
    net = multibit_mlp()
    first = compile_model(net, tmp_path / "a", latency=True)
    (tmp_path / "fold.json").write_text(json.dumps(first.report["fold_file"]))
    again = compile_model(net, tmp_path / "b", fold=str(tmp_path / "fold.json"))
    assert [(r["name"], r["engine"], r["fold"]) for r in again.report["layers"]] == \
        [(r["name"], r["engine"], r["fold"]) for r in first.report["layers"]]
    assert again.report["fold_file"] == first.report["fold_file"]


def test_manifest_says_whether_the_input_is_registered(tmp_path):
    """An unrolled chain at the input takes it into registers with a register for ready:
    the manifest says so, and the board's link then feeds it with no skid buffer."""
    import json
    from qloom.flows.compile.steps import compile_model
    from qloom.hw.board_top import VerilogAccelerator
    net = multibit_mlp()
    for latency, want in ((True, True), (False, False)):
        design = compile_model(net, tmp_path / str(latency), latency=latency)
        manifest = json.loads((design.out_dir / "manifest.json").read_text())
        assert manifest["input"]["registered"] is want
        assert VerilogAccelerator.from_manifest(manifest).registered_input is want
