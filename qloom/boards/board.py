"""What qloom needs to know about a board beyond its amaranth-boards platform: the device
budget, the clocks, the host link and how to program it."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable

from amaranth.build import Platform

from ..hw.sdram.chip import SdramChip

__all__ = ["Family", "Resources", "Board", "CELL_FILL"]

# The share of an iCE40's logic cells a design may fill (see ``Board.usable_cells``).
CELL_FILL = 0.9


class Family(enum.Enum):
    """FPGA families qloom can build for; only the open-flow ones run here."""

    ICE40 = "ice40"
    ECP5 = "ecp5"
    XILINX7 = "xilinx7"

    @property
    def open_flow(self) -> bool:
        """Yosys + nextpnr (YoWASP) can build a bitstream for this family."""
        return self is not Family.XILINX7


@dataclass(frozen=True)
class Resources:
    """A count of the four resource kinds the cost model and the fit check speak about:
    logic cells (LUT4 equivalents), flip-flops, hard multipliers and block RAMs. Both a
    board's budget and the cost model's estimates are ``Resources``."""

    lut: int = 0
    ff: int = 0
    dsp: int = 0
    bram: int = 0

    def __post_init__(self):
        for name in ("lut", "ff", "dsp", "bram"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise TypeError(f"Resource count {name} must be a non-negative integer, "
                                f"not {value!r}")

    def __add__(self, other: "Resources") -> "Resources":
        return Resources(**{k: v + getattr(other, k) for k, v in self.as_dict().items()})

    def fits(self, budget: "Resources") -> bool:
        return not self.over(budget)

    def over(self, budget: "Resources") -> list[str]:
        """Names of the resources that exceed ``budget``."""
        return [k for k, v in self.as_dict().items() if v > getattr(budget, k)]

    def as_dict(self) -> dict:
        return {"lut": self.lut, "ff": self.ff, "dsp": self.dsp, "bram": self.bram}

    @classmethod
    def from_dict(cls, d: dict) -> "Resources":
        return cls(**{k: int(round(float(d.get(k, 0)))) for k in ("lut", "ff", "dsp", "bram")})


@dataclass(frozen=True)
class Board:
    """One supported board.

    ``platform`` builds the amaranth-boards platform (pins, oscillator, vendor flow);
    ``budget`` is the device's capacity; ``clock_mhz`` the default accelerator clock that the
    board top's PLL makes from the ``oscillator_mhz`` input; ``programmer`` is the command
    line that loads a bitstream (``{bitstream}`` is replaced by its path);
    ``uart_note`` says where the host link's serial port is; ``sprams`` is how many
    single-port RAMs the device has besides its block RAMs (the iCE40UP5K's 256 Kbit
    SPRAMs); ``sdram`` is the external SDRAM the board carries (its geometry and timing),
    None when it has none.
    """

    name: str
    title: str
    platform: Callable[[], Platform]
    family: Family
    device: str
    package: str
    budget: Resources
    oscillator_mhz: float
    clock_mhz: float
    programmer: str
    bitstream_ext: str
    uart_note: str
    max_baud: int = 115200
    sprams: int = 0
    sdram: SdramChip | None = None

    def __post_init__(self):
        if self.clock_mhz <= 0 or self.oscillator_mhz <= 0:
            raise ValueError(f"Board {self.name!r} clocks must be positive, not "
                             f"{self.oscillator_mhz!r} / {self.clock_mhz!r}")
        if not isinstance(self.sprams, int) or isinstance(self.sprams, bool) \
                or self.sprams < 0:
            raise TypeError(f"Board {self.name!r} SPRAM count must be a non-negative "
                            f"integer, not {self.sprams!r}")
        if self.sdram is not None and not isinstance(self.sdram, SdramChip):
            raise TypeError(f"Board {self.name!r} SDRAM must be an SdramChip or None, not "
                            f"{self.sdram!r}")

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
