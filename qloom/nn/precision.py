"""Fixed-point precisions for float models, as hls4ml users write them.

``fixed<W,I>`` is hls4ml's ``ap_fixed<W,I>``: W bits of which I are integer bits including
the sign, so the step (QONNX scale) is ``2**-(W-I)`` and the range
``[-2**(I-1), 2**(I-1) - step]``. ``ufixed<W,I>`` is unsigned (``[0, 2**I - step]``),
``int<W>`` / ``uint<W>`` are ``fixed<W,W>`` / ``ufixed<W,W>``. ``ap_`` prefixes are accepted.

Rounding and overflow (``PrecisionConfig``): qloom's default is ``round`` (to nearest,
ties to even: QONNX ``ROUND``/``HALF_EVEN``, hls4ml's ``AP_RND_CONV``) with ``saturate``.
hls4ml defaults to ``AP_TRN`` (truncate, QONNX ``FLOOR``) and ``AP_WRAP``; truncation
biases every layer by half a step downwards, which adds up through a network (a float
16-64-32-32-5 MLP at fixed<16,6>: argmax agreement with the float model 97.7% truncating,
99.7% rounding, max abs error 0.0074 against 0.0009), while rounding costs one constant
in the requantizer's adder. ``truncate`` stays selectable for hls4ml's behaviour. A QONNX
``Quant`` always clips, so wrapping cannot be written in the quantized model that proves
what the hardware computes: qloom refuses ``wrap`` instead of building hardware that
differs from that proof.

Per-layer overrides (``PrecisionConfig.from_file``, TOML or JSON), like hls4ml's
per-layer configuration::

    [model]                 # all optional
    precision = "fixed<16,6>"
    input = "fixed<16,6>"
    rounding = "round"      # (half to even, default) or "truncate", "round_half_up"
    overflow = "saturate"

    [layers.dense_1]        # the node name in the ONNX file
    weight = "fixed<8,2>"
    bias = "fixed<8,2>"
    result = "fixed<8,4>"
    accumulator = "fixed<16,4>"    # after the bias; default: exact (never overflows)

    [layers.sigmoid_1]      # a nonlinear activation: its table index and its result
    table = "fixed<12,4>"   # default (4,096 entries over [-8, 8)); hls4ml's: fixed<10,4>
    result = "ufixed<16,0>"
"""

from __future__ import annotations

import enum
import json
import os
import re
from dataclasses import dataclass, field

from ..errors import QloomError

__all__ = ["Precision", "Rounding", "Overflow", "LayerPrecision", "PrecisionConfig",
           "PrecisionError", "MAX_BITS", "TABLE_INDEX"]

MAX_BITS = 16       # the widest quantizer qloom lowers (passes/quantizers.py)


class PrecisionError(QloomError):
    """A precision string, rounding/overflow mode or precision file qloom cannot use."""


class Rounding(enum.Enum):
    """How a value between two steps is rounded, with the qonnx ``rounding_mode`` of it."""
    TRUNCATE = "FLOOR"          # hls4ml AP_TRN: toward -inf
    ROUND = "HALF_EVEN"         # to nearest, ties to even (qonnx ROUND is the same)
    ROUND_HALF_UP = "HALF_UP"   # to nearest, ties up (hls4ml AP_RND)

    @classmethod
    def parse(cls, text) -> "Rounding":
        if isinstance(text, cls):
            return text
        key = str(text).strip().lower()
        for name, mode in (("truncate", cls.TRUNCATE), ("trn", cls.TRUNCATE),
                           ("floor", cls.TRUNCATE), ("round", cls.ROUND),
                           ("half_even", cls.ROUND), ("rnd_conv", cls.ROUND),
                           ("round_half_up", cls.ROUND_HALF_UP), ("half_up", cls.ROUND_HALF_UP),
                           ("rnd", cls.ROUND_HALF_UP)):
            if key in (name, f"ap_{name}"):
                return mode
        raise PrecisionError(f"rounding mode {text!r} is not supported; use 'round' "
                             f"(half to even, default), 'truncate' or 'round_half_up'")


class Overflow(enum.Enum):
    SATURATE = "saturate"
    WRAP = "wrap"

    @classmethod
    def parse(cls, text) -> "Overflow":
        if isinstance(text, cls):
            mode = text
        else:
            key = str(text).strip().lower().removeprefix("ap_")
            mode = {"saturate": cls.SATURATE, "sat": cls.SATURATE,
                    "wrap": cls.WRAP}.get(key)
            if mode is None:
                raise PrecisionError(f"overflow mode {text!r} is not supported; use "
                                     f"'saturate' (default)")
        if mode is cls.WRAP:
            raise PrecisionError(
                "overflow mode 'wrap' (hls4ml's AP_WRAP) is not supported: a QONNX Quant "
                "always saturates, so quantized.onnx could not state what wrapping hardware "
                "computes; use 'saturate' (qloom's default)")
        return mode


_PATTERN = re.compile(r"^\s*(?:ap_)?(fixed|ufixed|int|uint)\s*<\s*(-?\d+)\s*(?:,\s*(-?\d+)\s*)?>\s*$")


@dataclass(frozen=True)
class Precision:
    """One fixed-point type: ``width`` bits, ``integer`` of them integer bits (sign
    included when ``signed``)."""
    width: int
    integer: int
    signed: bool = True

    def __post_init__(self):
        for what, v in (("width", self.width), ("integer bits", self.integer)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"Precision {what} must be an integer, not {v!r}")
        if not 1 <= self.width <= MAX_BITS or (self.signed and self.width < 2):
            raise PrecisionError(
                f"{self}: width {self.width} is not supported; qloom quantizes to "
                f"{2 if self.signed else 1} to {MAX_BITS} bits")
        if self.integer > self.width + 32 or self.integer < -32:
            raise PrecisionError(f"{self}: {self.integer} integer bits is out of range")

    @classmethod
    def parse(cls, text) -> "Precision":
        """``fixed<16,6>``, ``ufixed<8,3>``, ``int<8>``, ``uint<4>`` (``ap_`` optional)."""
        if isinstance(text, cls):
            return text
        if not isinstance(text, str):
            raise PrecisionError(f"a precision must be a string like 'fixed<16,6>', not "
                                 f"{text!r}")
        m = _PATTERN.match(text)
        if m is None:
            raise PrecisionError(
                f"precision {text!r} is not understood; write fixed<W,I> (W bits, I integer "
                f"bits with the sign, like hls4ml's ap_fixed), ufixed<W,I>, int<W> or uint<W>")
        kind, width, integer = m.group(1), int(m.group(2)), m.group(3)
        if kind in ("int", "uint"):
            if integer is not None:
                raise PrecisionError(f"precision {text!r}: {kind}<W> takes one number")
            integer = width
        elif integer is None:
            raise PrecisionError(f"precision {text!r}: {kind}<W,I> needs the integer bits I")
        return cls(width, int(integer), signed=not kind.startswith("u"))

    @property
    def frac_bits(self) -> int:
        return self.width - self.integer

    @property
    def scale(self) -> float:
        """The QONNX scale: one step of this type."""
        return 2.0 ** -self.frac_bits

    @property
    def min(self) -> float:
        return -(2.0 ** (self.width - 1)) * self.scale if self.signed else 0.0

    @property
    def max(self) -> float:
        top = 2 ** (self.width - 1) if self.signed else 2 ** self.width
        return (top - 1) * self.scale

    def __str__(self):
        u = "" if self.signed else "u"
        if self.integer == self.width:
            return f"{u}int<{self.width}>"
        return f"{u}fixed<{self.width},{self.integer}>"


# A nonlinear activation is a table of its input quantized to fixed<12,4>: 4,096 entries
# over [-8, 8), the widest table qloom builds (passes/lookup.py). hls4ml's tables have
# 1,024 entries (fixed<10,4>, selectable per layer); on a float MLP through Sigmoid, Tanh,
# Elu, Selu and LeakyRelu at fixed<16,6>, argmax agreement with the float model was 99.3%
# with 4,096 entries and 98.3% with 1,024 (tests/float_models.py activations_mlp).
TABLE_INDEX = Precision(12, 4)


@dataclass(frozen=True)
class LayerPrecision:
    """The precisions of one layer; None: the model's default (accumulator: exact)."""
    weight: Precision | None = None
    bias: Precision | None = None
    result: Precision | None = None
    accumulator: Precision | None = None
    table: Precision | None = None          # a nonlinear activation's input (table index)

    KEYS = ("weight", "bias", "result", "accumulator", "table")

    @classmethod
    def from_dict(cls, d: dict, where: str) -> "LayerPrecision":
        if not isinstance(d, dict):
            raise PrecisionError(f"{where}: expected a table of precisions, not {d!r}")
        unknown = sorted(set(d) - set(cls.KEYS))
        if unknown:
            raise PrecisionError(f"{where}: unknown key {unknown[0]!r} (allowed: "
                                 f"{', '.join(cls.KEYS)})")
        return cls(**{k: _parse_in(v, f"{where}.{k}") for k, v in d.items()})


def _parse_in(value, where: str) -> Precision:
    try:
        return Precision.parse(value)
    except PrecisionError as e:
        raise PrecisionError(f"{where}: {e}") from None


@dataclass(frozen=True)
class PrecisionConfig:
    """The whole model's precision: a default, the input's, modes and per-layer overrides."""
    default: Precision
    input: Precision | None = None
    rounding: Rounding = Rounding.ROUND
    overflow: Overflow = Overflow.SATURATE
    layers: dict = field(default_factory=dict)     # node name -> LayerPrecision

    _MODEL_KEYS = ("precision", "input", "rounding", "overflow")

    @classmethod
    def make(cls, precision=None, precision_file=None, *, rounding=None,
             overflow=None) -> "PrecisionConfig":
        """From the ``--precision`` string and/or ``--precision-file``: the string, when
        given, is the default; the file adds per-layer overrides (and may set the
        default itself)."""
        base = cls.from_file(precision_file) if precision_file is not None else None
        default = Precision.parse(precision) if precision is not None else \
            (base.default if base is not None else None)
        if default is None:
            raise PrecisionError("no precision given: pass precision='fixed<16,6>' or a "
                                 "precision file with [model] precision = ...")
        return cls(default=default, input=base.input if base else None,
                   rounding=Rounding.parse(rounding) if rounding is not None else
                   (base.rounding if base else Rounding.ROUND),
                   overflow=Overflow.parse(overflow) if overflow is not None else
                   (base.overflow if base else Overflow.SATURATE),
                   layers=dict(base.layers) if base else {})

    @classmethod
    def from_file(cls, path) -> "PrecisionConfig":
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise PrecisionError(f"precision file not found: {path}")
        try:
            if path.endswith(".toml"):
                import tomllib
                with open(path, "rb") as f:
                    data = tomllib.load(f)
            else:
                with open(path) as f:
                    data = json.load(f)
        except (ValueError, OSError) as e:     # tomllib and json errors are ValueErrors
            raise PrecisionError(f"cannot read precision file {path}: {e}") from None
        return cls.from_dict(data, path)

    @classmethod
    def from_dict(cls, data: dict, where: str = "precision file") -> "PrecisionConfig":
        if not isinstance(data, dict):
            raise PrecisionError(f"{where}: expected a table with 'model' and 'layers'")
        unknown = sorted(set(data) - {"model", "layers"})
        if unknown:
            raise PrecisionError(f"{where}: unknown key {unknown[0]!r} (allowed: model, "
                                 f"layers)")
        model = data.get("model", {})
        bad = sorted(set(model) - set(cls._MODEL_KEYS))
        if bad:
            raise PrecisionError(f"{where}: unknown key model.{bad[0]} (allowed: "
                                 f"{', '.join(cls._MODEL_KEYS)})")
        default = model.get("precision")
        layers = data.get("layers", {})
        if not isinstance(layers, dict):
            raise PrecisionError(f"{where}: 'layers' must be a table of layer names")
        return cls(
            default=_parse_in(default, f"{where}: model.precision") if default else None,
            input=_parse_in(model["input"], f"{where}: model.input") if "input" in model
            else None,
            rounding=Rounding.parse(model.get("rounding", "round")),
            overflow=Overflow.parse(model.get("overflow", "saturate")),
            layers={name: LayerPrecision.from_dict(v, f"{where}: layers.{name}")
                    for name, v in layers.items()})

    def layer(self, name: str) -> LayerPrecision:
        """The resolved precisions of node ``name``: overrides, else the default."""
        own = self.layers.get(name, LayerPrecision())
        return LayerPrecision(weight=own.weight or self.default, bias=own.bias or self.default,
                              result=own.result or self.default, accumulator=own.accumulator,
                              table=own.table or TABLE_INDEX)

    @property
    def input_precision(self) -> Precision:
        return self.input or self.default

    def describe(self) -> dict:
        return {"precision": str(self.default), "input": str(self.input_precision),
                "rounding": self.rounding.name.lower(), "overflow": self.overflow.value,
                "layers": {n: {k: str(getattr(lp, k)) for k in LayerPrecision.KEYS
                               if getattr(lp, k) is not None}
                           for n, lp in self.layers.items()}}
