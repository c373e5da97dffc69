"""The generic cocotb testbench of a compiled design: stream frames through ``qloom_top``.

cocotb imports this module inside the simulator; ``qloom.sim.runner.run_rtl`` prepares
its job and reads its result, so nothing here is called directly. The job is a JSON file
named by the ``QLOOM_TB_JOB`` environment variable (the only channel into a cocotb test)
with keys:

- ``inputs``: a text file of input payload integers in hex, one word per line, all frames
  back to back; ``result``: the JSON file this bench writes; ``progress``: a file holding
  the number of frames received so far (the runner draws the progress bar from it);
- ``frames``, ``words_out`` (output words per frame), ``out_last_bit``;
- ``backpressure`` (probability of an input gap before each word and of a dropped output
  ``ready`` each cycle), ``seed``;
- ``idle_timeout`` (cycles without any handshake before giving up), ``drain_cycles``
  (cycles watched after the last expected word for extra output), ``clock_period_ps``.

The result file holds ``error`` (null or the reason the run failed), the output payloads
in hex, and the cycle of every accepted input word and taken output word (cycle 0 is the
first cycle after reset; a word is stamped with the cycle that ends in its handshake).

Per-cycle work is kept to one coroutine, two triggers and a few signal accesses: Python
is the bottleneck of a cocotb simulation.
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

__all__ = ["JOB_ENV", "stream_frames"]

JOB_ENV = "QLOOM_TB_JOB"

_RESET_CYCLES = 3
_PROGRESS_SECONDS = 0.2


class StreamError(Exception):
    """The design broke the stream protocol, or stopped making progress."""


@dataclass
class _Record:
    out_payloads: list
    in_cycles: list
    out_cycles: list


class _Progress:
    """Frames received, written to a small file at most every 0.2 s for the runner."""

    def __init__(self, path: str | None, frames: int):
        self.path, self.frames, self.last = path, frames, 0.0

    def update(self, done: int):
        now = time.monotonic()
        if self.path and (now - self.last >= _PROGRESS_SECONDS or done == self.frames):
            self.last = now
            Path(self.path).write_text(f"{done}\n")


def _bit(handle, what: str, cycle: int) -> bool:
    try:
        return bool(handle.value)
    except ValueError:
        raise StreamError(f"{what} is {handle.value} (not 0/1) at cycle {cycle}") from None


def _word(handle, what: str, cycle: int) -> int:
    try:
        return handle.value.to_unsigned()
    except ValueError:
        raise StreamError(f"{what} is {handle.value} (not all 0/1) at cycle {cycle}") from None


def _status(record: _Record, job: dict, n_in: int) -> str:
    words = len(record.out_payloads)
    return (f"{words // job['words_out']} of {job['frames']} frames arrived ({words} of "
            f"{job['frames'] * job['words_out']} output words), "
            f"{len(record.in_cycles)} of {n_in} input words accepted")


def _check_last(payload: int, index: int, job: dict, cycle: int):
    words_out = job["words_out"]
    frame, pos = divmod(index, words_out)
    if frame >= job["frames"]:
        raise StreamError(f"the design produced an extra output word at cycle {cycle}, "
                          f"after all {job['frames']} frames")
    last = (payload >> job["out_last_bit"]) & 1
    if last and pos != words_out - 1:
        raise StreamError(f"'last' set on output word {pos} of frame {frame} at cycle "
                          f"{cycle}, but frames are {words_out} words: the design dropped "
                          f"words or ended the frame early")
    if not last and pos == words_out - 1:
        raise StreamError(f"'last' missing on output word {pos} of frame {frame} at cycle "
                          f"{cycle} (frames are {words_out} words): the design added words "
                          f"or lost the flag")


async def _stream(dut, job: dict, inputs: list[int], record: _Record, progress: _Progress):
    """Drive ``inputs`` and take outputs until every input word is taken, every frame is
    back and the drain window shows no extra output word."""
    rng = random.Random(job["seed"])
    p = job["backpressure"]
    n_in, n_out = len(inputs), job["frames"] * job["words_out"]
    words_out = job["words_out"]
    i_valid, i_ready, i_payload = dut.i__valid, dut.i__ready, dut.i__payload
    o_valid, o_ready, o_payload = dut.o__valid, dut.o__ready, dut.o__payload
    clock_edge, settled = RisingEdge(dut.clk), ReadOnly()
    in_pos, offered, gap = 0, False, p > 0 and rng.random() < p
    valid_on = ready_on = False   # what the bench drives now; written only on change
    cycle = idle = drained = 0
    while True:
        # Just after a rising edge: drive this cycle's valid / ready / payload.
        if not offered and in_pos < n_in and not gap:
            i_payload.value = inputs[in_pos]
            offered = True
        if offered != valid_on:
            i_valid.value = int(offered)
            valid_on = offered
        ready = p == 0 or rng.random() >= p
        if ready != ready_on:
            o_ready.value = int(ready)
            ready_on = ready
        await settled
        progressed = False
        if offered and _bit(i_ready, "i__ready", cycle):
            record.in_cycles.append(cycle)
            in_pos += 1
            offered, progressed = False, True
            gap = p > 0 and rng.random() < p
        elif not offered and gap:
            gap = rng.random() < p
        if ready and _bit(o_valid, "o__valid", cycle):
            payload = _word(o_payload, "o__payload", cycle)
            index = len(record.out_payloads)
            _check_last(payload, index, job, cycle)
            record.out_payloads.append(payload)
            record.out_cycles.append(cycle)
            progressed = True
            if (index + 1) % words_out == 0:
                progress.update((index + 1) // words_out)
        if len(record.out_payloads) == n_out and in_pos == n_in:
            drained += 1
            if drained > job["drain_cycles"]:
                return
        idle = 0 if progressed else idle + 1
        if idle > job["idle_timeout"]:
            raise StreamError(f"timeout: no handshake for {job['idle_timeout']} cycles at "
                              f"cycle {cycle}; {_status(record, job, n_in)}")
        await clock_edge
        cycle += 1


@cocotb.test()
async def stream_frames(dut):
    """Stream every frame of the job through the design and record what comes back."""
    job = json.loads(Path(os.environ[JOB_ENV]).read_text())
    inputs = [int(line, 16) for line in Path(job["inputs"]).read_text().split()]
    record = _Record([], [], [])
    progress = _Progress(job.get("progress"), job["frames"])
    Clock(dut.clk, job["clock_period_ps"], unit="ps").start()
    dut.rst.value = 1
    dut.i__valid.value = 0
    dut.o__ready.value = 0
    clock_edge = RisingEdge(dut.clk)
    for _ in range(_RESET_CYCLES):
        await clock_edge
    dut.rst.value = 0
    error = None
    try:
        await _stream(dut, job, inputs, record, progress)
    except StreamError as exc:
        error = str(exc)
    Path(job["result"]).write_text(json.dumps({
        "error": error,
        "out_payloads": [format(x, "x") for x in record.out_payloads],
        "in_cycles": record.in_cycles,
        "out_cycles": record.out_cycles,
    }))
    assert error is None, error
