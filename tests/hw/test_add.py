# amaranth: UnusedElaboratable=no
import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from qloom.hw.add import ElementwiseAdd
from qloom.nn.dtypes import BIPOLAR, BINARY, TERNARY, int_type, uint_type
from qloom.nn.ir import Add
from qloom.sim.pysim import stream_put


def random_values(dtype, n, rng):
    if dtype.bipolar:
        return rng.choice([-1, 1], size=n)
    return rng.integers(dtype.min, dtype.max + 1, size=n)


def ref_add(a, b):
    return Add("add", ("a", "b"), "y").execute(a, b)


def rtl_add(dut, a_words, b_words, *, stall, seed=0):
    """Both operands from their own source with random stalls; output with random ready."""
    rng = random.Random(seed)
    out = []
    cycles = []

    def source(port, words, stream_seed):
        local = random.Random(stream_seed)

        async def run(ctx):
            for word in words:
                while local.random() < stall:
                    await ctx.tick()
                await stream_put(ctx, port, word)
        return run

    async def sink(ctx):
        cycle = 0
        while len(out) < len(a_words):
            ready = int(rng.random() >= stall)
            ctx.set(dut.o.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            cycle += 1
            if ready and valid:
                out.append([int(payload[k]) for k in range(dut.lanes)])
                cycles.append(cycle)
            if cycle > 100 + 20 * len(a_words):
                raise RuntimeError(f"timeout: {len(out)} of {len(a_words)} words")
        ctx.set(dut.o.ready, 1)
        for _ in range(16):  # nothing extra may follow
            _, _, valid = await ctx.tick().sample(dut.o.valid)
            assert not valid

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source(dut.i_a, a_words, seed + 1), background=True)
    sim.add_testbench(source(dut.i_b, b_words, seed + 2), background=True)
    sim.add_testbench(sink)
    sim.run()
    return out, cycles


@pytest.mark.parametrize("a_type,b_type,lanes", [
    (int_type(8), int_type(8), 1),
    (uint_type(4), int_type(3), 3),
    (BIPOLAR, BIPOLAR, 4),
    (BIPOLAR, uint_type(2), 2),
    (TERNARY, BINARY, 5),
    (uint_type(8), uint_type(8), 2),
])
@pytest.mark.parametrize("stall", [0.0, 0.3])
def test_add_matches_reference(a_type, b_type, lanes, stall):
    rng = np.random.default_rng(lanes)
    n_words = 24
    a = random_values(a_type, n_words * lanes, rng)
    b = random_values(b_type, n_words * lanes, rng)
    dut = ElementwiseAdd(a_type=a_type, b_type=b_type, lanes=lanes)
    to_words = lambda codes: codes.reshape(n_words, lanes).tolist()
    out, _ = rtl_add(dut, to_words(a_type.encode(a)), to_words(b_type.encode(b)),
                     stall=stall, seed=lanes)
    expect = dut.out_type.encode(ref_add(a, b))
    assert dut.out_type.allows(ref_add(a, b))
    assert np.array_equal(np.array(out).reshape(-1), expect)


def test_add_out_type_is_exact():
    assert ElementwiseAdd(a_type=int_type(8), b_type=int_type(8), lanes=1).out_type == int_type(9)
    assert ElementwiseAdd(a_type=BIPOLAR, b_type=BIPOLAR, lanes=1).out_type == int_type(3)
    assert ElementwiseAdd(a_type=uint_type(4), b_type=uint_type(4), lanes=1).out_type \
        == uint_type(5)
    assert ElementwiseAdd(a_type=int_type(8, narrow=True), b_type=int_type(1),
                          lanes=1).out_type == int_type(8)


def test_add_full_throughput():
    dut = ElementwiseAdd(a_type=uint_type(3), b_type=uint_type(3), lanes=1)
    words = [[k % 8] for k in range(30)]
    out, cycles = rtl_add(dut, words, words, stall=0.0)
    assert out == [[2 * w[0]] for w in words]
    assert cycles[-1] - cycles[0] == len(words) - 1


def test_add_rejects_bad_parameters():
    with pytest.raises(TypeError, match=r"a_type must be a qloom DataType, not 'INT8'"):
        ElementwiseAdd(a_type="INT8", b_type=int_type(8), lanes=1)
    with pytest.raises(TypeError, match=r"b_type must be a qloom DataType, not None"):
        ElementwiseAdd(a_type=int_type(8), b_type=None, lanes=1)
    with pytest.raises(TypeError, match=r"Lane count must be a positive integer, not 0"):
        ElementwiseAdd(a_type=int_type(8), b_type=int_type(8), lanes=0)
