"""The cost model's calibration: bench/calibrate.py's fit (coefficients from measured
modules) and the coefficients file it writes (qloom/hw/calibration.json)."""

import importlib.util
import sys
from pathlib import Path

import pytest

from qloom.hw.estimate import Family, Features, calibrated, coefficients

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def calibrate():
    if "bench_calibrate" not in sys.modules:
        spec = importlib.util.spec_from_file_location("bench_calibrate", BENCH / "calibrate.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["bench_calibrate"] = module
        spec.loader.exec_module(module)
    return sys.modules["bench_calibrate"]


def _designs(truth: dict, rows: list[dict]):
    """One design per row, of one measured module of template ``t`` whose LUTs are
    ``truth`` applied to the row's features."""
    designs = []
    for k, row in enumerate(rows):
        lut = sum(truth[n] * v for n, v in row.items())
        features = {"template": "t", "lut": row, "ff": {}}
        designs.append({"name": f"d{k}", "family": "ecp5", "yosys": {"lut": lut, "ff": 0},
                        "modules": [(features, {"lut": lut, "ff": 0})]})
    return designs


def _fit(calibrate, designs, **kw):
    args = {"prior": 0.0, "power": 0.5, "whole": 10.0, **kw}
    return calibrate.fit(designs, "ecp5", "lut", **args)["t"]


def test_fit_recovers_the_coefficients_of_exact_data(calibrate):
    truth = {"tree": 1.5, "select": 0.8}
    rows = [{"tree": 100, "select": 40}, {"tree": 30, "select": 200}, {"tree": 500, "select": 10},
            {"tree": 64, "select": 64}]
    assert _fit(calibrate, _designs(truth, rows)) == pytest.approx(truth, abs=1e-3)


def test_fit_keeps_coefficients_within_bounds(calibrate):
    """Data that a tree at 0 and selects at 2.5 fit best (collinear features, few modules)
    gives coefficients at the bounds, not outside them."""
    truth = {"tree": 0.0, "select": 2.5}
    rows = [{"tree": 100, "select": 100}, {"tree": 210, "select": 200}]
    coef = _fit(calibrate, _designs(truth, rows), bounds=(0.25, 4.0))
    assert all(0.25 - 1e-9 <= c <= 4.0 + 1e-9 for c in coef.values())
    assert coef["tree"] == pytest.approx(0.25, abs=1e-3)


def test_prior_pulls_unconstrained_coefficients_to_one(calibrate):
    """A feature no module has keeps its structural meaning."""
    designs = _designs({"tree": 1.5, "spare": 0.0}, [{"tree": 100, "spare": 0}])
    coef = _fit(calibrate, designs, prior=0.05)
    assert coef["spare"] == pytest.approx(1.0, abs=1e-3)
    assert coef["tree"] == pytest.approx(1.5, rel=0.05)


def test_whole_design_fits_what_no_module_measures(calibrate):
    """An instance without figures of its own (``measured`` None: an edge the rows did not
    measure) is fitted from its design's whole figures."""
    edge = {"template": "edge", "lut": {"skid": 10}, "ff": {}}
    unit = {"template": "t", "lut": {"a": 10}, "ff": {}}
    designs = [{"name": "d", "family": "ecp5", "yosys": {"lut": 50, "ff": 0},
                "modules": [(unit, {"lut": 20, "ff": 0}), (edge, None)]}]
    coef = calibrate.fit(designs, "ecp5", "lut", prior=0.0, power=0.5, whole=10.0)
    assert coef["t"]["a"] == pytest.approx(2.0, abs=1e-3)
    assert coef["edge"]["skid"] == pytest.approx(3.0, abs=1e-3)


def test_held_out_fit_leaves_the_design_out(calibrate):
    """A design's held-out coefficients are fitted without its own modules."""
    f = {"template": "t", "lut": {"a": 10}, "ff": {"b": 10}}
    designs = [{"name": n, "family": "ecp5", "yosys": {"lut": m, "ff": 10},
                "modules": [(f, {"lut": m, "ff": 10})]} for n, m in (("x", 20), ("y", 30))]
    held = calibrate.fit_all(designs, 0.0, 0.5, 10.0, (0.25, 4.0), leave_out=designs[0])
    assert held["ecp5"]["t"]["lut"]["a"] == pytest.approx(3.0, abs=1e-3)


def test_calibration_file_coefficients_are_within_the_default_bounds():
    for family, templates in coefficients().items():
        for template, kinds in templates.items():
            for kind, table in kinds.items():
                for name, value in table.items():
                    assert 0.25 - 1e-6 <= value <= 4.0 + 1e-6, (family, template, kind, name)


def test_calibrated_is_the_weighted_sum_of_the_features():
    f = Features("no_such_template")
    f.add("lut", "a", 10)
    f.add("ff", "b", 7)
    r = calibrated(f, Family.ECP5)
    assert (r.lut, r.ff) == (10, 7)
