"""``qloom deploy OUT``: ``OUT/deploy/`` with the bitstream, a program script for the board's
programmer, a run script for the host driver (``qloom run``) and instructions."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

from ..boards import get_board
from ..errors import QloomError

__all__ = ["deploy", "add_parser", "run"]


def _script(lines: list[str]) -> str:
    return "\n".join(["#!/bin/sh", "set -e", 'cd "$(dirname "$0")"', *lines, ""])


def deploy(out_dir) -> Path:
    """Write ``OUT/deploy`` from the build in ``OUT/build``; returns the folder."""
    out = Path(out_dir).resolve()
    report_path = out / "build" / "report.json"
    if not report_path.is_file():
        raise QloomError(f"{out} has no build: run `qloom build {out} --board B` first")
    report = json.loads(report_path.read_text())
    board = get_board(report["board"])
    tmp = Path(tempfile.mkdtemp(prefix=".deploy-", dir=out))
    try:
        if report.get("bitstream"):
            bitstream = Path(report["bitstream"])
            if not bitstream.is_file():
                raise QloomError(f"the bitstream {bitstream} named in {report_path} is missing; "
                                 f"rebuild with `qloom build {out}`")
            shutil.copy(bitstream, tmp / bitstream.name)
            program = [f"# {board.title}: load the bitstream into the FPGA (volatile).",
                       board.program_command(bitstream.name)]
        else:
            bitstream = Path(f"board_top.{board.bitstream_ext}")
            program = [f"# {board.title}: build the bitstream with Vivado first:",
                       f"#   sh {report.get('vendor_script')}",
                       "# then program it from Vivado's hardware manager (hw_server), or:",
                       board.program_command(f"../build/{bitstream.name}")]
        (tmp / "program.sh").write_text(_script(program))
        baud = report.get("baud", 115200)
        (tmp / "run.sh").write_text(_script([
            "# usage: ./run.sh DEVICE INPUTS.npy   (e.g. /dev/ttyUSB1 x.npy)",
            f'exec qloom run .. --port "$1" --inputs "$2" --baud {baud}']))
        for name in ("program.sh", "run.sh"):
            path = tmp / name
            path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        (tmp / "README.txt").write_text(
            f"qloom accelerator for {board.title} ({board.device})\n\n"
            f"1. Connect the board over USB and run ./program.sh "
            f"(needs `{board.programmer.split()[0]}` on PATH).\n"
            f"   The heartbeat LED blinks about once a second when the design runs.\n"
            f"2. Find the serial port: {board.uart_note}.\n"
            f"3. Run frames through it and check them against the reference:\n"
            f"     ./run.sh /dev/ttyUSB1 inputs.npy\n"
            f"   (inputs.npy: float inputs [N, *input_shape] of the model; the link runs at "
            f"{baud} baud, 8N1).\n"
            f"   The error LED flashes when the board rejects a frame (bad length or CRC).\n\n"
            f"Clock: {report.get('target_mhz')} MHz, Fmax from nextpnr: "
            f"{report.get('fmax_mhz')} MHz.\n"
            f"The serial protocol is described in qloom/hw/link.py.\n")
        dest = out / "deploy"
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print(f"[qloom] {dest}: program.sh, run.sh, README.txt"
          + (f", {bitstream.name}" if report.get("bitstream") else ""))
    return dest


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("deploy", help="program script, bitstream and host driver "
                                             "instructions for a built design")
    p.add_argument("out", metavar="OUT", help="folder built by `qloom build`")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    deploy(args.out)
    return 0
