"""``qloom build OUT``: the compiled accelerator on a board (UART host link, PLL, LEDs)
through Yosys and nextpnr into a bitstream, with Fmax and utilization in
``OUT/build/report.json``; or, with ``--target asic-generic``, a generic gate-level
synthesis with cell and transistor counts in ``OUT/build/asic_report.json``; with
``--target asic``, the standard-cell flow of :mod:`qloom.flows.toolchain.asic`.

A fit check against the board's budget runs before any tool. Everything is built in a
temporary folder inside OUT and moved to ``OUT/build`` only when complete (a build that a
tool failed goes to ``OUT/build-failed`` with its logs).
"""

from __future__ import annotations

import argparse
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from qloom.boards import Board, Family, Resources, get_board
from qloom.boards.board import CELL_FILL
from qloom.errors import QloomError, ToolError
from qloom.manifest import input_registered, read_manifest
from qloom.hw.board_top import BoardTop, VerilogAccelerator, pll_plan
from qloom.hw.protocol import WireFormat
from qloom.hw.target import clock_mhz as target_clock
from qloom.hw.uart import divisor_for
from qloom.flows import outdir
from qloom.flows.toolchain import synth
from qloom.flows.report.html import write_report_html
from qloom.flows.toolchain.pnr_seeds import clock_fmax, place_and_route, seed_list
from qloom.flows.toolchain.unwind import (Terminated,  # noqa: F401
                                          signals_unwind as _signals_unwind)

__all__ = ["BuildResult", "read_design", "fit_check", "build_board", "build_asic",
           "add_parser", "run"]

NAME = "board_top"


@dataclass(frozen=True)
class BuildResult:
    build_dir: Path
    report: dict
    bitstream: Path | None


def read_design(out_dir) -> tuple[dict, dict | None]:
    """OUT's manifest and report (None when OUT has no report.json)."""
    out = Path(out_dir)
    manifest_path = out / "manifest.json"
    manifest = read_manifest(out, ports=True)
    report_path = out / "report.json"
    report = _read_json(report_path) if report_path.is_file() else None
    _check_script_inputs(manifest, manifest_path)
    return manifest, report


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise QloomError(f"cannot read {path}: {e}") from None
    if not isinstance(value, dict):
        raise QloomError(f"{path} must hold a JSON object, not {type(value).__name__}")
    return value


# What of a manifest reaches the generated Yosys, Tcl and shell scripts: file names and
# the top module's name. Their languages quote differently (amaranth's Tcl quoting leaves
# '"' alone), so only names that need no quoting anywhere are accepted.
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*\.(v|sv)")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")


def _check_script_inputs(manifest: dict, path: Path):
    """Refuse manifest values that would be written into a build script unquoted."""
    rtl = manifest.get("rtl")
    if not isinstance(rtl, list) or not rtl:
        raise QloomError(f"{path}: 'rtl' must be a list of Verilog files, not {rtl!r}")
    for name in rtl:
        if not isinstance(name, str) or not _FILE_NAME.fullmatch(Path(name).name) \
                or Path(name).is_absolute() or ".." in Path(name).parts:
            raise QloomError(f"{path}: RTL file {name!r} is not allowed: qloom writes the "
                             f"file names into build scripts, so they must be relative, "
                             f"inside the design and made of letters, digits, '_', '.', '+' "
                             f"and '-', ending in .v or .sv")
    top = manifest.get("top", "qloom_top")
    if not isinstance(top, str) or not _IDENTIFIER.fullmatch(top):
        raise QloomError(f"{path}: top module {top!r} is not a Verilog identifier")


def _manifest_board(manifest: dict) -> str | None:
    board = manifest.get("board")
    return board.get("name") if isinstance(board, dict) else board


def link_share(manifest: dict, board: Board) -> Resources:
    """The board top's estimated share beside the accelerator (``qloom.hw.link.estimate``)
    for the design's streams on ``board``."""
    from qloom.hw import link
    return link.estimate(WireFormat.from_manifest(manifest["input"]),
                         WireFormat.from_manifest(manifest["output"]),
                         board.family.estimated_as,
                         registered_feed=input_registered(manifest))


def fit_check(report: dict | None, board: Board, manifest: dict) -> dict:
    """Estimated resources (accelerator + link) against the board budget. Raises a
    QloomError with the per-layer table when they do not fit."""
    if report is None:
        return {}
    share = link_share(manifest, board)
    total = Resources.from_dict(report.get("resources", {})) + share
    need, have = total.as_dict(), board.budget.as_dict()
    over = board.over(total)
    if over:
        lines = [f"{'layer':24} {'engine':14} {'LUT':>8} {'FF':>8} {'DSP':>5} {'BRAM':>5}"]
        for layer in report.get("layers", []):
            r = Resources.from_dict(layer.get("resources", {}))
            engine = layer.get("engine") or layer.get("op") or ""
            lines.append(f"{str(layer.get('name'))[:24]:24} {str(engine)[:14]:14} "
                         f"{r.lut:>8} {r.ff:>8} {r.dsp:>5} {r.bram:>5}")
        lines.append(f"{'host link (UART)':24} {'':14} {share.lut:>8} {share.ff:>8} "
                     f"{share.dsp:>5} {share.bram:>5}")
        lines.append(f"{'total':24} {'':14} {need['lut']:>8} {need['ff']:>8} "
                     f"{need['dsp']:>5} {need['bram']:>5}")
        lines.append(f"{board.name + ' budget':24} {'':14} {have['lut']:>8} {have['ff']:>8} "
                     f"{have['dsp']:>5} {have['bram']:>5}")
        if {"lut", "ff"} & set(over):
            lines.append(f"LUTs and flip-flops may fill {CELL_FILL:.0%} of the device "
                         f"(placement fails near 100%, estimates hold to about 10%)")
        if "lc" in over:
            lines.append(f"logic cells: {board.logic_cells(total)} needed (LUT + 2/3 FF), "
                         f"{board.usable_cells} usable ({CELL_FILL:.0%} of {have['lut']})")
        raise QloomError(
            f"the design does not fit {board.name} ({board.device}): over budget in "
            f"{', '.join(k.upper() for k in over)}\n" + "\n".join(lines) +
            f"\nrecompile with a smaller folding: qloom compile MODEL --board {board.name} "
            f"--fold auto")
    return need


def _clock_for(board: Board, manifest: dict, clock_mhz: float | None) -> float:
    """The clock to build at (``qloom.hw.target.clock_mhz``): the design's own only when
    it was compiled for this board."""
    recorded = manifest.get("clock_mhz") if _manifest_board(manifest) == board.name else None
    return target_clock(clock_mhz, recorded=recorded, board=board.clock_mhz)


def _baud_for(board: Board, clock_mhz: float, baud: int | None) -> int:
    if baud is not None:
        divisor_for(clock_mhz * 1e6, baud)        # a clear ValueError when impossible
        return baud
    for candidate in (board.max_baud, 1_000_000, 115200):
        try:
            divisor_for(clock_mhz * 1e6, candidate)
            return candidate
        except ValueError:
            continue
    raise QloomError(f"no usable baud rate at {clock_mhz} MHz")


def board_top(out_dir, manifest: dict, board: Board, clock_mhz: float, baud: int | None):
    """(platform with the accelerator's Verilog added, BoardTop). The baud rate (None: the
    fastest usable) is checked against the clock the PLL actually makes."""
    platform = board.platform()
    for name in manifest["rtl"]:
        platform.add_file(Path(name).name, (Path(out_dir) / name).read_text())
    fin = WireFormat.from_manifest(manifest["input"])
    fout = WireFormat.from_manifest(manifest["output"])
    pll = pll_plan(board.family, board.oscillator_mhz, clock_mhz)
    if pll is not None and pll.error > 0.01:
        print(f"[qloom] the PLL makes {pll.achieved_mhz} MHz (asked for {clock_mhz} MHz)")
    baud = _baud_for(board, pll.achieved_mhz if pll else board.oscillator_mhz, baud)
    top = BoardTop(accelerator=VerilogAccelerator.from_manifest(manifest),
                   input_format=fin, output_format=fout, baud=baud, pll=pll,
                   oscillator_mhz=board.oscillator_mhz)
    return platform, top


def _utilization(board: Board, stat: dict, util: dict) -> dict:
    """used/available per resource kind, from nextpnr's utilization and Yosys' cells."""
    names = {Family.ICE40: {"lut": "ICESTORM_LC", "dsp": "ICESTORM_DSP", "bram": "ICESTORM_RAM"},
             Family.ECP5: {"lut": "TRELLIS_COMB", "ff": "TRELLIS_FF", "dsp": "MULT18X18D",
                           "bram": "DP16KD"}}[board.family]
    out = {}
    for kind in ("lut", "ff", "dsp", "bram"):
        cell = names.get(kind)
        if cell in util:
            out[kind] = dict(util[cell], cell=cell)
        else:
            out[kind] = {"used": stat[kind], "available": board.budget.as_dict()[kind],
                         "cell": "yosys"}
    out["cells"] = util
    return out


def _area(out: Path, name: str) -> outdir.Area:
    """``OUT/build`` (or another of qloom's folders in OUT), checked and cleaned of a
    killed run's staging folders."""
    return outdir.Area.at(out / name, f"OUT/{name}", outdir.is_subfolder,
                          hint="move it away and build again").prepare()


@dataclass
class _Staged:
    """A complete build in a staging folder, not yet in place."""

    folder: Path
    result: BuildResult


# Rebuilds under the measured Fmax when the compiled clock is missed (see build_board).
RETRIES = 2


def build_board(out_dir, *, board: str | None = None, clock_mhz: float | None = None,
                baud: int | None = None, retry: bool = True,
                seed: int | None = None, seeds: int | None = None) -> BuildResult:
    """Build the bitstream. When the clock was not given and the design misses it, build
    again with the PLL 10% under the Fmax nextpnr measured, up to ``RETRIES`` times (place
    and route varies between runs: 3% under was seen to miss, and on a nearly full UP5K
    10% under too: 46.7 MHz at 48, then 39.7 at 42), so that the accelerator runs close
    to the highest clock it closes timing at (``retry=False`` keeps the first). ``seed``:
    nextpnr's placement seed (None: its default); placement and so Fmax vary with it (the
    jet tagger at II 1 on the ECP5-85F, one netlist at 100 MHz: 86.3 MHz routed with the
    default seed, 116.37 with seed 2). ``seeds``: place and route with that many seeds
    from ``seed`` (default 1), keeping the fastest (:mod:`qloom.flows.toolchain.pnr_seeds`)."""
    seeds = seed_list(seed, seeds)
    out = Path(out_dir)
    read_design(out)
    area, failed = _area(out, "build"), _area(out, "build-failed")
    with _signals_unwind():
        staged = _build_board(out, area, failed, board=board, clock_mhz=clock_mhz, baud=baud,
                              seeds=seeds)
        try:
            for _ in range(RETRIES if retry and clock_mhz is None else 0):
                report = staged.result.report
                fmax = report.get("fmax_mhz")
                if report.get("timing_met") is not False or not fmax:
                    break
                staged = _build_again(out, area, failed, staged, math.floor(fmax * 0.9 * 10) / 10,
                                      board=board, baud=baud, seeds=seeds)
            area.install(staged.folder)
        except BaseException:
            area.discard(staged.folder)
            raise
    write_report_html(out, required=False)
    _print_result(staged.result.report)
    return staged.result


def _build_again(out, area, failed, first: _Staged, lower: float, *, board, baud,
                 seeds) -> _Staged:
    """Another try at ``lower`` MHz. The previous try stays staged meanwhile, so that a
    kill keeps the previous build in ``OUT/build``; when the tools fail on this try, the
    previous one (complete, timing missed) is installed and the error raised."""
    print(f"[qloom] timing not met at {first.result.report['target_mhz']:g} MHz; building "
          f"again at {lower:g} MHz", flush=True)
    try:
        second = _build_board(out, area, failed, board=board, clock_mhz=lower, baud=baud,
                              seeds=seeds)
    except ToolError:
        area.install(first.folder)
        raise
    area.discard(first.folder)
    return second


def _print_result(result: dict):
    if result.get("fmax_mhz") is None and result.get("bitstream") is None:
        return
    slack = result.get("slack_ns")
    slack = "" if slack is None else f", slack {slack:+.2f} ns"
    print(f"[qloom] Fmax {result['fmax_mhz']} MHz (target {result['target_mhz']:g} MHz, timing "
          f"{'met' if result['timing_met'] else 'NOT met'}{slack}); bitstream "
          f"{result['bitstream']}")


def _build_board(out: Path, area: outdir.Area, failed: outdir.Area, *, board, clock_mhz,
                 baud, seeds=(None,)) -> _Staged:
    """One build into a staging folder (``area.install`` puts it in place). A tool
    failure moves the staging folder, logs and all, to ``OUT/build-failed``."""
    manifest, report = read_design(out)
    name = board or _manifest_board(manifest)
    if name is None:
        raise QloomError("no board given and none in the manifest: pass --board B "
                         "(see `qloom boards`)")
    b = get_board(name)
    need = fit_check(report, b, manifest)
    clock = _clock_for(b, manifest, clock_mhz)
    platform, top = board_top(out, manifest, b, clock, baud)
    print(f"[qloom] building for {b.name} ({b.device}) at {top.clock_mhz:g} MHz, "
          f"UART {top.baud} baud", flush=True)
    tmp = area.staging()
    try:
        # Yosys options and commands only for the open flow: Vivado's Tcl has no `stat`.
        options = ({"synth_opts": synth.board_synth_opts(b.family.value),
                    "script_after_read": synth.AFTER_READ,
                    "script_after_synth": f"tee -q -o {NAME}.stat.json stat -json"}
                   if b.family.open_flow else {})
        platform.prepare(top, name=NAME, **options).extract(tmp)
        if not b.family.open_flow:
            return _Staged(tmp, _vendor_project(out, tmp, b, top, need))
        stat, pnr, bitstream, (kept, tried) = _open_flow(
            tmp, b, platform, [layer["name"] for layer in manifest.get("layers", [])],
            seeds, top.clock_mhz)
        result = _board_result(out, b, top, need, stat, pnr, bitstream)
        result["seed"], result["placer"] = kept["seed"], kept["placer"]
        if len(seeds) > 1:
            result["seeds"] = tried
        (tmp / "report.json").write_text(json.dumps(result, indent=1))
    except ToolError as e:     # keep the logs of a failed build, apart from a good one
        failed.install(tmp)
        raise ToolError(str(e).replace(str(tmp), str(failed.path))) from None
    except BaseException:
        area.discard(tmp)
        raise
    return _Staged(tmp, BuildResult(out / "build", result, out / "build" / bitstream.name))


def _vendor_project(out: Path, tmp: Path, b, top, need) -> BuildResult:
    """A family qloom cannot build here: the project as written, and how to build it."""
    script = tmp / f"build_{NAME}.sh"
    result = {"board": b.name, "target_mhz": top.clock_mhz, "baud": top.baud,
              "bitstream": None, "vendor_script": str(out / "build" / script.name),
              "estimated": need}
    (tmp / "report.json").write_text(json.dumps(result, indent=1))
    print(f"[qloom] {b.title} needs the vendor tools (Vivado), which qloom cannot run "
          f"here; the complete project is in {out / 'build'}: run "
          f"`sh {script.name}` there on a machine with Vivado")
    return BuildResult(out / "build", result, None)


def _open_flow(tmp: Path, b, platform, engines: list[str], seeds: list,
               target_mhz: float) -> tuple[dict, dict, Path, tuple]:
    """Yosys, nextpnr (placement ``seeds``, :mod:`qloom.flows.toolchain.pnr_seeds`; ``[None]``: its
    default) and the bitstream packer in ``tmp`` (``engines``: the accelerator's, in
    stream order): Yosys' cell counts, nextpnr's report, the bitstream's path and the
    kept run (its seed, placer and Fmax) with those of each seed run."""
    family = b.family.value
    synth.run_yosys(tmp / f"{NAME}.ys", tmp, tmp / f"{NAME}.yosys.log",
                    step=f"yosys synth_{family}")
    stat = synth.read_stat(tmp / f"{NAME}.stat.json", family)
    routed = tmp / (f"{NAME}.asc" if family == "ice40" else f"{NAME}.config")
    kept = place_and_route(
        family, seeds, target_mhz, netlist=tmp / f"{NAME}.json", cwd=tmp,
        report=tmp / f"{NAME}.report.json", log=tmp / f"{NAME}.nextpnr.log", output=routed,
        engines=engines, device=b.device, package=b.package, clock_mhz=None,
        constraints=tmp / f"{NAME}.{'pcf' if family == 'ice40' else 'lpf'}",
        speed=getattr(platform, "speed", 6),
        router=synth.router_for(family, stat["dsp"], b.device, stat["lut"], stat["bram"]))
    bitstream = tmp / f"{NAME}.{b.bitstream_ext}"
    if family == "ice40":
        synth.run_tool("icepack", ["yowasp-icepack", routed.name, bitstream.name], tmp,
                       tmp / "icepack.log")
    else:
        synth.run_tool("ecppack", ["yowasp-ecppack", "--compress", "--input", routed.name,
                                   "--bit", bitstream.name], tmp, tmp / "ecppack.log")
    return stat, synth.read_nextpnr_report(tmp / f"{NAME}.report.json"), bitstream, kept


def _board_result(out: Path, b, top, need, stat: dict, pnr: dict, bitstream: Path) -> dict:
    """The build's ``report.json``: clock, timing, utilization and the estimate's error."""
    fmax = clock_fmax(pnr)
    util = _utilization(b, stat, pnr["utilization"])
    # LUT4s and flip-flops as Yosys counts them, what the cost model estimates (nextpnr's
    # logic cells also hold lone flip-flops; on the ECP5 it moves block RAM read registers
    # into the blocks, qloom.flows.toolchain.ecp5_outreg: `utilization` has the placed counts); DSP
    # blocks and block RAMs as placed.
    measured = {"lut": stat["lut"], "ff": stat["ff"], "dsp": util["dsp"]["used"],
                "bram": util["bram"]["used"]}
    return {
        "board": b.name, "device": b.device, "target_mhz": top.clock_mhz,
        "fmax_mhz": fmax, "timing_met": fmax is not None and fmax >= top.clock_mhz,
        # The worst path's slack at the target clock (negative: by how much it missed).
        "slack_ns": None if not fmax else round(1e3 / top.clock_mhz - 1e3 / fmax, 3),
        "fmax_by_clock": pnr["fmax_by_clock"], "critical_path": pnr["critical_path"],
        "pll": top.pll.__dict__ if top.pll else None, "baud": top.baud,
        "uart_divisor": top.divisor, "utilization": util,
        "yosys_cells": stat["cells_by_type"],
        "bitstream": str(out / "build" / bitstream.name),
        "estimated": need,
        # iCE40 logic cells (each one LUT4 and one flip-flop): nextpnr's "lut" count.
        "estimated_logic_cells": b.logic_cells(Resources.from_dict(need)) if need else None,
        "measured": measured,
        "estimate_error": {k: (round((need[k] - measured[k]) / measured[k], 3)
                               if measured[k] else None)
                           for k in need} if need else None,
    }


# A static CMOS D flip-flop with reset and enable (Yosys counts no transistors for them).
FF_TRANSISTORS = 24


def build_asic(out_dir) -> BuildResult:
    """Generic gate-level synthesis of OUT's accelerator: cells and transistors."""
    out = Path(out_dir)
    manifest, _ = read_design(out)
    if (out / "build").is_symlink() or (out / "build").is_file():
        _area(out, "build")                      # refused with the reason
    area = _area(out, "build/asic")
    with _signals_unwind():
        tmp = area.staging()
        try:
            r = synth.synthesize([out / name for name in manifest["rtl"]], family="generic",
                                 build_dir=tmp, top=manifest.get("top", "qloom_top"))
            result = {"target": "asic-generic",
                      "library": "yosys abc -g cmos2 (NAND/NOR/NOT)",
                      "cells_by_type": r.cells_by_type, "cells": sum(r.cells_by_type.values()),
                      "flip_flops": r.ff, "transistors_logic": r.transistors,
                      "transistors_estimate": (r.transistors or 0) + FF_TRANSISTORS * r.ff,
                      "note": f"flip-flops counted at {FF_TRANSISTORS} transistors each"}
            (tmp / "asic_report.json").write_text(json.dumps(result, indent=1))
            area.install(tmp)
        except BaseException:
            area.discard(tmp)
            raise
    (out / "build" / "asic_report.json").write_text(json.dumps(result, indent=1))
    print(f"[qloom] {result['cells']} cells, {result['flip_flops']} flip-flops, about "
          f"{result['transistors_estimate']:,} transistors")
    return BuildResult(out / "build", result, None)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("build", help="synthesize, place and route a compiled design "
                                            "into a bitstream for a board")
    p.add_argument("out", metavar="OUT", help="folder written by `qloom compile`")
    p.add_argument("--board", help="target board (default: the one compiled for)")
    p.add_argument("--clock", "--clock-mhz", type=float, metavar="MHZ",
                   help="accelerator clock (default: the compiled one; on a board, if timing "
                        "then fails, qloom builds again, up to twice, 10%% under the "
                        "measured Fmax; for --target asic, the clock timing is checked at "
                        "and power computed for)")
    p.add_argument("--baud", type=int, help="host link baud rate (default: the board's fastest)")
    p.add_argument("--seed", type=int, metavar="N",
                   help="nextpnr's placement seed (default: nextpnr's); Fmax varies with it, "
                        "so a design that misses timing may meet it with another")
    p.add_argument("--seeds", type=int, metavar="K",
                   help="place and route with K seeds (from --seed, default 1), as many at a "
                        "time as the machine has cores, keeping the fastest; no new seed "
                        "starts once one meets the clock")
    p.add_argument("--target", choices=["fpga", "asic", "asic-generic"], default="fpga",
                   help="asic: the accelerator core through an open standard-cell flow "
                        "(qflow) to a DRC/LVS-checked GDS with post-route timing, power and "
                        "a gate-level simulation (docs/asic.md); asic-generic: generic "
                        "gate-level synthesis with transistor counts")
    p.add_argument("--pdk", default="osu018",
                   help="for --target asic: the standard-cell kit, osu018 (default), osu035 "
                        "or osu050")
    p.add_argument("--density", type=float, metavar="D",
                   help="for --target asic: placement cell density, 0.1 to 1 (default: "
                        "graywolf's); lower leaves more room for wires")
    p.add_argument("--frames", type=int, default=20, metavar="N",
                   help="for --target asic: frames of the gate-level simulation (default 20)")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    if args.target == "asic":
        from qloom.flows.toolchain.asic.flow import build_asic_flow
        build_asic_flow(args.out, pdk=args.pdk, clock_mhz=args.clock, density=args.density,
                        frames=args.frames)
        return 0
    if args.target == "asic-generic":
        build_asic(args.out)
        return 0
    try:
        result = build_board(args.out, board=args.board, clock_mhz=args.clock, baud=args.baud,
                             seed=args.seed, seeds=args.seeds)
    except ValueError as e:
        raise QloomError(str(e)) from None
    if result.report.get("timing_met") is False:
        print(f"warning: timing not met; the bitstream may misbehave: rebuild with --clock "
              f"{int(result.report['fmax_mhz'])} or lower, or try other seeds (--seeds K)",
              flush=True)
    return 0
