# amaranth: UnusedElaboratable=no
import random

import pytest
from amaranth.hdl import signed, unsigned
from amaranth.lib import data
from amaranth.sim import Simulator

from qloom.hw.dup import Duplicate
from qloom.sim.pysim import to_python


def rtl_duplicate(dut, words, *, in_stall, out_stalls, seed=0, max_cycles=5000):
    """Feed ``words`` into ``i``; collect what ``o0`` and ``o1`` produce (each with its own
    random ready) plus the cycles of every transfer."""
    rng = random.Random(seed)
    got = {"o0": [], "o1": []}
    cycles = {"o0": [], "o1": []}

    async def source(ctx):
        for word in words:
            while rng.random() < in_stall:
                ctx.set(dut.i.valid, 0)
                await ctx.tick()
            ctx.set(dut.i.payload, dut.i.payload.shape().const(word)
                    if isinstance(dut.i.payload.shape(), data.Layout) else word)
            ctx.set(dut.i.valid, 1)
            await ctx.tick().until(dut.i.ready)
        ctx.set(dut.i.valid, 0)

    def sink(name, stall, sink_seed):
        port = getattr(dut, name)
        local = random.Random(sink_seed)

        async def run(ctx):
            for cycle in range(max_cycles):
                ready = int(local.random() >= stall)
                ctx.set(port.ready, ready)
                _, _, valid, payload = await ctx.tick().sample(port.valid, port.payload)
                if ready and valid:
                    got[name].append(to_python(payload))
                    cycles[name].append(cycle)
                if len(got[name]) == len(words) and cycle > cycles[name][-1] + 32:
                    return
            raise RuntimeError(f"{name}: {len(got[name])} of {len(words)} words")
        return run

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source, background=True)
    sim.add_testbench(sink("o0", out_stalls[0], seed + 1))
    sim.add_testbench(sink("o1", out_stalls[1], seed + 2))
    sim.run()
    return got, cycles


@pytest.mark.parametrize("stalls", [(0.0, 0.0, 0.0), (0.3, 0.3, 0.3), (0.0, 0.0, 0.7),
                                    (0.3, 0.7, 0.0), (0.0, 0.5, 0.5)])
def test_duplicate_delivers_every_word_to_both(stalls):
    rng = random.Random(5)
    words = [rng.randrange(1 << 8) for _ in range(80)]
    got, _ = rtl_duplicate(Duplicate(shape=unsigned(8)), words, in_stall=stalls[0],
                           out_stalls=stalls[1:], seed=sum(int(10 * s) for s in stalls))
    assert got["o0"] == words
    assert got["o1"] == words


def test_duplicate_array_payload():
    layout = data.ArrayLayout(signed(3), 4)
    rng = random.Random(2)
    words = [[rng.randrange(-4, 4) for _ in range(4)] for _ in range(30)]
    got, _ = rtl_duplicate(Duplicate(shape=layout), words, in_stall=0.3,
                           out_stalls=(0.3, 0.3), seed=1)
    assert got["o0"] == words and got["o1"] == words


def test_duplicate_full_throughput():
    words = list(range(40))
    got, cycles = rtl_duplicate(Duplicate(shape=unsigned(8)), words, in_stall=0.0,
                                out_stalls=(0.0, 0.0))
    assert got["o0"] == words and got["o1"] == words
    assert cycles["o0"][-1] - cycles["o0"][0] == len(words) - 1


def test_duplicate_rejects_bad_shape():
    with pytest.raises(TypeError, match=r"Payload shape must be a shape-like object, not 'u8'"):
        Duplicate(shape="u8")
