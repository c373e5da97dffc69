"""The board catalog: budgets, platforms, lookup errors and the `qloom boards` table."""

import pytest

from qloom.boards import BOARDS, Board, Device, Family, Resources, get_board
from qloom.boards.cli import table
from qloom.errors import QloomError


def test_catalog_names():
    assert set(BOARDS) == {"icebreaker", "ulx3s-85f", "ulx3s-25f", "orangecrab-25f",
                           "arty-a7-35"}


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_board_matches_its_platform(name):
    board = get_board(name)
    assert isinstance(board, Board) and board.name == name
    platform = board.platform()
    assert platform.device == board.device
    assert platform.package == board.package
    clock = platform.lookup(platform.default_clk).clock
    assert clock.frequency == pytest.approx(board.oscillator_mhz * 1e6)
    uart = platform.request("uart", 0)        # every board has a host link
    assert uart.rx is not None and uart.tx is not None
    assert isinstance(board.budget, Resources)
    assert "{bitstream}" in board.programmer


def test_budgets():
    assert get_board("icebreaker").budget == Resources(lut=5280, ff=5280, dsp=8, bram=30)
    assert get_board("ulx3s-85f").budget.dsp == 156
    assert get_board("ulx3s-25f").budget.lut == 24288
    assert get_board("icebreaker").family is Family.ICE40
    assert not get_board("arty-a7-35").family.open_flow


def test_unknown_board():
    with pytest.raises(QloomError, match=r"^unknown board 'de0'; known boards: arty-a7-35, "
                                         r"icebreaker, orangecrab-25f, ulx3s-25f, ulx3s-85f$"):
        get_board("de0")


def test_resources_validation():
    with pytest.raises(TypeError, match=r"^Resource count dsp must be a non-negative integer, "
                                        r"not -1$"):
        Resources(lut=1, ff=1, dsp=-1, bram=0)
    with pytest.raises(TypeError, match=r"^Resource count lut must be a non-negative integer, "
                                        r"not 1\.5$"):
        Resources(lut=1.5, ff=1, dsp=0, bram=0)
    assert Resources.from_dict({"lut": 10.4, "dsp": 2}) == Resources(10, 0, 2, 0)
    with pytest.raises(Exception):
        get_board("icebreaker").budget.lut = 1     # frozen


def test_board_validation():
    chip = Device("d", Family.ICE40, Resources(1, 1, 1, 1))
    with pytest.raises(ValueError, match=r"^Board 'x' clocks must be positive, not 12 / 0$"):
        Board(name="x", title="x", platform=None, chip=chip, package="p",
              oscillator_mhz=12, clock_mhz=0, programmer="p", bitstream_ext="bin", uart_note="")
    with pytest.raises(TypeError, match=r"^Board 'x' chip must be a Device, not 'd'$"):
        Board(name="x", title="x", platform=None, chip="d", package="p",
              oscillator_mhz=12, clock_mhz=50, programmer="p", bitstream_ext="bin", uart_note="")
    with pytest.raises(TypeError, match=r"^Device 'd' SPRAM count must be a non-negative "
                                        r"integer, not -1$"):
        Device("d", Family.ICE40, Resources(1, 1, 1, 1), sprams=-1)
    with pytest.raises(TypeError, match=r"^Device 'd' family must be a Family, not 'ice40'$"):
        Device("d", "ice40", Resources(1, 1, 1, 1))


def test_boards_read_their_device():
    board = get_board("icebreaker")
    assert (board.device, board.family, board.sprams) == ("iCE40UP5K", Family.ICE40, 4)
    assert board.budget is board.chip.budget
    assert get_board("ulx3s-25f").chip is get_board("orangecrab-25f").chip
    assert get_board("ulx3s-85f").sprams == 0
    assert get_board("arty-a7-35").family.estimated_as is Family.GENERIC


def test_program_command():
    assert get_board("icebreaker").program_command("a.bin") == "iceprog a.bin"
    assert get_board("ulx3s-85f").program_command("b.bit") == "openFPGALoader -b ulx3s b.bit"


def test_table(capsys):
    text = table()
    lines = text.splitlines()
    assert lines[0].split()[:6] == ["board", "device", "LUT4", "FF", "DSP", "BRAM"]
    assert len(lines) == 2 + len(BOARDS)
    row = next(line for line in lines if line.startswith("icebreaker"))
    assert "5280" in row and "iceprog" in row
    from qloom.flows.cli import main
    assert main(["boards"]) == 0
    assert "ulx3s-85f" in capsys.readouterr().out
