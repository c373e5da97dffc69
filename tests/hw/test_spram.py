"""iCE40UP5K SPRAM weights loaded from the SPI flash (qloom.hw.spram), as Verilog under
Icarus with the SB_SPRAM256KA model: the loader against the flash model, and the matrix
unit with its weights in SPRAM bit exact against the IR, with and without stalls."""

import sys
from pathlib import Path

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from qloom.hw.mvu import MVU, MVUConfig, MVUMemories, RamStyle
from qloom.hw.spram import (FlashLoader, SpiFlashModel, SpramRom, image_bytes,
                            simulation_models)
from qloom.hw.threshold import ThresholdSpec
from qloom.hw.weight_mem import rom
from qloom.nn.dtypes import BINARY, BIPOLAR, int_type, uint_type
from qloom.nn.ir import Dense

sys.path.insert(0, str(Path(__file__).parent))
from test_mvu import ref_mvu   # noqa: E402

pytestmark = pytest.mark.skipif(
    __import__("shutil").which("iverilog") is None, reason="Icarus Verilog not installed")

WAKE = 8    # short wake-up wait in simulation (the flash model has no tRES1)


class LoadedMvu(wiring.Component):
    """Flash model -> FlashLoader -> MVU with SPRAM weights, with the MVU's streams."""

    def __init__(self, mvu: MVU, offset: int = 0x100000):
        self.mvu, self.offset = mvu, offset
        super().__init__({"i": In(mvu.i.signature.flip()),
                          "o": Out(mvu.o.signature)})

    def elaborate(self, platform):
        m = Module()
        image = self.mvu.spram_image()
        blocks = self.mvu.load.signature.blocks
        per_block = len(image) // blocks
        m.submodules.flash = flash = SpiFlashModel(data=image_bytes(image), offset=self.offset)
        m.submodules.loader = loader = FlashLoader(blocks=[per_block] * blocks,
                                                   offset=self.offset, wake_cycles=WAKE)
        m.submodules.mvu = self.mvu
        wiring.connect(m, loader.flash, flash.flash)
        wiring.connect(m, loader.load, self.mvu.load)
        wiring.connect(m, wiring.flipped(self.i), self.mvu.i)
        wiring.connect(m, self.mvu.o, wiring.flipped(self.o))
        return m


def run(mvu, x, stall):
    from qloom.sim.rtl_check import run_component_icarus
    codes = mvu.in_type.encode(x)
    words = codes.reshape(-1, mvu.simd).tolist()
    out = run_component_icarus(LoadedMvu(mvu), words, x.shape[0] * mvu.neuron_folds,
                               stall=stall, seed=3, idle_timeout=20000)
    return mvu.out_type.decode(np.array(out, dtype=np.int64).reshape(x.shape[0], mvu.mh))


@pytest.mark.parametrize("stall", [0.0, 0.3])
@pytest.mark.parametrize("case", ["xnor-3-sprams", "addsub-1-spram-narrow", "mac-thresholds"])
def test_mvu_weights_in_spram_bit_exact(case, stall):
    rng = np.random.default_rng(7)
    if case == "xnor-3-sprams":        # 48-bit words over three SPRAMs
        mh, mw, pe, simd, wt, it, spec = 8, 24, 4, 12, BIPOLAR, BIPOLAR, None
    elif case == "addsub-1-spram-narrow":   # 6-bit words: part of one SPRAM
        mh, mw, pe, simd, wt, it, spec = 6, 9, 2, 3, BINARY, uint_type(3), None
    else:
        mh, mw, pe, simd, wt, it, spec = 4, 6, 2, 2, int_type(3), int_type(4), "t"
    weights = rng.integers(wt.min, wt.max + 1, size=(mh, mw))
    if wt.bipolar:
        weights = np.where(weights > 0, 1, -1)
    if spec:
        dense = Dense("d", ("x",), "y", weights=weights, w_type=wt, in_type=it)
        lo, hi = dense.acc_type.min, dense.acc_type.max
        t = np.sort(rng.integers(lo, hi + 1, size=(mh, 3)), axis=1)
        spec = ThresholdSpec(thresholds=t, bias=np.zeros(mh, dtype=np.int64),
                             sign=np.ones(mh, dtype=np.int64), out_type=uint_type(2))
    x = rng.integers(it.min, it.max + 1, size=(3, mw))
    if it.bipolar:
        x = np.where(x > 0, 1, -1)
    mvu = MVU(MVUConfig(weights=weights, w_type=wt, in_type=it, pe=pe, simd=simd,
                        threshold=spec, memories=MVUMemories(weights=RamStyle.SPRAM)))
    assert mvu.load.signature.blocks == -(-pe * simd * wt.bits // 16)
    got = run(mvu, x, stall)
    np.testing.assert_array_equal(got, ref_mvu(weights, wt, it, x, spec))


def test_image_layout():
    memory = SpramRom(width=20, init=[0xABCDE, 0x12345])
    # SPRAM 0 holds the low 16 bits of every word, SPRAM 1 the rest.
    assert memory.image() == [0xBCDE, 0x2345, 0xA, 0x1]
    assert image_bytes([0xBCDE, 0x0001]) == bytes([0xBC, 0xDE, 0x00, 0x01])


def test_models_only_when_instantiated():
    assert "SB_SPRAM256KA.v" in simulation_models("  SB_SPRAM256KA block (")
    assert simulation_models("module qloom_top();") == {}


@pytest.mark.parametrize("make,message", [
    (lambda: SpramRom(width=65, init=[0]), "at most 64 bits wide"),
    (lambda: SpramRom(width=8, init=[0] * 16385), "holds 1 to 16384 words, not 16385"),
    (lambda: FlashLoader(blocks=[0]), "SPRAM word counts must be 1 to 16384 each"),
    (lambda: FlashLoader(blocks=[4], offset=1 << 24), "Flash offset must be a 24-bit"),
    (lambda: rom(8, [1, 2], RamStyle.SPRAM), "cannot be initialized by the bitstream"),
    (lambda: MVUConfig(weights=np.ones((2, 40000), dtype=np.int64), w_type=BIPOLAR,
                       in_type=BIPOLAR, pe=1, simd=1,
                       memories=MVUMemories(weights=RamStyle.SPRAM)),
     "80000 words of 1 bits do not fit SPRAMs"),
    (lambda: MVUMemories(buffer=RamStyle.SPRAM),
     "Only the weights can be in SPRAM"),
])
def test_errors(make, message):
    with pytest.raises(ValueError, match=message):
        make()


# -- the compile flow: the planner's choice, the flash image, the simulation harness ---

def _spram_net(hidden=128, seed=0):
    sys.path.insert(0, str(Path(__file__).parent.parent / "flows"))
    from nets import NetBuilder
    b = NetBuilder((256,), BIPOLAR, seed)
    b.dense(hidden, BIPOLAR)
    b.threshold(BIPOLAR)
    b.dense(10, BIPOLAR)
    return b.network("spram_mlp")


@pytest.mark.slow
def test_compiled_design_loads_spram_from_flash_bit_exact(tmp_path):
    from qloom.flows.compile.steps import compile_model
    from qloom.flows.simulate import simulate
    net = _spram_net()
    # 2048 words of 16 bits: 8 block RAMs, so the planner puts them in one SPRAM.
    design = compile_model(net, tmp_path / "out", board="icebreaker",
                           fold={"dense0": {"pe": 2, "simd": 8}})
    rows = {row["name"]: row for row in design.report["layers"]}
    # The weights left block RAM (the input buffer and thresholds may still use one).
    assert rows["dense0"]["spram"] == 1 and rows["dense0"]["resources"]["bram"] <= 2
    assert design.report["spram"] == 1
    flash = design.manifest["flash"]
    assert flash["offset"] == 0x100000 and flash["words"] == 2048
    assert (tmp_path / "out" / flash["image"]).stat().st_size == 4096
    results = simulate(tmp_path / "out", random=3, seed=5, backpressure=0.3, progress=False,
                       network=net)
    assert results["frames"] == 3 and results["mismatches"] == 0

    # Deploy writes the image into the flash before the bitstream starts the design.
    from qloom.flows.deploy.bundle import deploy
    sys.path.insert(0, str(Path(__file__).parent.parent / "flows"))
    from designs import fake_build
    fake_build(tmp_path / "out", "icebreaker")
    dest = deploy(tmp_path / "out")
    program = (dest / "program.sh").read_text()
    assert program.index("\niceprog -o 1048576 weights.bin\n") < program.index(
        "\niceprog board_top.bin\n")
    assert (dest / "weights.bin").read_bytes() == (tmp_path / "out" / flash["image"]).read_bytes()


def test_planner_refuses_more_sprams_than_the_device_has(tmp_path):
    from qloom.errors import QloomError
    from qloom.flows.compile.steps import compile_model
    sys.path.insert(0, str(Path(__file__).parent.parent / "flows"))
    from nets import NetBuilder
    b = NetBuilder((256,), BIPOLAR, 0)
    b.dense(192, BIPOLAR)
    b.threshold(BIPOLAR)
    b.dense(256, BIPOLAR)
    b.threshold(BIPOLAR)
    b.dense(10, BIPOLAR)
    with pytest.raises(QloomError, match=r"need 5 SPRAMs \(dense0 4, dense2 1\) but the "
                                         r"device has 4"):
        compile_model(b.network("big"), tmp_path / "out", board="icebreaker",
                      fold={"dense0": {"pe": 4, "simd": 16}, "dense2": {"pe": 2, "simd": 8}})
    assert not (tmp_path / "out").exists()


def test_no_spram_on_ecp5_or_small_memories():
    from qloom.flows.compile.cost import Family
    from qloom.hw.mvu import weights_in_spram
    assert weights_in_spram(2048, 16, Family.ICE40, 4)
    assert not weights_in_spram(2048, 16, Family.ECP5, 0)
    assert not weights_in_spram(1024, 16, Family.ICE40, 4)       # 4 block RAMs: stays
    assert not weights_in_spram(2048, 80, Family.ICE40, 4)       # five SPRAMs wide
    assert not weights_in_spram(32768, 16, Family.ICE40, 4)      # deeper than one SPRAM
