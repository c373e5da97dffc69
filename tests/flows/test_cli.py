"""The `qloom` command line: inspect and compile, and clear one-line errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from qloom.flows.cli import main

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"


def test_inspect_table_and_json(capsys):
    assert main(["inspect", str(MODELS / "tfc_w1a1.onnx")]) == 0
    table = capsys.readouterr().out
    assert "MatMul_0" in table and "BIPOLAR" in table and "50,176" in table
    assert main(["inspect", str(MODELS / "tfc_w1a1.onnx"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["layers"][0]["name"] == "MatMul_0"


def test_compile_cli(tmp_path, capsys):
    out = tmp_path / "jet"
    fold = tmp_path / "fold.json"
    fold.write_text(json.dumps({"MatMul_0": {"pe": 8, "simd": 16}}))
    assert main(["compile", str(MODELS / "jettagging_w6a6.onnx"), "-o", str(out),
                 "--fold", str(fold), "--clock", "150"]) == 0
    assert "wrote" in capsys.readouterr().out
    report = json.loads((out / "report.json").read_text())
    assert report["clock_mhz"] == 150
    row = next(r for r in report["layers"] if r["name"] == "MatMul_0")
    assert row["fold"] == {"pe": 8, "simd": 16}


@pytest.mark.parametrize("argv, message", [
    (["inspect", "no/such/model.onnx"], "qloom inspect: error: "),
    (["compile", str(MODELS / "tfc_w1a1.onnx"), "-o", "x", "--fold", "no/such.json"],
     "qloom compile: error: fold file no/such.json does not exist"),
    (["compile", str(MODELS / "tfc_w1a1.onnx"), "-o", "x", "--fold", "auto"],
     "qloom compile: error: --fold auto needs a board"),
    (["inspect", str(MODELS / "tfc_w1a1.onnx"), "--input-type", "INT3.5"],
     "qloom inspect: error: unknown datatype 'INT3.5'"),
])
def test_errors_are_one_line(argv, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "qloom.flows.cli", *argv],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
