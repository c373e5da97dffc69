"""examples/train_to_board/train.py end to end (slow): brevitas training on digits, QONNX
export, compile for the iCEBreaker, the whole test set through the RTL in Verilator, the
bitstream, and the virtual board when this qloom has one."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).parents[2] / "examples" / "train_to_board" / "train.py"
_MISSING = [m for m in ("torch", "brevitas", "sklearn", "onnxoptimizer")
            if importlib.util.find_spec(m) is None]

needs_train_extra = pytest.mark.skipif(
    bool(_MISSING), reason=f"the train extra is not installed (missing {', '.join(_MISSING)}): "
                           f"pip install -e '.[train]'")


def _load_example():
    spec = importlib.util.spec_from_file_location("train_to_board", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@needs_train_extra
def test_train_to_board_end_to_end(tmp_path):
    out = tmp_path / "t2b"
    proc = subprocess.run([sys.executable, str(EXAMPLE), str(out), "--epochs", "20",
                           "--board-frames", "5"], capture_output=True, text=True,
                          timeout=3000)
    log = proc.stdout[-4000:] + proc.stderr[-4000:]
    assert proc.returncode == 0, log
    summary = json.loads((out / "summary.json").read_text())
    digits = summary["test_digits"]
    assert digits == 360
    assert summary["rtl_mismatches"] == 0
    assert summary["rtl_equals_qonnx"] == digits, "the RTL predicts the exported model's class"
    assert summary["rtl_accuracy"] == summary["qonnx_accuracy"]
    assert summary["torch_accuracy"] > 0.85 and summary["qonnx_accuracy"] > 0.85
    assert f"RTL (verilator) {summary['rtl_accuracy']:.4f}" in proc.stdout
    assert summary["bitstream"].endswith(".bin") and Path(summary["bitstream"]).is_file()
    assert summary["fmax_mhz"] > 0
    board = summary["virtual_board"]
    if _load_example().has_command("board-sim"):
        assert board["all_equal_reference"] is True, log
    else:
        assert "board-sim" in board["skipped"]
    page = (out / "design" / "report.html").read_text()
    assert 'id="fig-fmax"' in page and 'id="fig-timeline"' in page


def test_refuses_a_folder_it_did_not_write(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    proc = subprocess.run([sys.executable, str(EXAMPLE), str(tmp_path)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0
    assert "holds files this example did not write" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]
