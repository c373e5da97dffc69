"""``qloom.flows.toolchain.pnr_seeds``: the seed sweep's scheduling with a stand-in nextpnr (the real
tools run in test_build.py): a failing or interrupted seed ends the others."""

import json
import threading

import pytest

from qloom.errors import ToolError
from qloom.flows.toolchain import pnr_seeds, synth


def _fake_nextpnr(monkeypatch, behaviour):
    """``synth.run_nextpnr`` replaced: ``behaviour(seed, stop, placer)`` returns the Fmax
    (written as nextpnr's report) or raises; the threads that ran are recorded."""
    ran = []

    def run(family, *, report, log, output, seed, stop=None, placer=None, **kwargs):
        ran.append(seed)
        fmax = behaviour(seed, stop, placer)
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
    _fake_nextpnr(monkeypatch, lambda seed, stop, placer: {1: 80.0, 2: 95.5, 3: 90.0}[seed])
    kept, tried = _sweep(tmp_path, [1, 2, 3])
    assert kept["seed"] == 2 and sorted(r["seed"] for r in tried) == [1, 2, 3]
    assert (tmp_path / "top.config").read_text() == "2"
    assert (tmp_path / "top.nextpnr.log").read_text() == "2"
    assert (tmp_path / "top.nextpnr.stdout").read_text() == "2"
    assert json.loads((tmp_path / "top.report.json").read_text())["fmax"]["clk"]["achieved"] == 95.5
    assert not (tmp_path / "top.seed1.config").exists()
    assert (tmp_path / "top.seed1.report.json").is_file()


def test_a_seed_meeting_the_clock_stops_the_others(tmp_path, monkeypatch):
    """Seed 1 meets the clock while seed 2 still runs: seed 2 is stopped, seed 3 never
    starts."""
    ran = _fake_nextpnr(monkeypatch, lambda seed, stop, placer: 101.0 if seed == 1
                        else _wait_for_stop(stop))
    kept, tried = _sweep(tmp_path, [1, 2, 3])
    assert kept["seed"] == 1 and tried == [{"seed": 1, "placer": "heap", "fmax_mhz": 101.0}]
    assert sorted(ran) == [1, 2]


@pytest.mark.parametrize("error", [ToolError("nextpnr-ecp5 failed"), KeyboardInterrupt()])
def test_a_failing_or_interrupted_seed_stops_the_others(tmp_path, monkeypatch, error):
    stopped = threading.Event()

    def behaviour(seed, stop, placer):
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


def _unplaceable(*tries):
    """A stand-in nextpnr that cannot legalize a placement for the (seed, placer) ``tries``
    and places the rest at 90 MHz."""
    def behaviour(seed, stop, placer):
        if (seed, placer) in tries:
            raise ToolError("nextpnr-ice40 (iCE40UP5K) failed (exit 125) after 130 s\n"
                            "ERROR: Unable to find legal placement for all cells, design "
                            "is probably at utilisation limit.")
        return 90.0
    return behaviour


def test_placement_tries():
    tries = pnr_seeds.placement_tries(3)
    assert tries[0] == (None, 3) and tries[-1] == ("sa", 3)
    assert tries[1][0] == "heap" and tries[1][1] not in (None, 3)
    assert all(0 <= s <= pnr_seeds.SEED_LIMIT
               for s in (pnr_seeds.placement_tries(pnr_seeds.SEED_LIMIT)[1][1],
                         pnr_seeds.placement_tries(None)[1][1]))


def test_an_unplaceable_run_falls_back_to_another_seed(tmp_path, monkeypatch, capsys):
    ran = _fake_nextpnr(monkeypatch, _unplaceable((None, None)))
    kept, tried = _sweep(tmp_path, [None])
    other = pnr_seeds.placement_tries(None)[1][1]
    assert ran == [None, other]
    assert kept == {"seed": other, "placer": "heap", "fmax_mhz": 90.0} and tried == [kept]
    assert "could not legalize a placement (heap placer, seed default)" in capsys.readouterr().out


def test_then_to_the_other_placer(tmp_path, monkeypatch):
    other = pnr_seeds.placement_tries(5)[1][1]
    _fake_nextpnr(monkeypatch, _unplaceable((5, None), (other, "heap")))
    kept, _ = _sweep(tmp_path, [5])
    assert kept == {"seed": 5, "placer": "sa", "fmax_mhz": 90.0}


def test_no_placement_names_every_try(tmp_path, monkeypatch):
    other = pnr_seeds.placement_tries(5)[1][1]
    _fake_nextpnr(monkeypatch, _unplaceable((5, None), (other, "heap"), (5, "sa")))
    with pytest.raises(ToolError) as e:
        _sweep(tmp_path, [5])
    message = str(e.value)
    assert message.startswith("nextpnr-ecp5 could not place the design on LFE5U-85F: tried "
                              f"heap placer, seed 5; heap placer, seed {other}; sa placer, "
                              f"seed 5;")
    assert "--fold auto" in message and str(tmp_path / "top.nextpnr.log") in message


def test_other_tool_errors_are_not_retried(tmp_path, monkeypatch):
    def behaviour(seed, stop, placer):
        raise ToolError("nextpnr-ecp5 failed: ERROR: no BELs remaining to implement cell "
                        "type 'MULT18X18D'")
    ran = _fake_nextpnr(monkeypatch, behaviour)
    with pytest.raises(ToolError, match="no BELs remaining"):
        _sweep(tmp_path, [None])
    assert ran == [None]


@pytest.mark.parametrize("family, placer, capped", [
    ("ecp5", None, True), ("ecp5", "heap", True), ("ecp5", "sa", False),
    ("ice40", None, False)])
def test_ecp5_heap_legalization_is_bounded(tmp_path, monkeypatch, family, placer, capped):
    """On the ECP5 the HeAP placer gives up on a cell it cannot legalize after a bounded
    number of tries (``synth.ECP5_HEAP_PLACEMENT_TIMEOUT``), so that the fallbacks run
    instead of a placer that holds for hours; nextpnr's message is one they retry on."""
    argvs = []
    monkeypatch.setattr(synth, "run_tool", lambda step, argv, *a, **k: argvs.append(argv))
    device = "LFE5U-25F" if family == "ecp5" else "iCE40UP5K"
    package = "CABGA381" if family == "ecp5" else "SG48"
    synth.run_nextpnr(family, netlist=tmp_path / "n.json", cwd=tmp_path, device=device,
                      package=package, constraints=None, clock_mhz=None,
                      report=tmp_path / "r.json", log=tmp_path / "n.log", placer=placer,
                      prepared=True)
    argv = argvs[0]
    flag = "--placer-heap-cell-placement-timeout"
    assert (flag in argv) == capped
    if capped:
        assert argv[argv.index(flag) + 1] == str(synth.ECP5_HEAP_PLACEMENT_TIMEOUT)
    # What nextpnr prints when that bound is reached.
    assert any(text in "ERROR: Unable to find legal placement for cell 'x' of type "
               "'TRELLIS_FF' after 232309 attempts" for text in pnr_seeds.PLACEMENT_FAILURES)
