"""The compile flow's outputs and options, on networks built in the IR (no ONNX needed)."""

import json

import pytest

from qloom.errors import QloomError
from qloom.flows.compile.steps import CompileConfig, compile_model, run_steps
from qloom.nn.dtypes import int_type

from qloom.sim.rtl_check import comb_processes_without_reset

from nets import binary_mlp, conv_net, multibit_mlp, residual_mlp


def test_outputs_and_report(tmp_path):
    out = tmp_path / "out"
    design = compile_model(binary_mlp(), out)
    assert (out / "rtl" / "qloom_top.v").read_text().count("module qloom_top") == 1
    manifest = json.loads((out / "manifest.json").read_text())
    report = json.loads((out / "report.json").read_text())
    assert manifest["top"] == "qloom_top"
    assert manifest["input"]["payload_bits"] == manifest["input"]["lanes"] + 1
    assert [l["name"] for l in report["layers"]] == ["dense0", "dense2", "dense4"]
    assert report["layers"][0]["layers"] == ["dense0", "thr1"], "thresholds fuse into the MVU"
    assert report["ideal_ii_cycles"] == max(l["cycles_per_frame"] for l in report["layers"])
    assert report["bottleneck"] in {l["name"] for l in report["layers"]}
    assert "| dense0 | mvu_xnor |" in (out / "report.md").read_text()
    assert design.manifest == manifest


def test_verilog_is_deterministic(tmp_path):
    a = compile_model(multibit_mlp(), tmp_path / "a")
    b = compile_model(multibit_mlp(), tmp_path / "b")
    assert (a.out_dir / "rtl" / "qloom_top.v").read_bytes() == \
        (b.out_dir / "rtl" / "qloom_top.v").read_bytes()


def test_existing_output_replaced_only_when_complete(tmp_path):
    out = tmp_path / "out"
    compile_model(binary_mlp(), out)
    before = (out / "manifest.json").read_text()
    with pytest.raises(QloomError, match="unknown layer"):
        compile_model(binary_mlp(), out, fold={"nope": {"pe": 1}})
    assert (out / "manifest.json").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"], "no staging folders left"


@pytest.mark.parametrize("fold, message", [
    ({"nope": {"pe": 2}}, r"unknown layer\(s\) \['nope'\]"),
    ({"dense0": {"pe": 5}}, r"layer 'dense0': pe = 5 is not legal; allowed: \[1, 2, 4, 8, 16, 32\]"),
    ({"dense0": {"simd": 3}}, r"simd = 3 is not legal"),
    ({"dense0": {"rows": 3}}, r"unknown key\(s\) \['rows'\]"),
    ({"dense0": 4}, r"must be an object"),
])
def test_fold_file_errors_name_layer_and_value(fold, message):
    with pytest.raises(QloomError, match=message):
        run_steps(binary_mlp(), CompileConfig(fold=fold), until="fold")


def test_fold_file_from_disk(tmp_path):
    path = tmp_path / "fold.json"
    path.write_text(json.dumps({"dense0": {"pe": 2, "simd": 8}, "thr1": {"pe": 2, "simd": 8}}))
    state = run_steps(binary_mlp(), CompileConfig(fold=str(path)), until="fold")
    assert state.plan.folds["dense0"].pe == 2 and state.plan.folds["dense0"].simd == 8
    path.write_text("{not json")
    with pytest.raises(QloomError, match="not valid JSON"):
        run_steps(binary_mlp(), CompileConfig(fold=str(path)), until="fold")


def test_target_fps_meets_the_cycle_budget():
    for fps in (1e5, 1e6, 5e6):
        state = run_steps(binary_mlp(), CompileConfig(target_fps=fps, clock_mhz=100),
                          until="fold")
        budget = 100e6 / fps
        fastest = max(min(e.cycles(f) for f in e.folds()) for e in state.engines)
        assert state.plan.ideal_ii_cycles <= max(budget, fastest)
    slow = run_steps(binary_mlp(), CompileConfig(target_fps=1e5, clock_mhz=100), until="fold")
    fast = run_steps(binary_mlp(), CompileConfig(target_fps=5e6, clock_mhz=100), until="fold")
    assert fast.plan.total.lut > slow.plan.total.lut


def test_conv_maps_to_window_and_systolic_array():
    state = run_steps(conv_net(), CompileConfig(), until="fold")
    engines = {e.name: e.engine_name for e in state.engines}
    assert engines["conv0"] == "swg+systolic"
    assert engines["pool2"] == "maxpool"


def test_bad_options():
    with pytest.raises(QloomError, match="unknown compile option"):
        compile_model(binary_mlp(), None, colour="red")
    with pytest.raises(QloomError, match="target-fps must be positive"):
        run_steps(binary_mlp(), CompileConfig(target_fps=0), until="fold")
    with pytest.raises(QloomError, match="needs a board"):
        run_steps(binary_mlp(), CompileConfig(fold="auto"), until="fold")


@pytest.mark.parametrize("make", [binary_mlp, multibit_mlp, residual_mlp, conv_net])
def test_verilog_has_no_process_icarus_would_skip(tmp_path, make):
    """Every combinational `always @*` must read reset or be an `assign`: Icarus in
    SystemVerilog mode (-g2012, as cocotb runs it) never starts the others at time 0."""
    design = compile_model(make(), tmp_path / "out")
    verilog = (design.out_dir / "rtl" / "qloom_top.v").read_text()
    assert comb_processes_without_reset(verilog) == []


def test_ecp5_dsp_blocks_and_their_simulation_model(tmp_path):
    """For ECP5 the multipliers are MULT18X18D blocks with their own registers; the
    simulation model is written next to the RTL, listed apart from it, and the design
    stays bit exact."""
    from nets import NetBuilder
    b = NetBuilder((8,), int_type(12), seed=3)
    b.dense(4, int_type(6))
    design = compile_model(b.network("mac"), tmp_path / "out", board="ulx3s-85f",
                           fold={"dense0": {"pe": 2, "simd": 2}})
    verilog = (design.out_dir / "rtl" / "qloom_top.v").read_text()
    assert verilog.count("MULT18X18D #(") == 4 and "module MULT18X18D" not in verilog
    assert design.manifest["rtl"] == ["rtl/qloom_top.v"]
    assert design.manifest["sim_rtl"] == ["rtl/sim/MULT18X18D.v"]
    assert "module MULT18X18D" in (design.out_dir / "rtl" / "sim" / "MULT18X18D.v").read_text()
    result = design.simulate(random=30, backpressure=0.3)
    assert result["frames"] == 30 and result["mismatches"] == 0
    # Other targets keep Yosys' own multiplier mapping.
    generic = compile_model(b.network("mac"), tmp_path / "ice", board="icebreaker")
    assert generic.manifest["sim_rtl"] == []
    assert "MULT18X18D" not in (generic.out_dir / "rtl" / "qloom_top.v").read_text()
