"""Mutation fuzz test: hostile edits of real models (tests/fuzz_mutants.py) either compile
into designs that are exact, or are refused with one QloomError; never a traceback (an
InternalError counts as one), a hang or a blow-up.

Each case runs in a worker process with its data segment limited to 2 GB and an alarm
(tests/fuzz_worker.py). A case that compiles is checked against qonnx's ``execute_onnx``
(``compare_with_qonnx``) and simulated with Icarus bit exact against the network. Fast
tier: 48 mutants of the four bundled models (most are refused; every compiling one is
simulated) plus 4 light mutants of the brevitas CNNs, loaded only (their compile and
Icarus runs take minutes). Slow tier: 320 mutants, every compiling one simulated, plus 24
CNN mutants compiled and checked against qonnx (not simulated: minutes each in Icarus).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fuzz_mutants import mutant
from fuzz_worker import OK, FuzzWorker

ROOT = Path(__file__).resolve().parents[2]
MODELS = [ROOT / "examples" / "models" / f"{m}.onnx"
          for m in ("tfc_w1a1", "tfc_w2a2", "jettagging_w6a6", "unsw_nb15_w2a2")]
CNNS = [ROOT / "tests" / "nets" / f"{m}.onnx" for m in ("cnv_w1a1", "cnv_w2a2", "lfc_w1a1")]
FAST, SLOW = 48, 320


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    w = FuzzWorker(tmp_path_factory.mktemp("fuzz"))
    yield w
    w.stop()


def _case(worker, tmp_path, model: Path, seed: int, *, light=False, timeout=120, **options):
    desc, data = mutant(model.read_bytes(), seed, light=light)
    path = tmp_path / "mutant.onnx"
    path.write_bytes(data)
    result = worker.run(path, timeout=timeout, seed=seed, **options)
    where = f"{model.name} seed {seed} ({desc})"
    if result["status"] not in OK:
        keep = ROOT / ".fuzz-failures"
        keep.mkdir(exist_ok=True)
        shutil.copy(path, keep / f"{model.stem}-{seed}.onnx")
        pytest.fail(f"{where}: {result['status']}: {result.get('message', '')}\n"
                    f"{result.get('trace', '')}")
    assert result["max_rss_mb"] < 2048, where
    foreign = [w for w in result["warnings"] if not w.startswith(("LoadWarning",
                                                                  "FixedPointInputWarning"))]
    assert len(foreign) == 0 and sum(w.startswith("LoadWarning")
                                     for w in result["warnings"]) <= 1, (where, foreign)
    return result


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog is not installed")
@pytest.mark.parametrize("seed", range(FAST))
def test_fuzz_bundled(worker, tmp_path, seed):
    _case(worker, tmp_path, MODELS[seed % len(MODELS)], 1000 + seed, simulate=True,
          frames=3)


@pytest.mark.parametrize("seed", range(4))
def test_fuzz_cnn_load(worker, tmp_path, seed):
    """The CNNs, lightly mutated: loaded (the whole frontend) but not compiled."""
    _case(worker, tmp_path, CNNS[seed % len(CNNS)], 5000 + seed, light=True, timeout=180,
          check=False, load_only=True)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog is not installed")
@pytest.mark.parametrize("seed", range(SLOW))
def test_fuzz_bundled_slow(worker, tmp_path, seed):
    _case(worker, tmp_path, MODELS[seed % len(MODELS)], 20000 + seed, simulate=True,
          frames=4)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(24))
def test_fuzz_cnn_slow(worker, tmp_path, seed):
    _case(worker, tmp_path, CNNS[seed % len(CNNS)], 30000 + seed, light=True, timeout=900,
          frames=2)
