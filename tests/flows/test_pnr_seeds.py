"""``qloom.flows.pnr_seeds``: the seed sweep's scheduling with a stand-in nextpnr (the real
tools run in test_build.py): a failing or interrupted seed ends the others."""

import json
import threading

import pytest

from qloom.errors import ToolError
from qloom.flows import pnr_seeds, synth


def _fake_nextpnr(monkeypatch, behaviour):
    """``synth.run_nextpnr`` replaced: ``behaviour(seed, stop)`` returns the seed's Fmax
    (written as nextpnr's report) or raises; the threads that ran are recorded."""
    ran = []

    def run(family, *, report, log, output, seed, stop=None, **kwargs):
        ran.append(seed)
        fmax = behaviour(seed, stop)
        report.write_text(json.dumps({"fmax": {"clk": {"achieved": fmax, "constraint": 100}}}))
        for path in (log, log.with_suffix(".stdout"), output):
            path.write_text(str(seed))
        return 1.0

    monkeypatch.setattr(synth, "run_nextpnr", run)
    monkeypatch.setattr(synth, "prepare_netlist", lambda *args, **kwargs: args[1])
    return ran


def _sweep(tmp_path, seeds, jobs=2):
    return pnr_seeds.place_and_route(
        "ecp5", seeds, 100.0, netlist=tmp_path / "top.json", cwd=tmp_path,
        report=tmp_path / "top.report.json", log=tmp_path / "top.nextpnr.log",
        output=tmp_path / "top.config", engines=None, jobs=jobs, device="LFE5U-85F")


def _wait_for_stop(stop):
    while not stop.wait(0.01):
        pass
    raise synth.Stopped("nextpnr")


def test_the_fastest_is_kept_under_the_usual_names(tmp_path, monkeypatch):
    _fake_nextpnr(monkeypatch, lambda seed, stop: {1: 80.0, 2: 95.5, 3: 90.0}[seed])
    seed, tried = _sweep(tmp_path, [1, 2, 3])
    assert seed == 2 and sorted(r["seed"] for r in tried) == [1, 2, 3]
    assert (tmp_path / "top.config").read_text() == "2"
    assert (tmp_path / "top.nextpnr.log").read_text() == "2"
    assert (tmp_path / "top.nextpnr.stdout").read_text() == "2"
    assert json.loads((tmp_path / "top.report.json").read_text())["fmax"]["clk"]["achieved"] == 95.5
    assert not (tmp_path / "top.seed1.config").exists()
    assert (tmp_path / "top.seed1.report.json").is_file()


def test_a_seed_meeting_the_clock_stops_the_others(tmp_path, monkeypatch):
    """Seed 1 meets the clock while seed 2 still runs: seed 2 is stopped, seed 3 never
    starts."""
    ran = _fake_nextpnr(monkeypatch, lambda seed, stop: 101.0 if seed == 1
                        else _wait_for_stop(stop))
    seed, tried = _sweep(tmp_path, [1, 2, 3])
    assert seed == 1 and tried == [{"seed": 1, "fmax_mhz": 101.0}]
    assert sorted(ran) == [1, 2]


@pytest.mark.parametrize("error", [ToolError("nextpnr-ecp5 failed"), KeyboardInterrupt()])
def test_a_failing_or_interrupted_seed_stops_the_others(tmp_path, monkeypatch, error):
    stopped = threading.Event()

    def behaviour(seed, stop):
        if seed == 1:
            raise error
        try:
            _wait_for_stop(stop)
        finally:
            stopped.set()

    ran = _fake_nextpnr(monkeypatch, behaviour)
    with pytest.raises(type(error)):
        _sweep(tmp_path, [1, 2, 3])
    assert stopped.is_set() and 3 not in ran
    assert not [t for t in threading.enumerate() if t.name.startswith("ThreadPoolExecutor")]
