"""ASIC bench: TFC-w1a1 (default folding) and the jet tagger in latency mode (II 1), both
compiled for the ULX3S-85F, through qloom's open standard-cell flow (``qloom build
--target asic``): cells, core area, post-route Fmax, power and energy per frame at the
clock, beside the ECP5 build's LUT count and Fmax of the same design, and ECON-T's
published figures as a reference (a different node and tool flow: no scaling is
attempted).

    python bench/asic.py [--workdir DIR] [--only tfc|jet] [--pdk osu018] [--clock 100]
                         [--ecp5]

Each design is compiled into ``DIR/NAME`` and built there for the ASIC, unless
``DIR/NAME/build/report.json`` already holds an ASIC build of it (the flow takes minutes
for TFC-w1a1). The ECP5 figures come from ``DIR/NAME-ecp5/build/report.json`` (a copy of
the design built with ``qloom build`` for the ULX3S-85F); ``--ecp5`` builds it when
missing, otherwise the bench says the figure is not available.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from qloom.errors import QloomError
from qloom.flows.toolchain.asic.flow import build_asic_flow
from qloom.flows.toolchain.build import build_board
from qloom.flows.compile.steps import compile_model

MODELS = Path(__file__).resolve().parents[1] / "examples" / "models"
BOARD = "ulx3s-85f"
DESIGNS = {"tfc": ("TFC-w1a1, default folding", "tfc_w1a1.onnx", {}),
           "jet": ("jet tagger w6a6, latency mode", "jettagging_w6a6.onnx", {"latency": True})}
ECON_T = ("ECON-T (published; hls4ml + Catapult, commercial place and route)", "65 nm",
          "3.6 mm2", "2.4 nJ per inference at 40 MHz")


def _report(folder: Path) -> dict | None:
    path = folder / "build" / "report.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _same_rtl(a: Path, b: Path) -> bool:
    return (a / "rtl" / "qloom_top.v").read_bytes() == (b / "rtl" / "qloom_top.v").read_bytes()


def asic(work: Path, key: str, pdk: str, clock: float) -> tuple[dict, float | None]:
    """The design's ASIC build report (run when missing) and the seconds it took (None:
    an earlier run's)."""
    title, model, options = DESIGNS[key]
    out = work / key
    fresh = work / f".{key}-compiled"
    compile_model(MODELS / model, fresh, board=BOARD, **options)
    report = _report(out) if (out / "manifest.json").is_file() else None
    if report and report.get("target") == "asic" and report.get("pdk") == pdk \
            and report.get("clock_mhz") == clock and _same_rtl(out, fresh):
        shutil.rmtree(fresh)
        return report, None
    if out.exists():
        shutil.rmtree(out)
    fresh.rename(out)
    start = time.monotonic()
    report = build_asic_flow(out, pdk=pdk, clock_mhz=clock).report
    return report, time.monotonic() - start


def ecp5(work: Path, key: str, build: bool) -> dict | None:
    """The ECP5 build report of the same RTL, if there is one (built with ``build``)."""
    folder = work / f"{key}-ecp5"
    report = _report(folder) if folder.is_dir() else None
    if report and _same_rtl(folder, work / key) and report.get("board") == BOARD:
        return report
    if not build:
        return None
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(work / key, folder, ignore=shutil.ignore_patterns("build", "build-failed"))
    return build_board(folder, board=BOARD).report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=Path("out/bench-asic"))
    parser.add_argument("--only", choices=sorted(DESIGNS))
    parser.add_argument("--pdk", default="osu018")
    parser.add_argument("--clock", type=float, default=100.0, metavar="MHZ")
    parser.add_argument("--ecp5", action="store_true",
                        help="build the ECP5 bitstream of each design when its report is "
                             "missing")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    rows, failed = [], []
    for key in [args.only] if args.only else list(DESIGNS):
        try:
            report, seconds = asic(args.workdir, key, args.pdk, args.clock)
        except QloomError as e:            # one design's failure does not hide the others
            failed.append((key, str(e).splitlines()[0]))
            continue
        rows.append((key, report, seconds, ecp5(args.workdir, key, args.ecp5)))
    print(f"\nASIC flow on {args.pdk} (typical corner), power at {args.clock:g} MHz; "
          f"ECP5 on the {BOARD}")
    head = (f"{'design':34} {'cells':>8} {'area mm2':>9} {'Fmax MHz':>9} {'mW':>8} "
            f"{'nJ/frame':>9} {'gate-level':>11} {'ECP5 LUT':>9} {'ECP5 MHz':>9}")
    print(head + "\n" + "-" * len(head))
    for key, r, seconds, e in rows:
        g = r["gate_level_sim"]
        lut = f"{e['utilization']['lut']['used']:,}" if e else "n/a"
        fmax = f"{e['fmax_mhz']:g}" if e and e.get("fmax_mhz") else "n/a"
        print(f"{DESIGNS[key][0]:34} {r['cells']:>8,} {r['area_um2'] / 1e6:>9.3f} "
              f"{r['fmax_mhz']:>9g} {r['power_mw']:>8.3f} {r['energy_nj_per_frame']:>9.4g} "
              f"{g['frames'] - g['mismatches']:>4}/{g['frames']:<3} exact {lut:>9} {fmax:>9}")
    for key, r, seconds, e in rows:
        took = f"flow took {seconds / 60:.1f} min" if seconds else "from an earlier run"
        print(f"  {key}: {r['flip_flops']:,} flip-flops, DRC {r['drc_errors']}, LVS "
              f"{'match' if r['lvs_match'] else 'MISMATCH'}, GDS {r['gds']} "
              f"({r['gds_cell_views']} cell views); {took}"
              + ("" if e else f"; ECP5 figure not available (no build report in "
                              f"{args.workdir / (key + '-ecp5')}; --ecp5 builds it)"))
    for key, error in failed:
        print(f"  {key}: the ASIC flow failed: {error}")
    print(f"\nreference: {ECON_T[0]}, {ECON_T[1]}: {ECON_T[2]}, {ECON_T[3]}; a different "
          f"node, function and flow, quoted as published, not scaled")


if __name__ == "__main__":
    main()
