"""The build regression suite: every shared model on every board qloom builds for, at
default folding, ``--fold auto`` and (ECP5) II 1 (``--latency --clock 100``), compiled
and built from scratch with ``qloom build``'s first try (no rebuild under the measured
Fmax), each result compared with the one recorded in ``bench/results/build_suite.json``.

    python bench/build_suite.py [--only TEXT ...] [--record] [--list] [--keep DIR]
                                [--results FILE]

Without ``--record`` it exits with status 1 when a design that met timing in the record
no longer builds, or builds more than 5% slower (``FMAX_LOSS``); a design that met timing
and now misses it by less is reported, not failed. ``--record`` writes the rows it ran
into the results file (the others stay as recorded). ``--only`` picks designs whose name
contains any of the texts (e.g. ``--only icebreaker`` or ``--only "jettagging_w6a6
icebreaker auto"``). A design that does not fit its board is a row too (``no-fit``, with
qloom's reason): the suite records what happens to each, not only what builds.

Builds run one at a time (each nextpnr run takes one core); the whole suite takes hours.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "examples" / "models"
RESULTS = ROOT / "bench" / "results" / "build_suite.json"
TABLE = ROOT / "docs" / "build_suite.md"
SCHEMA = 1
# A design that met timing fails the suite when its Fmax falls by more than this.
FMAX_LOSS = 0.05
# The clock of II-1 designs (``--latency``): what the documented ECP5 builds use.
II1_CLOCK_MHZ = 100.0
FOLDINGS = {"default": {}, "auto": {"fold": "auto"},
            "ii1": {"latency": True, "clock_mhz": II1_CLOCK_MHZ}}
BUILT = ("met", "missed")


@dataclass(frozen=True)
class Design:
    model: Path
    board: str
    folding: str
    options: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.model.stem} {self.board} {self.folding}"


def designs() -> list[Design]:
    """The suite: shared models x open-flow boards x foldings (II 1 on the ECP5 only)."""
    from qloom.boards import BOARDS, Family
    out = []
    for model in sorted(MODELS.glob("*.onnx")):
        for board in BOARDS.values():
            if not board.family.open_flow:
                continue
            for folding, options in FOLDINGS.items():
                if folding == "ii1" and board.family is not Family.ECP5:
                    continue
                out.append(Design(model, board.name, folding, options))
    return out


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__


def measure(design: Design, work: Path) -> dict:
    """Compile and build ``design`` in ``work``: its row (status, clock, Fmax, use)."""
    from qloom.errors import QloomError, ToolError
    from qloom.flows.toolchain.build import build_board
    from qloom.flows.compile.steps import compile_model

    row = {"design": design.name, "model": design.model.stem, "board": design.board,
           "folding": design.folding}
    out = work / "out"
    started = time.perf_counter()
    try:
        compile_model(design.model, out, board=design.board, **design.options)
    except QloomError as e:
        return {**row, "status": "no-fit", "message": _first_line(e)}
    row["compile_s"] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    try:
        result = build_board(out, retry=False).report
    except ToolError as e:
        return {**row, "status": "failed", "message": _first_line(e),
                "build_s": round(time.perf_counter() - started, 1)}
    except QloomError as e:               # the fit check before any tool
        return {**row, "status": "no-fit", "message": _first_line(e)}
    util = result["utilization"]
    return {**row, "status": "met" if result["timing_met"] else "missed",
            "target_mhz": result["target_mhz"], "fmax_mhz": result["fmax_mhz"],
            "seed": result.get("seed"),
            "used": {k: util[k]["used"] for k in ("lut", "ff", "dsp", "bram")},
            "available": {k: util[k]["available"] for k in ("lut", "ff", "dsp", "bram")},
            "placer": result.get("placer"),
            "build_s": round(time.perf_counter() - started, 1)}


def source_commit() -> str | None:
    """The checkout's commit (with ``+`` when qloom's sources differ from it)."""
    def git(*args):
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True,
                              text=True).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD")
    return (commit + ("+" if git("status", "--porcelain", "--", "qloom") else "")) or None


def compare(recorded: dict | None, new: dict) -> tuple[bool, str]:
    """(regressed, what changed) between a recorded row and a new one of one design."""
    if recorded is None:
        return False, "new design (no record)"
    was, now = recorded["status"], new["status"]
    if was == "met":
        if now not in BUILT:
            return True, f"met timing at {recorded['fmax_mhz']} MHz, now {now}: " \
                         f"{new.get('message', '')}"
        loss = 1 - new["fmax_mhz"] / recorded["fmax_mhz"]
        if loss > FMAX_LOSS:
            return True, f"Fmax {recorded['fmax_mhz']} -> {new['fmax_mhz']} MHz " \
                         f"(-{loss:.1%}, more than {FMAX_LOSS:.0%})"
        if now == "missed":
            return False, f"timing now missed by less than {FMAX_LOSS:.0%} " \
                          f"({recorded['fmax_mhz']} -> {new['fmax_mhz']} MHz)"
    if was in BUILT and now in BUILT:
        return False, f"Fmax {recorded['fmax_mhz']} -> {new['fmax_mhz']} MHz"
    return False, f"{was} -> {now}" if was != now else now


def read_results(path: Path) -> dict:
    """The recorded rows by design name (empty when the file does not exist)."""
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    if data.get("schema") != SCHEMA:
        raise SystemExit(f"{path}: schema {data.get('schema')!r}, this script writes "
                         f"{SCHEMA}")
    return {row["design"]: row for row in data["designs"]}


@contextlib.contextmanager
def _locked(path: Path):
    """The results file held for one read-modify-write (suites may run side by side, each
    on its own boards)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def record(path: Path, new: dict):
    """``new`` rows (by design name) written into the results file over what it holds."""
    with _locked(path):
        write_results(path, {**read_results(path), **new})


def write_results(path: Path, rows: dict):
    """The results file with ``rows`` (by design name), in the suite's order."""
    order = {d.name: k for k, d in enumerate(designs())}
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"schema": SCHEMA, "fmax_loss_allowed": FMAX_LOSS,
            "designs": sorted(rows.values(), key=lambda r: order.get(r["design"], 1 << 30))}
    path.write_text(json.dumps(data, indent=1) + "\n")
    if path == RESULTS:
        TABLE.parent.mkdir(exist_ok=True)
        TABLE.write_text(
            "# Build regression suite: recorded results\n\n"
            "Written by `python bench/build_suite.py --record` from "
            "`bench/results/build_suite.json` (see README, \"What built before keeps "
            "building\"). Each design built from scratch, `qloom build`'s first try; "
            "LUT/LC is nextpnr's logic cells (iCE40) or TRELLIS_COMB (ECP5), as placed.\n\n"
            + table(data["designs"]) + "\n\n"
            + "\n".join(f"- {r['design']}: {r['message']}" for r in data["designs"]
                        if r.get("message")) + "\n")


def table(rows) -> str:
    """The rows as a Markdown table."""
    lines = ["| design | status | target MHz | Fmax MHz | LUT/LC | FF | DSP | BRAM | build s "
             "| commit |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        used = r.get("used", {})
        cells = [str(used.get(k, "")) for k in ("lut", "ff", "dsp", "bram")]
        lines.append(f"| {r['design']} | {r['status']} | {r.get('target_mhz', '')} | "
                     f"{r.get('fmax_mhz', '')} | {' | '.join(cells)} | {r.get('build_s', '')} "
                     f"| {r.get('commit', '')} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="+", metavar="TEXT",
                    help="designs whose name contains any of these texts")
    ap.add_argument("--record", action="store_true",
                    help="write the rows run into the results file")
    ap.add_argument("--list", action="store_true", help="list the designs and stop")
    ap.add_argument("--keep", type=Path, metavar="DIR",
                    help="build in DIR/<design> and keep it (default: a temporary folder)")
    ap.add_argument("--results", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    chosen = [d for d in designs()
              if not args.only or any(t in d.name for t in args.only)]
    if args.list:
        print("\n".join(d.name for d in chosen))
        return 0
    commit = source_commit()           # before any build: what this run measures
    recorded = read_results(args.results)
    rows, measured, regressions = dict(recorded), {}, []
    for k, design in enumerate(chosen, 1):
        print(f"[suite] {k}/{len(chosen)} {design.name}", flush=True)
        with tempfile.TemporaryDirectory(prefix="qloom-suite-") as tmp:
            work = args.keep / design.name.replace(" ", "_") if args.keep else Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            row = {**measure(design, work), "commit": commit}
        regressed, change = compare(recorded.get(design.name), row)
        fmax = f" {row['fmax_mhz']} MHz" if row["status"] in BUILT else ""
        print(f"[suite] {design.name}: {row['status']}{fmax} ({change})"
              f"{'  REGRESSION' if regressed else ''}", flush=True)
        if regressed:
            regressions.append(f"{design.name}: {change}")
        rows[design.name] = measured[design.name] = row
        if args.record:
            record(args.results, measured)     # after every design: a kill keeps them
    print(table(rows[d.name] for d in chosen))
    if regressions:
        print(f"{len(regressions)} regression(s):\n" + "\n".join(regressions))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
