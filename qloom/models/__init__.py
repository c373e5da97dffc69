"""The published QONNX models that ship with qloom, by name.

TFC-w1a1 and TFC-w2a2 (MNIST), UNSW-NB15 w2a2 (network intrusion) from the QONNX model
zoo, and the hls4ml jet tagger w6a6, unmodified (origin and licence: README's "Bundled
models", LICENSE-tfc.txt). They are package data, so an installed qloom can compile one
without a checkout: ``qloom compile tfc_w1a1 -o OUT``; ``qloom models`` lists them.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["bundled", "model_path"]

FOLDER = Path(__file__).resolve().parent


def bundled() -> dict[str, Path]:
    """Name -> path of every bundled model."""
    return {p.stem: p for p in sorted(FOLDER.glob("*.onnx"))}


def model_path(text: str) -> str:
    """A MODEL argument: a file's path as given, or, when no such file exists, the bundled
    model of that name (``tfc_w1a1``); anything else is passed on for the loader to refuse
    with its own message."""
    if not Path(text).exists() and text in bundled():
        return str(bundled()[text])
    return text
