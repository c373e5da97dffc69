# amaranth: UnusedElaboratable=no
"""UART transmitter and receiver, bit-level in Amaranth simulation."""

import random

import pytest
from amaranth.hdl import Module
from amaranth.sim import Simulator

from qloom.hw.uart import UARTRx, UARTTx, divisor_for
from qloom.sim.pysim import stream_get, stream_put


def ref_line(byte: int, divisor: int) -> list[int]:
    """The tx line, one value per clock, for one 8N1 byte."""
    bits = [0] + [(byte >> k) & 1 for k in range(8)] + [1]
    return [b for b in bits for _ in range(divisor)]


@pytest.mark.parametrize("divisor", [4, 5, 13])
def test_tx_waveform(divisor):
    dut = UARTTx(divisor=divisor)
    payload = [0x00, 0xFF, 0xA5, 0x3C]
    line = []

    async def bench(ctx):
        for byte in payload:
            await stream_put(ctx, dut.i, byte)
            # stream_put returns on the clock edge where the byte was taken.
            for _ in range(10 * divisor):
                line.append(ctx.get(dut.tx))
                await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert line == [b for byte in payload for b in ref_line(byte, divisor)]


def _drive_line(ctx, rx, bits_per_clock):
    async def drive():
        for level in bits_per_clock:
            ctx.set(rx, level)
            await ctx.tick()
    return drive()


@pytest.mark.parametrize("divisor,skew", [(4, 0), (8, 0), (13, 0), (32, 1), (32, -1)])
def test_rx_bytes(divisor, skew):
    """Random bytes, also with a 3 % wrong bit time (skew clocks per bit), arrive intact."""
    rng = random.Random(divisor)
    payload = [rng.randrange(256) for _ in range(12)] + [0x00, 0xFF]
    dut = UARTRx(divisor=divisor)
    got, errors = [], []

    async def line(ctx):
        ctx.set(dut.rx, 1)
        await ctx.tick().repeat(5)
        for byte in payload:
            bits = [0] + [(byte >> k) & 1 for k in range(8)] + [1]
            for b in bits:
                ctx.set(dut.rx, b)
                await ctx.tick().repeat(divisor + skew)
            await ctx.tick().repeat(1 + rng.randrange(3))
        await ctx.tick().repeat(4 * divisor)

    async def sink(ctx):
        ctx.set(dut.o.ready, 1)
        async for _, _, valid, byte in ctx.tick().sample(dut.o.valid, dut.o.payload):
            if valid:
                got.append(byte)

    async def watch(ctx):
        async for _, _, err in ctx.tick().sample(dut.error):
            if err:
                errors.append(1)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(line)
    sim.add_testbench(watch, background=True)
    sim.add_testbench(sink, background=True)
    sim.run()
    assert got == payload
    assert errors == []


def test_rx_framing_error_and_overrun():
    divisor = 4
    dut = UARTRx(divisor=divisor)
    events = []

    async def bench(ctx):
        async def send(byte, stop=1):
            for b in [0] + [(byte >> k) & 1 for k in range(8)] + [stop]:
                ctx.set(dut.rx, b)
                for _ in range(divisor):
                    await ctx.tick()
                    if ctx.get(dut.error):
                        events.append(("error", byte))
            ctx.set(dut.rx, 1)
            for _ in range(divisor):
                await ctx.tick()
                if ctx.get(dut.error):            # a register: a cycle after the stop bit
                    events.append(("error", byte))
        await send(0x12, stop=0)          # framing error: dropped
        await send(0x34)                  # kept, never read
        await send(0x56)                  # overrun: dropped
        events.append(("valid", ctx.get(dut.o.valid), ctx.get(dut.o.payload)))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert events == [("error", 0x12), ("error", 0x56), ("valid", 1, 0x34)]


def test_loopback():
    m = Module()
    m.submodules.tx = tx = UARTTx(divisor=6)
    m.submodules.rx = rx = UARTRx(divisor=6)
    m.d.comb += rx.rx.eq(tx.tx)
    payload = list(range(0, 256, 17))
    got = []

    async def source(ctx):
        for byte in payload:
            await stream_put(ctx, tx.i, byte)

    async def sink(ctx):
        while len(got) < len(payload):
            got.append(await stream_get(ctx, rx.o))

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(source, background=True)
    sim.add_testbench(sink)
    sim.run()
    assert got == payload


def test_divisor_for():
    assert divisor_for(48e6, 115200) == 417
    assert divisor_for(100e6, 3_000_000) == 33
    with pytest.raises(TypeError, match=r"^Baud rate must be a positive integer, not 9600\.0$"):
        divisor_for(12e6, 9600.0)
    with pytest.raises(ValueError, match=r"^Clock frequency must be positive, not 0$"):
        divisor_for(0, 9600)
    with pytest.raises(ValueError, match=r"^Baud rate 4000000 is too fast for a 12 MHz clock "
                                         r"\(divisor 3\.00, at least 4 needed\)$"):
        divisor_for(12e6, 4_000_000)
    with pytest.raises(ValueError, match=r"^Baud rate 2000000 is off by 4\.2% at 12\.5 MHz "):
        divisor_for(12.5e6, 2_000_000)


@pytest.mark.parametrize("cls", [UARTTx, UARTRx])
def test_divisor_validation(cls):
    with pytest.raises(TypeError, match=r"^Divisor must be an integer, not 4\.0$"):
        cls(divisor=4.0)
    with pytest.raises(ValueError, match=r"^Divisor must be at least 4 clocks per bit, not 3$"):
        cls(divisor=3)
