import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from qloom.nn.dtypes import BINARY, BIPOLAR, TERNARY, DataType, int_type, uint_type
from qloom.sim.packing import (ints_to_words, pack_frames, padding, unpack_frames,
                               words_per_frame, words_to_ints)

DTYPES = [BIPOLAR, BINARY, TERNARY, int_type(2), int_type(4), int_type(8, narrow=True),
          uint_type(3), int_type(16), uint_type(32), int_type(32)]


def _values(draw, dtype, frames, elements):
    if dtype.bipolar:
        return np.array(draw(st.lists(st.sampled_from([-1, 1]), min_size=frames * elements,
                                      max_size=frames * elements))).reshape(frames, elements)
    items = st.integers(dtype.min, dtype.max)
    flat = draw(st.lists(items, min_size=frames * elements, max_size=frames * elements))
    return np.array(flat, dtype=np.int64).reshape(frames, elements)


@st.composite
def frames_case(draw):
    dtype = draw(st.sampled_from(DTYPES))
    lanes = draw(st.integers(1, 9))
    elements = draw(st.integers(1, 23))
    frames = draw(st.integers(1, 4))
    return dtype, lanes, _values(draw, dtype, frames, elements)


@settings(max_examples=150, deadline=None)
@given(frames_case())
def test_round_trip(case):
    dtype, lanes, values = case
    elements = values.shape[1]
    codes = pack_frames(values, dtype, lanes)
    assert codes.shape == (values.shape[0], words_per_frame(elements, lanes), lanes)
    assert not padding(codes, elements).any()
    ints = words_to_ints(codes, dtype)
    assert all(0 <= x < 1 << (lanes * dtype.bits + 1) for x in ints.flat)
    back, last = ints_to_words(ints, dtype, lanes)
    np.testing.assert_array_equal(back, codes)
    np.testing.assert_array_equal(last[:, -1], True)
    np.testing.assert_array_equal(last[:, :-1], False)
    np.testing.assert_array_equal(unpack_frames(back, dtype, elements), values)


def test_wire_layout_by_hand():
    # INT4, 3 lanes: lane k in bits [4k, 4k+4), two's complement, last = bit 12
    codes = pack_frames(np.array([[-1, 2, -8, 7]]), int_type(4), 3)
    np.testing.assert_array_equal(codes, [[[-1, 2, -8], [7, 0, 0]]])
    ints = words_to_ints(codes, int_type(4))
    assert [hex(x) for x in ints[0]] == ["0x82f", "0x1007"]


def test_bipolar_codes():
    codes = pack_frames(np.array([[-1, 1, 1]]), BIPOLAR, 2)
    np.testing.assert_array_equal(codes, [[[0, 1], [1, 0]]])
    assert list(words_to_ints(codes, BIPOLAR)[0]) == [0b10, 0b101]


def test_wider_than_64_bits():
    dtype = int_type(16)
    values = np.array([[-32768, 32767, -1, 1, 0, 12345]])
    ints = words_to_ints(pack_frames(values, dtype, 6), dtype)
    assert ints[0, 0] >> 96 == 1 and ints[0, 0].bit_length() == 97
    codes, _ = ints_to_words(ints, dtype, 6)
    np.testing.assert_array_equal(unpack_frames(codes, dtype, 6), values)


def test_padding_reports_unused_lanes():
    codes = np.array([[[1, 2, 3], [4, 5, 6]]])
    np.testing.assert_array_equal(padding(codes, 4), [[5, 6]])


@pytest.mark.parametrize("call, error, message", [
    (lambda: pack_frames(np.array([[0, 16]]), uint_type(4), 2), ValueError,
     r"Values must lie in UINT4 \[0, 15\], not in \[0, 16\]"),
    (lambda: pack_frames(np.array([[1, 0]]), BIPOLAR, 2), ValueError,
     r"BIPOLAR values must be -1 or \+1"),
    (lambda: pack_frames(np.array([[0]]), "UINT4", 2), TypeError,
     r"Datatype must be a qloom DataType, not 'UINT4'"),
    (lambda: pack_frames(np.array([[0]]), BINARY, 0), TypeError,
     r"Lane count must be a positive integer, not 0"),
    (lambda: pack_frames(np.int64(3), BINARY, 1), ValueError,
     r"Values must have a leading frame axis, not shape \(\)"),
    (lambda: unpack_frames(np.zeros((1, 2)), BINARY, 2), ValueError,
     r"Codes must have shape \[frames, words, lanes\], not \(1, 2\)"),
    (lambda: unpack_frames(np.zeros((1, 2, 2)), BINARY, 5), ValueError,
     r"2 words of 2 lanes cannot hold 5 elements"),
    (lambda: unpack_frames(np.zeros((1, 3, 2)), BINARY, 3), ValueError,
     r"3 elements take 2 words of 2 lanes, not 3"),
    (lambda: unpack_frames(np.zeros((1, 1, 2)), BINARY, -1), TypeError,
     r"Element count must be a non-negative integer, not -1"),
    (lambda: words_to_ints(np.array([[[8]]]), int_type(4)), ValueError,
     r"Codes must fit 4-bit signed lanes \[-8, 7\], not \[8, 8\]"),
    (lambda: words_to_ints(np.zeros((1, 0, 2)), BINARY), ValueError,
     r"Codes must have shape \[frames, words >= 1, lanes\], not \(1, 0, 2\)"),
    (lambda: ints_to_words(np.array([[1 << 9]], dtype=object), uint_type(4), 2), ValueError,
     r"Payload integers must fit 9 bits"),
    (lambda: ints_to_words(np.array([1]), uint_type(4), 2), ValueError,
     r"Payload integers must have shape \[frames, words\], not \(1,\)"),
])
def test_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_datatype_from_json_packs_like_the_constant():
    # a DataType built from JSON packs exactly like the constant it describes
    dtype = DataType.from_json(TERNARY.to_json())
    np.testing.assert_array_equal(pack_frames(np.array([[-1, 0, 1]]), dtype, 3),
                                  pack_frames(np.array([[-1, 0, 1]]), TERNARY, 3))
