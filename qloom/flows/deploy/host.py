"""The host side of the board link: send input frames over a serial port, read the output
frames, and (``qloom run``) check them against the integer reference.

The protocol and its codec live in ``qloom.hw.link``. ``HostLink`` works with anything that
has pyserial's ``write(bytes)`` and ``read(n)`` (``read`` returning fewer bytes on timeout),
so the tests drive it against a board simulated in Python.

Every fault of the link (an error reply, an unknown status byte, garbage, silence, a port
that hangs up) ends as a ``LinkError`` within the stated timeout of a frame, retries
included.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qloom.errors import QloomError
from qloom.manifest import load_network, read_manifest
from qloom.hw.protocol import ProtocolError, Status, WireFormat, decode_reply, encode_request

__all__ = ["LinkError", "HostLink", "RunReport", "open_serial", "reference", "run_on_board",
           "add_parser", "run"]


class LinkError(QloomError):
    """The board did not answer a frame correctly (after the retries)."""


def _check_timeout(timeout) -> float:
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool):
        raise TypeError(f"Timeout must be a number of seconds, not {timeout!r}")
    if not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(f"Timeout must be a finite number of seconds above 0, not {timeout!r}")
    return float(timeout)


class HostLink:
    """Frames in, frames out over ``port``. A request answered with an error reply, a
    corrupted reply or no reply is sent again up to ``retries`` times, all within
    ``timeout`` seconds per frame (each attempt waits for its share of the time left, so
    a silent board costs ``timeout``, not ``retries + 1`` times it); ``errors`` counts what
    happened. A port that fails (an unplugged board) ends the frame at once."""

    def __init__(self, port, input_format: WireFormat, output_format: WireFormat, *,
                 timeout: float = 2.0, retries: int = 2, retry_gap: float = 0.1):
        for name, fmt in (("Input format", input_format), ("Output format", output_format)):
            if not isinstance(fmt, WireFormat):
                raise TypeError(f"{name} must be a WireFormat, not {fmt!r}")
        if not isinstance(retries, int) or retries < 0:
            raise TypeError(f"Retries must be a non-negative integer, not {retries!r}")
        self.port, self.input_format, self.output_format = port, input_format, output_format
        self.timeout, self.retries, self.retry_gap = _check_timeout(timeout), retries, retry_gap
        self.errors: dict[str, int] = {}
        self._buffer = b""
        # The frame of every request sent and not answered yet, oldest first: the board
        # answers each request once, in order, so a reply to an attempt that timed out
        # can still arrive, and must not be taken for a later frame's answer.
        self._in_flight: collections.deque = collections.deque()
        self._frame = 0

    def _count(self, what: str):
        self.errors[what] = self.errors.get(what, 0) + 1

    def _reply(self, deadline: float):
        """The next reply, or None at ``deadline``. Raises ProtocolError for a corrupted
        one, ValueError for an unknown status byte, OSError when the port fails."""
        while True:
            reply, used = decode_reply(self._buffer)
            self._buffer = self._buffer[used:]
            if reply is not None:
                return reply
            if time.monotonic() >= deadline:
                return None
            waiting = getattr(self.port, "in_waiting", 0)
            data = self.port.read(max(1, waiting))
            if not data:           # a port object whose read does not wait: do not spin
                time.sleep(min(0.002, max(0.0, deadline - time.monotonic())))
            self._buffer += data

    def _answer(self, frame: int, deadline: float):
        """The reply to ``frame``'s requests, or None at ``deadline``; replies to earlier
        frames' timed-out attempts are dropped (counted as "late reply"). Raises like
        ``_reply`` for a corrupted reply to this frame."""
        while True:
            try:
                reply = self._reply(deadline)
            except (ProtocolError, ValueError):
                if self._owner() == frame:
                    raise
                self._count("late reply")
                self._buffer = b""
                continue
            if reply is None:
                return None
            if self._owner() == frame:
                return reply
            self._count("late reply")

    def _owner(self) -> int | None:
        """The frame the reply just read answers (None: a reply nothing asked for)."""
        return self._in_flight.popleft() if self._in_flight else None

    def _hung_up(self, error: OSError) -> LinkError:
        return LinkError(f"the serial port failed, was the board unplugged? "
                         f"({type(error).__name__}: {error})")

    def infer(self, codes) -> np.ndarray:
        """One frame of input wire codes -> the frame of output wire codes."""
        request = encode_request(self.input_format.pack(codes))
        self._frame += 1
        deadline = time.monotonic() + self.timeout
        last, attempts = f"no reply within {self.timeout:g} s", 0
        for attempt in range(self.retries + 1):
            if attempt:
                # let the board drop a half-read request
                time.sleep(max(0.0, min(self.retry_gap, deadline - time.monotonic())))
                self._buffer = b""
            left = deadline - time.monotonic()
            if left <= 0:
                break
            attempts += 1
            try:
                self.port.write(request)
                self._in_flight.append(self._frame)
                reply = self._answer(self._frame,
                                     time.monotonic() + left / (self.retries + 1 - attempt))
            except ProtocolError as e:
                self._count("corrupt reply")
                self._buffer, last = b"", str(e)
                continue
            except ValueError:         # protocol.Status() of a byte it does not know
                self._count("unknown status")
                self._buffer, last = b"", "the board answered with an unknown status byte"
                continue
            except OSError as e:       # pyserial's SerialException is an OSError
                raise self._hung_up(e) from None
            if reply is None:
                self._count("no reply")
                last = f"no reply within {self.timeout:g} s"
                continue
            status, payload = reply
            if status == Status.OK:
                try:
                    return self.output_format.unpack(payload)
                except ProtocolError as e:
                    self._count("wrong reply length")
                    last = str(e)
                    continue
            self._count(status.name)
            last = f"the board answered {status.name}"
        raise LinkError(f"frame failed after {attempts} attempts: {last}")


def open_serial(device: str, baud: int, timeout: float = 0.05):
    try:
        import serial
    except ImportError:
        raise QloomError("pyserial is not installed: pip install pyserial") from None
    try:
        return serial.Serial(device, baudrate=baud, timeout=timeout)
    except (serial.SerialException, ValueError) as e:
        raise QloomError(f"cannot open serial port {device} at {baud} baud: {e}") from None


def reference(out_dir, x) -> tuple[np.ndarray, np.ndarray, object]:
    """(input codes [N, E_in], expected output codes [N, E_out], network) for float
    inputs ``x`` [N, *input_shape] of OUT's model, from the integer reference."""
    net = load_network(out_dir, read_manifest(out_dir))
    x = np.asarray(x, dtype=np.float32)
    sample = tuple(net.input_shape[1:])
    if x.ndim != len(sample) + 1 or x.shape[1:] != sample or x.shape[0] < 1:
        raise QloomError(f"inputs must have shape [N, {', '.join(map(str, sample))}] (the "
                         f"model input '{net.input_name}' with a batch of N >= 1), not "
                         f"{list(x.shape)}")
    values = net.quantize(x)
    out_values = net.execute_int(values)
    n = values.shape[0]
    codes_in = net.tensors[net.input].dtype.encode(values).reshape(n, -1)
    codes_out = net.tensors[net.output].dtype.encode(out_values).reshape(n, -1)
    return codes_in, codes_out, net


@dataclass
class RunReport:
    frames: int
    mismatches: list = field(default_factory=list)   # (frame, element, expected, got)
    seconds: float = 0.0
    errors: dict = field(default_factory=dict)

    @property
    def fps(self) -> float:
        return self.frames / self.seconds if self.seconds else 0.0


def run_on_board(link: HostLink, codes_in: np.ndarray, expected: np.ndarray | None = None,
                 *, progress=None) -> tuple[np.ndarray, RunReport]:
    """Send every frame of ``codes_in`` [N, E_in]; compare with ``expected`` [N, E_out]."""
    outputs, report = [], RunReport(frames=len(codes_in))
    start = time.monotonic()
    for k, frame in enumerate(codes_in):
        got = link.infer(frame)
        outputs.append(got)
        if expected is not None:
            for e in np.flatnonzero(got != expected[k]):
                report.mismatches.append((k, int(e), int(expected[k][e]), int(got[e])))
        if progress:
            progress(k + 1)
    report.seconds = time.monotonic() - start
    report.errors = dict(link.errors)
    return np.array(outputs), report


def _seconds(text: str) -> float:
    """argparse type of ``--timeout``: a finite number of seconds above 0."""
    try:
        return _check_timeout(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a finite number of seconds above 0, not {text!r}") from None


def _baud(text: str) -> int:
    """argparse type of ``--baud``: a positive integer."""
    try:
        baud = int(text)
    except ValueError:
        baud = 0
    if baud <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return baud


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("run", help="run inputs through the accelerator on a board "
                                          "over its serial port and check the outputs")
    p.add_argument("out", metavar="OUT", help="folder written by `qloom compile` / `qloom build`")
    p.add_argument("--port", required=True, metavar="DEVICE", help="serial port, e.g. /dev/ttyUSB1")
    p.add_argument("--inputs", required=True, metavar="X.npy",
                   help="float inputs [N, *input_shape] of the model")
    p.add_argument("--baud", type=_baud, help="baud rate (default: the one the build used)")
    p.add_argument("--timeout", type=_seconds, default=2.0, metavar="SECONDS",
                   help="seconds a frame may take, its retries included (default 2)")
    p.add_argument("--outputs", metavar="Y.npy",
                   help="write the model's float outputs [N, *output shape] (the host tail "
                        "applied) there")
    p.set_defaults(func=run)
    return p


def _build_baud(out: Path) -> int:
    """The baud rate of OUT's build (115200 without a build)."""
    path = out / "build" / "report.json"
    if not path.is_file():
        return 115200
    try:
        baud = json.loads(path.read_text()).get("baud", 115200)
    except (OSError, ValueError, AttributeError) as e:
        raise QloomError(f"cannot read the baud rate from {path}: {e}") from None
    if not isinstance(baud, int) or isinstance(baud, bool) or baud <= 0:
        raise QloomError(f"{path}: baud must be a positive integer, not {baud!r}; "
                         f"pass --baud")
    return baud


def _manifest(out: Path) -> dict:
    return read_manifest(out, ports=True)


def _formats(out: Path, manifest: dict) -> tuple[WireFormat, WireFormat]:
    try:
        return (WireFormat.from_manifest(manifest["input"]),
                WireFormat.from_manifest(manifest["output"]))
    except (KeyError, TypeError, ValueError) as e:
        raise QloomError(f"{out / 'manifest.json'} has no valid input/output port "
                         f"description ({type(e).__name__}: {e})") from None


def load_inputs(path) -> np.ndarray:
    """Float inputs from a .npy file; a clear error for a file that is not one."""
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        if "pickle" in str(e):      # numpy's word for a file that holds no .npy header
            raise QloomError(f"cannot read the inputs {path}: not a NumPy .npy file of "
                             f"numbers (numpy.save writes one)") from None
        raise QloomError(f"cannot read the inputs {path}: {e}") from None


def _position(net, element: int) -> str:
    """Where output element ``element`` (stream order) sits in a multi-axis output."""
    if net is None or len(net.tensors[net.output].shape) < 2:
        return ""
    shape = net.tensors[net.output].shape
    index = [int(i) for i in np.unravel_index(element, shape)]
    return f" (at {index} of the channels-last output {list(shape)})"


def run(args) -> int:
    out = Path(args.out)
    manifest = _manifest(out)
    baud = args.baud or _build_baud(out)
    fin, fout = _formats(out, manifest)
    codes_in, expected, net = reference(out, load_inputs(args.inputs))
    link = HostLink(open_serial(args.port, baud), fin, fout, timeout=args.timeout)
    print(f"[qloom] {len(codes_in)} frames to {args.port} at {baud} baud "
          f"({fin.frame_bytes + 5} bytes out, {fout.frame_bytes + 6} bytes back per frame)")
    codes_out, report = run_on_board(link, codes_in, expected)
    for frame, element, want, got in report.mismatches[:20]:
        print(f"  mismatch: frame {frame} element {element}{_position(net, element)}: "
              f"expected {want}, got {got}")
    if args.outputs:
        info = net.tensors[net.output]
        np.save(args.outputs, net.outputs(info.dtype.decode(codes_out)))
        print(f"[qloom] outputs {list(net.outputs(info.dtype.decode(codes_out[:1])).shape[1:])} "
              f"per frame written to {args.outputs}")
    line_limit = baud / 10 / (fin.frame_bytes + fout.frame_bytes + 11)
    print(f"[qloom] {report.frames} frames, {len(report.mismatches)} mismatching elements, "
          f"{report.fps:.1f} frames/s (the serial line allows {line_limit:.1f}); "
          f"link errors: {report.errors or 'none'}")
    return 1 if report.mismatches else 0
