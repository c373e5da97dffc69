"""The ASIC flow's pieces that need no tools: the chip top and its simulation wrapper, the
SPEF repair, netlist and layout facts, activity commands and option errors."""

import re

import pytest

from qloom.errors import QloomError, ToolError
from qloom.flows.toolchain.asic import layout, stages
from qloom.flows.toolchain.asic.activity import Activity, counters, read_counts
from qloom.flows.toolchain.asic.flow import build_asic_flow
from qloom.flows.toolchain.asic.pdk import get_pdk
from qloom.flows.toolchain.asic.ports import AsicTop, netlist_nets, read_ports, unused_inputs
from qloom.flows.toolchain.asic.sta import fix_spef, parse_power

RTL = """module qloom_top(i__valid, clk, rst, i__ready, o__payload, o__valid, i__payload, o__ready);
  input clk;
  input [4:0] i__payload;
  output i__ready;
  input i__valid;
  output [2:0] o__payload;
  input o__ready;
  output o__valid;
  input rst;
endmodule
"""


def top(dropped=()):
    return AsicTop(tuple(read_ports(RTL, "qloom_top")), frozenset(dropped))


def test_read_ports():
    ports = {p.name: (p.direction, p.width) for p in read_ports(RTL, "qloom_top")}
    assert ports == {"i__valid": ("input", None), "clk": ("input", None),
                     "rst": ("input", None), "i__ready": ("output", None),
                     "o__payload": ("output", 3), "o__valid": ("output", None),
                     "i__payload": ("input", 5), "o__ready": ("input", None)}
    with pytest.raises(QloomError, match="no module other"):
        read_ports(RTL, "other")


def test_wrapper_drops_the_last_bit_as_a_narrower_bus():
    v = top({("i__payload", 4)}).wrapper("qloom_top")
    assert "input [3:0] i__payload;" in v
    assert "assign core__i__payload = {1'b0, i__payload[3], i__payload[2], i__payload[1], " \
           "i__payload[0]};" in v
    assert "assign o__payload[2] = core__o__payload[2];" in v
    sim = top({("i__payload", 4)}).sim_top("qloom_top")
    assert ".i__payload(i__payload[3:0])" in sim and "input [4:0] i__payload;" in sim


def test_wrapper_with_a_hole_uses_scalar_pins():
    t = top({("i__payload", 1), ("i__payload", 4)})
    payload = next(p for p in t.ports if p.name == "i__payload")
    assert [pin for _, pin in t.pins(payload)] == ["i__payload_0", "i__payload_2",
                                                   "i__payload_3"]
    v = t.wrapper("qloom_top")
    assert "input i__payload_2;" in v and "{1'b0, i__payload_3, i__payload_2, 1'b0, " \
                                          "i__payload_0}" in v
    assert ".i__payload_2(i__payload[2])" in t.sim_top("qloom_top")


NETLIST = """module qloom_asic (clk, rst, i__payload, o__payload);
wire vdd = 1'b1;
wire gnd = 1'b0;
DFFPOSX1 DFFPOSX1_1 ( .CLK(clk), .D(i__payload[0]), .Q(_1_) );
NAND2X1 NAND2X1_1 ( .A(_1_), .B(core_x_0_), .Y(o__payload[0]) );
INVX1 INVX1_1 ( .A(i__payload[2]), .Y(core_x_0_) );
FILL FILL_0_0 ( .gnd(gnd), .vdd(vdd) );
endmodule
"""


def test_netlist_facts():
    assert netlist_nets(NETLIST) == {"clk", "i__payload[0]", "_1_", "core_x_0_",
                                     "o__payload[0]", "i__payload[2]"}
    counts = layout.cell_counts(NETLIST)
    assert counts == {"DFFPOSX1": 1, "NAND2X1": 1, "INVX1": 1, "FILL": 1}


def test_unused_inputs_and_floating_outputs():
    t = AsicTop(tuple(read_ports(RTL.replace("[4:0]", "[3:0]").replace("[2:0]", "[0:0]"),
                                 "qloom_top")), frozenset())
    assert unused_inputs(NETLIST + "assign i__ready = gnd;\nassign o__valid = gnd;\n", t) \
        == {("i__payload", 1), ("i__payload", 3), ("i__valid", 0), ("o__ready", 0),
            ("rst", 0)}
    with pytest.raises(ToolError, match="output pin.*i__ready, o__valid.*undriven"):
        unused_inputs(NETLIST, t)


SPEF = """*SPEF "IEEE 1481.1999"
*C_UNIT 1 FF
*NAME_MAP
*1 core_x[0]
*2 i__payload[0]
*3 INVX1_1
*D_NET *1 0.0035
*CONN
*I *3:Y O *D INVX1
*CAP
1 1_1 0.0035
*RES
1 *3:Y 1_1 15.9
*END
"""


def test_fix_spef():
    fixed = fix_spef(SPEF, {"core_x_0_", "i__payload[0]"})
    assert "*C_UNIT 1 PF" in fixed and "*1 core_x_0_\n" in fixed
    assert "*2 i__payload[0]\n" in fixed                # a port keeps its bit select
    assert "1 *1:1 0.0035" in fixed and "1 *3:Y *1:1 15.9" in fixed
    with pytest.raises(ToolError, match="C_UNIT"):
        fix_spef(SPEF.replace("1 FF", "1 PF"), set())


def test_parse_power():
    text = ("Group  Internal  Switching  Leakage  Total\n"
            "Total  1.2e-02  3.0e-03  1.0e-07  1.5e-02 100.0%\n")
    assert parse_power(text) == {"internal": 0.012, "switching": 0.003, "leakage": 1e-7,
                                 "total": 0.015}
    with pytest.raises(ToolError, match="no Total row"):
        parse_power("nothing")


def test_die_area():
    text = "UNITS DISTANCE MICRONS 100 ;\nDIEAREA ( -320 -300 ) ( 29600 20300 ) ;\n"
    assert layout.die_area_um2(text) == (299.2, 206.0, 61635.2)


def test_activity(tmp_path):
    nets = ["_1_", "i__payload[0]", "clk"]
    v = counters(nets, tmp_path / "t.txt")
    assert "always @(gates.i__payload[0]) if (rst === 1'b0) qloom_toggles[1]" in v
    assert "final begin" in v
    (tmp_path / "t.txt").write_text("10\n5\n2\n20\n")
    a = read_counts(tmp_path / "t.txt", nets)
    assert a.rate("clk") == 2.0 and a.mean == pytest.approx(0.9)
    tcl = a.tcl({"i__payload[0]", "clk"})
    assert "qloom_net_activity {_1_} 0.5" in tcl
    assert "set_power_activity -input_ports [get_ports {i__payload[0]}] -activity 0.2" in tcl
    (tmp_path / "t.txt").write_text("10\n5\n")
    with pytest.raises(ToolError, match="expected a cycle count and 3 toggle counts"):
        read_counts(tmp_path / "t.txt", nets)


def test_stage_problems():
    drc = stages.STAGES[[s.name for s in stages.STAGES].index("drc")]
    assert drc.problem(drc.facts("drc = 3\n")) == "magic found 3 DRC errors"
    assert drc.problem(drc.facts("drc = 0\n")) is None
    route = stages.STAGES[[s.name for s in stages.STAGES].index("route")]
    assert route.problem(route.facts("Final: Failed net routes: 7\n")) == \
        "7 nets failed to route"
    lvs = stages.STAGES[[s.name for s in stages.STAGES].index("lvs")]
    assert lvs.problem(lvs.facts("Result: Circuits match uniquely.\nTotal errors = 0\n")) \
        is None
    assert "does not match" in lvs.problem(lvs.facts("Netlists do not match.\n"))


@pytest.mark.parametrize("options, message", [
    ({"pdk": "sky130"}, "unknown PDK 'sky130'; qloom's ASIC flow supports osu018, osu035, "
                        "osu050"),
    ({"density": 1.5}, "density must be a cell density between 0.1 and 1"),
    ({"clock_mhz": -3}, "clock must be a positive number of MHz, not -3"),
    ({"frames": 0}, "gate-level frames must be a positive integer, not 0"),
])
def test_option_errors(tmp_path, options, message):
    if "pdk" in options:
        with pytest.raises(QloomError, match=re.escape(message)):
            get_pdk(options["pdk"])
        return
    with pytest.raises(QloomError, match=re.escape(message)):
        build_asic_flow(tmp_path, **options)


def test_placement_options(tmp_path):
    par = tmp_path / "kit.par"
    par.write_text("TWSC*do.global.route  : on\n")
    assert stages.write_placement_options(tmp_path, par, 1268) == 4
    text = (tmp_path / "qloom_asic.par").read_text()
    assert text.endswith("TWSC*fast : 4\n") and "gr_placement_improve" not in text
    assert stages.write_placement_options(tmp_path, par, 21576) == 10
    assert (tmp_path / "qloom_asic.par").read_text().endswith(
        "TWSC*fast : 10\nTWSC*gr_placement_improve : off\n")
    assert stages.placement_speedup(100) == 1
