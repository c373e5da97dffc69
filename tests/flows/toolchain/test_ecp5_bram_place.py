"""The ECP5-85F block RAM placement pass (qloom.flows.toolchain.ecp5_bram_place) on hand-made
netlists."""

import json

import pytest

from qloom.flows.toolchain.ecp5_bram_place import (EBR_SITES_85F, engine_rank, place_brams,
                                                   place_brams_in_netlist)

ENGINES = ["Conv_0", "Conv_1", "MaxPool_0", "Conv_10", "MatMul_0"]
A = "core.accelerator.accelerator."


def netlist(names):
    cells = {name: {"type": "DP16KD", "attributes": {}, "connections": {}} for name in names}
    cells["lut0"] = {"type": "LUT4", "attributes": {}, "connections": {}}
    return {"modules": {"top": {"cells": cells}}}


def bels(net):
    return {n: c["attributes"].get("BEL") for n, c in net["modules"]["top"]["cells"].items()
            if c["type"] == "DP16KD"}


def test_sites_of_the_85f():
    """The 208 sites as nextpnr 0.11 names them (read from a placement of 208 blocks):
    rows Y22 and Y70 left to right, Y46 and Y82 right to left."""
    assert len(EBR_SITES_85F) == len(set(EBR_SITES_85F)) == 208
    assert EBR_SITES_85F[:5] == ["X4/Y22/EBR0", "X6/Y22/EBR1", "X8/Y22/EBR2", "X10/Y22/EBR3",
                                 "X13/Y22/EBR0"]
    assert EBR_SITES_85F[51:54] == ["X120/Y22/EBR3", "X120/Y46/EBR3", "X118/Y46/EBR2"]
    assert EBR_SITES_85F[104] == "X4/Y70/EBR0" and EBR_SITES_85F[-1] == "X4/Y82/EBR0"
    assert "X69/Y46/EBR0" in EBR_SITES_85F and "X67/Y46/EBR0" not in EBR_SITES_85F


@pytest.mark.parametrize("cell, engine", [
    (A + "Conv_1.weights3.mem", "Conv_1"),
    (A + "Conv_1_swg.buffer", "Conv_1"),
    (A + "Conv_10.weights0", "Conv_10"),              # not Conv_1's
    (A + "Conv_10_thr.table", "Conv_10"),
    (A + "BipolarQuant_9_out0_to_MaxPool_0.fifo.mem", "MaxPool_0"),   # the edge feeding it
    (A + "Conv_1_windows_to_Conv_1_skid_in.mem", "Conv_1"),
    ("core.link.buffer.0.0", None),
    (A + "Other_3.mem", None),
])
def test_engine_of_a_cell(cell, engine):
    rank = engine_rank(cell, ENGINES)
    assert (ENGINES[rank] if rank is not None else None) == engine


def test_engines_in_stream_order_blocks_in_natural_order():
    names = ([A + f"MatMul_0.weights{k}" for k in range(12)]
             + [A + f"Conv_1.weights{k}" for k in range(30)]
             + [A + "Conv_0_swg.buffer", A + "X_to_Conv_10.fifo"]
             + [A + f"Conv_10.weights{k}" for k in range(20)]
             + ["core.link.buffer.0.0"])
    net = netlist(names)
    assert place_brams_in_netlist(net, ENGINES) == len(names) - 1
    placed = bels(net)
    order = [A + "Conv_0_swg.buffer"] + [A + f"Conv_1.weights{k}" for k in range(30)] \
        + [A + "X_to_Conv_10.fifo"] + [A + f"Conv_10.weights{k}" for k in range(20)] \
        + [A + f"MatMul_0.weights{k}" for k in range(12)]
    assert [EBR_SITES_85F.index(placed[n]) for n in order] == list(range(len(order)))
    assert placed["core.link.buffer.0.0"] is None           # left to the placer
    assert net["modules"]["top"]["cells"]["lut0"]["attributes"] == {}


def test_few_blocks_and_fixed_ones_are_left_alone():
    net = netlist([A + f"Conv_0.w{k}" for k in range(52)])
    assert place_brams_in_netlist(net, ENGINES) == 0 and set(bels(net).values()) == {None}
    net = netlist([A + f"Conv_0.w{k}" for k in range(60)])
    net["modules"]["top"]["cells"][A + "Conv_0.w0"]["attributes"]["BEL"] = EBR_SITES_85F[1]
    assert place_brams_in_netlist(net, ENGINES) == 59
    placed = bels(net)
    assert placed[A + "Conv_0.w0"] == EBR_SITES_85F[1]
    assert placed[A + "Conv_0.w1"] == EBR_SITES_85F[0]
    assert placed[A + "Conv_0.w2"] == EBR_SITES_85F[2]
    assert len(set(placed.values())) == 60


def test_too_many_blocks():
    with pytest.raises(ValueError, match=r"^209 DP16KD blocks, but the device has 208$"):
        place_brams_in_netlist(netlist([A + f"Conv_0.w{k}" for k in range(209)]), ENGINES)


def test_only_on_the_85f_die(tmp_path):
    src = tmp_path / "in.json"
    src.write_text(json.dumps(netlist([A + f"Conv_0.w{k}" for k in range(60)])))
    assert place_brams(src, tmp_path / "a.json", "LFE5U-45F", ENGINES) == 0
    assert set(bels(json.loads((tmp_path / "a.json").read_text())).values()) == {None}
    assert place_brams(src, tmp_path / "b.json", "LFE5UM5G-85F", ENGINES) == 60
