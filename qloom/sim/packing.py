"""Frames of integer values <-> stream words <-> payload integers.

A frame of ``E`` elements (channels-last flattened order) travels as ``ceil(E / lanes)``
words; element ``k`` of word ``w`` is frame element ``w * lanes + k`` and the unused lanes
of a final partial word are zero. On the wire a word is one payload integer
(``data.StructLayout({"data": data.ArrayLayout(shape, lanes), "last": 1})``): lane ``k``
holds the *code* of its element (two's complement for signed types, see
``DataType.encode``) in bits ``[k * bits, (k + 1) * bits)`` and ``last`` is the top bit,
set on the last word of every frame.

Payloads can be wider than 64 bits, so payload integers are Python ints in numpy
``object`` arrays.
"""

from __future__ import annotations

import numpy as np

from ..nn.dtypes import DataType

__all__ = ["words_per_frame", "pack_frames", "unpack_frames", "padding", "words_to_ints",
           "ints_to_words"]


def _check_dtype(dtype):
    if not isinstance(dtype, DataType):
        raise TypeError(f"Datatype must be a qloom DataType, not {dtype!r}")


def _check_lanes(lanes):
    if not isinstance(lanes, int) or isinstance(lanes, bool) or lanes < 1:
        raise TypeError(f"Lane count must be a positive integer, not {lanes!r}")


def words_per_frame(elements: int, lanes: int) -> int:
    """Words carrying a frame of ``elements`` elements on a stream ``lanes`` wide."""
    _check_lanes(lanes)
    return -(-elements // lanes)


def pack_frames(values, dtype: DataType, lanes: int) -> np.ndarray:
    """Integer values ``[N, ...]`` -> codes ``int64 [N, words, lanes]``, one frame per row,
    the final word zero-padded."""
    _check_dtype(dtype)
    _check_lanes(lanes)
    values = np.asarray(values)
    if values.ndim < 1:
        raise ValueError(f"Values must have a leading frame axis, not shape {values.shape}")
    if dtype.bipolar and not dtype.allows(values):
        raise ValueError("BIPOLAR values must be -1 or +1")
    if not dtype.allows(values):
        raise ValueError(f"Values must lie in {dtype} [{dtype.min}, {dtype.max}], not in "
                         f"[{values.min()}, {values.max()}]")
    flat = values.reshape(values.shape[0], -1)
    elements = flat.shape[1]
    words = words_per_frame(elements, lanes)
    codes = np.zeros((flat.shape[0], words * lanes), dtype=np.int64)
    codes[:, :elements] = dtype.encode(flat)
    return codes.reshape(flat.shape[0], words, lanes)


def unpack_frames(codes, dtype: DataType, elements: int) -> np.ndarray:
    """Codes ``[N, words, lanes]`` -> values ``int64 [N, elements]``, dropping the padding
    lanes of the final word (``padding`` returns those)."""
    _check_dtype(dtype)
    codes = np.asarray(codes)
    if codes.ndim != 3:
        raise ValueError(f"Codes must have shape [frames, words, lanes], not {codes.shape}")
    if not isinstance(elements, int) or elements < 0:
        raise TypeError(f"Element count must be a non-negative integer, not {elements!r}")
    n, words, lanes = codes.shape
    if words * lanes < elements:
        raise ValueError(f"{words} words of {lanes} lanes cannot hold {elements} elements")
    if words * lanes - elements >= lanes:
        raise ValueError(f"{elements} elements take {words_per_frame(elements, lanes)} "
                         f"words of {lanes} lanes, not {words}")
    return dtype.decode(codes.reshape(n, words * lanes)[:, :elements])


def padding(codes, elements: int) -> np.ndarray:
    """The codes of the unused lanes after ``elements`` elements: ``[N, words * lanes -
    elements]``, all zero on a well-formed stream."""
    codes = np.asarray(codes)
    if codes.ndim != 3:
        raise ValueError(f"Codes must have shape [frames, words, lanes], not {codes.shape}")
    return codes.reshape(codes.shape[0], -1)[:, elements:]


def _lane_mask(dtype):
    return (1 << dtype.bits) - 1


def words_to_ints(codes, dtype: DataType) -> np.ndarray:
    """Codes ``[N, words, lanes]`` -> payload integers ``object [N, words]`` (Python ints),
    with ``last`` (bit ``lanes * dtype.bits``) set on the final word of each frame."""
    _check_dtype(dtype)
    codes = np.asarray(codes, dtype=np.int64)
    if codes.ndim != 3 or codes.shape[1] < 1:
        raise ValueError(f"Codes must have shape [frames, words >= 1, lanes], "
                         f"not {codes.shape}")
    lo = -(1 << (dtype.bits - 1)) if dtype.signed else 0
    hi = (1 << (dtype.bits - 1)) - 1 if dtype.signed else _lane_mask(dtype)
    if codes.size and (codes.min() < lo or codes.max() > hi):
        raise ValueError(f"Codes must fit {dtype.bits}-bit {'signed' if dtype.signed else 'unsigned'}"
                         f" lanes [{lo}, {hi}], not [{codes.min()}, {codes.max()}]")
    lanes = codes.shape[2]
    shifts = np.array([k * dtype.bits for k in range(lanes)], dtype=object)
    lane_bits = codes.astype(object) & _lane_mask(dtype)
    ints = (lane_bits << shifts).sum(axis=2) if lanes > 1 else lane_bits[:, :, 0]
    ints = np.array(ints, dtype=object).reshape(codes.shape[:2])
    ints[:, -1] += 1 << (lanes * dtype.bits)
    return ints


def ints_to_words(ints, dtype: DataType, lanes: int) -> tuple[np.ndarray, np.ndarray]:
    """Payload integers ``[N, words]`` -> (codes ``int64 [N, words, lanes]``,
    ``last`` flags ``bool [N, words]``). The inverse of ``words_to_ints``."""
    _check_dtype(dtype)
    _check_lanes(lanes)
    ints = np.asarray(ints, dtype=object)
    if ints.ndim != 2:
        raise ValueError(f"Payload integers must have shape [frames, words], not {ints.shape}")
    width = lanes * dtype.bits
    if ints.size and (min(ints.flat) < 0 or max(ints.flat) >> (width + 1)):
        raise ValueError(f"Payload integers must fit {width + 1} bits")
    mask = _lane_mask(dtype)
    codes = np.empty(ints.shape + (lanes,), dtype=np.int64)
    for k in range(lanes):
        codes[..., k] = (ints >> (k * dtype.bits)) & mask
    if dtype.signed:
        codes -= (codes >> (dtype.bits - 1)) << dtype.bits
    last = (ints >> width).astype(bool)
    return codes, last
