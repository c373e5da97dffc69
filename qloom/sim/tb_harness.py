"""The cocotb side of the stream harness (``qloom.sim.harness``): load, start, wait, read.

cocotb imports this module inside the simulator; ``qloom.sim.runner.run_rtl`` prepares
its job (``QLOOM_TB_JOB``, the same keys as ``qloom.sim.tb_stream``'s, plus ``depth``,
``lanes``, ``in_bits`` and ``out_bits``: the harness's ring size, words per memory row
and payload widths) and reads the result file, which has the same keys as the
per-cycle bench's plus ``cycles`` (simulated cycles of the run). Python runs only at the
start, at every half ring of input or output words, at a progress tick every
``_TICK_CYCLES`` cycles and at the end: the harness does the per-cycle work.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import cocotb
from cocotb.triggers import FallingEdge, First, ReadOnly, RisingEdge, Timer

from .harness_codes import PROBABILITY_ONE, STAMP_BITS, HarnessError
from .tb_stream import JOB_ENV, _Progress

__all__ = ["run_harness"]

_RESET_CYCLES = 3
_SETUP_CYCLES = 3   # registered reset, the memory's read register, the row register
_TICK_CYCLES = 20_000


def _probability(p: float) -> int:
    return min(PROBABILITY_ONE - 1, round(p * PROBABILITY_ONE))


def _unsigned(handle) -> int:
    return int(handle.value.to_unsigned())


def _message(code: int, cycle: int, job: dict, n_in: int, in_count: int, out_count: int,
             handshake_x: str | None) -> str:
    """The per-cycle bench's wording for each way a run can fail."""
    words_out, frames = job["words_out"], job["frames"]
    frame, pos = divmod(out_count, words_out)
    status = (f"{out_count // words_out} of {frames} frames arrived ({out_count} of "
              f"{frames * words_out} output words), {in_count} of {n_in} input words "
              f"accepted")
    if code == HarnessError.TIMEOUT:
        text = (f"timeout: no handshake for {job['idle_timeout']} cycles at cycle {cycle}; "
                f"{status}")
        return text + (f"; {handshake_x}" if handshake_x else "")
    if code == HarnessError.EXTRA_WORD:
        return (f"the design produced an extra output word at cycle {cycle}, after all "
                f"{frames} frames")
    if code == HarnessError.LAST_EARLY:
        return (f"'last' set on output word {pos} of frame {frame} at cycle {cycle}, but "
                f"frames are {words_out} words: the design dropped words or ended the "
                f"frame early")
    if code == HarnessError.LAST_MISSING:
        return (f"'last' missing on output word {pos} of frame {frame} at cycle {cycle} "
                f"(frames are {words_out} words): the design added words or lost the flag")
    return f"the harness stopped with unknown error code {code} at cycle {cycle}"


def _x_on_handshake(dut) -> str | None:
    """Name a handshake signal of the design that is not 0/1 (Icarus' X or Z)."""
    for name in ("i__ready", "o__valid"):
        try:
            value = getattr(dut.dut, name).value
        except AttributeError:      # Verilator: two-state, and the design is not public
            return None
        if not value.is_resolvable:
            return f"{name} is {value} (not 0/1)"
    return None


class _Rings:
    """The cocotb side of the harness's ring memories: refills the input ring ahead of
    the harness and copies out the records behind it, a row of ``lanes`` words per VPI
    call (the calls, not the bits, are what costs)."""

    def __init__(self, dut, inputs: list[int], depth: int, lanes: int, in_bits: int,
                 out_bits: int):
        self.dut, self.inputs, self.depth, self.lanes = dut, inputs, depth, lanes
        self.in_bits, self.out_bits = in_bits, out_bits
        self.loaded = 0                      # input words written to the ring so far
        self.in_cycles: list[int] = []
        self.out_payloads: list[int] = []
        self.out_cycles: list[int] = []

    def refill(self, in_count: int):
        """Write the rows whose words the harness has all consumed: word ``j`` goes to
        slot ``j % depth`` once word ``j - depth`` has been taken, and a row is written
        whole, so only rows up to the one holding word ``in_count + depth - 1``, and that
        one only when it is complete or the input ends in it. Call outside the
        read-only phase."""
        lanes, bits, words = self.lanes, self.in_bits, self.inputs
        end = min(len(words), in_count - in_count % lanes + self.depth)
        mem, rows = self.dut.in_mem, self.depth // lanes
        for first in range(self.loaded, end, lanes):
            chunk = words[first:first + lanes]
            value = 0
            for k, word in enumerate(chunk):
                value |= word << (k * bits)
            mem[(first // lanes) % rows].value = value
        self.loaded = max(self.loaded, end)

    def collect(self, in_count: int, out_count: int):
        """Copy the records of the words handled since the last call (a partly filled
        row is read again next time). A record of word ``j`` is overwritten only by word
        ``j + depth``; the harness wakes this at every half ring, so nothing is lost."""
        dut, lanes, depth = self.dut, self.lanes, self.depth
        _read_rows(dut.in_cycle_mem, dut.in_cycle_row, self.in_cycles, in_count, lanes,
                   depth, STAMP_BITS)
        _read_rows(dut.out_mem, dut.out_row, self.out_payloads, out_count, lanes, depth,
                   self.out_bits)
        _read_rows(dut.out_cycle_mem, dut.out_cycle_row, self.out_cycles, out_count, lanes,
                   depth, STAMP_BITS)


class UnknownBits(Exception):
    """A recorded word has X or Z bits (Icarus); ``index`` is the word's position."""

    def __init__(self, index: int, value):
        super().__init__(index, value)
        self.index, self.value = index, value


def _read_rows(mem, partial, record: list[int], count: int, lanes: int, depth: int,
               bits: int):
    """Extend ``record`` to ``count`` words: full rows of ``lanes`` words of ``bits`` bits
    from the ring ``mem``, the row being filled from the register ``partial`` (its ``k``
    words in the top ``k`` lanes). Raises UnknownBits for a word with X or Z bits."""
    rows, mask = depth // lanes, (1 << bits) - 1
    while len(record) < count:
        first = len(record) - len(record) % lanes
        if first + lanes <= count:
            value, words, skip = mem[(first // lanes) % rows].value, lanes, 0
        else:
            words = count - first
            value, skip = partial.value, lanes - words
        try:
            # Not value.is_resolvable: that walks the bits in Python (about 1 ms for a
            # 1024-bit row, most of a run's time); the conversion checks them in C.
            value = int(value.to_unsigned()) >> (skip * bits)
        except ValueError:
            text = str(value)           # most significant bit first
            for k in range(words):
                lane = text[len(text) - (skip + k + 1) * bits:len(text) - (skip + k) * bits]
                if any(c not in "01" for c in lane):
                    raise UnknownBits(first + k, lane) from None
            raise
        del record[first:]
        record.extend((value >> (k * bits)) & mask for k in range(words))


def _unwrap(stamps: list[int]) -> list[int]:
    """Whole cycle numbers from the harness's 32-bit stamps, which only grow and are less
    than 2**32 cycles apart (see qloom.sim.harness_codes.STAMP_BITS)."""
    whole, base, previous = [], 0, 0
    for stamp in stamps:
        if stamp < previous:
            base += 1 << STAMP_BITS
        whole.append(base + stamp)
        previous = stamp
    return whole


@cocotb.test()
async def run_harness(dut):
    """Load the job's frames into the harness, run it to ``done`` and save its record."""
    job = json.loads(Path(os.environ[JOB_ENV]).read_text())
    inputs = [int(line, 16) for line in Path(job["inputs"]).read_text().split()]
    n_in, n_out = len(inputs), job["frames"] * job["words_out"]
    progress = _Progress(job.get("progress"), job["frames"])
    rings = _Rings(dut, inputs, job["depth"], job["lanes"], job["in_bits"], job["out_bits"])

    dut.reset.value = 1
    dut.start.value = 0
    rings.refill(0)
    p = float(job["backpressure"])
    for name, value in (("n_in", n_in), ("n_out", n_out), ("words_out", job["words_out"]),
                        ("p_in", _probability(p)), ("p_out", _probability(p)),
                        ("seed", job["seed"] & 0xFFFF_FFFF),
                        ("idle_timeout", min(job["idle_timeout"], 0xFFFF_FFFF)),
                        ("drain", min(job["drain_cycles"], 0xFFFF)), ("rd_addr", 0)):
        getattr(dut, name).value = value
    clock_edge, falling = RisingEdge(dut.clock), FallingEdge(dut.clock)
    for _ in range(_RESET_CYCLES):
        await clock_edge
    dut.reset.value = 0
    for _ in range(_SETUP_CYCLES):
        await clock_edge       # reset ends, the generators take their seed, row 0 loads
    dut.start.value = 1

    tick = Timer(_TICK_CYCLES * job["clock_period_ps"], unit="ps")
    wake = [RisingEdge(dut.done), dut.in_half.value_change, dut.out_half.value_change, tick]
    last_cycle = -1
    error = None
    while True:
        await First(*wake)
        await ReadOnly()
        in_count, out_count = _unsigned(dut.in_count), _unsigned(dut.out_count)
        try:
            rings.collect(in_count, out_count)
        except UnknownBits as exc:
            frame, pos = divmod(exc.index, job["words_out"])
            error = (f"o__payload is {exc.value} (not all 0/1) on output word {pos} of "
                     f"frame {frame}, taken by cycle {_unsigned(dut.cycle)}")
            break
        progress.update(out_count // job["words_out"])
        if dut.done.value:
            break
        cycle = _unsigned(dut.cycle)
        if cycle == last_cycle:
            raise RuntimeError(f"the stream harness is not running (cycle {cycle}): "
                               f"its control inputs did not reach it")
        last_cycle = cycle
        await falling          # out of the read-only phase: memories may be written
        rings.refill(in_count)

    code, cycle = int(dut.error.value), _unsigned(dut.error_cycle)
    if error is None and code != HarnessError.NONE:
        handshake_x = _x_on_handshake(dut) if code == HarnessError.TIMEOUT else None
        error = _message(code, cycle, job, n_in, in_count, out_count, handshake_x)
    Path(job["result"]).write_text(json.dumps({
        "error": error,
        "cycles": _unsigned(dut.cycle),
        "out_payloads": [format(x, "x") for x in rings.out_payloads],
        "in_cycles": _unwrap(rings.in_cycles),
        "out_cycles": _unwrap(rings.out_cycles),
    }))
    assert error is None, error
