"""The device families qloom builds for and what qloom needs to know about each: one
``Family`` enum, one frozen ``FamilyTarget`` per family, a ``Device`` per chip (its budget
and SPRAMs as fields) and the clock rule.

The templates, their estimates, the planner and the boards ask these objects; none of them
restates a family's rule. ``Family.GENERIC`` is the cost model's LUT4 fabric with 18x18
multipliers, used for families qloom estimates but has no model of its own (Xilinx 7):
its block RAMs and calibration are the ECP5's.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Family", "FamilyTarget", "Resources", "Device", "TARGETS", "DEFAULT_CLOCK_MHZ",
           "clock_mhz"]

# The accelerator clock when neither the user nor a board says one.
DEFAULT_CLOCK_MHZ = 100.0


class Family(enum.Enum):
    """FPGA families: those of the boards (``ICE40``, ``ECP5``, ``XILINX7``) and the cost
    model's ``GENERIC`` one. ``target`` is what qloom knows about each."""

    ICE40 = "ice40"
    ECP5 = "ecp5"
    XILINX7 = "xilinx7"
    GENERIC = "generic"

    @property
    def target(self) -> "FamilyTarget":
        return TARGETS[self]

    @property
    def open_flow(self) -> bool:
        """Yosys + nextpnr (YoWASP) can build a bitstream for this family."""
        return self.target.open_flow

    @property
    def estimated_as(self) -> "Family":
        """The family whose templates and estimates a design for this family uses."""
        return self.target.estimated_as


@dataclass(frozen=True)
class FamilyTarget:
    """What one family's hardware rules are, for the templates, estimates and planner.

    ``estimated_as``: the family the templates are built and estimated for (itself, or
    ``GENERIC`` for a family without a model of its own); ``calibrated_as``: the family
    whose block RAM shapes and fitted coefficients its estimates use; ``open_flow``: Yosys
    and nextpnr build its bitstreams; ``lut_ram``: it has distributed RAM cells (ECP5's
    16x4 TRELLIS_DPR16X4); ``luts_per_bram``: the exchange rate between one block RAM and
    LUT4s (roughly the device's LUT/BRAM ratio over two, so that neither runs out first),
    the one both sides of that trade use: a ROM goes to block RAM only when its LUT
    implementation would cost more than that per block, and ``weight``, the price the
    planner ranks an engine's foldings by, counts a block RAM at that many LUT4s (a hard
    multiplier at ``luts_per_dsp``, a flip-flop at ``luts_per_ff``)."""

    family: Family
    estimated_as: Family
    calibrated_as: Family
    open_flow: bool
    lut_ram: bool
    luts_per_bram: int
    luts_per_dsp: int = 200
    luts_per_ff: float = 0.5

    def weight(self, r: "Resources") -> float:
        """One number to rank ``r`` by: LUT-equivalents."""
        return (r.lut + self.luts_per_ff * r.ff + self.luts_per_dsp * r.dsp
                + self.luts_per_bram * r.bram)


TARGETS = {t.family: t for t in [
    FamilyTarget(Family.ICE40, estimated_as=Family.ICE40, calibrated_as=Family.ICE40,
                 open_flow=True, lut_ram=False, luts_per_bram=90),
    FamilyTarget(Family.ECP5, estimated_as=Family.ECP5, calibrated_as=Family.ECP5,
                 open_flow=True, lut_ram=True, luts_per_bram=200),
    FamilyTarget(Family.XILINX7, estimated_as=Family.GENERIC, calibrated_as=Family.ECP5,
                 open_flow=False, lut_ram=True, luts_per_bram=200),
    FamilyTarget(Family.GENERIC, estimated_as=Family.GENERIC, calibrated_as=Family.ECP5,
                 open_flow=False, lut_ram=True, luts_per_bram=200),
]}


@dataclass(frozen=True)
class Resources:
    """A count of the four resource kinds the cost model and the fit check speak about:
    logic cells (LUT4 equivalents), flip-flops, hard multipliers and block RAMs. Both a
    device's budget and the cost model's estimates are ``Resources``."""

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
class Device:
    """One FPGA: its part name, family, capacity (``budget``) and the single-port RAMs it
    has besides its block RAMs (``sprams``: the iCE40UP5K's four 256 Kbit SPRAMs)."""

    name: str
    family: Family
    budget: Resources
    sprams: int = 0

    def __post_init__(self):
        if not isinstance(self.family, Family):
            raise TypeError(f"Device {self.name!r} family must be a Family, not "
                            f"{self.family!r}")
        if not isinstance(self.budget, Resources):
            raise TypeError(f"Device {self.name!r} budget must be Resources, not "
                            f"{self.budget!r}")
        if not isinstance(self.sprams, int) or isinstance(self.sprams, bool) \
                or self.sprams < 0:
            raise TypeError(f"Device {self.name!r} SPRAM count must be a non-negative "
                            f"integer, not {self.sprams!r}")

    @property
    def target(self) -> FamilyTarget:
        return self.family.target


def clock_mhz(explicit: float | None = None, *, recorded: float | None = None,
              board: float | None = None) -> float:
    """The accelerator clock: the one asked for (``explicit``), else the one the design was
    compiled at (``recorded``, from its manifest), else the board's default (``board``),
    else ``DEFAULT_CLOCK_MHZ``. An unset value is None (a manifest's missing or zero
    clock counts as unset)."""
    if explicit is not None:
        return float(explicit)
    for value in (recorded, board):
        if value:
            return float(value)
    return DEFAULT_CLOCK_MHZ
