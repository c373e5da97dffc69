"""Amaranth simulation helpers shared by every hardware test: put and get stream payloads,
and drive a component's ``i`` -> ``o`` streams with random stalls on both sides.

Payloads are given and returned as plain Python values: an int for a plain shape, a list of
ints for a ``data.ArrayLayout`` (one per lane), a dict for a ``data.StructLayout``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from amaranth.lib import data
from amaranth.sim import Simulator

__all__ = ["stream_put", "stream_get", "to_python", "StreamRun", "run_stream"]


def to_python(value):
    """A simulation value (int or ``data.Const``) as nested Python ints, lists and dicts."""
    if isinstance(value, data.Const):
        layout = value.shape()
        if isinstance(layout, data.ArrayLayout):
            return [to_python(value[k]) for k in range(layout.length)]
        return {name: to_python(value[name]) for name, _ in layout}
    return value


def _const(stream, payload):
    shape = stream.payload.shape()
    if isinstance(shape, data.Layout):
        return shape.const(payload)
    return payload


async def stream_put(ctx, stream, payload):
    """Offer one payload on ``stream`` and wait until it is taken."""
    ctx.set(stream.payload, _const(stream, payload))
    ctx.set(stream.valid, 1)
    await ctx.tick().until(stream.ready)
    ctx.set(stream.valid, 0)


async def stream_get(ctx, stream):
    """Accept one payload from ``stream``."""
    ctx.set(stream.ready, 1)
    payload, = await ctx.tick().sample(stream.payload).until(stream.valid)
    ctx.set(stream.ready, 0)
    return to_python(payload)


@dataclass
class StreamRun:
    outputs: list       # payloads in the order they left ``o``
    out_cycles: list    # the cycle each output was taken
    in_cycles: list     # the cycle each input was taken
    cycles: int         # cycles until the last output


def run_stream(dut, inputs, n_outputs, *, in_stall=0.0, out_stall=0.0, seed=0,
               max_cycles=None, i="i", o="o", vcd=None, in_period=1,
               out_period=1) -> StreamRun:
    """Simulate ``dut``: feed ``inputs`` into stream ``i`` and collect ``n_outputs`` payloads
    from stream ``o``. With ``in_stall``/``out_stall`` > 0 the input ``valid`` and output
    ``ready`` are dropped at random with that probability each cycle; ``in_period`` /
    ``out_period`` throttle them exactly: an input offered at most every ``in_period``
    cycles, the output ready every ``out_period``-th cycle only. Raises RuntimeError
    when ``max_cycles`` pass first, and when ``o`` produces more than ``n_outputs`` within
    a short drain window after the last expected one.
    """
    rng = random.Random(seed)
    inputs = list(inputs)
    if max_cycles is None:
        max_cycles = 1000 + 50 * (len(inputs) + n_outputs)
    si, so = getattr(dut, i), getattr(dut, o)
    result = StreamRun([], [], [], 0)
    state = {"done": False}

    async def source(ctx):
        cycle = 0
        for payload in inputs:
            # the last input was taken on tick ``in_cycles[-1]``, this one at ``cycle + 1``
            since = cycle - (result.in_cycles[-1] if result.in_cycles else -in_period)
            for _ in range(in_period - 1 - since):
                ctx.set(si.valid, 0)
                await ctx.tick()
                cycle += 1
            while rng.random() < in_stall:
                ctx.set(si.valid, 0)
                await ctx.tick()
                cycle += 1
            ctx.set(si.payload, _const(si, payload))
            ctx.set(si.valid, 1)
            while True:
                _, _, ready = await ctx.tick().sample(si.ready)
                cycle += 1
                if ready:
                    break
            result.in_cycles.append(cycle)
        ctx.set(si.valid, 0)

    async def sink(ctx):
        cycle = 0
        drain = 0
        while cycle < max_cycles:
            ready = int(rng.random() >= out_stall and cycle % out_period == 0)
            ctx.set(so.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(so.valid, so.payload)
            cycle += 1
            if ready and valid:
                if len(result.outputs) >= n_outputs:
                    raise RuntimeError(f"stream '{o}' produced more than the {n_outputs} "
                                       f"outputs expected (extra at cycle {cycle})")
                result.outputs.append(to_python(payload))
                result.out_cycles.append(cycle)
                if len(result.outputs) == n_outputs:
                    result.cycles = cycle
            if len(result.outputs) == n_outputs:
                drain += 1
                if drain > 64:
                    state["done"] = True
                    return
        raise RuntimeError(f"timeout after {max_cycles} cycles: {len(result.outputs)} of "
                           f"{n_outputs} outputs, {len(result.in_cycles)} of {len(inputs)} "
                           f"inputs taken")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source, background=True)
    sim.add_testbench(sink)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()
    return result
