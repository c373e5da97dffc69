"""The boards qloom knows, each a thin layer over its amaranth-boards platform."""

from __future__ import annotations

from amaranth.build import Attrs
from amaranth_boards.arty_a7 import ArtyA7_35Platform
from amaranth_boards.icebreaker import ICEBreakerPlatform
from amaranth_boards.orangecrab_r0_2 import OrangeCrabR0_2_25FPlatform
from amaranth_boards.resources import UARTResource
from amaranth_boards.ulx3s import ULX3S_25F_Platform, ULX3S_85F_Platform

from ..errors import QloomError
from ..hw.sdram.chip import ULX3S_SDRAM
from ..hw.spram import UP5K_SPRAMS
from .board import Board, Device, Family, Resources

__all__ = ["BOARDS", "get_board", "UP5K", "LFE5U_85F", "LFE5U_25F", "XC7A35T"]


class OrangeCrab25FWithUART(OrangeCrabR0_2_25FPlatform):
    """The OrangeCrab has no USB-serial bridge: the host link uses a 3.3 V USB-UART
    adapter on the Feather header (board RX on pin 0, TX on pin 1)."""

    resources = OrangeCrabR0_2_25FPlatform.resources + [
        UARTResource(0, rx="0", tx="1", conn=("io", 0), attrs=Attrs(IO_TYPE="LVCMOS33")),
    ]


UP5K = Device("iCE40UP5K", Family.ICE40, Resources(lut=5280, ff=5280, dsp=8, bram=30),
              sprams=UP5K_SPRAMS)
LFE5U_85F = Device("LFE5U-85F", Family.ECP5, Resources(lut=83640, ff=83640, dsp=156, bram=208))
LFE5U_25F = Device("LFE5U-25F", Family.ECP5, Resources(lut=24288, ff=24288, dsp=28, bram=56))
XC7A35T = Device("xc7a35ti", Family.XILINX7, Resources(lut=20800, ff=41600, dsp=90, bram=50))

BOARDS: dict[str, Board] = {b.name: b for b in [
    Board(name="icebreaker", title="1BitSquared iCEBreaker",
          platform=ICEBreakerPlatform, chip=UP5K, package="SG48",
          oscillator_mhz=12.0, clock_mhz=50.25,
          programmer="iceprog {bitstream}", bitstream_ext="bin",
          uart_note="FTDI channel B (usually /dev/ttyUSB1)", max_baud=1_000_000),
    Board(name="ulx3s-85f", title="Radiona ULX3S (LFE5U-85F)",
          platform=ULX3S_85F_Platform, chip=LFE5U_85F, package="BG381",
          oscillator_mhz=25.0, clock_mhz=150.0,
          programmer="openFPGALoader -b ulx3s {bitstream}", bitstream_ext="bit",
          uart_note="the FTDI US1 port (usually /dev/ttyUSB0)", max_baud=3_000_000,
          sdram=ULX3S_SDRAM),
    Board(name="ulx3s-25f", title="Radiona ULX3S (LFE5U-25F)",
          platform=ULX3S_25F_Platform, chip=LFE5U_25F, package="BG381",
          oscillator_mhz=25.0, clock_mhz=150.0,
          programmer="openFPGALoader -b ulx3s {bitstream}", bitstream_ext="bit",
          uart_note="the FTDI US1 port (usually /dev/ttyUSB0)", max_baud=3_000_000,
          sdram=ULX3S_SDRAM),
    Board(name="orangecrab-25f", title="Good Stuff Department OrangeCrab r0.2 (LFE5U-25F)",
          platform=OrangeCrab25FWithUART, chip=LFE5U_25F, package="MG285",
          oscillator_mhz=48.0, clock_mhz=96.0,
          programmer="ecpprog -S {bitstream}  # or: dfu-util -a 0 -D {bitstream}",
          bitstream_ext="bit",
          uart_note="a 3.3 V USB-UART adapter on Feather pins 0 (board RX) and 1 (board TX)"),
    Board(name="arty-a7-35", title="Digilent Arty A7-35T",
          platform=ArtyA7_35Platform, chip=XC7A35T, package="csg324",
          oscillator_mhz=100.0, clock_mhz=100.0,
          programmer="openFPGALoader -b arty {bitstream}  # or Vivado hw_server",
          bitstream_ext="bit",
          uart_note="the FTDI channel B (usually /dev/ttyUSB1)", max_baud=3_000_000),
]}


def get_board(name: str) -> Board:
    """The board called ``name``; a QloomError lists the known ones otherwise."""
    try:
        return BOARDS[name]
    except (KeyError, TypeError):
        raise QloomError(f"unknown board {name!r}; known boards: "
                         f"{', '.join(sorted(BOARDS))}") from None
