"""What qloom needs to know about a board beyond its amaranth-boards platform: the device
budget, the clocks, the host link and how to program it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from amaranth.build import Platform

from ..hw.sdram.chip import SdramChip
from ..hw.target import Device, Family, Resources

__all__ = ["Family", "Resources", "Device", "Board", "CELL_FILL"]

# The share of an iCE40's logic cells a design may fill (see ``Board.usable_cells``).
CELL_FILL = 0.9


@dataclass(frozen=True)
class Board:
    """One supported board.

    ``platform`` builds the amaranth-boards platform (pins, oscillator, vendor flow);
    ``chip`` is the FPGA on it (``qloom.hw.target.Device``: its family, capacity and
    SPRAMs; ``family``, ``device``, ``budget`` and ``sprams`` read them) in ``package``;
    ``clock_mhz`` the default accelerator clock that the board top's PLL makes from the
    ``oscillator_mhz`` input; ``programmer`` is the command line that loads a bitstream
    (``{bitstream}`` is replaced by its path); ``uart_note`` says where the host link's
    serial port is; ``sdram`` is the external SDRAM the board carries (its geometry and
    timing), None when it has none.
    """

    name: str
    title: str
    platform: Callable[[], Platform]
    chip: Device
    package: str
    oscillator_mhz: float
    clock_mhz: float
    programmer: str
    bitstream_ext: str
    uart_note: str
    max_baud: int = 115200
    sdram: SdramChip | None = None

    def __post_init__(self):
        if not isinstance(self.chip, Device):
            raise TypeError(f"Board {self.name!r} chip must be a Device, not {self.chip!r}")
        if self.clock_mhz <= 0 or self.oscillator_mhz <= 0:
            raise ValueError(f"Board {self.name!r} clocks must be positive, not "
                             f"{self.oscillator_mhz!r} / {self.clock_mhz!r}")
        if self.sdram is not None and not isinstance(self.sdram, SdramChip):
            raise TypeError(f"Board {self.name!r} SDRAM must be an SdramChip or None, not "
                            f"{self.sdram!r}")

    @property
    def family(self) -> Family:
        return self.chip.family

    @property
    def device(self) -> str:
        """The FPGA's part name, as amaranth-boards and nextpnr spell it."""
        return self.chip.name

    @property
    def budget(self) -> Resources:
        """The FPGA's capacity."""
        return self.chip.budget

    @property
    def sprams(self) -> int:
        """The FPGA's single-port RAMs besides its block RAMs (``Device.sprams``)."""
        return self.chip.sprams

    def logic_cells(self, need: Resources) -> int | None:
        """iCE40 logic cells ``need`` takes (None on other families, whose LUTs and
        flip-flops are counted apart): a cell holds one LUT4 and one flip-flop, and a
        flip-flop shares a cell only with the LUT that drives it. Measured on two builds
        (TFC-w1a1: 4,137 cells for 2,540 LUT + 2,463 FF; jet tagger: 5,733 for
        3,331 + 3,591): LUTs plus two thirds of the flip-flops."""
        if self.family is not Family.ICE40:
            return None
        return need.lut + -(-2 * need.ff // 3)

    @property
    def usable_cells(self) -> int:
        """Logic cells a design may take: placement fails near 100% (a jet tagger folding
        at 108% could not be placed), and the estimates are first-order."""
        return int(self.budget.lut * CELL_FILL)

    def over(self, need: Resources) -> list[str]:
        """Names of the resources ``need`` exceeds on this board: ``lut``, ``ff``, ``dsp``,
        ``bram``, and ``lc`` when iCE40 logic cells run out (see ``logic_cells``). LUTs
        and flip-flops count against ``usable_cells`` of them, not all: placement fails
        near 100%, and the estimates hold to about 10%."""
        over = need.over(self.budget)
        for kind in ("lut", "ff"):
            usable = int(getattr(self.budget, kind) * CELL_FILL)
            if kind not in over and getattr(need, kind) > usable:
                over.append(kind)
        cells = self.logic_cells(need)
        if cells is not None and cells > self.usable_cells:
            over.append("lc")
        return over

    def fits(self, need: Resources) -> bool:
        return not self.over(need)

    def program_command(self, bitstream: str) -> str:
        return self.programmer.format(bitstream=bitstream)
