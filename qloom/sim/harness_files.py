"""The files a simulator build of the stream harness needs, beside the design's RTL: the
harness's Verilog, generated once per port shape; for Icarus with its clock, for
Verilator with a clock input made by the main loop ``harness_main.cpp`` (built instead of
cocotb's own, see there), and Verilator's control file making only the harness visible
to cocotb."""

from __future__ import annotations

import hashlib
import json
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path

from . import harness as generator
from .harness import STAMP_BITS, StreamHarness, clock_verilog, harness_verilog

__all__ = ["HarnessFiles", "write_harness_files", "MAIN_SOURCE"]

TOP = "qloom_harness"
MAIN_SOURCE = Path(__file__).with_name("harness_main.cpp")

# Bits per row of the harness's memories at most: a VPI call moves a row, but the
# simulator also shifts the row registers every cycle, which costs Icarus far more than
# Verilator (TFC-w1a1 on Icarus: 1,700 cycles/s with 1024-bit rows).
_ROW_BITS = {False: 128, True: 1024}        # by "is Verilator"
# Rows per ring memory: the conversion of a memory through Amaranth takes time in
# proportion to its depth (a 1024-row ring took 25 s), so the ring grows by its width.
_ROWS = 64

# Verilator: only the harness is visible to cocotb, and only its inputs and input ring
# writable. --public-flat-rw, which cocotb's runner passes, makes every signal of the
# design writable through VPI, so Verilator evaluates all logic behind them on every step
# as if it were fed by inputs: several times slower here.
_WRITABLE = ("reset", "free_run", "start", "n_in", "n_out", "words_out", "p_in", "p_out", "seed",
             "idle_timeout", "drain", "rd_addr", "in_mem")
_READABLE = ("clock", "done", "error", "error_cycle", "cycle", "in_count", "out_count",
             "in_half", "out_half", "in_cycle_mem", "out_mem", "out_cycle_mem",
             "in_cycle_row", "out_row", "out_cycle_row")
_VERILATOR_CONFIG = "`verilator_config\n" + "".join(
    f'{access} -module "{TOP}" -var "{name}"\n'
    for access, names in (("public_flat_rw", _WRITABLE), ("public_flat_rd", _READABLE))
    for name in names)


# Integer instruction-set extensions the Verilated model is compiled for when this CPU
# has them (/proc/cpuinfo's name -> the GCC/Clang flag): BMI's shifts and masks and AVX2's
# wide moves take a tenth off its instructions per cycle (TFC-w1a1: 4,392 -> 3,952,
# callgrind) and 10-15% off its run time. No FMA: it would let the compiler fuse the
# runtime's floating-point time arithmetic differently. The flags go into the build's
# key, so a build folder moved to a CPU without them is rebuilt rather than stopped by an
# illegal instruction.
_X86_EXTENSIONS = {"popcnt": "-mpopcnt", "sse4_2": "-msse4.2", "avx2": "-mavx2",
                   "bmi1": "-mbmi", "bmi2": "-mbmi2", "abm": "-mlzcnt", "movbe": "-mmovbe"}


def _cpu_flags() -> list[str]:
    """The compiler flags of ``_X86_EXTENSIONS`` this machine's CPU supports (none off
    x86-64 or without /proc/cpuinfo)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return []
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    found = re.search(r"^flags\s*:(.*)$", text, re.M)
    have = set(found.group(1).split()) if found else set()
    return [flag for name, flag in _X86_EXTENSIONS.items() if name in have]


@dataclass(frozen=True)
class HarnessFiles:
    """``source``: the harness's Verilog; ``params``: the StreamHarness parameters it was
    made with; ``verilator_args``, ``config_files`` and ``main``: what a Verilator build
    adds (its C++ main replaces cocotb's), ``plusargs``: what its run needs."""

    source: Path
    params: dict
    verilator_args: list = field(default_factory=list)
    config_files: list = field(default_factory=list)
    main: Path | None = None
    plusargs: list = field(default_factory=list)


def _params(manifest: dict, verilator: bool, clock_period_ps: int) -> dict:
    in_bits, out_bits = manifest["input"]["payload_bits"], manifest["output"]["payload_bits"]
    lanes = 2
    while 2 * lanes * max(in_bits, out_bits, STAMP_BITS) <= _ROW_BITS[verilator]:
        lanes *= 2
    return {"top": manifest["top"], "in_bits": in_bits, "out_bits": out_bits,
            "out_last_bit": manifest["output"]["last_bit"], "depth": _ROWS * lanes,
            "lanes": lanes, "clock_period_ps": clock_period_ps, "clock_input": verilator}


def write_harness_files(build_dir: Path, manifest: dict, *, verilator: bool,
                        clock_period_ps: int, flash: bytes | None = None) -> HarnessFiles:
    """Write the harness for the manifest's ports into ``build_dir``, unless the file there
    was made for the same ports by the same generator (its first line says so), and for
    Verilator its control file. ``flash``: the SPI flash image of a design with weights
    in SPRAM (the manifest's ``flash``), served by a flash model in the harness."""
    params = _params(manifest, verilator, clock_period_ps)
    extra = {}
    if flash:
        extra = {"flash": flash, "flash_offset": manifest["flash"]["offset"]}
    source = build_dir / f"{TOP}.v"
    digest = hashlib.sha256(Path(generator.__file__).read_bytes()).hexdigest()[:16]
    shown = dict(params, **({"flash": hashlib.sha256(flash).hexdigest()[:16],
                             "flash_offset": extra["flash_offset"]} if flash else {}))
    header = f"// qloom stream harness {digest} {json.dumps(shown, sort_keys=True)}\n"
    fresh = False
    if source.is_file():
        with source.open() as f:
            fresh = f.readline() == header
    if not fresh:
        source.write_text(header + harness_verilog(StreamHarness(**params, **extra), name=TOP)
                          + ("" if verilator else clock_verilog(clock_period_ps)))
    if not verilator:
        return HarnessFiles(source, params)
    config = build_dir / "public.vlt"
    config.write_text(_VERILATOR_CONFIG)
    # The control file goes in as an argument: among the sources it trips the cocotb
    # runner's language check. Time is counted in picoseconds (timescale 1ns/1ps).
    cpu = _cpu_flags()
    return HarnessFiles(source, params, ["--no-public-flat-rw", str(config),
                                         *(["-CFLAGS", " ".join(cpu)] if cpu else [])],
                        [config],
                        main=MAIN_SOURCE,
                        plusargs=[f"+qloom_half_period={clock_period_ps // 2}"])
