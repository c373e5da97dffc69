"""The ECP5-85F DSP placement pass (qloom.flows.toolchain.ecp5_dsp_place) on hand-made netlists."""

import json

import pytest

from qloom.flows.toolchain.ecp5_dsp_place import (DSP_SITES_85F, place_dsps, place_dsps_in_netlist)


def netlist(names, other=("LUT4",)):
    cells = {name: {"type": "MULT18X18D", "attributes": {}, "connections": {}}
             for name in names}
    cells.update({f"lut{k}": {"type": t, "attributes": {}, "connections": {}}
                  for k, t in enumerate(other)})
    return {"modules": {"top": {"cells": cells}}}


def bels(net):
    cells = net["modules"]["top"]["cells"]
    return {n: c["attributes"].get("BEL") for n, c in cells.items()
            if c["type"] == "MULT18X18D"}


def test_sites_of_the_85f():
    assert len(DSP_SITES_85F) == len(set(DSP_SITES_85F)) == 156
    # row Y10 left to right, Y34 right to left, Y58 left to right
    assert DSP_SITES_85F[:5] == ["X4/Y10/MULT18_0", "X5/Y10/MULT18_1", "X8/Y10/MULT18_4",
                                 "X9/Y10/MULT18_5", "X13/Y10/MULT18_0"]
    assert DSP_SITES_85F[51:54] == ["X119/Y10/MULT18_5", "X119/Y34/MULT18_5",
                                    "X118/Y34/MULT18_4"]
    assert DSP_SITES_85F[-1] == "X119/Y58/MULT18_5"
    assert "X105/Y34/MULT18_0" in DSP_SITES_85F and "X67/Y10/MULT18_0" not in DSP_SITES_85F


def test_lanes_in_natural_order_side_by_side():
    names = [f"core.MatMul_{m}.dsp{k}.block" for m in (0, 1) for k in range(40)]
    net = netlist(names)
    assert place_dsps_in_netlist(net) == 80
    placed = bels(net)
    order = [DSP_SITES_85F.index(placed[n]) for n in names]
    assert order == list(range(80))          # dsp9 before dsp10, MatMul_0 before MatMul_1
    assert all(c["attributes"] == {} for n, c in net["modules"]["top"]["cells"].items()
               if n.startswith("lut"))


def test_few_blocks_and_fixed_ones_are_left_alone():
    net = netlist([f"u.dsp{k}.block" for k in range(52)])
    assert place_dsps_in_netlist(net) == 0 and set(bels(net).values()) == {None}
    net = netlist([f"u.dsp{k}.block" for k in range(60)])
    net["modules"]["top"]["cells"]["u.dsp0.block"]["attributes"]["BEL"] = DSP_SITES_85F[1]
    assert place_dsps_in_netlist(net) == 59
    placed = bels(net)
    assert placed["u.dsp0.block"] == DSP_SITES_85F[1]
    assert placed["u.dsp1.block"] == DSP_SITES_85F[0]
    assert placed["u.dsp2.block"] == DSP_SITES_85F[2]
    assert len(set(placed.values())) == 60


def test_too_many_blocks():
    with pytest.raises(ValueError, match=r"^157 MULT18X18D blocks, but the device has 156$"):
        place_dsps_in_netlist(netlist([f"d{k}" for k in range(157)]))


def test_only_on_the_85f_die(tmp_path):
    src = tmp_path / "in.json"
    src.write_text(json.dumps(netlist([f"u.dsp{k}.block" for k in range(60)])))
    assert place_dsps(src, tmp_path / "a.json", "LFE5U-45F") == 0
    assert set(bels(json.loads((tmp_path / "a.json").read_text())).values()) == {None}
    assert place_dsps(src, tmp_path / "b.json", "LFE5UM5G-85F") == 60
