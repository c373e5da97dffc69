"""The stream harness's ring rows as bytes <-> words, on the runner's side.

The harness's memories hold rows of ``lanes`` words of ``bits`` bits, word ``k`` of a row
in bits ``k * bits`` up (``qloom.sim.harness``). The simulator process moves rows only
(one VPI access and one ``int.from_bytes`` / ``to_bytes`` each, no numpy: its import
alone costs a tenth of a second per run); splitting rows into words, thousands of
per-word Python operations, is done here with numpy, once, outside the simulation.

A rows file is the rows back to back, ``row_bytes(bits, lanes)`` bytes each, little
endian; the last row may hold fewer words (in its low lanes) and is zero-padded.
"""

from __future__ import annotations

import numpy as np

__all__ = ["row_bytes", "words_to_rows", "rows_to_words", "unwrap_stamps"]


def row_bytes(bits: int, lanes: int) -> int:
    """Bytes of one row in a rows file."""
    return (bits * lanes + 7) // 8


def _word_bytes(bits: int) -> int:
    return (bits + 7) // 8


def words_to_rows(words, bits: int, lanes: int) -> bytes:
    """Payload integers (any sequence of ints below ``2**bits``) -> a rows file's bytes."""
    words = np.asarray(words, dtype=object).ravel()
    count, size = len(words), _word_bytes(bits)
    if bits <= 63:
        as_bytes = np.asarray(words, dtype=np.uint64).astype("<u8").view(np.uint8)
        as_bytes = as_bytes.reshape(count, 8)[:, :size]
    else:
        as_bytes = np.frombuffer(b"".join(int(w).to_bytes(size, "little") for w in words),
                                 dtype=np.uint8).reshape(count, size)
    bits_matrix = np.unpackbits(as_bytes, axis=1, bitorder="little")[:, :bits]
    rows = -(-count // lanes)
    padded = np.zeros((rows * lanes, bits), dtype=np.uint8)
    padded[:count] = bits_matrix
    packed = np.packbits(padded.reshape(rows, lanes * bits), axis=1, bitorder="little")
    return packed.tobytes()


def rows_to_words(data: bytes, count: int, bits: int, lanes: int) -> np.ndarray:
    """The first ``count`` words of a rows file: ``uint64 [count]`` for ``bits`` up to 64,
    else ``object [count]`` of Python ints."""
    size = row_bytes(bits, lanes)
    rows = -(-count // lanes)
    if len(data) < rows * size:
        raise ValueError(f"a rows file of {len(data)} bytes holds fewer than {count} words "
                         f"of {bits} bits in rows of {lanes}")
    matrix = np.frombuffer(data, dtype=np.uint8, count=rows * size).reshape(rows, size)
    bits_matrix = np.unpackbits(matrix, axis=1, bitorder="little")[:, :lanes * bits]
    bits_matrix = bits_matrix.reshape(rows * lanes, bits)[:count]
    if bits <= 64:
        wide = np.zeros((count, 64), dtype=np.uint8)
        wide[:, :bits] = bits_matrix
        return np.packbits(wide, axis=1, bitorder="little").view("<u8").ravel()
    packed = np.packbits(bits_matrix, axis=1, bitorder="little")
    out = np.empty(count, dtype=object)
    out[:] = [int.from_bytes(row.tobytes(), "little") for row in packed]
    return out


def unwrap_stamps(stamps: np.ndarray, stamp_bits: int) -> np.ndarray:
    """Whole cycle numbers (int64) from the harness's stamps of ``stamp_bits`` bits, which
    only grow and are less than ``2**stamp_bits`` cycles apart (see
    ``qloom.sim.harness_codes.STAMP_BITS``): each fall is a wrap."""
    stamps = np.asarray(stamps, dtype=np.int64)
    wraps = np.concatenate([[0], np.cumsum(stamps[1:] < stamps[:-1])]) if len(stamps) else stamps
    return stamps + (wraps.astype(np.int64) << stamp_bits)
