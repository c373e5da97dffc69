"""The build regression suite (``bench/build_suite.py``): its comparison rule, its recorded
results (every design of the suite has a row), and one of its designs rebuilt for real in
the slow tier: the jet tagger ``--fold auto`` on the iCEBreaker, which once stopped placing
without any test noticing."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def suite():
    spec = importlib.util.spec_from_file_location("bench_build_suite",
                                                  ROOT / "bench" / "build_suite.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _row(status, fmax=None, **more):
    return {"design": "m b f", "status": status, "fmax_mhz": fmax, **more}


@pytest.mark.parametrize("recorded, new, regressed", [
    (_row("met", 100.0), _row("met", 96.0), False),
    (_row("met", 100.0), _row("missed", 95.5), False),     # within 5%: reported only
    (_row("met", 100.0), _row("met", 94.9), True),
    (_row("met", 100.0), _row("failed", message="nextpnr failed"), True),
    (_row("met", 100.0), _row("no-fit", message="over budget"), True),
    (_row("missed", 40.0), _row("failed", message="nextpnr failed"), False),
    (_row("no-fit"), _row("met", 60.0), False),
    (None, _row("failed"), False),
])
def test_compare(suite, recorded, new, regressed):
    assert suite.compare(recorded, new)[0] is regressed


def test_a_lost_build_says_what_happened(suite):
    regressed, change = suite.compare(_row("met", 52.66), _row("failed", message="no place"))
    assert regressed and change == "met timing at 52.66 MHz, now failed: no place"


def test_the_matrix(suite):
    names = [d.name for d in suite.designs()]
    models = sorted(p.stem for p in (ROOT / "examples" / "models").glob("*.onnx"))
    assert len(names) == len(set(names)) == len(models) * (2 + 3 + 3 + 3)
    assert "jettagging_w6a6 icebreaker auto" in names
    assert "tfc_w1a1 ulx3s-85f ii1" in names and "tfc_w1a1 icebreaker ii1" not in names
    assert not [n for n in names if "arty" in n]           # vendor flow: nothing to build


def test_the_recorded_results_are_of_suite_designs(suite):
    recorded = suite.read_results(suite.RESULTS)
    names = {d.name for d in suite.designs()}
    assert recorded and set(recorded) <= names, sorted(set(recorded) - names)
    for row in recorded.values():
        assert row["status"] in ("met", "missed", "no-fit", "failed"), row
        if row["status"] in suite.BUILT:
            assert row["fmax_mhz"] > 0 and row["target_mhz"] > 0 and row["used"]["lut"] > 0
        else:
            assert row["message"]


def test_results_round_trip(suite, tmp_path):
    path = tmp_path / "r.json"
    rows = {"tfc_w1a1 icebreaker auto": {"design": "tfc_w1a1 icebreaker auto",
                                         "status": "met", "fmax_mhz": 52.6}}
    suite.write_results(path, rows)
    assert suite.read_results(path)["tfc_w1a1 icebreaker auto"]["fmax_mhz"] == 52.6
    data = json.loads(path.read_text())
    data["schema"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(SystemExit, match="schema 99"):
        suite.read_results(path)


@pytest.mark.slow
def test_every_design_has_a_recorded_result(suite):
    """The record covers the whole suite (the slow tier: filling it takes hours of builds,
    ``bench/build_suite.py --record``)."""
    recorded = suite.read_results(suite.RESULTS)
    missing = [d.name for d in suite.designs() if d.name not in recorded]
    assert not missing, f"no recorded result for {missing}: run bench/build_suite.py --record"


@pytest.mark.slow
def test_jet_tagger_fold_auto_builds_on_the_icebreaker(suite, tmp_path):
    """The design of the regression, first try, against its recorded row."""
    design = next(d for d in suite.designs() if d.name == "jettagging_w6a6 icebreaker auto")
    row = suite.measure(design, tmp_path)
    assert row["status"] == "met" and row["fmax_mhz"] >= 50.0, row
    regressed, change = suite.compare(suite.read_results(suite.RESULTS).get(design.name), row)
    assert not regressed, change
