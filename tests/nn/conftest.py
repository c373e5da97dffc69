"""Shared fixtures for the frontend tests: the example models (loaded once per module) and
a small builder of QONNX graphs with onnx.helper."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from graph_builder import QONNX_DOMAIN, GraphBuilder  # noqa: F401 (re-exported)

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"


@pytest.fixture(scope="module")
def load_example():
    """``load_example(name, **options)``: an example model's Network, loaded once."""
    from qloom.nn.load import load
    cache = {}

    def get(name, **options):
        key = (name, tuple(sorted(options.items())))
        if key not in cache:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cache[key] = load(MODELS / f"{name}.onnx", **options)
        return cache[key]
    return get


@pytest.fixture
def graph():
    return GraphBuilder()
