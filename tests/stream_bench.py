"""A pysim bench for stream components with any number of inputs and one output ``o``:
random input gaps and output stalls, every output word and its cycle recorded, and nothing
extra allowed after the last expected word. Shared by the hardware tests."""

import random

import numpy as np
from amaranth.sim import Simulator

from qloom.sim.pysim import stream_put

__all__ = ["run", "values"]


def values(dtype, n, rng):
    if dtype.bipolar:
        return rng.choice([-1, 1], size=n)
    return rng.integers(dtype.min, dtype.max + 1, size=n)


def run(dut, feeds, n_out, lanes, *, stall, seed=0):
    """``feeds``: (port, words) per input, each from its own stalling source; returns the
    output words and the cycles they left at."""
    rng, out, cycles = random.Random(seed), [], []

    def source(port, words, stream_seed):
        local = random.Random(stream_seed)

        async def go(ctx):
            for word in words:
                while local.random() < stall:
                    await ctx.tick()
                await stream_put(ctx, port, word)
        return go

    async def sink(ctx):
        cycle = 0
        while len(out) < n_out:
            ready = int(rng.random() >= stall)
            ctx.set(dut.o.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            cycle += 1
            if ready and valid:
                out.append([int(payload[k]) for k in range(lanes)])
                cycles.append(cycle)
            if cycle > 100 + 20 * n_out:
                raise RuntimeError(f"timeout: {len(out)} of {n_out} words")
        ctx.set(dut.o.ready, 1)
        for _ in range(16):     # nothing extra may follow
            _, _, valid = await ctx.tick().sample(dut.o.valid)
            assert not valid

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for k, (port, words) in enumerate(feeds):
        sim.add_testbench(source(port, words, seed + k + 1), background=True)
    sim.add_testbench(sink)
    sim.run()
    return out, cycles
