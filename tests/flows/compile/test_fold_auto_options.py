"""``--fold auto`` with ``--target-fps`` (the smallest design that fits the board and
meets the rate, or an error quoting the reachable rate) and with ``--latency`` (the
latency design when it fits the board, else an error): no option is dropped."""

import pytest

from qloom.errors import QloomError
from qloom.flows.cli import main
from qloom.flows.compile.steps import CompileConfig, run_steps

from foreign_models import kws_mlp

BOARD = "ulx3s-85f"


@pytest.fixture(scope="module")
def model():
    return kws_mlp()


def _plan(model, **options):
    options.setdefault("board", BOARD)
    return run_steps(model, CompileConfig(**options), until="fold").plan


def _fps(plan, clock_mhz=150.0):
    return clock_mhz * 1e6 / plan.ideal_ii_cycles


def test_target_fps_is_met_by_the_smallest_fitting_design(model):
    fastest = _plan(model, fold="auto")
    target = _fps(fastest) / 8
    plan = _plan(model, fold="auto", target_fps=target)
    assert plan.how == "auto-target-fps"
    assert target <= _fps(plan) < _fps(fastest)
    assert plan.total.lut < fastest.total.lut
    # the same folding as --target-fps alone: each engine at its cheapest meeting the rate
    alone = _plan(model, target_fps=target)
    assert {n: (f.pe, f.simd) for n, f in plan.folds.items()} == \
        {n: (f.pe, f.simd) for n, f in alone.folds.items()}


def test_target_fps_beyond_any_folding_is_refused_with_the_reachable_rate(model):
    fastest = _fps(_plan(model, fold="auto"))
    with pytest.raises(QloomError, match=r"--fold auto with --target-fps: no folding reaches "
                       r"1,000,000,000 frames/s at 150 MHz .* the fastest folding that fits "
                       rf"ulx3s-85f reaches {fastest:,.0f} frames/s"):
        _plan(model, fold="auto", target_fps=1e9)


def test_target_fps_reachable_only_by_a_design_too_big_is_refused(model):
    fastest = _fps(_plan(model, fold="auto"))
    with pytest.raises(QloomError, match=r"the smallest design meeting .* frames/s at 150 MHz "
                       r"does not fit ulx3s-85f: estimated LUT .* \(over in [A-Z, ]+\); the "
                       rf"fastest folding that fits ulx3s-85f reaches {fastest:,.0f} frames/s"):
        _plan(model, fold="auto", target_fps=fastest * 1.5)


def test_latency_with_fold_auto_is_checked_against_the_board(model):
    with pytest.raises(QloomError, match=r"--fold auto --latency: the latency design .* does "
                       r"not fit ulx3s-25f: estimated LUT [\d,]+/24,288"):
        _plan(model, fold="auto", latency=True, board="ulx3s-25f")
    small = kws_mlp(shape=(1, 1, 2, 4))
    plan = _plan(small, fold="auto", latency=True, board="ulx3s-25f")
    assert plan.how == "auto-latency" and plan.ideal_ii_cycles == 1
    with pytest.raises(QloomError, match="--fold auto needs a board"):
        run_steps(small, CompileConfig(fold="auto", latency=True), until="fold")


def test_cli_fold_auto_with_target_fps(model, tmp_path, capsys):
    import onnx
    path = tmp_path / "kws.onnx"
    onnx.save(model, path)
    assert main(["compile", str(path), "-o", str(tmp_path / "o"), "--board", BOARD,
                 "--fold", "auto", "--target-fps", "100000"]) == 0
    assert "frames/s at 150 MHz" in capsys.readouterr().out
    assert main(["compile", str(path), "-o", str(tmp_path / "o"), "--board", BOARD,
                 "--fold", "auto", "--target-fps", "1e9"]) == 2
    err = capsys.readouterr().err
    assert "qloom compile: error: --fold auto with --target-fps: no folding reaches" in err
    assert "Traceback" not in err
