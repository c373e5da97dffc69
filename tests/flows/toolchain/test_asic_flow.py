"""`qloom build --target asic`: a threshold unit through the whole open standard-cell
flow (fast tier), and TFC-w1a1 at default folding (slow tier)."""

import json
import shutil
from pathlib import Path

import pytest

from nets import NetBuilder
from qloom.errors import ToolError
from qloom.flows.toolchain.asic.flow import build_asic_flow
from qloom.flows.toolchain.asic.gate_sim import gate_level_sim
from qloom.flows.toolchain.asic.pdk import TOOLS, get_pdk
from qloom.flows.toolchain.asic.ports import AsicTop, read_ports
from qloom.flows.toolchain.asic.stages import STAGES
from qloom.flows.compile.steps import compile_model
from qloom.nn.dtypes import int_type, uint_type

MISSING = [t for t in TOOLS if shutil.which(t) is None]
needs_tools = pytest.mark.skipif(bool(MISSING), reason=f"the ASIC flow needs {MISSING} "
                                 f"(make asic-tools)")
TFC = Path(__file__).resolve().parents[3] / "examples" / "models" / "tfc_w1a1.onnx"


def threshold_unit():
    b = NetBuilder((2,), int_type(5), seed=3)
    b.threshold(uint_type(2))
    return b.network("thr")


def check_report(out: Path, report: dict, frames: int):
    saved = json.loads((out / "build" / "report.json").read_text())
    assert saved == report
    assert report["target"] == "asic" and report["pdk"] == "osu018"
    assert report["drc_errors"] == 0 and report["lvs_match"] is True
    assert report["failed_routes"] == 0
    assert report["gate_level_sim"]["frames"] == frames
    assert report["gate_level_sim"]["mismatches"] == 0
    assert Path(report["gds"]).is_file() and Path(report["gds"]).stat().st_size > 1000
    assert report["cells"] > 10 and report["area_um2"] > report["cell_area_um2"] > 0
    assert report["power_mw"] > 0 and report["energy_nj_per_frame"] > 0
    assert report["activity"]["cycles"] > 0
    build = out / "build"
    for stage in STAGES:
        assert (build / "logs" / f"{stage.name}.out").is_file()
        assert (build / "qflow" / "log" / stage.log).is_file()
    for name in ("sta_timing.log", "sta_power.log", "activity.tcl"):
        assert (build / "logs" / name).is_file()
    md = (build / "report.md").read_text()
    assert f"Fmax **{report['fmax_mhz']:g} MHz**" in md
    assert f"{report['energy_nj_per_frame']:.4g} nJ per frame" in md
    assert "DRC (magic): 0 errors; LVS (netgen): match" in md


@needs_tools
def test_threshold_unit_through_the_flow(tmp_path):
    net = threshold_unit()
    out = tmp_path / "thr"
    compile_model(net, out)
    report = build_asic_flow(out, network=net, frames=20).report
    check_report(out, report, 20)
    assert report["fmax_mhz"] > 100
    assert report["dropped_inputs"] == ["i__payload[10]"]   # the input's `last` flag

    # The gate-level check can fail: the routed netlist with one cell swapped for another
    # mismatches the network.
    netlist = out / "build" / "qflow" / "qloom_asic.rtlnopwr.v"
    text = netlist.read_text()
    assert "NAND2X1 NAND2X1_1 (" in text
    broken = tmp_path / "broken.v"
    broken.write_text(text.replace("NAND2X1 NAND2X1_1 (", "NOR2X1 NAND2X1_1 (", 1))
    manifest = json.loads((out / "manifest.json").read_text())
    top = AsicTop(tuple(read_ports((out / "rtl" / "qloom_top.v").read_text(), "qloom_top")),
                  frozenset([("i__payload", manifest["input"]["last_bit"])]))
    results, _ = gate_level_sim(tmp_path / "gls", out, top, broken, get_pdk("osu018"),
                                network=net, frames=20)
    assert results["mismatches"] > 0


@needs_tools
def test_network_comes_from_the_compiled_model(tmp_path, monkeypatch):
    """Without a Network given (the command line), the gate-level check's reference is the
    model file the design was compiled from, loaded again with its options."""
    from qloom.flows.toolchain.asic import flow
    from qloom.nn.load import load
    out = tmp_path / "tfc"
    compile_model(TFC, out)
    seen = {}

    def stop(*args):
        seen["network"] = args[-1]
        raise ToolError("stopped before the tools")
    monkeypatch.setattr(flow, "_run", stop)
    with pytest.raises(ToolError, match="stopped before the tools"):
        build_asic_flow(out)
    reference = load(TFC)
    assert [layer.name for layer in seen["network"].layers] == \
        [layer.name for layer in reference.layers]


@needs_tools
@pytest.mark.slow
def test_threshold_unit_timing_missed(tmp_path):
    """A clock the routed design cannot meet ends in an error naming the stage and what to
    try, with the logs kept in OUT/build-failed."""
    net = threshold_unit()
    out = tmp_path / "thr"
    compile_model(net, out)
    with pytest.raises(ToolError, match=r"stage 'sta': timing missed at 5000 MHz .*try "
                                        r"--clock-mhz \d+ or lower"):
        build_asic_flow(out, network=net, clock_mhz=5000)
    assert not (out / "build").exists()
    assert (out / "build-failed" / "logs" / "sta_timing.log").is_file()


@needs_tools
@pytest.mark.slow
def test_tfc_w1a1(tmp_path):
    out = tmp_path / "tfc"
    compile_model(TFC, out)
    report = build_asic_flow(out, frames=20).report
    check_report(out, report, 20)
    assert report["fmax_mhz"] >= 100


@needs_tools
def test_min_area_patch(tmp_path):
    """A lone 4x4 piece of metal1 (area 16, the rule asks 20) is lengthened to the minimum
    and then passes magic's DRC."""
    import subprocess
    from qloom.flows.toolchain.asic.area_fix import patch_min_area
    pdk = get_pdk("osu018")
    shutil.copyfile(pdk.folder / "osu018.magicrc", tmp_path / ".magicrc")
    make = tmp_path / "make.tcl"
    make.write_text("box values 0 0 4 4\npaint metal1\nsave qloom_asic\nquit -noprompt\n")
    subprocess.run(["magic", "-dnull", "-noconsole", "-rcfile", str(tmp_path / ".magicrc"),
                    str(make)], cwd=tmp_path, check=True, capture_output=True)
    logs = tmp_path / "logs"
    logs.mkdir()
    assert patch_min_area(tmp_path, pdk.lef_path, logs) == 1
    assert "qloom_patch metal1 0 0 4 4 -> 0 0 5 4" in (logs / "area_fix.log").read_text()
    assert patch_min_area(tmp_path, pdk.lef_path, logs) == 0     # clean now
