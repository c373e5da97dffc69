"""Run an SDRAM controller against the SDRAM model in Amaranth's simulator: a list of read
and write requests in, the words each read returned out, with random stalls on every
stream and the cycle each read word arrived (for bandwidth measurements)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from amaranth.sim import Simulator

from .pysim import to_python
from .sdram_model import SdramModel, SdramViolation

__all__ = ["Read", "Write", "SdramRun", "run_sdram"]


@dataclass(frozen=True)
class Read:
    burst: int


@dataclass(frozen=True)
class Write:
    burst: int
    words: tuple


@dataclass
class SdramRun:
    reads: list = field(default_factory=list)        # per Read, its words
    read_cycles: list = field(default_factory=list)  # the cycle each read word was taken
    ready_cycle: int | None = None                   # the cycle initialization ended
    cycles: int = 0                                  # cycles until the last read word
    model: SdramModel | None = None


async def _put(ctx, stream, payload, rng, stall, stop):
    """Offer ``payload`` until taken; False when ``stop`` (a list) filled first."""
    while stall and rng.random() < stall:
        await ctx.tick()
    ctx.set(stream.payload, payload)
    ctx.set(stream.valid, 1)
    while True:
        _, _, ready = await ctx.tick().sample(stream.ready)
        if ready or stop:
            break
    ctx.set(stream.valid, 0)
    return not stop


def run_sdram(dut, requests, *, chip=None, cmd_stall=0.0, w_stall=0.0, r_stall=0.0,
              seed=0, max_cycles=None, model_seed=1, vcd=None, drain=None) -> SdramRun:
    """Simulate controller ``dut`` with a model of a chip of timing ``chip`` (an
    ``SdramCycles``; by default the controller's own ``cycles``: a controller built with
    wrong timing is checked against the right one). ``requests`` are ``Read``/``Write``; a write's
    ``words`` are one burst. Stall probabilities drop ``valid`` (requests, write data) or
    ``ready`` (read data) at random each cycle. With ``drain`` the run continues that many
    cycles past the last read word (refresh keeps going, the model keeps checking).
    Raises RuntimeError after ``max_cycles``; the model raises ``SdramViolation``."""
    rng = random.Random(seed)
    requests = list(requests)
    bl = dut.burst_length
    for req in requests:
        if isinstance(req, Write) and len(req.words) != bl:
            raise ValueError(f"a write carries one burst of {bl} words, not {len(req.words)}")
    n_words = bl * sum(isinstance(r, Read) for r in requests)
    chip = dut.cycles if chip is None else chip
    model = SdramModel(dut.bus, geometry=dut.geometry, cycles=chip, seed=model_seed)
    if max_cycles is None:
        max_cycles = dut.cycles.power_up + 200 + 40 * len(requests) * bl
    result = SdramRun(model=model)
    layout = dut.cmd.payload.shape()
    violations = []

    async def sdram(ctx):
        # a violation ends the run (the other testbenches stop with it) and is raised
        # after the simulation, not from inside it
        try:
            await model.process(ctx)
        except SdramViolation as violation:
            violations.append(violation)

    async def commands(ctx):
        for req in requests:
            payload = layout.const({"addr": req.burst, "write": isinstance(req, Write)})
            if not await _put(ctx, dut.cmd, payload, rng, cmd_stall, violations):
                return

    async def write_data(ctx):
        for req in requests:
            if isinstance(req, Write):
                for word in req.words:
                    if not await _put(ctx, dut.w, word, rng, w_stall, violations):
                        return

    async def read_data(ctx):
        words = []
        cycle = 0
        while len(words) < n_words or (drain and cycle < result.cycles + drain):
            if violations:
                return
            if cycle >= max_cycles:
                raise RuntimeError(f"timeout after {max_cycles} cycles: {len(words)} of "
                                   f"{n_words} read words")
            ready = int(len(words) < n_words and rng.random() >= r_stall)
            ctx.set(dut.r.ready, ready)
            _, _, valid, payload, up = await ctx.tick().sample(dut.r.valid, dut.r.payload,
                                                               dut.ready)
            cycle += 1
            if up and result.ready_cycle is None:
                result.ready_cycle = cycle
            if ready and valid:
                words.append(to_python(payload))
                result.read_cycles.append(cycle)
                if len(words) == n_words:
                    result.cycles = cycle
        result.reads = [words[k:k + bl] for k in range(0, n_words, bl)]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(sdram, background=True)
    sim.add_testbench(commands, background=True)
    sim.add_testbench(write_data, background=True)
    sim.add_testbench(read_data)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()
    if violations:
        raise violations[0]
    return result
