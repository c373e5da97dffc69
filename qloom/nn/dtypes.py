"""Integer datatypes of the integer network: what a tensor's elements may hold and how
they are encoded on a hardware wire.

Every integer tensor has a *value* (the integer the network computes with) and a *code*
(the bits on the wire). For two's-complement and unsigned types the two are the same
integer; for ``BIPOLAR`` the value is -1 or +1 and the code is 0 or 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import QloomError

__all__ = ["DataType", "BIPOLAR", "BINARY", "TERNARY", "int_type", "uint_type", "parse_dtype",
           "smallest_type"]


@dataclass(frozen=True)
class DataType:
    """An integer element type.

    ``bits`` is the width on the wire. ``signed`` selects two's complement. ``narrow``
    drops the most negative value of a signed type (``INT2`` narrow is ternary).
    ``bipolar`` is the 1-bit type of values {-1, +1}, coded 0 -> -1, 1 -> +1.
    """

    bits: int
    signed: bool
    narrow: bool = False
    bipolar: bool = False

    def __post_init__(self):
        if not isinstance(self.bits, int) or self.bits < 1:
            raise QloomError(f"datatype width must be a positive integer, not {self.bits!r}")
        if self.bipolar and (self.bits != 1 or self.signed or self.narrow):
            raise QloomError("a bipolar datatype is 1 bit, unsigned code, not narrow")
        if self.narrow and not self.signed:
            raise QloomError("only signed datatypes can be narrow")

    @property
    def name(self) -> str:
        if self.bipolar:
            return "BIPOLAR"
        if self == TERNARY:
            return "TERNARY"
        if self == BINARY:
            return "BINARY"
        base = f"{'INT' if self.signed else 'UINT'}{self.bits}"
        return base + ("N" if self.narrow else "")

    def __str__(self):
        return self.name

    @property
    def min(self) -> int:
        if self.bipolar:
            return -1
        if self.signed:
            return -(1 << (self.bits - 1)) + (1 if self.narrow else 0)
        return 0

    @property
    def max(self) -> int:
        if self.bipolar:
            return 1
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1

    def allows(self, values) -> bool:
        v = np.asarray(values)
        if v.size == 0:
            return True
        if self.bipolar:
            return bool(np.all((v == -1) | (v == 1)))
        return bool(np.all(v == np.round(v)) and v.min() >= self.min and v.max() <= self.max)

    def encode(self, values) -> np.ndarray:
        """Values -> codes (int64); for signed types the code is the signed integer."""
        v = np.asarray(values, dtype=np.int64)
        return (v + 1) // 2 if self.bipolar else v

    def decode(self, codes) -> np.ndarray:
        c = np.asarray(codes, dtype=np.int64)
        return 2 * c - 1 if self.bipolar else c

    def to_json(self) -> dict:
        return {"name": self.name, "bits": self.bits, "signed": self.signed,
                "narrow": self.narrow, "bipolar": self.bipolar,
                "min": self.min, "max": self.max}

    @classmethod
    def from_json(cls, d: dict) -> "DataType":
        return cls(bits=d["bits"], signed=d["signed"], narrow=d.get("narrow", False),
                   bipolar=d.get("bipolar", False))


BIPOLAR = DataType(1, False, bipolar=True)
BINARY = DataType(1, False)
TERNARY = DataType(2, True, narrow=True)


def int_type(bits: int, narrow: bool = False) -> DataType:
    return DataType(bits, True, narrow=narrow)


def uint_type(bits: int) -> DataType:
    return DataType(bits, False)


def smallest_type(lo: int, hi: int) -> DataType:
    """The narrowest plain (not narrow, not bipolar) type holding every integer in [lo, hi]."""
    lo, hi = int(lo), int(hi)
    if lo > hi:
        raise QloomError(f"empty integer range [{lo}, {hi}]")
    if lo >= 0:
        return uint_type(max(1, hi.bit_length()))
    bits = 1
    while not (-(1 << (bits - 1)) <= lo and hi <= (1 << (bits - 1)) - 1):
        bits += 1
    return int_type(bits)


def parse_dtype(name: str) -> DataType:
    """A datatype from its name: BIPOLAR, BINARY, TERNARY, INTn, INTnN (narrow), UINTn."""
    import re
    key = str(name).strip().upper()
    named = {"BIPOLAR": BIPOLAR, "BINARY": BINARY, "TERNARY": TERNARY}
    if key in named:
        return named[key]
    match = re.fullmatch(r"(U?)INT(\d+)(N?)", key)
    if not match or int(match[2]) < 1 or (match[1] and match[3]):
        raise QloomError(f"unknown datatype {name!r}; use BIPOLAR, BINARY, TERNARY, INTn, "
                         f"INTnN (narrow) or UINTn, e.g. INT16 or UINT1")
    bits = int(match[2])
    return uint_type(bits) if match[1] else int_type(bits, narrow=bool(match[3]))
