"""The cocotb bench of ``qloom.sim.rtl_check``: stream words through one component's
``i`` -> ``o`` ports and record what leaves.

cocotb imports this module inside the simulator, so it imports nothing but cocotb and the
standard library (a heavier import costs every run a second or more). Its job is a JSON
file named by ``QLOOM_RTL_CHECK_JOB`` with keys ``inputs`` (payloads in hex), ``n_outputs``,
``stall`` (probability of an input gap and of a dropped output ``ready`` each cycle),
``seed``, ``idle_timeout`` (cycles without a handshake before giving up), ``drain_cycles``
(cycles watched after the last expected word for an extra one) and ``result`` (the JSON
file this bench writes: ``error``, null or the reason the run failed, and ``outputs`` in
hex).
"""

import json
import os
import random
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

__all__ = ["JOB_ENV", "stream_component"]

JOB_ENV = "QLOOM_RTL_CHECK_JOB"

_RESET_CYCLES = 3


class BenchError(Exception):
    """The component stalled, produced an extra word or drove X."""


def _value(handle, what: str, cycle: int) -> int:
    value = handle.value
    try:
        return value.to_unsigned() if hasattr(value, "to_unsigned") else int(value)
    except ValueError:
        raise BenchError(f"{what} is {value} (not all 0/1) at cycle {cycle}") from None


async def _stream(dut, job: dict, outputs: list):
    rng = random.Random(job["seed"])
    stall = job["stall"]
    inputs = [int(word, 16) for word in job["inputs"]]
    n_out = job["n_outputs"]
    clock_edge, settled = RisingEdge(dut.clk), ReadOnly()
    pos = cycle = idle = drained = 0
    while True:
        # just after a rising edge: this cycle's valid, payload and ready
        offer = pos < len(inputs) and not (stall and rng.random() < stall)
        if offer:
            dut.i__payload.value = inputs[pos]
        dut.i__valid.value = int(offer)
        ready = not (stall and rng.random() < stall)
        dut.o__ready.value = int(ready)
        await settled
        progressed = False
        if offer and _value(dut.i__ready, "i__ready", cycle):
            pos, progressed = pos + 1, True
        if _value(dut.o__valid, "o__valid", cycle) and ready:
            if len(outputs) == n_out:
                raise BenchError(f"an output word beyond the {n_out} expected at cycle {cycle}")
            outputs.append(_value(dut.o__payload, f"o__payload (word {len(outputs)})", cycle))
            progressed = True
        if len(outputs) == n_out and pos == len(inputs):
            drained += 1
            if drained > job["drain_cycles"]:
                return
        idle = 0 if progressed else idle + 1
        if idle > job["idle_timeout"]:
            raise BenchError(f"no handshake for {job['idle_timeout']} cycles at cycle {cycle}: "
                             f"{pos} of {len(inputs)} inputs taken, {len(outputs)} of {n_out} "
                             f"outputs")
        await clock_edge
        cycle += 1


@cocotb.test()
async def stream_component(dut):
    """Reset, then stream the job's inputs through ``dut`` and record its outputs."""
    job = json.loads(Path(os.environ[JOB_ENV]).read_text())
    Clock(dut.clk, 10, unit="ns").start()
    dut.rst.value = 1
    dut.i__valid.value = 0
    dut.o__ready.value = 0
    for _ in range(_RESET_CYCLES):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    outputs, error = [], None
    try:
        await _stream(dut, job, outputs)
    except BenchError as exc:
        error = str(exc)
    except Exception as exc:   # a bench bug: report it rather than lose the result
        error = f"bench error: {exc!r}"
    Path(job["result"]).write_text(json.dumps(
        {"error": error, "outputs": [format(word, "x") for word in outputs]}))
    assert error is None, error
