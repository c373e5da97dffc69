"""The harness's rows files (qloom.sim.harness_rows): words packed into ring rows as the
harness's memories hold them, and back; cycle stamps unwrapped."""

import numpy as np
import pytest

from qloom.sim.harness_rows import row_bytes, rows_to_words, unwrap_stamps, words_to_rows


def _rows_by_hand(words, bits, lanes):
    """The reference: each row an integer with word k at bit k * bits."""
    out = b""
    for first in range(0, len(words), lanes):
        value = sum(int(w) << (k * bits) for k, w in enumerate(words[first:first + lanes]))
        out += value.to_bytes(row_bytes(bits, lanes), "little")
    return out


@pytest.mark.parametrize("bits", [1, 7, 9, 17, 32, 63, 64, 65, 257])
@pytest.mark.parametrize("lanes,count", [(2, 5), (4, 8), (32, 100), (64, 1)])
def test_round_trip_and_layout(bits, lanes, count):
    rng = np.random.default_rng(bits * 1000 + lanes)
    words = [int.from_bytes(rng.bytes((bits + 7) // 8), "little") % (1 << bits)
             for _ in range(count)]
    words[0] = (1 << bits) - 1                      # all ones, the top bit included
    data = words_to_rows(np.asarray(words, dtype=object), bits, lanes)
    assert data == _rows_by_hand(words, bits, lanes)
    back = rows_to_words(data, count, bits, lanes)
    assert [int(w) for w in back] == words
    assert back.dtype == (np.uint64 if bits <= 64 else object)


def test_fewer_words_than_the_file_holds():
    data = _rows_by_hand([5, 6, 7, 8, 9], 9, 4)
    assert rows_to_words(data, 3, 9, 4).tolist() == [5, 6, 7]


def test_short_file_is_an_error():
    with pytest.raises(ValueError, match="fewer than 9 words"):
        rows_to_words(bytes(row_bytes(9, 4) * 2), 9, 9, 4)


def test_unwrap_stamps():
    stamps = np.array([5, 2**32 - 1, 3, 3, 2**32 - 2, 0], dtype=np.uint64)
    assert unwrap_stamps(stamps, 32).tolist() == [
        5, 2**32 - 1, 2**32 + 3, 2**32 + 3, 2**33 - 2, 2**33]
    assert unwrap_stamps(np.zeros(0, dtype=np.uint64), 32).tolist() == []
