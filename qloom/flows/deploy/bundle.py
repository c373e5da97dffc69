"""``qloom deploy OUT``: ``OUT/deploy/`` with the bitstream, a program script for the board's
programmer, a run script for the host driver (``qloom run``) and instructions.

The scripts name nothing outside ``OUT`` (they find their files relative to themselves),
and every value from the build report that reaches them is checked and quoted for sh. A
bitstream that missed timing is refused unless forced.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import stat
import sys
from pathlib import Path

from qloom.boards import get_board
from qloom.errors import QloomError
from qloom.flows import outdir

__all__ = ["deploy", "add_parser", "run"]


def _script(lines: list[str]) -> str:
    return "\n".join(["#!/bin/sh", "set -e", 'cd "$(dirname "$0")"', *lines, ""])


def sh_word(text: str, what: str) -> str:
    """``text`` quoted as one sh word; a control character (a newline would end a
    comment or a command line whatever the quoting) is refused."""
    return shlex.quote(outdir.check_path_text(text, what))


def _read_report(out: Path) -> tuple[Path, dict]:
    report_path = out / "build" / "report.json"
    if not out.is_dir():
        raise QloomError(f"OUT {out} is not a folder: give a design folder written by "
                         f"`qloom compile MODEL -o OUT` and built by `qloom build OUT`")
    if not report_path.is_file():
        raise QloomError(f"{out} has no build: run `qloom build {out} --board B` first")
    try:
        report = json.loads(report_path.read_text())
    except (OSError, ValueError) as e:
        raise QloomError(f"cannot read {report_path}: {e}") from None
    if not isinstance(report, dict) or not isinstance(report.get("board"), str):
        raise QloomError(f"{report_path} is not a qloom build report (no board name)")
    return report_path, report


def _baud(report: dict, report_path: Path) -> int:
    baud = report.get("baud", 115200)
    if not isinstance(baud, int) or isinstance(baud, bool) or baud <= 0:
        raise QloomError(f"{report_path}: baud must be a positive integer, not {baud!r}")
    return baud


def _timing_gate(report: dict, report_path: Path, force: bool):
    """Refuse a bitstream whose build missed timing (it may compute wrong results at
    the clock it was built for), unless ``force``, which warns loudly."""
    if report.get("timing_met") is not False:
        return
    what = (f"the bitstream in {report_path.parent} missed timing: Fmax "
            f"{report.get('fmax_mhz')} MHz is below the {report.get('target_mhz')} MHz it "
            f"runs at, so it may compute wrong results")
    if not force:
        raise QloomError(f"{what}; rebuild with `qloom build {report_path.parent.parent} "
                         f"--clock {int(report.get('fmax_mhz') or 0)}` (or lower), or deploy it "
                         f"anyway with --force")
    print(f"WARNING: {what}. Deploying it because of --force.", file=sys.stderr, flush=True)


def _program_lines(board, report: dict, report_path: Path, tmp: Path) -> list[str]:
    """The program script's lines; copies the bitstream into ``tmp`` when there is one."""
    if report.get("bitstream"):
        bitstream = Path(report["bitstream"])
        if not bitstream.is_file():
            raise QloomError(f"the bitstream {bitstream} named in {report_path} is missing; "
                             f"rebuild with `qloom build {report_path.parent.parent}`")
        # Copied under qloom's own name: the report's file name never reaches the script.
        name = f"board_top.{board.bitstream_ext}"
        shutil.copyfile(bitstream, tmp / name)
        return [f"# {board.title}: load the bitstream into the FPGA (volatile).",
                board.program_command(sh_word(name, "the bitstream name"))]
    script = sh_word(Path(str(report.get("vendor_script") or "build_board_top.sh")).name,
                     "the vendor build script name")
    bitstream = sh_word(f"../build/board_top.{board.bitstream_ext}", "the bitstream path")
    return [f"# {board.title}: build the bitstream with Vivado first:",
            f"#   (cd ../build && sh {script})",
            "# then program it from Vivado's hardware manager (hw_server), or:",
            board.program_command(bitstream)]


def _flash_lines(board, out: Path, tmp: Path) -> list[str]:
    """Weights in SPRAM (``qloom.hw.spram``) are read from the board's flash at start-up:
    the lines writing the image there (before the bitstream, which starts the design);
    copies the image into ``tmp``. No lines without SPRAM weights."""
    from qloom.manifest import NAME, read_manifest
    # (A build folder copied without its design's manifest deploys as before.)
    flash = read_manifest(out).get("flash") if (out / NAME).is_file() else None
    if not flash:
        return []
    if not board.programmer.startswith("iceprog "):
        raise QloomError(f"weights in SPRAM are loaded from the flash, which qloom programs "
                         f"with iceprog; board {board.name!r} uses {board.programmer!r}")
    shutil.copyfile(out / flash["image"], tmp / "weights.bin")
    return ["# The weights live in SPRAM, read from the flash at start-up: write them there "
            "first.", f"iceprog -o {int(flash['offset'])} weights.bin"]


def deploy(out_dir, *, force: bool = False) -> Path:
    """Write ``OUT/deploy`` from the build in ``OUT/build``; returns the folder. A build
    that missed timing is refused unless ``force``."""
    out = Path(out_dir).resolve()
    report_path, report = _read_report(out)
    board = get_board(report["board"])
    baud = _baud(report, report_path)
    _timing_gate(report, report_path, force)
    area = outdir.Area.at(out / "deploy", "OUT/deploy", outdir.is_subfolder,
                          hint="move it away and deploy again").prepare()
    tmp = area.staging()
    try:
        lines = _flash_lines(board, out, tmp) + _program_lines(board, report, report_path, tmp)
        (tmp / "program.sh").write_text(_script(lines))
        (tmp / "run.sh").write_text(_script([
            "# usage: ./run.sh DEVICE INPUTS.npy [OUTPUTS.npy]   (e.g. /dev/ttyUSB1 x.npy y.npy)",
            "# OUTPUTS.npy: the model's float outputs [N, *output shape]",
            f'exec qloom run .. --port "$1" --inputs "$2" --baud {baud} '
            '${3:+--outputs "$3"}']))
        for name in ("program.sh", "run.sh"):
            path = tmp / name
            path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        (tmp / "README.txt").write_text(_readme(board, report, baud))
        area.install(tmp)
    except OSError as e:
        area.discard(tmp)
        raise QloomError(f"cannot write {area.path}: {e.strerror or e}") from None
    except BaseException:
        area.discard(tmp)
        raise
    copied = [p.name for p in area.path.iterdir() if p.name not in
              ("program.sh", "run.sh", "README.txt")]
    print(f"[qloom] {area.path}: program.sh, run.sh, README.txt"
          + "".join(f", {name}" for name in copied))
    return area.path


def _readme(board, report: dict, baud: int) -> str:
    missed = ("\nWARNING: this bitstream MISSED TIMING (deployed with --force); it may "
              "compute wrong results.\n" if report.get("timing_met") is False else "")
    return (f"qloom accelerator for {board.title} ({board.device})\n{missed}\n"
            f"1. Connect the board over USB and run ./program.sh "
            f"(needs `{board.programmer.split()[0]}` on PATH).\n"
            f"   The heartbeat LED blinks about once a second when the design runs.\n"
            f"2. Find the serial port: {board.uart_note}.\n"
            f"3. Run frames through it and check them against the reference:\n"
            f"     ./run.sh /dev/ttyUSB1 inputs.npy outputs.npy\n"
            f"   (inputs.npy: float inputs [N, *input_shape] of the model; outputs.npy, "
            f"optional: the model's float outputs [N, *output shape] it computed; the link "
            f"runs at {baud} baud, 8N1).\n"
            f"   The error LED flashes when the board rejects a frame (bad length or CRC).\n\n"
            f"Clock: {report.get('target_mhz')} MHz, Fmax from nextpnr: "
            f"{report.get('fmax_mhz')} MHz.\n"
            f"The serial protocol is described in qloom/hw/link.py.\n")


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("deploy", help="program script, bitstream and host driver "
                                             "instructions for a built design")
    p.add_argument("out", metavar="OUT", help="folder built by `qloom build`")
    p.add_argument("--force", action="store_true",
                   help="deploy a bitstream that missed timing (with a warning)")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    deploy(args.out, force=args.force)
    return 0
