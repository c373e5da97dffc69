# amaranth: UnusedElaboratable=no
import random

import pytest
from amaranth.hdl import signed, unsigned
from amaranth.lib import data

from qloom.hw.fifo import StreamFIFO
from qloom.sim.pysim import run_stream


@pytest.mark.parametrize("depth", [1, 2, 3, 5, 16])
@pytest.mark.parametrize("stall", [0.0, 0.3])
def test_fifo_passes_every_word_in_order(depth, stall):
    rng = random.Random(depth)
    words = [rng.randrange(256) for _ in range(60)]
    run = run_stream(StreamFIFO(shape=unsigned(8), depth=depth), words, len(words),
                     in_stall=stall, out_stall=stall, seed=depth)
    assert run.outputs == words


def test_fifo_array_payload_signed_lanes():
    layout = data.ArrayLayout(signed(5), 3)
    rng = random.Random(1)
    words = [[rng.randrange(-16, 16) for _ in range(3)] for _ in range(40)]
    run = run_stream(StreamFIFO(shape=layout, depth=4), words, len(words),
                     in_stall=0.3, out_stall=0.3, seed=3)
    assert run.outputs == words


@pytest.mark.parametrize("depth", [3, 4])
def test_fifo_full_throughput_and_buffering(depth):
    words = list(range(50))
    run = run_stream(StreamFIFO(shape=unsigned(8), depth=depth), words, len(words))
    # one word per cycle once the first word is through (3: the edges' _FULL_RATE_DEPTH)
    assert run.out_cycles[-1] - run.out_cycles[0] == len(words) - 1


def test_fifo_holds_depth_words_while_output_blocked():
    # with the sink never ready early on, the FIFO accepts exactly `depth` words
    from amaranth.sim import Simulator
    dut = StreamFIFO(shape=unsigned(8), depth=3)
    taken = []

    async def bench(ctx):
        ctx.set(dut.o.ready, 0)
        ctx.set(dut.i.valid, 1)
        for k in range(10):
            ctx.set(dut.i.payload, k)
            _, _, ready = await ctx.tick().sample(dut.i.ready)
            if ready:
                taken.append(k)
            else:
                # hold the same payload until it is taken
                ctx.set(dut.i.valid, 0)
                break

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert taken == [0, 1, 2]


def test_fifo_rejects_bad_parameters():
    with pytest.raises(TypeError, match=r"FIFO depth must be a positive integer, not 0"):
        StreamFIFO(shape=unsigned(8), depth=0)
    with pytest.raises(TypeError, match=r"FIFO depth must be a positive integer, not 2\.5"):
        StreamFIFO(shape=unsigned(8), depth=2.5)
    with pytest.raises(TypeError, match=r"Payload shape must be a shape-like object, not 'x'"):
        StreamFIFO(shape="x", depth=2)
