"""The cocotb side of the stream harness (``qloom.sim.harness``): load, start, wait, read.

cocotb imports this module inside the simulator; ``qloom.sim.runner.run_rtl`` prepares
its job (``QLOOM_TB_JOB``, the keys of ``qloom.sim.tb_stream``'s but ``inputs``, plus
``depth``, ``lanes``, ``in_bits`` and ``out_bits``: the harness's ring size, words per
memory row and payload widths; ``in_rows`` and ``n_in``: the input words as ring rows
(``qloom.sim.harness_rows``) and their number; ``records``: a file for each record's
rows, by name: ``in_cycle``, ``out``, ``out_cycle``) and reads the result file:
``error`` (null or why the run failed), ``cycles`` (simulated cycles of the run) and
``record_words`` (words in each record file). The rows are split into words and the
stamps unwrapped by the runner, with numpy, after the run. Python runs only at the
start, at every half ring of input or output words, at a progress tick every
``_TICK_CYCLES`` cycles and at the end: the harness does the per-cycle work.

While it waits for those, the bench holds the harness's ``free_run`` input at 1: under
Verilator the main loop (``qloom/sim/harness_main.cpp``) then runs the clock without
calling into cocotb until one of them happens. It drops it before anything else (a read
in the read-only phase, a write in the next time step), so that those callbacks run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import cocotb
from cocotb.triggers import First, NextTimeStep, ReadOnly, RisingEdge, Timer

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


class UnknownBits(Exception):
    """A recorded word has X or Z bits (Icarus); ``index`` is the word's position."""

    def __init__(self, index: int, value):
        super().__init__(index, value)
        self.index, self.value = index, value


def _bits_reader(handle):
    """A function returning ``handle``'s value as a string of bits, most significant
    first ('0', '1', 'X', 'Z', ...).

    cocotb's public ``handle.value`` builds a LogicArray for every read, which made the
    records' reads the larger part of the bench's Python time (tens of thousands of rows
    a run); the simulator object behind the handle (``_handle``, cocotb 2.1 as pinned)
    hands out the same string that LogicArray is built from. Without it, the public
    way."""
    read = getattr(getattr(handle, "_handle", None), "get_signal_val_binstr", None)
    return read if callable(read) else (lambda: str(handle.value))


def _row_value(read, first: int, words: int, skip: int, bits: int) -> int:
    """The ``words`` words above the ``skip`` lowest lanes of the row that ``read`` (see
    ``_bits_reader``) returns, the first of them word ``first`` of the record. Raises
    UnknownBits for a word with X or Z bits (the lanes skipped may hold anything: a row
    register's unwritten lanes start undefined in Icarus)."""
    text = read()               # most significant bit first
    if not skip:
        try:
            # Not a check bit by bit in Python (about 1 ms for a 1024-bit row, most of a
            # run's time): the conversion checks them in C.
            return int(text, 2)
        except ValueError:
            pass
    for k in range(words):
        lane = text[len(text) - (skip + k + 1) * bits:len(text) - (skip + k) * bits]
        if any(c not in "01" for c in lane):
            raise UnknownBits(first + k, lane)
    return int(text[:len(text) - skip * bits], 2)


class _Record:
    """One ring of records (``in_cycle``, ``out``, ``out_cycle``) as read so far: the
    values of its full rows in order, read once each from the memory ``mem``, and the
    row being filled, from the one-row memory ``partial`` (its ``k`` words in the top
    ``k`` lanes, moved to the low ones here). A record of word ``j`` is overwritten only by
    word ``j + depth``; the bench reads at every half ring, so nothing is lost."""

    def __init__(self, mem, partial, bits: int, lanes: int, depth: int):
        self.rows = depth // lanes
        self.mem = [_bits_reader(mem[k]) for k in range(self.rows)]
        self.partial, self.bits, self.lanes = _bits_reader(partial[0]), bits, lanes
        self.full: list[int] = []
        self.tail: tuple[int, int] = (0, 0)      # (words, value) of the partial row

    def read(self, count: int, last: bool):
        """Read the full rows up to word ``count``, and with ``last`` the partly filled
        row after them too (the run is over)."""
        lanes, bits = self.lanes, self.bits
        while (len(self.full) + 1) * lanes <= count:
            row = len(self.full)
            self.full.append(_row_value(self.mem[row % self.rows], row * lanes, lanes, 0,
                                        bits))
        words = count - len(self.full) * lanes
        if last and words:
            self.tail = (words, _row_value(self.partial, len(self.full) * lanes, words,
                                           lanes - words, bits))

    def save(self, path: Path) -> int:
        """Write the rows (``qloom.sim.harness_rows``' format); returns the word count."""
        size = (self.bits * self.lanes + 7) // 8
        rows = self.full + ([self.tail[1]] if self.tail[0] else [])
        path.write_bytes(b"".join(value.to_bytes(size, "little") for value in rows))
        return len(self.full) * self.lanes + self.tail[0]


class _Rings:
    """The cocotb side of the harness's ring memories: refills the input ring ahead of
    the harness and copies out the records behind it, a row of ``lanes`` words per VPI
    call (the calls, not the bits, are what costs). ``in_rows`` is the input words as
    ring rows (``qloom.sim.harness_rows``), ``n_in`` the number of words."""

    def __init__(self, dut, in_rows: bytes, n_in: int, depth: int, lanes: int, in_bits: int,
                 out_bits: int):
        self.dut, self.in_rows, self.n_in = dut, in_rows, n_in
        self.depth, self.lanes = depth, lanes
        self.row_bytes = (in_bits * lanes + 7) // 8
        self.loaded = 0                      # input words written to the ring so far
        self.in_mem = [dut.in_mem[k] for k in range(depth // lanes)]
        self.records = {
            "in_cycle": _Record(dut.in_cycle_mem, dut.in_cycle_row, STAMP_BITS, lanes, depth),
            "out": _Record(dut.out_mem, dut.out_row, out_bits, lanes, depth),
            "out_cycle": _Record(dut.out_cycle_mem, dut.out_cycle_row, STAMP_BITS, lanes,
                                 depth)}

    def refill(self, in_count: int):
        """Write the rows whose words the harness has all consumed: word ``j`` goes to
        slot ``j % depth`` once word ``j - depth`` has been taken, and a row is written
        whole, so only rows up to the one holding word ``in_count + depth - 1``, and that
        one only when it is complete or the input ends in it. Call outside the
        read-only phase."""
        lanes, size = self.lanes, self.row_bytes
        end = min(self.n_in, in_count - in_count % lanes + self.depth)
        mem, rows = self.in_mem, len(self.in_mem)
        for row in range(self.loaded // lanes, -(-end // lanes)):
            mem[row % rows].value = int.from_bytes(self.in_rows[row * size:(row + 1) * size],
                                                   "little")
        self.loaded = max(self.loaded, end)

    def collect(self, in_count: int, out_count: int, last: bool):
        """Copy the records of the words handled since the last call: the full rows, and
        with ``last`` (the run is over) the partly filled ones."""
        for record, count in zip(self.records.values(), (in_count, out_count, out_count)):
            record.read(count, last)


@cocotb.test()
async def run_harness(dut):
    """Load the job's frames into the harness, run it to ``done`` and save its record."""
    job = json.loads(Path(os.environ[JOB_ENV]).read_text())
    n_in, n_out = job["n_in"], job["frames"] * job["words_out"]
    progress = _Progress(job.get("progress"), job["frames"])
    rings = _Rings(dut, Path(job["in_rows"]).read_bytes(), n_in, job["depth"], job["lanes"],
                   job["in_bits"], job["out_bits"])

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
    clock_edge = RisingEdge(dut.clock)
    for _ in range(_RESET_CYCLES):
        await clock_edge
    dut.reset.value = 0
    for _ in range(_SETUP_CYCLES):
        await clock_edge       # reset ends, the generators take their seed, row 0 loads
    dut.start.value = 1
    dut.free_run.value = 1

    tick = Timer(_TICK_CYCLES * job["clock_period_ps"], unit="ps")
    wake = [RisingEdge(dut.done), dut.in_half.value_change, dut.out_half.value_change, tick]
    last_cycle = -1
    error = None
    while True:
        await First(*wake)
        dut.free_run.value = 0
        await ReadOnly()
        in_count, out_count = _unsigned(dut.in_count), _unsigned(dut.out_count)
        done = bool(dut.done.value)
        try:
            rings.collect(in_count, out_count, done)
        except UnknownBits as exc:
            frame, pos = divmod(exc.index, job["words_out"])
            error = (f"o__payload is {exc.value} (not all 0/1) on output word {pos} of "
                     f"frame {frame}, taken by cycle {_unsigned(dut.cycle)}")
            break
        progress.update(out_count // job["words_out"])
        if done:
            break
        cycle = _unsigned(dut.cycle)
        if cycle == last_cycle:
            raise RuntimeError(f"the stream harness is not running (cycle {cycle}): "
                               f"its control inputs did not reach it")
        last_cycle = cycle
        await NextTimeStep()   # out of the read-only phase: memories may be written
        rings.refill(in_count)
        dut.free_run.value = 1

    code, cycle = int(dut.error.value), _unsigned(dut.error_cycle)
    if error is None and code != HarnessError.NONE:
        handshake_x = _x_on_handshake(dut) if code == HarnessError.TIMEOUT else None
        error = _message(code, cycle, job, n_in, in_count, out_count, handshake_x)
    counts = {name: record.save(Path(job["records"][name]))
              for name, record in rings.records.items()}
    Path(job["result"]).write_text(json.dumps({
        "error": error, "cycles": _unsigned(dut.cycle), "record_words": counts}))
    assert error is None, error
