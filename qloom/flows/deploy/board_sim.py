"""``qloom board-sim OUT``: the design's board, simulated, behind a serial port.

The board core is the one ``qloom build`` puts on the FPGA (``qloom.flows.toolchain.build.board_top``:
the same UART divisor, link timeout and accelerator), at the clock and baud rate of OUT's
build, or, before a build, of the board and clock OUT was compiled for. Only the PLL and
the pins stay out: ``qloom.sim.board_sim.SimBoardTop`` gives the core a clock pin and a
power-on reset, and the simulation drives the clock and the UART pins itself. Verilator
compiles it with a C++ main that owns a pseudo-terminal; the build is cached in
``OUT/sim/board_sim``. ``qloom run OUT --port <the pty>`` then talks to it exactly as to
the real board.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from pathlib import Path

from qloom.boards import get_board
from qloom.errors import QloomError
from qloom.hw.estimate import unelaborated  # marks hardware built only to be asked about
from qloom.hw.protocol import Status, WireFormat, encode_reply, encode_request
from qloom.sim.board_sim import TOP, VirtualBoard, board_sim_verilog, build_board_sim
from qloom.sim.runner import _idle_timeout
from qloom.manifest import read_manifest
from qloom.flows.toolchain.build import _clock_for, _manifest_board, _read_json, board_top

__all__ = ["BoardSetup", "board_setup", "start_board", "describe", "add_parser", "run"]

# Simulated time stops while the UART lines are quiet (see qloom.sim.board_sim): after a
# frame's computation once every request is answered, else after twice the link's 50 ms
# request timeout (``LinkCore``), so that a request stalled half-way still gets its
# TIMEOUT reply.
_STALL_SECONDS = 0.1


@dataclass(frozen=True)
class BoardSetup:
    """What the virtual board simulates. ``origin`` is "build" (OUT/build/report.json)
    or "compile" (the manifest's board and clock, as a build would start)."""

    board: str
    clock_hz: int
    divisor: int
    baud: int
    origin: str
    verilog: str
    idle_cycles: int
    stall_cycles: int

    @property
    def board_baud(self) -> float:
        """The baud rate the board's UART actually runs at: clock / divisor."""
        return self.clock_hz / self.divisor


def board_setup(out_dir, *, board: str | None = None) -> BoardSetup:
    """The board core of OUT as ``qloom build`` makes it, with its clock and baud rate:
    those of OUT's build, or without one (or for another ``board``) those a build for
    the compiled board and clock would choose."""
    out = Path(out_dir)
    manifest = read_manifest(out, ports=True)
    if "flash" in manifest:
        # SimBoardTop has no SPI flash model wired to the board core yet.
        raise QloomError(f"{out} keeps its weights in SPRAM, loaded from the board's SPI "
                         f"flash, which the virtual board does not simulate yet; check the "
                         f"design with `qloom simulate {out}` (its harness has a flash model)")
    report_path = out / "build" / "report.json"
    report = _read_json(report_path) if report_path.is_file() else None
    if report is not None and board not in (None, report.get("board")):
        report = None                  # another board than the one built for
    if report is not None:
        name, origin = report.get("board"), "build"
        clock_mhz, baud = report.get("target_mhz"), report.get("baud")
        if not isinstance(clock_mhz, (int, float)) or isinstance(clock_mhz, bool) or \
                not clock_mhz > 0 or not isinstance(baud, int) or isinstance(baud, bool) \
                or baud <= 0:
            raise QloomError(f"{report_path} has no valid target_mhz and baud (found "
                             f"{clock_mhz!r} and {baud!r}); build again")
    else:
        name, origin, baud = board or _manifest_board(manifest), "compile", None
        if name is None:
            raise QloomError(f"{out} was compiled without a board and has no build: pass "
                             f"--board B (see `qloom boards`)")
    b = get_board(name)
    if report is None:
        clock_mhz = _clock_for(b, manifest, None)
    try:
        _, top = board_top(out, manifest, b, clock_mhz, baud)
    except ValueError as e:
        raise QloomError(f"no board top for {b.name} at {clock_mhz:g} MHz: {e}") from None
    unelaborated(top)          # only its core is simulated: not the PLL, not the pins
    if report is not None and report.get("uart_divisor") not in (None, top.divisor):
        unelaborated(top.core)
        unelaborated(top.core.accelerator)
        raise QloomError(f"{report_path} says the UART divisor is {report['uart_divisor']}, "
                         f"but the board top at {clock_mhz:g} MHz and {baud} baud has "
                         f"{top.divisor}; build again")
    text = board_sim_verilog(top.core)
    clock_hz = round(top.clock_mhz * 1e6)
    idle = _idle_timeout(manifest, 0.0) + 20 * top.divisor
    return BoardSetup(board=b.name, clock_hz=clock_hz, divisor=top.divisor, baud=top.baud,
                      origin=origin, verilog=text, idle_cycles=idle,
                      stall_cycles=math.ceil(_STALL_SECONDS * clock_hz) + idle)


def _print(text: str):
    print(text, flush=True)


def start_board(out_dir, *, board: str | None = None, frames: int | None = None,
                timeout: float | None = None, progress=_print
                ) -> tuple[VirtualBoard, BoardSetup]:
    """Build (or reuse) and start the virtual board of OUT; returns it running, with its
    setup. ``frames``: it stops after that many replies; ``timeout``: after that many
    seconds. ``progress`` prints what is simulated and the build (None: quiet)."""
    out = Path(out_dir).resolve()
    setup = board_setup(out, board=board)
    manifest = read_manifest(out, ports=True)
    sources = [out / name for name in manifest["rtl"] + manifest.get("sim_rtl", [])]
    for source in sources:
        if not source.is_file():
            raise QloomError(f"RTL source {source} listed in the manifest does not exist")
    build_dir = out / "sim" / "board_sim"
    build_dir.mkdir(parents=True, exist_ok=True)
    core = build_dir / f"{TOP}.v"
    if not core.is_file() or core.read_text() != setup.verilog:
        core.write_text(setup.verilog)
    progress = progress or (lambda text: None)
    what = "as built" if setup.origin == "build" else "as `qloom build` would make it"
    progress(f"[qloom] virtual {setup.board} ({what}): clock {setup.clock_hz / 1e6:g} MHz, "
             f"board UART {setup.board_baud:,.0f} baud ({setup.divisor} clocks per bit), "
             f"host side {setup.baud:,} baud")
    built = build_board_sim([core, *sources], build_dir, label=manifest["top"])
    progress(f"[qloom] Verilator build: {built.build_seconds:.1f} s" if built.build_seconds
             else f"[qloom] Verilator build: reused ({build_dir})")
    virtual = VirtualBoard(built.binary, clock_hz=setup.clock_hz, host_baud=setup.baud,
                           idle_cycles=setup.idle_cycles, stall_cycles=setup.stall_cycles,
                           max_replies=frames, max_seconds=timeout,
                           log_file=build_dir / "board_sim.log")
    virtual.start()
    return virtual, setup


def describe(status: dict, clock_hz: int) -> str:
    """One line of a virtual board's counters."""
    cycles = status.get("cycles", 0)
    busy = status.get("busy_seconds") or 0.0
    rate = cycles / busy if busy else 0.0
    text = (f"{status.get('replies_ok', 0) + status.get('replies_error', 0)} replies "
            f"({status.get('replies_ok', 0)} ok, {status.get('replies_error', 0)} errors), "
            f"{status.get('bytes_to_board', 0):,} bytes in, "
            f"{status.get('bytes_from_board', 0):,} out; {cycles:,} cycles = "
            f"{cycles / clock_hz * 1e3:,.1f} ms simulated in {busy:.1f} s "
            f"({rate / 1e6:.2f} M cycles/s, {rate / clock_hz:.1%} of real time)")
    if status.get("bytes_dropped"):
        text += f"; {status['bytes_dropped']} bytes dropped while no host had the port open"
    if status.get("framing_errors"):
        text += f"; {status['framing_errors']} framing errors on uart_tx"
    return text


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(
            f"must be a finite number of seconds above 0, not {text!r}")
    return value


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "board-sim", help="simulate the design's board (UART, host link, accelerator) in "
                          "Verilator behind a pseudo-terminal, for `qloom run`",
        description="Build (once, cached in OUT/sim/board_sim) and run the board top of "
                    "OUT's build (or, before a build, the one `qloom build` would make) in "
                    "Verilator, with its UART on a pseudo-terminal. Prints the terminal's "
                    "path; `qloom run OUT --port PATH --inputs X.npy` talks to it as to the "
                    "real board. Runs until Ctrl-C, --frames or --timeout.")
    p.add_argument("out", metavar="OUT", help="folder written by `qloom compile` / `qloom build`")
    p.add_argument("--board", help="board to simulate when OUT has no build for it "
                                   "(default: the one compiled for)")
    p.add_argument("--frames", type=_positive_int, metavar="N",
                   help="stop after answering N requests (error replies included), once the "
                        "host has closed the port (at most 30 s later)")
    p.add_argument("--timeout", type=_seconds, metavar="SECONDS",
                   help="stop after SECONDS of wall time")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    virtual, setup = start_board(args.out, board=args.board, frames=args.frames,
                                 timeout=args.timeout)
    manifest = read_manifest(Path(args.out), ports=True)
    line_bytes = (sum(WireFormat.from_manifest(manifest[port]).frame_bytes
                      for port in ("input", "output"))
                  + len(encode_request(b"")) + len(encode_reply(Status.OK)))
    print(f"[qloom] serial port {virtual.port}   e.g. qloom run {args.out} --port "
          f"{virtual.port} --inputs X.npy", flush=True)
    print(f"[qloom] a frame is {line_bytes} bytes on the UART, "
          f"{line_bytes * 10 * setup.clock_hz / setup.baud:,.0f} clock cycles; if the "
          f"simulation needs longer than qloom run's 2 s per frame, pass --timeout",
          flush=True)
    print("[qloom] running" + (f" for {args.frames} replies" if args.frames else "")
          + (f", at most {args.timeout:g} s" if args.timeout else "")
          + "; Ctrl-C stops it", flush=True)
    shown, shown_at = 0, 0.0
    try:
        while virtual.running():
            time.sleep(0.25)
            status = virtual.status()
            replies = status.get("replies_ok", 0) + status.get("replies_error", 0)
            if replies != shown and time.monotonic() - shown_at >= 2.0:
                print(f"[qloom] {describe(status, setup.clock_hz)}", flush=True)
                shown, shown_at = replies, time.monotonic()
    except KeyboardInterrupt:
        pass
    finally:
        final = virtual.stop()
    code = virtual.returncode
    print(f"[qloom] stopped: {describe(final, setup.clock_hz)}", flush=True)
    if code not in (0, 128 + 2, 128 + 15, -2, -15):
        raise QloomError(f"the virtual board ended with exit status {code}; its output is in "
                         f"{Path(args.out) / 'sim' / 'board_sim' / 'board_sim.log'}")
    return 0
