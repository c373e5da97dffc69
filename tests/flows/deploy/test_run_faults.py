"""`qloom run` against a board played by a thread on a real pseudo-terminal: every link
fault (unknown status byte, hang-up, garbage, silence) ends in one clear error line,
no traceback, within the stated timeout of a frame (retries included); bad options are
refused before anything is opened."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

from qloom.flows.cli import main
from qloom.flows.compile.steps import compile_model
from qloom.flows.deploy.host import reference
from qloom.hw.protocol import REPLY_SYNC, Status, WireFormat, crc16, decode_request, \
    encode_reply

from test_out_safety import tiny_model

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT = 2.0
# Loading the model for the reference, the port's own read timeout, thread start-up and
# a machine loaded by parallel tests (0.5 s failed under a load of 8).
SLACK = 1.5


@pytest.fixture(scope="module")
def design(tmp_path_factory):
    """A tiny compiled model and one input frame saved as .npy."""
    folder = tmp_path_factory.mktemp("run")
    onnx.save(tiny_model(), folder / "tiny.onnx")
    out = folder / "out"
    compile_model(folder / "tiny.onnx", out)
    np.save(folder / "x.npy", np.random.default_rng(0).uniform(0, 3, (1, 8)).astype(np.float32))
    return out, folder / "x.npy"


class Board(threading.Thread):
    """The far end of a pty: reads requests, answers as ``behaviour`` says: "good",
    "unknown_status", "hangup", "garbage", "silent"."""

    def __init__(self, behaviour, expected=None, fout=None):
        super().__init__(daemon=True)
        # The slave stays open here until the end: a master with no slave open reads EIO.
        self.master, self._slave = os.openpty()
        self.device = os.ttyname(self._slave)
        self.behaviour, self.expected, self.fout = behaviour, expected, fout
        self.stop = False

    def run(self):
        rx = b""
        try:
            while not self.stop:
                data = os.read(self.master, 4096)
                rx += data
                payload, used = decode_request(rx)
                rx = rx[used:]
                if payload is None:
                    continue
                self.answer()
                if self.behaviour == "hangup":
                    return
        except OSError:
            pass
        finally:
            if self.behaviour == "hangup":
                os.close(self.master)

    def answer(self):
        if self.behaviour == "good":
            os.write(self.master, encode_reply(Status.OK, self.fout.pack(self.expected[0])))
        elif self.behaviour == "unknown_status":
            body = bytes([0x42, 0, 0])
            os.write(self.master, bytes([REPLY_SYNC]) + body + crc16(body).to_bytes(2, "little"))
        elif self.behaviour == "garbage":
            rng = np.random.default_rng(1)
            for _ in range(20):
                os.write(self.master, rng.integers(0, 256, 64, dtype=np.uint8).tobytes())
                os.write(self.master, bytes([REPLY_SYNC, 0, 4, 0, 1, 2, 3, 4, 0xde, 0xad]))

    def close(self):
        self.stop = True
        for fd in (self.master, self._slave):
            try:
                os.close(fd)
            except OSError:
                pass


def run_cli(design, board, capsys, *extra):
    out, x = design
    board.start()
    start = time.monotonic()
    try:
        code = main(["run", str(out), "--port", board.device, "--inputs", str(x),
                     "--timeout", str(TIMEOUT), *extra])
    finally:
        elapsed = time.monotonic() - start
        board.close()
    captured = capsys.readouterr()
    return code, captured.out, captured.err, elapsed


def test_good_board(design, capsys):
    out, x = design
    _, expected, _ = reference(out, np.load(x))
    import json
    manifest = json.loads((out / "manifest.json").read_text())
    board = Board("good", expected, WireFormat.from_manifest(manifest["output"]))
    code, text, err, _ = run_cli(design, board, capsys)
    assert code == 0, err
    assert "1 frames, 0 mismatching elements" in text


@pytest.mark.parametrize("behaviour, message", [
    ("unknown_status", r"frame failed after 3 attempts: the board answered with an unknown "
                       r"status byte"),
    ("hangup", r"the serial port failed, was the board unplugged\?"),
    ("garbage", r"frame failed after \d attempts: "),
    ("silent", r"frame failed after 3 attempts: no reply within 2 s"),
])
def test_link_faults_end_in_one_line_within_the_timeout(design, capsys, behaviour, message):
    code, _, err, elapsed = run_cli(design, Board(behaviour), capsys)
    import re
    assert code == 2
    assert re.search(r"^qloom run: error: " + message, err, re.M), err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert elapsed < TIMEOUT + SLACK, f"{behaviour}: {elapsed:.2f} s"
    if behaviour == "silent":
        assert elapsed > TIMEOUT * 0.9, "a silent board is given the whole timeout"


@pytest.mark.parametrize("option, value, message", [
    ("--timeout", "nan", "must be a finite number of seconds above 0, not 'nan'"),
    ("--timeout", "inf", "must be a finite number of seconds above 0, not 'inf'"),
    ("--timeout", "0", "must be a finite number of seconds above 0, not '0'"),
    ("--timeout", "-1", "must be a finite number of seconds above 0, not '-1'"),
    ("--timeout", "soon", "must be a finite number of seconds above 0, not 'soon'"),
    ("--baud", "0", "must be a positive integer, not '0'"),
    ("--baud", "-115200", "must be a positive integer, not '-115200'"),
    ("--baud", "fast", "must be a positive integer, not 'fast'"),
    ("--baud", "1.5", "must be a positive integer, not '1.5'"),
])
def test_bad_options(design, capsys, option, value, message):
    out, x = design
    with pytest.raises(SystemExit) as e:
        main(["run", str(out), "--port", "/dev/null", "--inputs", str(x), f"{option}={value}"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: {message}" in err and "Traceback" not in err


def test_bad_out_inputs_and_port(design, tmp_path, capsys):
    out, x = design
    cases = [
        ([str(tmp_path), "--port", "/dev/null", "--inputs", str(x)], "is not a compiled design"),
        ([str(out), "--port", "/dev/null", "--inputs", str(tmp_path / "no.npy")],
         "cannot read the inputs"),
        ([str(out), "--port", str(tmp_path / "no-such-tty"), "--inputs", str(x)],
         "cannot open serial port"),
    ]
    for args, message in cases:
        assert main(["run", *args]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err


def test_hangup_from_the_real_command(design):
    """The installed entry point, in its own process: one line on stderr, exit 2."""
    out, x = design
    board = Board("hangup")
    board.start()
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "qloom.flows.cli", "run", str(out), "--port",
                           board.device, "--inputs", str(x), "--timeout", "1"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    board.close()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().startswith("qloom run: error: the serial port failed")
    assert time.monotonic() - start < 60
