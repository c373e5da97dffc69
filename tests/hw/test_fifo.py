# amaranth: UnusedElaboratable=no
import random

import pytest
from amaranth.hdl import signed, unsigned
from amaranth.lib import data

from qloom.hw.fifo import StreamFIFO
from qloom.sim.pysim import run_stream


@pytest.mark.parametrize("depth,registered", [(1, False), (2, False), (3, False), (5, False),
                                              (16, False), (4, True), (5, True), (16, True)])
@pytest.mark.parametrize("stall", [0.0, 0.3, 0.7])
def test_fifo_passes_every_word_in_order(depth, registered, stall):
    rng = random.Random(depth)
    words = [rng.randrange(256) for _ in range(60)]
    run = run_stream(StreamFIFO(shape=unsigned(8), depth=depth, registered_read=registered),
                     words, len(words), in_stall=stall, out_stall=stall, seed=depth)
    assert run.outputs == words


def test_fifo_array_payload_signed_lanes():
    layout = data.ArrayLayout(signed(5), 3)
    rng = random.Random(1)
    words = [[rng.randrange(-16, 16) for _ in range(3)] for _ in range(40)]
    run = run_stream(StreamFIFO(shape=layout, depth=4), words, len(words),
                     in_stall=0.3, out_stall=0.3, seed=3)
    assert run.outputs == words


@pytest.mark.parametrize("depth,registered", [(3, False), (4, False), (4, True)])
def test_fifo_full_throughput_and_buffering(depth, registered):
    words = list(range(50))
    run = run_stream(StreamFIFO(shape=unsigned(8), depth=depth, registered_read=registered),
                     words, len(words))
    # one word per cycle once the first word is through (3: the edges' _FULL_RATE_DEPTH)
    assert run.out_cycles[-1] - run.out_cycles[0] == len(words) - 1
    # the registered read adds a cycle to a word's way through an empty FIFO
    assert run.out_cycles[0] - run.in_cycles[0] == 2 + registered


@pytest.mark.parametrize("depth,registered", [(3, False), (5, True)])
def test_fifo_holds_depth_words_while_output_blocked(depth, registered):
    # with the sink never ready early on, the FIFO accepts exactly `depth` words
    from amaranth.sim import Simulator
    dut = StreamFIFO(shape=unsigned(8), depth=depth, registered_read=registered)
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
    assert taken == list(range(depth))


def test_fifo_rejects_bad_parameters():
    with pytest.raises(TypeError, match=r"FIFO depth must be a positive integer, not 0"):
        StreamFIFO(shape=unsigned(8), depth=0)
    with pytest.raises(TypeError, match=r"FIFO depth must be a positive integer, not 2\.5"):
        StreamFIFO(shape=unsigned(8), depth=2.5)
    with pytest.raises(TypeError, match=r"Payload shape must be a shape-like object, not 'x'"):
        StreamFIFO(shape="x", depth=2)
    with pytest.raises(ValueError, match=r"registered read needs a depth of 4 or more, not 3"):
        StreamFIFO(shape=unsigned(8), depth=3, registered_read=True)


def test_registered_read_where_the_storage_is_block_ram():
    """ECP5 only, and only for storage in block RAM (``fifo_block_ram``, said explicitly:
    distributed RAM cells on the ECP5, flip-flops on the iCE40 otherwise)."""
    from qloom.hw.estimate import Family, fifo_block_ram
    from qloom.hw.fifo import fifo_registered_read, fifo_storage
    from qloom.hw.weight_mem import RamStyle
    assert fifo_storage(1024, 16, Family.ECP5) is RamStyle.BLOCK
    assert fifo_storage(16, 16, Family.ECP5) is RamStyle.LUTRAM
    assert fifo_storage(3, 8, Family.ICE40) is RamStyle.DISTRIBUTED
    assert fifo_storage(1024, 16, None) is RamStyle.AUTO
    assert fifo_block_ram(1023, 16, Family.ECP5) and fifo_registered_read(1024, 16,
                                                                         Family.ECP5)
    assert not fifo_registered_read(1024, 16, Family.ICE40)
    assert not fifo_registered_read(1024, 16, None)
    assert not fifo_block_ram(15, 16, Family.ECP5)
    assert not fifo_registered_read(16, 16, Family.ECP5)
