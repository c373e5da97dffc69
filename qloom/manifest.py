"""``OUT/manifest.json``, the contract between ``qloom compile`` and everything after it
(simulation, build, deploy, the host driver): read and written here only, its format
version and the keys every reader relies on checked in one place.

The manifest is a JSON object: ``format`` (this module's ``FORMAT``), ``qloom_version``,
``top`` (the Verilog top module), ``rtl`` and ``sim_rtl`` (files relative to OUT, for
synthesis and for simulation only), ``model_file`` and ``load_options`` (how to load the
model again), ``clock_mhz``, ``input`` and ``output`` (the stream ports: ``lanes``,
``element_bits``, ``payload_bits``, ``last_bit``, ``words_per_frame``,
``elements_per_frame``, ``dtype``, ...; the input's ``registered``, see
``input_registered``), ``host`` (what a host driver needs to quantize inputs and
dequantize outputs), ``layers``, ``ideal_ii_cycles``, ``board`` and, when
weights are in SPRAM, ``flash`` (``image``: the file relative to OUT, ``offset``: its
byte address in the board's SPI flash; see ``qloom.hw.spram``).
"""

from __future__ import annotations

import json
from pathlib import Path

from .errors import QloomError

__all__ = ["FORMAT", "ManifestError", "read_manifest", "write_manifest", "is_design",
           "input_registered", "load_network"]

FORMAT = 1
NAME = "manifest.json"

_NUMBER = (int, float)
# Every manifest has these; the rest are checked when present (a reader that needs the
# ports asks for them: read_manifest(out, ports=True)).
_REQUIRED = {"format": int, "top": str, "rtl": list}
_OPTIONAL = {"qloom_version": str, "clock_mhz": _NUMBER, "input": dict, "output": dict,
             "layers": list, "ideal_ii_cycles": int, "sim_rtl": list, "flash": dict,
             "load_options": dict}
_PORT_KEYS = {"lanes": int, "element_bits": int, "payload_bits": int, "last_bit": int,
              "words_per_frame": int, "elements_per_frame": int, "dtype": dict}


class ManifestError(QloomError):
    """OUT/manifest.json is missing, unreadable or not what this qloom writes."""


def _bad(path: Path, key: str, value, kind) -> ManifestError:
    name = "number" if kind is _NUMBER else kind.__name__
    return ManifestError(f"{path}: '{key}' is {value!r}, not a valid {name}; recompile the "
                         f"design")


def _check(manifest, path: Path, ports: bool):
    if not isinstance(manifest, dict):
        raise ManifestError(f"{path} must hold a JSON object, not {type(manifest).__name__}")
    if manifest.get("format") != FORMAT:
        raise ManifestError(f"{path}: unsupported manifest format {manifest.get('format')!r} "
                            f"(this qloom reads format {FORMAT}); recompile the design")
    required = dict(_REQUIRED, **({"input": dict, "output": dict} if ports else {}))
    for key, kind in {**_OPTIONAL, **required}.items():
        if key not in manifest and key not in required:
            continue
        value = manifest.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise _bad(path, key, value, kind)
    for side in ("input", "output"):
        for key, kind in (_PORT_KEYS.items() if side in manifest else ()):
            value = manifest[side].get(key)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise _bad(path, f"{side}.{key}", value, kind)
    registered = input_registered(manifest)
    if not isinstance(registered, bool):
        raise _bad(path, "input.registered", registered, bool)
    if not all(isinstance(name, str) for name in manifest["rtl"] + manifest.get("sim_rtl", [])):
        raise ManifestError(f"{path}: 'rtl' and 'sim_rtl' must list file names")


def input_registered(manifest: dict) -> bool:
    """The input's ``registered``: its ready is a register and it goes into registers
    only, so the board's link feeds it with no skid buffer (false when absent, as in
    manifests from before it)."""
    return manifest.get("input", {}).get("registered", False)


def read_manifest(out_dir, *, ports: bool = False) -> dict:
    """The checked manifest of the compiled design in ``out_dir``; ``ports``: the reader
    needs the stream ports described."""
    out = Path(out_dir)
    path = out / NAME
    if not path.is_file():
        raise ManifestError(f"{path} not found: '{out}' is not a compiled design folder; "
                            f"make one with `qloom compile MODEL -o {out}`")
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ManifestError(f"cannot read {path}: {e}") from None
    _check(manifest, path, ports)
    return manifest


def write_manifest(folder, manifest: dict) -> Path:
    """Check ``manifest`` and write it into ``folder``; returns the file's path."""
    path = Path(folder) / NAME
    _check(manifest, path, ports=True)
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    return path


def is_design(folder) -> bool:
    """Whether ``folder`` holds a design ``qloom compile`` wrote (any manifest format, so
    that a newer qloom may still replace an older design)."""
    try:
        manifest = json.loads((Path(folder) / NAME).read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(manifest, dict) and "format" in manifest and \
        ("qloom_version" in manifest or "top" in manifest)


def load_network(out_dir, manifest: dict):
    """The integer ``Network`` of the design in ``out_dir``: its ``model_file`` loaded
    again with its ``load_options``."""
    from .nn.load import load
    from .nn.dtypes import parse_dtype
    out = Path(out_dir)
    if not isinstance(manifest.get("model_file"), str) or not manifest["model_file"]:
        raise QloomError(f"{out} keeps no model file (it was compiled from an in-Python "
                         f"network): pass that network to simulate(..., network=net)")
    options = dict(manifest.get("load_options") or {})
    if isinstance(options.get("input_type"), str):
        options["input_type"] = parse_dtype(options["input_type"])
    return load(out / manifest["model_file"], **options)
