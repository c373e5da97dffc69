# amaranth: UnusedElaboratable=no
"""The virtual board's mechanics (``qloom.sim.board_sim``) on the toy accelerator (``min(x +
1, 15)`` on UINT4, see toy_top.py) behind the real host link: frames through the pty bit
exact, a corrupted or truncated request answered with the protocol's error reply and the
link recovering, a host that stops reading losing nothing, a host on a slightly different
baud rate, hang-ups, the pause of simulated time on an idle link, the limits, the cache.

One Verilator build for the module: a 1 MHz clock and 8 clocks per bit keep every
simulated second short (the link's request timeout is 50 ms = 50,000 cycles)."""

import importlib.util
import os
import select
import termios
import time
import tty
from pathlib import Path

import numpy as np
import pytest

from qloom.errors import ToolError
from qloom.flows.deploy.host import HostLink
from qloom.hw.board_top import LinkCore, VerilogAccelerator
from qloom.hw.protocol import Status, WireFormat, decode_reply, encode_request
from qloom.nn.dtypes import uint_type
from qloom.sim.board_sim import SimBoardTop, VirtualBoard, board_sim_verilog, build_board_sim

_spec = importlib.util.spec_from_file_location("qloom_tests_toy_top_board",
                                               Path(__file__).with_name("toy_top.py"))
toy = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(toy)

FMT = WireFormat(lanes=3, element_bits=4, signed=False, elements=10)
CLOCK_HZ = 1_000_000
DIVISOR = 8
BAUD = CLOCK_HZ // DIVISOR
IDLE = 2_000                  # a toy frame takes a few dozen cycles
STALL = 110_000               # more than the link's 50,000-cycle request timeout
REPLY_BYTES = FMT.frame_bytes + 6
# Seconds a test waits for the board at most: generous, for a machine loaded by parallel
# tests (a passing test never waits this long).
SLOW = 120.0


def ref_toy(x):
    return np.minimum(np.asarray(x) + 1, 15)


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    folder = tmp_path_factory.mktemp("board_sim")
    out = toy.write_toy_out(folder / "out", uint_type(4), 3, 10)
    core = folder / "board_top.v"
    core.write_text(board_sim_verilog(LinkCore(VerilogAccelerator(FMT, FMT), input_format=FMT,
                                               output_format=FMT, divisor=DIVISOR,
                                               clock_hz=CLOCK_HZ)))
    sources = [core, out / "rtl" / "qloom_top.v"]
    try:
        built = build_board_sim(sources, folder / "build", label="the toy")
    except ToolError as e:
        if "not installed" in str(e):
            pytest.skip(str(e))
        raise
    again = build_board_sim(sources, folder / "build", label="the toy")
    assert again.build_seconds == 0.0 and again.binary == built.binary   # cached
    return built.binary


def start(binary, **options):
    settings = dict(clock_hz=CLOCK_HZ, host_baud=BAUD, idle_cycles=IDLE, stall_cycles=STALL)
    settings.update(options)
    return VirtualBoard(binary, **settings).start()


def open_port(path):
    fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
    tty.setraw(fd)
    termios.tcflush(fd, termios.TCIOFLUSH)
    return fd


def read_replies(fd, count, timeout=SLOW):
    """``count`` replies read from ``fd`` (all bytes accounted for)."""
    buf, replies, deadline = b"", [], time.monotonic() + timeout
    while len(replies) < count:
        left = deadline - time.monotonic()
        assert left > 0, f"only {len(replies)} of {count} replies, then {buf!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            buf += os.read(fd, 4096)
        while True:
            reply, used = decode_reply(buf)
            buf = buf[used:]
            if reply is None:
                break
            replies.append(reply)
    assert buf == b"", f"bytes after the replies: {buf!r}"
    return replies


def wait_for(board, predicate, timeout=SLOW):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = board.status()
        if status and predicate(status):
            return status
        assert board.running(), f"the virtual board ended: {board.stop()}"
        time.sleep(0.02)
    raise AssertionError(f"timed out; status {board.status()}")


def frames(n, seed):
    return np.random.default_rng(seed).integers(0, 16, (n, FMT.elements))


class PortFile:
    """pyserial's read/write on a raw fd, for HostLink."""

    def __init__(self, fd):
        self.fd = fd

    def write(self, data):
        os.write(self.fd, data)

    def read(self, n):
        ready, _, _ = select.select([self.fd], [], [], 0.05)
        return os.read(self.fd, n) if ready else b""


def test_frames_bit_exact_with_counters(binary):
    with start(binary) as board:
        fd = open_port(board.port)
        try:
            link = HostLink(PortFile(fd), FMT, FMT, timeout=SLOW)
            xs = frames(25, 1)
            for x in xs:
                assert np.array_equal(link.infer(x), ref_toy(x))
            status = wait_for(board, lambda s: s["bytes_to_host"] == 25 * REPLY_BYTES)
        finally:
            os.close(fd)
    assert link.errors == {}
    assert status["replies_ok"] == 25 and status["replies_error"] == 0
    assert status["bytes_to_board"] == 25 * len(encode_request(FMT.pack(xs[0])))
    assert status["bytes_from_board"] == 25 * REPLY_BYTES
    assert status["framing_errors"] == 0 and status["bytes_dropped"] == 0
    assert status["cycles"] > 25 * len(encode_request(FMT.pack(xs[0]))) * 10 * DIVISOR


def test_corrupted_and_short_requests_get_error_replies_then_the_link_recovers(binary):
    x = frames(3, 2)
    bad_crc = bytearray(encode_request(FMT.pack(x[0])))
    bad_crc[4] ^= 0x10                                 # a payload bit flipped on the wire
    bad_length = encode_request(FMT.pack(x[0])[:-1])   # one byte short
    with start(binary) as board:
        fd = open_port(board.port)
        try:
            os.write(fd, bytes(bad_crc))
            assert read_replies(fd, 1) == [(Status.BAD_CRC, b"")]
            os.write(fd, encode_request(FMT.pack(x[1])))
            (status, payload), = read_replies(fd, 1)
            assert status == Status.OK and np.array_equal(FMT.unpack(payload), ref_toy(x[1]))
            os.write(fd, bad_length)
            assert read_replies(fd, 1)[0] == (Status.BAD_LENGTH, b"")
            # the rest of the short request is noise to the board: the host resends
            time.sleep(0.3)
            termios.tcflush(fd, termios.TCIFLUSH)
            link = HostLink(PortFile(fd), FMT, FMT, timeout=SLOW)
            assert np.array_equal(link.infer(x[2]), ref_toy(x[2]))
        finally:
            os.close(fd)
    assert board.stop()["replies_error"] == 2


def test_request_stalled_half_way_gets_the_timeout_reply(binary):
    """Simulated time must not pause before the link's 50 ms timeout runs out."""
    x = frames(2, 3)
    request = encode_request(FMT.pack(x[0]))
    with start(binary) as board:
        fd = open_port(board.port)
        try:
            os.write(fd, request[:5])
            assert read_replies(fd, 1) == [(Status.TIMEOUT, b"")]
            os.write(fd, encode_request(FMT.pack(x[1])))
            (status, payload), = read_replies(fd, 1)
        finally:
            os.close(fd)
    assert status == Status.OK and np.array_equal(FMT.unpack(payload), ref_toy(x[1]))


def test_host_that_stops_reading_loses_nothing(binary):
    """Twenty requests, each sent once the board's previous reply is in the pty, none read
    until the end (a host busy elsewhere), then all read at once: every reply, in order."""
    xs = frames(20, 4)
    with start(binary) as board:
        fd = open_port(board.port)
        try:
            for k, x in enumerate(xs):
                os.write(fd, encode_request(FMT.pack(x)))
                wait_for(board, lambda s, k=k: s["bytes_to_host"] == (k + 1) * REPLY_BYTES)
            time.sleep(0.5)
            replies = read_replies(fd, len(xs))
        finally:
            os.close(fd)
    assert [s for s, _ in replies] == [Status.OK] * len(xs)
    for (_, payload), x in zip(replies, xs):
        assert np.array_equal(FMT.unpack(payload), ref_toy(x))


def test_host_on_a_slightly_different_baud_rate(binary):
    """A USB-UART bridge 1.6% slow against the board's clock / divisor still works (bits
    are timed from clock_hz / host_baud, not rounded to the board's divisor)."""
    xs = frames(5, 5)
    with start(binary, host_baud=123_000) as board:
        fd = open_port(board.port)
        try:
            link = HostLink(PortFile(fd), FMT, FMT, timeout=SLOW)
            outputs = [link.infer(x) for x in xs]
        finally:
            os.close(fd)
    assert link.errors == {}
    assert all(np.array_equal(o, ref_toy(x)) for o, x in zip(outputs, xs))


def test_idle_board_stops_simulated_time(binary):
    with start(binary) as board:
        fd = open_port(board.port)
        try:
            link = HostLink(PortFile(fd), FMT, FMT, timeout=SLOW)
            # the board pauses at once after its start; then the frame wakes it up
            pauses = wait_for(board, lambda s: s["idle_pauses"] >= 1)["idle_pauses"]
            link.infer(frames(1, 6)[0])
            first = wait_for(board, lambda s: s["idle_pauses"] > pauses)
            time.sleep(0.8)
            later = board.status()
        finally:
            os.close(fd)
    assert later["cycles"] == first["cycles"]        # no CPU spent while nothing happens


def test_hang_up_drops_the_reply_and_a_new_host_starts_clean(binary):
    """A host that closes the port before its reply: the reply is dropped (as a closed
    serial port drops it) and counted; the next host sees no stale bytes. (The bytes the
    board wrote into the pty before the hang-up count as sent and the kernel drops them:
    on a loaded machine the host can be descheduled between its write and its close for
    longer than the simulated request and reply take.)"""
    x = frames(2, 7)
    with start(binary) as board:
        fd = open_port(board.port)
        os.write(fd, encode_request(FMT.pack(x[0])))
        os.close(fd)
        wait_for(board, lambda s: s["bytes_dropped"] + s["bytes_to_host"] == REPLY_BYTES)
        fd = open_port(board.port)
        try:
            os.write(fd, encode_request(FMT.pack(x[1])))
            (status, payload), = read_replies(fd, 1)
        finally:
            os.close(fd)
    assert status == Status.OK and np.array_equal(FMT.unpack(payload), ref_toy(x[1]))


def test_reply_limit_ends_the_board_once_the_host_has_read_and_closed(binary):
    """After the last reply the board waits for the host to close the port: ending at
    once hung the host up before it had read that reply (EIO, seen under load)."""
    board = start(binary, max_replies=2)
    fd = open_port(board.port)
    try:
        link = HostLink(PortFile(fd), FMT, FMT, timeout=SLOW)
        x = frames(2, 8)
        assert np.array_equal(link.infer(x[0]), ref_toy(x[0]))
        os.write(fd, encode_request(FMT.pack(x[1])))
        wait_for(board, lambda s: s["bytes_to_host"] == 2 * REPLY_BYTES)
        time.sleep(0.5)
        assert board.running()                           # the reply is still unread
        (status, payload), = read_replies(fd, 1)
        assert status == Status.OK and np.array_equal(FMT.unpack(payload), ref_toy(x[1]))
    finally:
        os.close(fd)
    assert board.wait(SLOW) == 0
    assert board.stop()["replies_ok"] == 2


def test_time_limit_and_stop(binary):
    board = start(binary, max_seconds=0.5)
    assert board.wait(SLOW) == 0
    board = start(binary)
    assert board.running()
    board.stop()
    assert not board.running() and board.returncode == 143   # ended by SIGTERM


def test_validation():
    with pytest.raises(TypeError, match=r"^Board core must be a wiring.Component, not 'x'$"):
        SimBoardTop("x")
    with pytest.raises(TypeError, match=r"^Clock must be a positive integer, not 0$"):
        VirtualBoard("x", clock_hz=0, host_baud=9600, idle_cycles=1, stall_cycles=1)
    with pytest.raises(TypeError, match=r"^Stall cycles must be a positive integer, not 1.5$"):
        VirtualBoard("x", clock_hz=10**6, host_baud=9600, idle_cycles=1, stall_cycles=1.5)
    with pytest.raises(ValueError, match=r"^Clock \(100000 Hz\) must be at least 4 times "
                                         r"the host baud rate \(115200\)$"):
        VirtualBoard("x", clock_hz=100_000, host_baud=115200, idle_cycles=1, stall_cycles=1)
    with pytest.raises(ValueError, match=r"^Time limit must be a number of seconds above 0, "
                                         r"not 0$"):
        VirtualBoard("x", clock_hz=10**6, host_baud=9600, idle_cycles=1, stall_cycles=1,
                     max_seconds=0)


def test_program_that_does_not_start(tmp_path):
    script = tmp_path / "fake"
    script.write_text("#!/bin/sh\necho 'no pty for you' >&2\nexit 3\n")
    script.chmod(0o755)
    board = VirtualBoard(script, clock_hz=10**6, host_baud=9600, idle_cycles=1,
                         stall_cycles=1, log_file=tmp_path / "log")
    with pytest.raises(ToolError, match=r"did not start: no output; its output .*\n"
                                        r"no pty for you"):
        board.start()


def test_broken_verilog_is_a_tool_error_with_verilators_output(tmp_path):
    bad = tmp_path / "board_top.v"
    bad.write_text("module board_top(input clk);\n  wire x = ;\nendmodule\n")
    with pytest.raises(ToolError, match=r"^Verilator failed to build the virtual board of the "
                                        r"broken one \(exit [1-9]\d*\); its output \(.*build\.log"
                                        r"\):\n(.|\n)*board_top\.v:2"):
        build_board_sim([bad], tmp_path / "build", label="the broken one")
    assert not (tmp_path / "build" / "build.key").exists()
