"""The family targets: one Family enum, one description per family, the clock rule."""

import pytest

from qloom.hw import estimate, mem_pack
from qloom.hw.target import DEFAULT_CLOCK_MHZ, TARGETS, Family, Resources, clock_mhz


def test_every_family_has_one_target():
    assert set(TARGETS) == set(Family)
    for family, target in TARGETS.items():
        assert family.target is target and target.family is family
        assert target.estimated_as.target.estimated_as is target.estimated_as


def test_one_family_enum():
    from qloom.boards import Family as BoardFamily
    from qloom.flows.compile.cost import Family as CostFamily
    assert BoardFamily is Family and CostFamily is Family and estimate.Family is Family


def test_family_rules():
    assert [f for f in Family if f.open_flow] == [Family.ICE40, Family.ECP5]
    assert Family.XILINX7.estimated_as is Family.GENERIC
    assert Family.GENERIC.target.calibrated_as is Family.ECP5
    assert not Family.ICE40.target.lut_ram and Family.ECP5.target.lut_ram
    assert estimate.block_bits(Family.GENERIC) == estimate.block_bits(Family.ECP5)
    assert mem_pack.pack(512, 36, Family.GENERIC) == mem_pack.pack(512, 36, Family.ECP5)


def test_one_exchange_rate_prices_block_ram_for_memories_and_foldings():
    ice40, ecp5 = Family.ICE40.target, Family.ECP5.target
    assert (ice40.luts_per_bram, ecp5.luts_per_bram) == (90, 200)
    # The planner's price of a block RAM is the rate the memories are placed by.
    assert ecp5.weight(Resources(lut=10, ff=4, dsp=1, bram=2)) == 10 + 2 + 200 + 2 * 200
    assert ice40.weight(Resources(bram=1)) == 90
    # A 256 x 16 ROM: 16 leaves of 16 words, 496 LUTs on iCE40 against one block (90).
    assert estimate.use_block_ram(256, 16, Family.ICE40)


@pytest.mark.parametrize("explicit, recorded, board, want", [
    (80, 120, 150, 80.0), (None, 120, 150, 120.0), (None, None, 150, 150.0),
    (None, 0, None, DEFAULT_CLOCK_MHZ), (None, None, None, 100.0)])
def test_clock_rule(explicit, recorded, board, want):
    assert clock_mhz(explicit, recorded=recorded, board=board) == want
