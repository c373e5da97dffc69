"""Wire shapes of the integer datatypes: how a ``DataType`` value travels on a stream lane.

Signed types are two's complement (``signed(bits)``); unsigned types and ``BIPOLAR``
(code 0 -> -1, code 1 -> +1) are ``unsigned(bits)``.
"""

from amaranth.hdl import Shape, signed, unsigned

from ..nn.dtypes import DataType

__all__ = ["shape_of"]


def shape_of(dtype: DataType) -> Shape:
    """The Amaranth shape carrying codes of ``dtype``."""
    if not isinstance(dtype, DataType):
        raise TypeError(f"Datatype must be a qloom DataType, not {dtype!r}")
    return signed(dtype.bits) if dtype.signed else unsigned(dtype.bits)
