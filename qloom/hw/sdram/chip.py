"""An SDR SDRAM chip as its datasheet gives it (geometry, timing in nanoseconds) and the
same timing in clock cycles at one clock, which the controller (``qloom.hw.sdram``) and the
simulation model (``qloom.sim.sdram_model``) both take.

The chip is a board property (``qloom.boards.Board.sdram``). ``SdramChip.cycles(mhz)``
rounds every minimum time up to whole cycles and picks the lowest CAS latency the chip
allows at that clock; a clock above the chip's fastest is refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["SdramGeometry", "SdramTiming", "SdramChip", "SdramCycles", "BURST_LENGTHS",
           "ULX3S_SDRAM"]

# The burst lengths the controller programs (full-page bursts are not used).
BURST_LENGTHS = (1, 2, 4, 8)


def _positive_int(what: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise TypeError(f"{what} must be a positive integer, not {value!r}")


def _power_of_two(what: str, value) -> None:
    _positive_int(what, value)
    if value & (value - 1):
        raise ValueError(f"{what} must be a power of two, not {value}")


def _positive_number(what: str, value) -> None:
    if (not isinstance(value, (int, float)) or isinstance(value, bool)
            or not math.isfinite(value) or value <= 0):
        raise TypeError(f"{what} must be a positive number, not {value!r}")


@dataclass(frozen=True)
class SdramGeometry:
    """Banks x rows x columns of ``data_bits``-bit words; the row address also carries the
    mode register and auto-precharge bit (A10), so it has at least 11 bits."""

    banks: int
    rows: int
    columns: int
    data_bits: int

    def __post_init__(self):
        _power_of_two("SDRAM bank count", self.banks)
        _power_of_two("SDRAM row count", self.rows)
        _power_of_two("SDRAM column count", self.columns)
        _positive_int("SDRAM data width", self.data_bits)
        if self.rows < 2048:
            raise ValueError(f"SDRAM row count must be at least 2048 (11 address bits), "
                             f"not {self.rows}")
        if self.columns > self.rows:
            raise ValueError(f"SDRAM column count ({self.columns}) must not exceed the row "
                             f"count ({self.rows}): columns share the row address pins")
        if self.data_bits % 8:
            raise ValueError(f"SDRAM data width must be a multiple of 8, not {self.data_bits}")

    @property
    def bank_bits(self) -> int:
        return self.banks.bit_length() - 1

    @property
    def row_bits(self) -> int:
        return self.rows.bit_length() - 1

    @property
    def column_bits(self) -> int:
        return self.columns.bit_length() - 1

    @property
    def words(self) -> int:
        return self.banks * self.rows * self.columns

    @property
    def bytes(self) -> int:
        return self.words * self.data_bits // 8


@dataclass(frozen=True)
class SdramTiming:
    """Datasheet minimums in nanoseconds (``*_ns``) and
    ``cas_latency_mhz``: per CAS latency the fastest clock it allows, as
    ``((cl, mhz), ...)``. ``t_refi_ns`` is the refresh interval (64 ms / 8192 rows is
    7.8 us); ``power_up_us`` and ``init_refreshes`` are the initialization's pause with the
    clock running and its count of auto-refreshes before the mode register is set."""

    t_rcd_ns: float           # ACTIVATE to READ/WRITE, same bank
    t_rp_ns: float            # PRECHARGE to ACTIVATE/REFRESH, same bank
    t_ras_ns: float           # ACTIVATE to PRECHARGE, same bank (minimum)
    t_ras_max_ns: float       # ACTIVATE to PRECHARGE, same bank (maximum)
    t_rc_ns: float            # ACTIVATE to ACTIVATE, same bank
    t_rfc_ns: float           # REFRESH to ACTIVATE/REFRESH
    t_rrd_ns: float           # ACTIVATE to ACTIVATE, different banks
    t_wr_ns: float            # last write data to PRECHARGE
    t_mrd_ns: float           # MODE REGISTER SET to any command
    t_refi_ns: float          # refresh interval
    cas_latency_mhz: tuple    # ((cas latency, fastest clock in MHz), ...)
    power_up_us: float = 200.0
    init_refreshes: int = 8

    def __post_init__(self):
        for name in ("t_rcd_ns", "t_rp_ns", "t_ras_ns", "t_ras_max_ns", "t_rc_ns", "t_rfc_ns",
                     "t_rrd_ns", "t_wr_ns", "t_mrd_ns", "t_refi_ns", "power_up_us"):
            _positive_number(f"SDRAM timing {name}", getattr(self, name))
        _positive_int("SDRAM init refresh count", self.init_refreshes)
        if self.t_ras_max_ns < self.t_ras_ns:
            raise ValueError(f"SDRAM tRAS maximum ({self.t_ras_max_ns} ns) is below its "
                             f"minimum ({self.t_ras_ns} ns)")
        if self.t_rc_ns < self.t_ras_ns:
            raise ValueError(f"SDRAM tRC ({self.t_rc_ns} ns) is below tRAS "
                             f"({self.t_ras_ns} ns)")
        cls = self.cas_latency_mhz
        if (not isinstance(cls, tuple) or not cls
                or not all(isinstance(p, tuple) and len(p) == 2 for p in cls)):
            raise TypeError(f"SDRAM CAS latencies must be a non-empty tuple of (latency, MHz) "
                            f"pairs, not {cls!r}")
        for cl, mhz in cls:
            if cl not in (2, 3):
                raise ValueError(f"SDRAM CAS latency must be 2 or 3, not {cl!r}")
            _positive_number(f"SDRAM clock limit for CAS latency {cl}", mhz)

    @property
    def max_clock_mhz(self) -> float:
        return max(mhz for _, mhz in self.cas_latency_mhz)


@dataclass(frozen=True)
class SdramCycles:
    """An SDRAM's timing in cycles of one clock: what the controller counts and the model
    checks. Made by ``SdramChip.cycles``; a test may ``dataclasses.replace`` a field to
    build a controller that breaks the chip's timing on purpose."""

    clock_mhz: float
    t_rcd: int
    t_rp: int
    t_ras: int
    t_ras_max: int
    t_rc: int
    t_rfc: int
    t_rrd: int
    t_wr: int
    t_mrd: int
    t_refi: int
    cas_latency: int
    power_up: int
    init_refreshes: int

    def __post_init__(self):
        _positive_number("SDRAM clock", self.clock_mhz)
        for name in ("t_rcd", "t_rp", "t_ras", "t_ras_max", "t_rc", "t_rfc", "t_rrd",
                     "t_wr", "t_mrd", "t_refi", "power_up", "init_refreshes"):
            _positive_int(f"SDRAM cycle count {name}", getattr(self, name))
        if self.cas_latency not in (2, 3):
            raise ValueError(f"SDRAM CAS latency must be 2 or 3, not {self.cas_latency!r}")


def _cycles(ns: float, mhz: float) -> int:
    # the smallest whole number of cycles covering ``ns``; the 1e-9 keeps 15 ns at
    # 100 MHz at 2 cycles despite float rounding
    return max(1, math.ceil(ns * mhz / 1000.0 - 1e-9))


@dataclass(frozen=True)
class SdramChip:
    """One SDRAM part (or the slower of the parts a board is sold with)."""

    name: str
    geometry: SdramGeometry
    timing: SdramTiming

    def __post_init__(self):
        if not isinstance(self.geometry, SdramGeometry):
            raise TypeError(f"SDRAM geometry must be an SdramGeometry, not {self.geometry!r}")
        if not isinstance(self.timing, SdramTiming):
            raise TypeError(f"SDRAM timing must be an SdramTiming, not {self.timing!r}")

    def cycles(self, clock_mhz: float) -> SdramCycles:
        """The timing in cycles at ``clock_mhz``, with the lowest CAS latency allowed there;
        a ValueError when the clock is faster than the chip."""
        _positive_number("SDRAM clock", clock_mhz)
        t = self.timing
        allowed = sorted(cl for cl, mhz in t.cas_latency_mhz if clock_mhz <= mhz)
        if not allowed:
            raise ValueError(f"SDRAM {self.name} runs at most at {t.max_clock_mhz:g} MHz, "
                             f"not {clock_mhz:g}")
        return SdramCycles(
            clock_mhz=float(clock_mhz),
            t_rcd=_cycles(t.t_rcd_ns, clock_mhz), t_rp=_cycles(t.t_rp_ns, clock_mhz),
            t_ras=_cycles(t.t_ras_ns, clock_mhz),
            # the maximum rounds down: a row may stay open at most this long
            t_ras_max=max(1, math.floor(t.t_ras_max_ns * clock_mhz / 1000.0)),
            t_rc=_cycles(t.t_rc_ns, clock_mhz), t_rfc=_cycles(t.t_rfc_ns, clock_mhz),
            t_rrd=_cycles(t.t_rrd_ns, clock_mhz), t_wr=_cycles(t.t_wr_ns, clock_mhz),
            t_mrd=_cycles(t.t_mrd_ns, clock_mhz),
            t_refi=max(1, math.floor(t.t_refi_ns * clock_mhz / 1000.0)),
            cas_latency=allowed[0],
            power_up=_cycles(t.power_up_us * 1000.0, clock_mhz),
            init_refreshes=t.init_refreshes)


# The ULX3S carries a 16-bit SDR SDRAM, a 32 MB ISSI IS42S16160G-7 (4 banks x 8192 rows x
# 512 columns) or, on some batches, a 64 MB Alliance AS4C32M16SB-7 (1024 columns). The
# geometry is the 32 MB part's (the larger chip is used as its first 32 MB); the timing is
# the slower part's, the AS4C32M16SB-7 datasheet's table 16 (tRC = tRFC = 63 ns,
# tRCD = tRP = 21 ns, tRAS 42 ns .. 120 us, tRRD = tMRD = tWR = 14 ns, tREFI 7.8 us,
# CL 2 up to 100 MHz and CL 3 up to 143 MHz), which the IS42S16160G-7 meets too.
# Initialization: 200 us and 8 auto-refreshes cover both parts' datasheets.
ULX3S_SDRAM = SdramChip(
    name="IS42S16160G-7 / AS4C32M16SB-7",
    geometry=SdramGeometry(banks=4, rows=8192, columns=512, data_bits=16),
    timing=SdramTiming(t_rcd_ns=21.0, t_rp_ns=21.0, t_ras_ns=42.0, t_ras_max_ns=120_000.0,
                       t_rc_ns=63.0, t_rfc_ns=63.0, t_rrd_ns=14.0, t_wr_ns=14.0,
                       t_mrd_ns=14.0, t_refi_ns=7800.0,
                       cas_latency_mhz=((2, 100.0), (3, 143.0)),
                       power_up_us=200.0, init_refreshes=8))
