"""A sweep SPEC (TOML) read once into frozen points: which models, boards, foldings and
clocks to cross, and how each point is simulated and built.

Every point has two names. Its **id** comes from its coordinates (model, board, folding,
clock), so that it keeps its folder ``RESULTS/points/<id>`` across runs. Its **key**
hashes everything its results depend on (the model file's bytes, a fold file's bytes,
the options, qloom's version and a digest of its code): a point whose key is unchanged
is not run again.

Example::

    frames = 64                       # random frames simulated per point
    simulator = "verilator"           # or "icarus"
    build = true                      # false: compile and simulate only
    boards = ["icebreaker", "ulx3s-85f"]
    clocks = ["board"]                # MHz, or "board" for the board's default clock
    foldings = ["auto", { target_fps = 100000 }, { fold = "folds/tfc.json" }, "default"]

    [[models]]
    path = "../models/tfc_w1a1.onnx"  # relative to the SPEC file
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from qloom._version import __version__
from qloom.errors import QloomError

__all__ = ["Folding", "ModelEntry", "Point", "Spec", "read_spec", "parse_spec"]

SIMULATORS = ("icarus", "verilator")
_TOP_KEYS = {"frames", "simulator", "build", "seed", "boards", "clocks", "foldings",
             "models", "cpus", "memory_gb", "timing_retry"}
_MODEL_KEYS = {"path", "name", "boards", "clocks", "foldings", "input_type", "input_scale",
               "precision"}
_FOLD_KEYS = {"target_fps", "fold", "label"}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


@dataclass(frozen=True)
class Folding:
    """How one point folds its layers: ``fold`` is ``"auto"``, a fold file or None (the
    default folding), optionally from a frame-rate target (``target_fps``)."""

    label: str
    target_fps: float | None = None
    fold: str | None = None            # "auto", an absolute fold file path, or None
    fold_sha256: str | None = None     # of the fold file's bytes (part of the key)

    def key(self) -> dict:
        fold = self.fold if self.fold in (None, "auto") else {"sha256": self.fold_sha256}
        return {"target_fps": self.target_fps, "fold": fold}


@dataclass(frozen=True)
class ModelEntry:
    name: str
    path: Path
    sha256: str
    load_options: dict = field(default_factory=dict)   # JSON values: input_type as text


@dataclass(frozen=True)
class Point:
    """One design point of the sweep, with everything its task needs."""

    id: str
    key: str
    model: ModelEntry
    board: str
    folding: Folding
    clock_mhz: float | None            # None: the board's default clock
    frames: int
    simulator: str
    seed: int
    build: bool
    timing_retry: bool

    def inputs(self) -> dict:
        """What the key hashes (kept in the point's record, to show why a point ran)."""
        return {"qloom_version": __version__, "qloom_code": code_digest(),
                "model_sha256": self.model.sha256,
                "load_options": self.model.load_options, "board": self.board,
                "clock_mhz": self.clock_mhz, "folding": self.folding.key(),
                "frames": self.frames, "simulator": self.simulator, "seed": self.seed,
                "build": self.build, "timing_retry": self.timing_retry}

    def request(self) -> dict:
        """The JSON a point's process runs from (``sweep_point``)."""
        return {"id": self.id, "key": self.key, "model": str(self.model.path),
                "model_name": self.model.name, "load_options": self.model.load_options,
                "board": self.board, "clock_mhz": self.clock_mhz,
                "folding": self.folding.label, "target_fps": self.folding.target_fps,
                "fold": self.folding.fold, "frames": self.frames,
                "simulator": self.simulator, "seed": self.seed, "build": self.build,
                "timing_retry": self.timing_retry}


@dataclass(frozen=True)
class Spec:
    path: Path
    points: tuple[Point, ...]
    cpus: float
    memory_gb: float


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """A digest of qloom's own files (its Python modules and package data): part of every
    point's key, so that a re-run notices a changed compiler even when the version number
    did not change."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".cpp", ".json", ".v", ".mk"):
            h.update(path.relative_to(root).as_posix().encode() + b"\0")
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _key(inputs: dict) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


class _Where:
    """Names the place in the SPEC a value came from, for error messages."""

    def __init__(self, spec: Path):
        self.spec = spec

    def error(self, where: str, message: str) -> QloomError:
        return QloomError(f"sweep spec {self.spec}: {where}: {message}")


def _unknown(w: _Where, table: dict, known: set, where: str):
    extra = sorted(set(table) - known)
    if extra:
        raise w.error(where, f"unknown key {extra[0]!r}; known keys: {', '.join(sorted(known))}")


def _int(w, value, where, minimum):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise w.error(where, f"must be an integer >= {minimum}, not {value!r}")
    return value


def _positive(w, value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value <= 0:
        raise w.error(where, f"must be a positive number, not {value!r}")
    return float(value)


def _bool(w, value, where):
    if not isinstance(value, bool):
        raise w.error(where, f"must be true or false, not {value!r}")
    return value


def _list(w, value, where):
    if not isinstance(value, list) or not value:
        raise w.error(where, f"must be a non-empty list, not {value!r}")
    return value


def _boards(w, value, where) -> list[str]:
    from qloom.boards import BOARDS
    out = []
    for i, name in enumerate(_list(w, value, where)):
        if name not in BOARDS:
            raise w.error(f"{where}[{i}]", f"unknown board {name!r}; known boards: "
                                           f"{', '.join(sorted(BOARDS))}")
        out.append(name)
    return out


def _clocks(w, value, where) -> list[float | None]:
    out = []
    for i, c in enumerate(_list(w, value, where)):
        if c == "board":
            out.append(None)
        elif isinstance(c, (int, float)) and not isinstance(c, bool):
            out.append(_positive(w, c, f"{where}[{i}]"))
        else:
            raise w.error(f"{where}[{i}]", f"a clock is a frequency in MHz or \"board\" (the "
                                           f"board's default clock), not {c!r}")
    return out


def _fps_label(fps: float) -> str:
    # whole rates in full (fps1000000, not fps1e+06); fractional ones as %g
    return f"fps{int(fps)}" if fps == int(fps) else f"fps{fps:g}".replace("+", "")


def _folding(w, value, where, base: Path) -> Folding:
    if value == "auto":
        return Folding("auto", fold="auto")
    if value == "default":
        return Folding("default")
    if not isinstance(value, dict):
        raise w.error(where, f"a folding is \"auto\", \"default\" or a table with target_fps "
                             f"and/or fold (a fold file or \"auto\"), not {value!r}")
    _unknown(w, value, _FOLD_KEYS, where)
    fps = value.get("target_fps")
    if fps is not None:
        fps = _positive(w, fps, f"{where}.target_fps")
    fold, digest, label = value.get("fold"), None, []
    if fps is not None:
        label.append(_fps_label(fps))
    if fold == "auto":
        label.append("auto")
    elif fold is not None:
        if not isinstance(fold, str) or not fold:
            raise w.error(f"{where}.fold", f"must be \"auto\" or a fold file path, not {fold!r}")
        path = (base / fold).resolve()
        if not path.is_file():
            raise w.error(f"{where}.fold", f"fold file {fold!r} not found (looked for {path})")
        digest, fold = _sha256(path), str(path)
        label.append(f"fold-{path.stem}")
    if not label:
        raise w.error(where, "a folding table needs target_fps or fold (or write \"default\")")
    name = value.get("label", "+".join(label))
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise w.error(f"{where}.label", f"must be letters, digits, '_', '.', '+' or '-', "
                                        f"not {name!r}")
    return Folding(name, target_fps=fps, fold=fold, fold_sha256=digest)


def _model(w, table, where, base: Path) -> ModelEntry:
    if not isinstance(table, dict):
        raise w.error(where, f"must be a table with a path, not {table!r}")
    _unknown(w, table, _MODEL_KEYS, where)
    if "path" not in table or not isinstance(table["path"], str) or not table["path"]:
        raise w.error(where, f"needs path = \"MODEL.onnx\" (relative to the spec), "
                             f"not {table.get('path')!r}")
    path = (base / table["path"]).resolve()
    if not path.is_file():
        raise w.error(f"{where}.path", f"model {table['path']!r} not found (looked for {path})")
    name = table.get("name", path.stem)
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise w.error(f"{where}.name", f"must be letters, digits, '_', '.', '+' or '-', "
                                       f"not {name!r}")
    options = {}
    if "input_type" in table:
        from qloom.nn.dtypes import parse_dtype
        try:
            parse_dtype(table["input_type"])
        except QloomError as e:
            raise w.error(f"{where}.input_type", str(e)) from None
        options["input_type"] = str(table["input_type"]).upper()
    if "input_scale" in table:
        options["input_scale"] = _positive(w, table["input_scale"], f"{where}.input_scale")
    if "precision" in table:        # a float model at a fixed-point precision
        from qloom.nn.precision import Precision
        try:
            options["precision"] = str(Precision.parse(table["precision"]))
        except QloomError as e:
            raise w.error(f"{where}.precision", str(e)) from None
    return ModelEntry(name, path, _sha256(path), options)


def parse_spec(doc: dict, path: Path, *, build: bool | None = None) -> Spec:
    """The points of a parsed SPEC document; relative paths are relative to ``path``.
    ``build`` overrides the document's ``build`` (the command line's ``--no-build``)."""
    w, base = _Where(path), path.parent
    _unknown(w, doc, _TOP_KEYS, "top level")
    frames = _int(w, doc.get("frames", 16), "frames", 1)
    simulator = doc.get("simulator", "icarus")
    if simulator not in SIMULATORS:
        raise w.error("simulator", f"unknown simulator {simulator!r}; choose one of "
                                   f"{', '.join(SIMULATORS)}")
    build = _bool(w, doc.get("build", True), "build") if build is None else build
    timing_retry = _bool(w, doc.get("timing_retry", True), "timing_retry")
    seed = _int(w, doc.get("seed", 0), "seed", 0)
    cpus = _positive(w, doc.get("cpus", 1), "cpus")
    memory_gb = _positive(w, doc.get("memory_gb", 2), "memory_gb")
    boards = _boards(w, doc["boards"], "boards") if "boards" in doc else None
    clocks = _clocks(w, doc.get("clocks", ["board"]), "clocks")
    foldings = ([_folding(w, f, f"foldings[{i}]", base)
                 for i, f in enumerate(_list(w, doc["foldings"], "foldings"))]
                if "foldings" in doc else [Folding("default")])
    models = doc.get("models")
    if not isinstance(models, list) or not models:
        raise w.error("models", "needs at least one [[models]] table with a path")

    # A model may have several tables (one per board with its own foldings, say) as long
    # as the name always means the same file and no point is listed twice.
    points, names, seen = [], {}, {}
    for m, table in enumerate(models):
        where = f"models[{m}]"
        model = _model(w, table, where, base)
        if model.name in names and names[model.name][1] != model.sha256:
            raise w.error(f"{where}.name", f"model name {model.name!r} is used twice for "
                                           f"different files (also {names[model.name][0]}); "
                                           f"give one a name = \"...\"")
        names.setdefault(model.name, (where, model.sha256))
        m_boards = _boards(w, table["boards"], f"{where}.boards") if "boards" in table \
            else boards
        if m_boards is None:
            raise w.error("boards", f"no boards for model {model.name!r}: give boards = "
                                    f"[...] at the top or in its [[models]] table")
        m_clocks = _clocks(w, table["clocks"], f"{where}.clocks") if "clocks" in table \
            else clocks
        m_folds = ([_folding(w, f, f"{where}.foldings[{i}]", base)
                    for i, f in enumerate(_list(w, table["foldings"], f"{where}.foldings"))]
                   if "foldings" in table else foldings)
        labels = [f.label for f in m_folds]
        dup = next((label for label in labels if labels.count(label) > 1), None)
        if dup:
            raise w.error(f"{where}.foldings" if "foldings" in table else "foldings",
                          f"two foldings are labelled {dup!r}; give one a label = \"...\"")
        for board in dict.fromkeys(m_boards):
            for folding in m_folds:
                for clock in dict.fromkeys(m_clocks):
                    point = _point(model, board, folding, clock, frames=frames,
                                   simulator=simulator, seed=seed, build=build,
                                   timing_retry=timing_retry)
                    if point.id in seen:
                        raise w.error(where, f"point {model.name} on {board}, folding "
                                             f"{folding.label!r}, is also listed by "
                                             f"{seen[point.id]}")
                    seen[point.id] = where
                    points.append(point)
    return Spec(path, tuple(points), cpus, memory_gb)


def _point(model, board, folding, clock, **options) -> Point:
    clock_label = "board" if clock is None else f"{clock:g}MHz"
    coords = f"{model.name}-{board}-{folding.label}-{clock_label}"
    point_id = f"{coords}-{hashlib.sha256(coords.encode()).hexdigest()[:6]}"
    point = Point(id=point_id, key="", model=model, board=board, folding=folding,
                  clock_mhz=clock, **options)
    return dataclasses.replace(point, key=_key(point.inputs()))


def read_spec(path, *, build: bool | None = None) -> Spec:
    """Read and check a SPEC file; every mistake is a QloomError naming the key and value."""
    path = Path(path)
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        raise QloomError(f"sweep spec {path} not found") from None
    except OSError as e:
        raise QloomError(f"cannot read sweep spec {path}: {e.strerror or e}") from None
    try:
        doc = tomllib.loads(text.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise QloomError(f"sweep spec {path} is not valid TOML: {e}") from None
    return parse_spec(doc, path.resolve(), build=build)
