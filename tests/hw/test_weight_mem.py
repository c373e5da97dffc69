"""Block RAM packing of parameter memories (qloom.hw.mem_pack) and its cost-model use."""

import math
import re

import pytest

from qloom.hw.estimate import (Family, Features, bit_efficiency, block_bits, bram_count,
                               memory_cost)
from qloom.hw.mem_pack import BLOCK_SHAPES, pack


def ref_min_blocks(depth, width, family):
    """The textbook covering table over every bit of width (no shortcut for the bulk)."""
    shapes = BLOCK_SHAPES[family]
    best = [0] + [math.inf] * width
    for w in range(1, width + 1):
        best[w] = min(best[max(0, w - s.width)] + math.ceil(depth / s.depth) for s in shapes)
    return best[width]


@pytest.mark.parametrize("family", ["ecp5", "ice40"])
@pytest.mark.parametrize("depth", [1, 300, 1000, 2048, 5000, 16384, 40000])
@pytest.mark.parametrize("width", [1, 13, 49, 1301, 4099])
def test_pack_is_minimal(family, depth, width):
    packing = pack(depth, width, family)
    assert packing.blocks == ref_min_blocks(depth, width, family)
    assert sum(s.width for s in packing.slices) >= width
    assert all(s.stack == math.ceil(depth / s.shape.depth) for s in packing.slices)


@pytest.mark.parametrize("depth,width,family,blocks,slices", [
    # Mixed ratios beat any single one: 16K x 49 needs 48 blocks in one ratio.
    (16384, 49, "ecp5", 44, "32 x 512x36 + 8 x 2048x9 + 4 x 4096x4"),
    (512, 1568, "ecp5", 44, "44 x 512x36"),          # LFC's first layer at pe=2, simd=784
    (2048, 13, "ice40", 7, "4 x 512x8 + 2 x 1024x4 + 1 x 2048x2"),
    # A 1-bit column folded into the 2-bit mode, as Yosys maps it (measured: 3 blocks).
    (4096, 3, "ice40", 3, "2 x 2048x2 + 1 x 4096x1"),
    (256, 4096, "ecp5", 114, "114 x 512x36"),        # bandwidth-bound: half full
])
def test_pack_examples(depth, width, family, blocks, slices):
    packing = pack(depth, width, family)
    assert (packing.blocks, str(packing)) == (blocks, slices)


def test_wide_memory_is_between_its_bounds():
    # The bulk of a very wide memory goes to the cheapest ratio per bit (no table per
    # bit of width); the result lies between the fractional bound and one ratio alone.
    depth, width = 40000, 100000
    packing = pack(depth, width, "ecp5")
    shapes = BLOCK_SHAPES["ecp5"]
    per_bit = min(math.ceil(depth / s.depth) / s.width for s in shapes)
    single = min(math.ceil(depth / s.depth) * math.ceil(width / s.width) for s in shapes)
    assert math.ceil(per_bit * width) <= packing.blocks <= single
    assert sum(s.width for s in packing.slices) >= width


def test_efficiency():
    assert pack(512, 36, "ecp5").efficiency == 1.0
    assert pack(256, 16, "ice40").efficiency == 1.0
    assert pack(256, 4096, "ecp5").efficiency == pytest.approx(256 * 4096 / (114 * 18432))
    assert block_bits(Family.GENERIC) == 18432 and block_bits(Family.ICE40) == 4096


def test_cost_model_counts_packed_blocks():
    assert bram_count(16384, 49, Family.ECP5) == 44
    assert memory_cost(16384, 49, Family.ECP5, block=True).bram == 44
    f = Features("t")
    f.add_memory("weights", memory_cost(16384, 49, Family.ECP5, block=True), bits=16384 * 49)
    f.add_memory("buffer", memory_cost(16384, 49, Family.ECP5, block=True))   # not counted
    f.add_memory("small", memory_cost(8, 4, Family.ECP5), bits=32)           # in logic
    assert f.bram == 88 and f.bram_memories == {"weights": (16384 * 49, 44)}
    eff = bit_efficiency([f], Family.ECP5)
    assert eff == {"bits": 16384 * 49, "blocks": 44,
                   "efficiency": round(16384 * 49 / (44 * 18432), 4)}
    assert bit_efficiency([Features("none")], Family.ECP5) is None


@pytest.mark.parametrize("depth,width,family,message", [
    (0, 4, "ecp5", "Depth must be a positive integer, not 0"),
    (4, 2.5, "ecp5", "Width must be a positive integer, not 2.5"),
    (4, 4, "xilinx", "Family must be 'ice40', 'ecp5' or 'generic', not 'xilinx'"),
])
def test_pack_errors(depth, width, family, message):
    with pytest.raises(ValueError, match=message):
        pack(depth, width, family)


@pytest.mark.parametrize("w_type,in_type,bias", [("bipolar", "bipolar", "uniform"),
                                                  ("int3", "uint4", "varied")])
def test_threshold_memory_width_as_built(w_type, in_type, bias):
    # The estimate's threshold word is the one the MVU elaborates (narrowed codes, and
    # the bias and sign only when they vary), so its blocks are counted exactly.
    import numpy as np
    from amaranth.hdl import Fragment, Shape
    from qloom.hw.mvu import MVU, MVUConfig, threshold_lane_bits
    from qloom.hw.threshold import ThresholdSpec
    from qloom.nn.dtypes import BIPOLAR, int_type, uint_type
    types = {"bipolar": BIPOLAR, "int3": int_type(3), "uint4": uint_type(4)}
    wt, it = types[w_type], types[in_type]
    rng = np.random.default_rng(1)
    mh, mw, pe = 8, 30, 4
    weights = (np.where(rng.integers(0, 2, (mh, mw)) > 0, 1, -1) if wt.bipolar
               else rng.integers(wt.min, wt.max + 1, (mh, mw)))
    t = np.sort(rng.integers(-20, 21, (mh, 3)), axis=1)
    b = np.zeros(mh, dtype=np.int64) if bias == "uniform" else rng.integers(0, 3, mh)
    spec = ThresholdSpec(thresholds=t, bias=b, sign=np.ones(mh, dtype=np.int64),
                         out_type=uint_type(3))
    mvu = MVU(MVUConfig(weights=weights, w_type=wt, in_type=it, pe=pe, simd=5,
                        threshold=spec))
    fragment = Fragment.get(mvu, None)
    thresholds = next(m for m, name, *_ in fragment.subfragments if name == "thresholds")
    built = thresholds._data        # the elaborated memory's contents and shape
    assert built.depth == mh // pe
    assert Shape.cast(built.shape).width == pe * threshold_lane_bits(weights, wt, it, spec)


@pytest.mark.parametrize("depth, width, bank", [
    (9216, 64, 512),      # CNV's Conv_5 at --fold auto: 33 blocks stacked, 36 in 18 banks
    (8448, 16, 1024),     # CNV's first dense layer: 9 blocks either way
    (600, 20, 512),
    (512, 36, None),      # one block deep
    (72, 1024, None),     # shallow and wide
    (16384, 49, None),    # banks would take 64 blocks against 44
    (3584, 49, None),     # 14 against 10
])
def test_bank_depth(depth, width, bank):
    from qloom.hw.mem_pack import bank_depth, banked_blocks
    assert bank_depth(depth, width, "ecp5") == bank
    assert bank_depth(depth, width, "ice40") is None
    if bank is not None:
        stacked = pack(depth, width, "ecp5").blocks
        assert banked_blocks(depth, width, "ecp5", bank) <= stacked * 1.125
        assert all(s.stack == 1 for s in pack(bank, width, "ecp5").slices)


@pytest.mark.parametrize("depth, bank, width", [(24, 8, 8), (20, 8, 8), (9, 8, 8), (40, 4, 8),
                                                (38, 2, 8), (24, 8, 72), (38, 2, 40)])
def test_banked_rom_reads_every_word_two_cycles_later(depth, bank, width):
    from amaranth.sim import Simulator
    from qloom.hw.weight_mem import BankedRom
    words = [(k * 0x9E3779B97F4A7C15 + 5) % (1 << width) for k in range(depth)]
    dut = BankedRom(width, words, bank)
    order = list(range(depth)) + list(range(depth - 1, -1, -1))
    got = []

    async def bench(ctx):
        for k in order + [0, 0, 0]:
            ctx.set(dut.addr, k)
            await ctx.tick()
            got.append(ctx.get(dut.data))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert dut.latency == (2 if dut.banks <= BankedRom.GROUP else 3)
    assert got[dut.latency - 1:][:len(order)] == [words[k] for k in order]


@pytest.mark.parametrize("depth, bank, width", [(16, 8, 8), (24, 8, 8), (40, 4, 72),
                                                (38, 2, 40), (2048, 512, 64)])
def test_bank_select_copies(depth, bank, width):
    """Every register that chooses among banks steers at most GROUP_BITS bits of the word,
    and the estimate counts every select flip-flop the unit builds."""
    from amaranth.back import rtlil
    from qloom.hw.skid import GROUP_BITS
    from qloom.hw.weight_mem import BankedRom
    dut = BankedRom(width, [0] * depth, bank)
    text = rtlil.convert(dut, ports=[dut.addr, dut.en, dut.data])
    selects = {name: int(bits or 1) for bits, name in
               re.findall(r"wire (?:width (\d+) )?\\(bank_select\S*)", text)}
    slices = -(-width // GROUP_BITS)
    last = "bank_select2" if dut.banks > BankedRom.GROUP else "bank_select1"
    assert sorted(k for k in selects if k.startswith(last + "_")) == \
        sorted(f"{last}_{k}" for k in range(slices))
    assert sum(selects.values()) == BankedRom.select_registers(dut.banks, width)


def test_banked_memory_cost_counts_banks_and_mux():
    from qloom.hw.mem_pack import banked_blocks
    cost = memory_cost(9216, 64, Family.ECP5, block=True, bank=512)
    assert cost.bram == banked_blocks(9216, 64, "ecp5", 512) == 36
    assert cost.lut > 0 and memory_cost(9216, 64, Family.ECP5, block=True).lut == 0
