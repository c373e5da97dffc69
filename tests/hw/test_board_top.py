# amaranth: UnusedElaboratable=no
"""The board top: PLL settings, and the whole host link (UART bits -> Link -> accelerator ->
Link -> UART bits) in Amaranth simulation and, around a compiled ``qloom_top`` Verilog, in
cocotb (Icarus). ``run_board_sim(OUT, requests)`` takes any compiled OUT folder.

This module is also the cocotb test module (``board_top_bench`` runs inside Icarus).
"""

import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from amaranth.sim import Simulator

from qloom.hw.board_top import LinkCore, ecp5_pll, ice40_pll, link_core_verilog
from qloom.hw.protocol import Status, WireFormat, decode_reply, encode_request
from qloom.nn.dtypes import uint_type

HERE = Path(__file__).parent
JOB_ENV = "QLOOM_BOARD_TB_JOB"


def load_toy():
    spec = importlib.util.spec_from_file_location("toy_top", HERE.parent / "sim" / "toy_top.py")
    toy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(toy)
    return toy


# The toy accelerator: elementwise min(x + 1, 15) on UINT4, 3 lanes, 10 elements a frame.
TOY = dict(dtype=uint_type(4), lanes=3, elements=10)
FMT = WireFormat(lanes=3, element_bits=4, signed=False, elements=10)


def ref_toy(x):
    return np.minimum(np.asarray(x) + 1, 15)


@pytest.mark.parametrize("fin,fout", [(12, 48), (12, 50), (12, 30), (12, 100)])
def test_ice40_pll(fin, fout):
    plan = ice40_pll(fin, fout)
    p = plan.params
    pfd = fin / (p["DIVR"] + 1)
    vco = pfd * (p["DIVF"] + 1)
    assert 10 <= pfd <= 133 and 533 <= vco <= 1066
    assert plan.achieved_mhz == pytest.approx(vco / 2 ** p["DIVQ"], abs=1e-3)
    assert plan.error < 0.01


@pytest.mark.parametrize("fin,fout", [(25, 100), (25, 150), (48, 96), (25, 133)])
def test_ecp5_pll(fin, fout):
    plan = ecp5_pll(fin, fout)
    p = plan.params
    out = fin / p["CLKI_DIV"] * p["CLKFB_DIV"]
    assert 400 <= out * p["CLKOP_DIV"] <= 800
    assert plan.achieved_mhz == pytest.approx(out, abs=1e-3)
    assert plan.error < 0.01


def test_pll_range_errors():
    with pytest.raises(ValueError, match=r"^iCE40 PLL output must be within 16\.\.275 MHz, not 5$"):
        ice40_pll(12, 5)
    with pytest.raises(ValueError, match=r"^ECP5 PLL output must be within 3\.125\.\.400 MHz, "
                                         r"not 500$"):
        ecp5_pll(25, 500)


def test_link_core_validation():
    toy = load_toy()
    acc = toy.PlusOneTop(TOY["dtype"], TOY["lanes"], TOY["elements"])
    with pytest.raises(TypeError, match=r"^Accelerator must be a wiring.Component, not 'x'$"):
        LinkCore("x", input_format=FMT, output_format=FMT, divisor=4, clock_hz=1e5)
    with pytest.raises(ValueError, match=r"^Clock frequency must be positive, not 0$"):
        LinkCore(acc, input_format=FMT, output_format=FMT, divisor=4, clock_hz=0)
    with pytest.raises(ValueError, match=r"^Divisor must be at least 4 clocks per bit, not 2$"):
        LinkCore(acc, input_format=FMT, output_format=FMT, divisor=2, clock_hz=1e5)


def _requests(frames, corrupt_at, fmt=FMT):
    """Encoded requests; the one at ``corrupt_at`` has a flipped payload bit."""
    requests = [encode_request(fmt.pack(x)) for x in frames]
    bad = bytearray(requests[corrupt_at])
    bad[4] ^= 0x10
    return requests[:corrupt_at] + [bytes(bad)] + requests[corrupt_at:]


def _check_replies(reply_bytes, expected, corrupt_at, fmt=FMT):
    """The replies are the expected outputs, with a BAD_CRC reply at ``corrupt_at``."""
    replies, buf = [], bytes(reply_bytes)
    while buf:
        reply, used = decode_reply(buf)
        assert reply is not None, f"truncated reply {buf!r}"
        replies.append(reply)
        buf = buf[used:]
    statuses = [s for s, _ in replies]
    assert statuses == ([Status.OK] * corrupt_at + [Status.BAD_CRC]
                        + [Status.OK] * (len(expected) - corrupt_at))
    outputs = [fmt.unpack(p) for s, p in replies if s == Status.OK]
    mismatches = sum(int(np.sum(o != want)) for o, want in zip(outputs, expected))
    assert mismatches == 0


def test_link_core_bits_pysim():
    """Three frames and a corrupted one, driven bit by bit into uart_rx."""
    toy = load_toy()
    divisor = 4
    dut = LinkCore(toy.PlusOneTop(TOY["dtype"], TOY["lanes"], TOY["elements"]),
                   input_format=FMT, output_format=FMT, divisor=divisor, clock_hz=1e5)
    rng = np.random.default_rng(3)
    frames = [rng.integers(0, 16, 10) for _ in range(3)]
    requests = _requests(frames, corrupt_at=1)
    line = []
    error_led = []

    async def host(ctx):
        ctx.set(dut.uart_rx, 1)
        await ctx.tick().repeat(10)
        for request in requests:
            for byte in request:
                for bit in [0] + [(byte >> k) & 1 for k in range(8)] + [1]:
                    ctx.set(dut.uart_rx, bit)
                    await ctx.tick().repeat(divisor)
            await ctx.tick().repeat(divisor * 10 * 16)   # the reply goes out meanwhile

    async def monitor(ctx):
        async for _, _, tx, err in ctx.tick().sample(dut.uart_tx, dut.led_error):
            line.append(tx)
            error_led.append(err)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(host)
    sim.add_testbench(monitor, background=True)
    sim.run()
    _check_replies(_decode_line(line, divisor), [ref_toy(x) for x in frames], corrupt_at=1)
    assert any(error_led)


def _decode_line(levels, divisor):
    """Bytes of an 8N1 line sampled once per clock."""
    out, k = [], 0
    while k < len(levels):
        if levels[k] == 0:
            mid = k + divisor // 2
            bits = [levels[mid + divisor * (b + 1)] for b in range(8)]
            out.append(sum(bit << b for b, bit in enumerate(bits)))
            k = mid + divisor * 9
        else:
            k += 1
    return out


def run_board_sim(out_dir: Path, requests: list[bytes], build_dir: Path, *, divisor: int = 4):
    """Simulate the board top around OUT's ``qloom_top`` in Verilator, sending ``requests``
    bit by bit on uart_rx (each after the previous reply) and returning the bytes seen on
    uart_tx. (Not Icarus: it never evaluates Amaranth's combinational blocks whose inputs
    keep their initial values, so the link's idle-state ``ready`` stays X there.)"""
    from cocotb_tools.runner import get_runner
    from qloom.errors import ToolError
    from qloom.sim.runner import Simulator as Sim, _environment, _tool_env
    try:
        env = _tool_env(Sim.VERILATOR)
    except ToolError as e:
        pytest.skip(str(e))
    manifest = json.loads((out_dir / "manifest.json").read_text())
    build_dir.mkdir(parents=True, exist_ok=True)
    top_v = build_dir / "board_top.v"
    top_v.write_text(link_core_verilog(manifest, divisor=divisor))
    job = build_dir / "job.json"
    result = build_dir / "result.json"
    job.write_text(json.dumps({"requests": [r.hex() for r in requests], "divisor": divisor,
                               "result": str(result)}))
    # cocotb's runner sets the simulator's PYTHONPATH from sys.path: make this module
    # importable there for the duration of the run.
    sys.path.insert(0, str(HERE))
    try:
        with _environment(env):
            runner = get_runner("verilator")
            runner.build(sources=[top_v, *(out_dir / name for name in manifest["rtl"])],
                         hdl_toplevel="board_top", build_dir=build_dir,
                         build_args=["-Wno-fatal"], log_file=build_dir / "build.log")
            runner.test(test_module="test_board_top", hdl_toplevel="board_top",
                        build_dir=build_dir, test_dir=build_dir,
                        extra_env={JOB_ENV: str(job)}, log_file=build_dir / "sim.log",
                        results_xml=str(build_dir / "results.xml"))
    finally:
        sys.path.remove(str(HERE))
    if not result.is_file():
        raise AssertionError(f"no result; see {build_dir / 'sim.log'}")
    return bytes.fromhex(json.loads(result.read_text())["reply"])


@pytest.mark.slow   # about 27 s, most of it the Verilator build
def test_board_top_cocotb_toy(tmp_path):
    """Twelve frames and one corrupted request through the Verilog board top, bit level."""
    toy = load_toy()
    out = toy.write_toy_out(tmp_path / "out", TOY["dtype"], TOY["lanes"], TOY["elements"])
    rng = np.random.default_rng(11)
    frames = [rng.integers(0, 16, 10) for _ in range(12)]
    reply = run_board_sim(out, _requests(frames, corrupt_at=5), tmp_path / "sim")
    _check_replies(reply, [ref_toy(x) for x in frames], corrupt_at=5)


@pytest.mark.slow
def test_board_top_cocotb_real_model(tmp_path):
    """The TFC-w1a1 MNIST MLP, compiled by qloom, behind the UART link: ten frames bit-exact
    against the integer reference, one corrupted request rejected."""
    import qloom
    from qloom.flows.deploy.host import reference
    model = Path(__file__).resolve().parents[2] / "examples" / "models" / "tfc_w1a1.onnx"
    design = qloom.compile(str(model), tmp_path / "out")
    manifest = json.loads((design.out_dir / "manifest.json").read_text())
    fin = WireFormat.from_manifest(manifest["input"])
    fout = WireFormat.from_manifest(manifest["output"])
    rng = np.random.default_rng(5)
    pixels = rng.integers(0, 256, size=(10, 1, 28, 28)) * (rng.random((10, 1, 28, 28)) < 0.2)
    codes_in, expected, _ = reference(design.out_dir, (pixels / 255.0).astype(np.float32))
    requests = _requests(list(codes_in), corrupt_at=4, fmt=fin)
    reply = run_board_sim(design.out_dir, requests, tmp_path / "sim")
    _check_replies(reply, list(expected), corrupt_at=4, fmt=fout)


@pytest.mark.slow
def test_board_top_cocotb_latency_mode(tmp_path):
    """The jet tagger unrolled (``--latency``): its input is registered, so the link feeds
    it with no skid buffer; ten frames bit exact through the UART, one corrupted."""
    import qloom
    from qloom.flows.deploy.host import reference
    model = Path(__file__).resolve().parents[2] / "examples" / "models" / "jettagging_w6a6.onnx"
    design = qloom.compile(str(model), tmp_path / "out", latency=True)
    manifest = json.loads((design.out_dir / "manifest.json").read_text())
    assert manifest["input"]["registered"]
    fin = WireFormat.from_manifest(manifest["input"])
    fout = WireFormat.from_manifest(manifest["output"])
    rng = np.random.default_rng(8)
    features = rng.normal(0, 1, size=(10, *manifest["host"]["input_shape"][1:]))
    codes_in, expected, _ = reference(design.out_dir, features.astype(np.float32))
    requests = _requests(list(codes_in), corrupt_at=3, fmt=fin)
    reply = run_board_sim(design.out_dir, requests, tmp_path / "sim")
    _check_replies(reply, list(expected), corrupt_at=3, fmt=fout)


try:
    import cocotb
    from cocotb.clock import Clock
    from cocotb.triggers import ClockCycles, FallingEdge
except ImportError:   # pragma: no cover - cocotb is a pinned dependency
    cocotb = None

if cocotb is not None and os.environ.get(JOB_ENV):
    @cocotb.test()
    async def board_top_bench(dut):
        job = json.loads(Path(os.environ[JOB_ENV]).read_text())
        divisor = job["divisor"]
        clock = Clock(dut.clk, 10, unit="ns")
        cocotb.start_soon(clock.start())
        dut.uart_rx.value = 1
        dut.rst.value = 1
        await ClockCycles(dut.clk, 5)
        dut.rst.value = 0
        received = bytearray()

        async def uart_receiver():
            while True:
                await FallingEdge(dut.uart_tx)
                await ClockCycles(dut.clk, divisor // 2 + divisor)
                byte = 0
                for b in range(8):
                    byte |= int(dut.uart_tx.value) << b
                    await ClockCycles(dut.clk, divisor)
                received.append(byte)

        cocotb.start_soon(uart_receiver())
        for request in job["requests"]:
            before = len(received)
            for byte in bytes.fromhex(request):
                for bit in [0] + [(byte >> k) & 1 for k in range(8)] + [1]:
                    dut.uart_rx.value = bit
                    await ClockCycles(dut.clk, divisor)
            # wait for the complete reply (stop and wait, like the host driver)
            for _ in range(2000):
                reply, _ = decode_reply(bytes(received[before:]))
                if reply is not None:
                    break
                await ClockCycles(dut.clk, 10 * divisor)
        await ClockCycles(dut.clk, 20 * divisor)
        Path(job["result"]).write_text(json.dumps({"reply": bytes(received).hex()}))
