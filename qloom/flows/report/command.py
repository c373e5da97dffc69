"""``qloom report OUT``: write a design's reports again from the files in OUT.

``report.md`` comes from ``report.json`` alone and ``report.html`` from everything the
steps wrote (``html_report``). Compile, simulate and build refresh the HTML page
themselves; this command is for a page deleted, made by an older qloom, or wanted after
editing nothing but the reports' code.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from qloom.errors import QloomError
from qloom.flows.report.html import ReportFiles, write_report_html
from qloom.flows.report.markdown import render_report_md

__all__ = ["write_reports", "add_parser", "run"]


def write_reports(out_dir) -> list[Path]:
    """Rewrite ``OUT/report.md`` and ``OUT/report.html``; returns their paths. Refuses a
    folder that is not a compiled design, naming what is missing."""
    out = Path(out_dir)
    if not out.is_dir():
        raise QloomError(f"OUT {out} is not a folder: give a design folder written by "
                         f"`qloom compile MODEL -o OUT`")
    files = ReportFiles.read(out)           # checks the manifest and report.json first
    md = out / "report.md"
    if md.is_symlink() or (md.exists() and not md.is_file()):
        raise QloomError(f"{md} is not a file qloom wrote (a link or a folder); move it away")
    tmp = out / f".report.md.{os.getpid()}.tmp"
    try:
        tmp.write_text(render_report_md(files.compiled))
        os.replace(tmp, md)
    except OSError as e:
        raise QloomError(f"cannot write {md}: {e.strerror or e}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return [md, write_report_html(out)]


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "report", help="write OUT/report.md and OUT/report.html again",
        description="Rebuild a design's reports from what compile, simulate and build wrote "
                    "into OUT (manifest.json, report.json, sim/results.json, "
                    "build/report.json): report.md and the self-contained report.html "
                    "(charts of per-engine cycles and resources, the bottleneck, estimate "
                    "against measured, Fmax and critical path, latency, II and a timeline "
                    "of the first frames).")
    p.add_argument("out", type=Path, metavar="OUT", help="design folder (from qloom compile)")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    for path in write_reports(args.out):
        print(f"wrote {path}")
    return 0
