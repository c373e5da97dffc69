"""What the stream harness (``qloom.sim.harness``, Amaranth) and its cocotb side
(``qloom.sim.tb_harness``) agree on: error codes, widths and the probability scale.

A module of its own without Amaranth, so that the simulator's start-up (which imports
the cocotb side) does not pay for importing Amaranth: about half a second a run."""

from __future__ import annotations

import enum

__all__ = ["HarnessError", "PROBABILITY_ONE", "CYCLE_BITS", "STAMP_BITS", "COUNT_BITS"]

PROBABILITY_ONE = 1 << 16
CYCLE_BITS = 48
# Stamps keep the cycle's low 32 bits: they only grow, and two in a row are less than
# 2**32 cycles apart (the idle timeout fires first), so the reader unwraps them exactly;
# half the width is half the cost of the records, which run every cycle.
STAMP_BITS = 32
COUNT_BITS = 32


class HarnessError(enum.IntEnum):
    """Why the harness stopped (its ``error`` output)."""
    NONE = 0
    TIMEOUT = 1        # no handshake for idle_timeout cycles
    EXTRA_WORD = 2     # an output word beyond the expected count
    LAST_EARLY = 3     # `last` before a frame's final word
    LAST_MISSING = 4   # no `last` on a frame's final word
