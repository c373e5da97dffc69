"""The controller's side of an SDR SDRAM's pins, and the command encoding.

Control lines are active high here (chip select ``cs``, ``ras``, ``cas``, ``we``), as the
amaranth-boards ``SDRAMResource`` presents them (it declares the pins inverted): a board
top drives ``sdram.cs.o`` from ``bus.cs`` and so on. ``dq_o``/``dq_oe`` drive the data
lines, ``dq_i`` reads them.
"""

from __future__ import annotations

import enum

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .chip import SdramGeometry

__all__ = ["Command", "SdramBusSignature", "mode_register", "decode_mode_register",
           "A10_ALL_BANKS"]

# Address bit 10 selects all banks in PRECHARGE (and auto-precharge in READ/WRITE).
A10_ALL_BANKS = 1 << 10


class Command(enum.IntEnum):
    """(ras, cas, we) with chip select high, as one 3-bit number ``ras<<2 | cas<<1 | we``."""

    NOP = 0b000
    BURST_STOP = 0b001
    READ = 0b010
    WRITE = 0b011
    ACTIVATE = 0b100
    PRECHARGE = 0b101
    REFRESH = 0b110
    MODE = 0b111


class SdramBusSignature(wiring.Signature):
    """The pins of one SDRAM of ``geometry`` (the controller's side)."""

    def __init__(self, geometry: SdramGeometry):
        if not isinstance(geometry, SdramGeometry):
            raise TypeError(f"SDRAM geometry must be an SdramGeometry, not {geometry!r}")
        self.geometry = geometry
        dw = geometry.data_bits
        super().__init__({
            "clk_en": Out(1), "cs": Out(1), "ras": Out(1), "cas": Out(1), "we": Out(1),
            "ba": Out(max(1, geometry.bank_bits)), "a": Out(geometry.row_bits),
            "dqm": Out(dw // 8), "dq_o": Out(dw), "dq_oe": Out(1), "dq_i": In(dw),
        })

    def __eq__(self, other):
        return isinstance(other, SdramBusSignature) and other.geometry == self.geometry

    def __repr__(self):
        return f"SdramBusSignature({self.geometry!r})"


_BL_CODE = {1: 0, 2: 1, 4: 2, 8: 3}


def mode_register(burst_length: int, cas_latency: int) -> int:
    """The mode register value: sequential bursts of ``burst_length`` for reads and writes,
    ``cas_latency``, standard operation."""
    if burst_length not in _BL_CODE:
        raise ValueError(f"SDRAM burst length must be one of 1, 2, 4, 8, not {burst_length!r}")
    if cas_latency not in (2, 3):
        raise ValueError(f"SDRAM CAS latency must be 2 or 3, not {cas_latency!r}")
    return _BL_CODE[burst_length] | cas_latency << 4


def decode_mode_register(value: int) -> tuple[int | None, int | None, str]:
    """(burst length, CAS latency, what else is set) of a mode register value; None for a
    field qloom's controller never programs (full page, interleaved, CL 1, ...)."""
    codes = {v: k for k, v in _BL_CODE.items()}
    bl = codes.get(value & 0b111)
    cl = (value >> 4) & 0b111
    other = []
    if value & 0b1000:
        other.append("interleaved bursts")
    if value >> 7:
        other.append(f"bits A7 and up = {value >> 7:#x}")
    return bl, cl if cl in (2, 3) else None, ", ".join(other)
