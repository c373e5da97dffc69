"""The SDRAM chip description: cycles at a clock, validation, the ULX3S boards' chip."""

import dataclasses

import pytest

from qloom.boards import BOARDS, Board, Family, Resources, get_board
from qloom.hw.target import Device
from qloom.hw.sdram import (ULX3S_SDRAM, SdramBusSignature, SdramChip, SdramGeometry,
                            SdramTiming,
                            decode_mode_register, mode_register)


def test_ulx3s_cycles_round_up_and_pick_cas_latency():
    c = ULX3S_SDRAM.cycles(133)
    # 21 ns at 7.52 ns a cycle: 2.79 -> 3; 63 ns: 8.38 -> 9; 42: 5.59 -> 6; 14: 1.86 -> 2
    assert (c.t_rcd, c.t_rp, c.t_rc, c.t_rfc, c.t_ras, c.t_rrd, c.t_wr, c.t_mrd) == \
        (3, 3, 9, 9, 6, 2, 2, 2)
    assert c.cas_latency == 3                     # CL 2 only up to 100 MHz
    assert c.t_refi == 1037                       # 7.8 us, rounded down
    assert c.t_ras_max == 15960                   # 120 us, rounded down
    assert c.power_up == 26600 and c.init_refreshes == 8
    assert ULX3S_SDRAM.cycles(100).cas_latency == 2
    # 15 ns-class figures land on whole cycles without a float round-up
    chip = dataclasses.replace(ULX3S_SDRAM, timing=dataclasses.replace(
        ULX3S_SDRAM.timing, t_rcd_ns=20.0))
    assert chip.cycles(100).t_rcd == 2


def test_ulx3s_geometry():
    g = ULX3S_SDRAM.geometry
    assert (g.bank_bits, g.row_bits, g.column_bits) == (2, 13, 9)
    assert g.bytes == 32 * 1024 * 1024


def test_clock_above_the_chip_is_refused():
    with pytest.raises(ValueError, match=r"^SDRAM IS42S16160G-7 / AS4C32M16SB-7 runs at most "
                                         r"at 143 MHz, not 150$"):
        ULX3S_SDRAM.cycles(150)
    with pytest.raises(TypeError, match=r"^SDRAM clock must be a positive number, not 0$"):
        ULX3S_SDRAM.cycles(0)


def test_geometry_validation():
    with pytest.raises(ValueError, match=r"^SDRAM bank count must be a power of two, not 3$"):
        SdramGeometry(banks=3, rows=8192, columns=512, data_bits=16)
    with pytest.raises(TypeError, match=r"^SDRAM row count must be a positive integer, "
                                        r"not 8192\.0$"):
        SdramGeometry(banks=4, rows=8192.0, columns=512, data_bits=16)
    with pytest.raises(ValueError, match=r"^SDRAM row count must be at least 2048"):
        SdramGeometry(banks=4, rows=1024, columns=512, data_bits=16)
    with pytest.raises(ValueError, match=r"^SDRAM data width must be a multiple of 8, not 12$"):
        SdramGeometry(banks=4, rows=8192, columns=512, data_bits=12)


def test_timing_validation():
    t = ULX3S_SDRAM.timing
    with pytest.raises(TypeError, match=r"^SDRAM timing t_rcd_ns must be a positive number, "
                                        r"not -1$"):
        dataclasses.replace(t, t_rcd_ns=-1)
    with pytest.raises(ValueError, match=r"^SDRAM tRC \(30\.0 ns\) is below tRAS \(42\.0 ns\)$"):
        dataclasses.replace(t, t_rc_ns=30.0)
    with pytest.raises(ValueError, match=r"^SDRAM CAS latency must be 2 or 3, not 4$"):
        dataclasses.replace(t, cas_latency_mhz=((4, 200.0),))
    with pytest.raises(TypeError, match=r"^SDRAM CAS latencies must be a non-empty tuple"):
        dataclasses.replace(t, cas_latency_mhz=[(3, 143.0)])
    with pytest.raises(TypeError, match=r"^SDRAM cycle count t_rcd must be a positive "
                                        r"integer, not 0$"):
        dataclasses.replace(ULX3S_SDRAM.cycles(133), t_rcd=0)
    with pytest.raises(TypeError, match=r"^SDRAM timing must be an SdramTiming, not None$"):
        SdramChip(name="x", geometry=ULX3S_SDRAM.geometry, timing=None)
    assert isinstance(t, SdramTiming)


def test_mode_register_round_trip():
    for bl in (1, 2, 4, 8):
        for cl in (2, 3):
            assert decode_mode_register(mode_register(bl, cl)) == (bl, cl, "")
    assert mode_register(8, 3) == 0x33
    assert decode_mode_register(0x37) == (None, 3, "")           # full page
    assert decode_mode_register(0x3B) == (8, 3, "interleaved bursts")
    with pytest.raises(ValueError, match=r"^SDRAM burst length must be one of 1, 2, 4, 8, "
                                         r"not 16$"):
        mode_register(16, 3)


def test_boards_carry_their_sdram():
    assert get_board("ulx3s-85f").sdram is ULX3S_SDRAM
    assert get_board("ulx3s-25f").sdram is ULX3S_SDRAM
    assert {n for n, b in BOARDS.items() if b.sdram is not None} == {"ulx3s-85f", "ulx3s-25f"}
    with pytest.raises(TypeError, match=r"^Board 'x' SDRAM must be an SdramChip or None, "
                                        r"not 'big'$"):
        Board(name="x", title="x", platform=None,
              chip=Device("d", Family.ECP5, Resources(1, 1, 1, 1)), package="p",
              oscillator_mhz=25, clock_mhz=50, programmer="p", bitstream_ext="bit",
              uart_note="", sdram="big")


@pytest.mark.parametrize("name", ["ulx3s-85f", "ulx3s-25f"])
def test_sdram_matches_the_platform_pins(name):
    board = get_board(name)
    platform = board.platform()
    res = platform.lookup("sdram", 0)
    widths = {sub.name: len(sub.ios[0].names) for sub in res.ios}
    g = board.sdram.geometry
    # the controller's bus members are named as amaranth-boards names the pins
    members = set(SdramBusSignature(g).members) - {"dq_o", "dq_oe", "dq_i"}
    assert members | {"dq", "clk"} == set(widths)
    assert widths["ba"] == g.bank_bits
    assert widths["a"] == g.row_bits
    assert widths["dq"] == g.data_bits
    assert widths["dqm"] == g.data_bits // 8
