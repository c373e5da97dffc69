# amaranth: UnusedElaboratable=no
"""The host-link protocol: the Python codec, and the board side (``Link``) at byte level in
Amaranth simulation, with good, corrupted, mis-sized and stalled requests."""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from qloom.hw.link import Link
from qloom.hw.protocol import (ProtocolError, Status, WireFormat, crc16, decode_reply,
                               decode_request, encode_reply, encode_request)
from qloom.sim.pysim import stream_put

IN_FMT = WireFormat(lanes=3, element_bits=4, signed=False, elements=10)   # 4 words x 2 bytes
OUT_FMT = WireFormat(lanes=2, element_bits=5, signed=True, elements=3)    # 2 words x 2 bytes


def ref_accelerator(x):
    """What the toy accelerator in these tests computes from one input frame."""
    x = [int(v) for v in x]
    return np.array([sum(x) % 32 - 16, x[0] - x[9], x[4] - 8])


def test_crc16_check_value():
    assert crc16(b"123456789") == 0x29B1          # CRC-16/CCITT-FALSE check value
    assert crc16(b"") == 0xFFFF


@pytest.mark.parametrize("fmt", [IN_FMT, OUT_FMT, WireFormat(8, 1, False, 784),
                                 WireFormat(1, 8, True, 5), WireFormat(4, 3, True, 7)])
def test_pack_unpack_roundtrip(fmt):
    rng = np.random.default_rng(fmt.elements)
    lo = -(1 << (fmt.element_bits - 1)) if fmt.signed else 0
    codes = rng.integers(lo, lo + (1 << fmt.element_bits), fmt.elements)
    payload = fmt.pack(codes)
    assert len(payload) == fmt.frame_bytes == fmt.words * fmt.bytes_per_word
    assert np.array_equal(fmt.unpack(payload), codes)


def test_pack_layout():
    """Lane k at bits [k*b, (k+1)*b), two's complement, words little endian, unused lanes 0."""
    fmt = WireFormat(lanes=2, element_bits=5, signed=True, elements=3)
    assert fmt.pack([1, -1, -16]) == bytes([0x01 | (0x1F << 5) & 0xFF, 0x1F >> 3, 0x10, 0x00])
    assert WireFormat(8, 1, False, 10).pack([1, 0, 1, 1, 0, 0, 0, 1, 1, 1]) == bytes([0x8D, 0x03])


def test_codec_errors():
    with pytest.raises(ProtocolError, match=r"^a frame has 10 elements, not 9$"):
        IN_FMT.pack(np.zeros(9))
    with pytest.raises(ProtocolError, match=r"^codes outside \[-16, 15\] for 5-bit signed lanes$"):
        OUT_FMT.pack([0, 16, 0])
    with pytest.raises(ProtocolError, match=r"^a frame is 8 bytes, not 7$"):
        IN_FMT.unpack(bytes(7))
    frame = bytearray(encode_reply(Status.OK, b"\x01\x02"))
    frame[-1] ^= 1
    with pytest.raises(ProtocolError, match=r"^frame CRC mismatch"):
        decode_reply(bytes(frame))
    with pytest.raises(TypeError, match=r"^Wire format lanes must be a positive integer, not 0$"):
        WireFormat(0, 1, False, 1)


def test_codec_streaming():
    """Decoders skip noise before a sync byte and wait for complete frames."""
    req = encode_request(b"\xA5\x00\x5A")
    assert decode_request(b"\x00\x17" + req) == (b"\xA5\x00\x5A", 2 + len(req))
    assert decode_request(req[:-1]) == (None, 0)
    rep = encode_reply(Status.BAD_CRC)
    assert decode_reply(b"\xFF" + rep + b"\x5A") == ((Status.BAD_CRC, b""), 1 + len(rep))
    assert decode_reply(b"\x00\x01") == (None, 2)


def test_link_validation():
    with pytest.raises(TypeError, match=r"^Input format must be a WireFormat, not 3$"):
        Link(input_format=3, output_format=OUT_FMT)
    with pytest.raises(TypeError, match=r"^Output format must be a WireFormat, not None$"):
        Link(input_format=IN_FMT, output_format=None)
    with pytest.raises(ValueError, match=r"^Frames must be at most 65535 bytes, not 65536 / 4$"):
        Link(input_format=WireFormat(8, 8, False, 65536), output_format=OUT_FMT)
    with pytest.raises(TypeError, match=r"^Timeout must be a positive integer, not 0$"):
        Link(input_format=IN_FMT, output_format=OUT_FMT, timeout=0)


def run_link(chunks, *, timeout=200, acc_stall=0.3, registered_feed=False):
    """Drive ``chunks`` (bytes, or an int: that many idle cycles) into a Link whose
    accelerator is ``ref_accelerator`` in Python; return (replies, frames fed)."""
    dut = Link(input_format=IN_FMT, output_format=OUT_FMT, timeout=timeout,
               registered_feed=registered_feed)
    rng = random.Random(1)
    reply_bytes, fed = [], []

    async def host(ctx):
        for chunk in chunks:
            if isinstance(chunk, int):
                await ctx.tick().repeat(chunk)
            else:
                for byte in chunk:
                    await stream_put(ctx, dut.i, byte)
        await ctx.tick().repeat(400)

    async def accelerator(ctx):
        words = []
        while True:
            ready = int(rng.random() >= acc_stall)
            ctx.set(dut.feed.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.feed.valid, dut.feed.payload)
            if valid and ready:
                words.append(payload)
            if words and words[-1].last:
                ctx.set(dut.feed.ready, 0)
                lanes = [int(v) for w in words for v in w.data]
                assert [int(w.last) for w in words] == [0] * (len(words) - 1) + [1]
                x = np.array(lanes[:IN_FMT.elements])
                fed.append(x)
                out = OUT_FMT.word_values(ref_accelerator(x))
                words = []
                for k, word in enumerate(out):
                    await stream_put(ctx, dut.result,
                                     {"data": [(word >> (5 * j)) & 31 for j in range(2)],
                                      "last": int(k == len(out) - 1)})

    async def uart_tx(ctx):
        async for _, _, valid, byte in ctx.tick().sample(dut.o.valid, dut.o.payload):
            if valid and ctx.get(dut.o.ready):
                reply_bytes.append(byte)
            ctx.set(dut.o.ready, int(rng.random() >= 0.5))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(host)
    sim.add_testbench(accelerator, background=True)
    sim.add_testbench(uart_tx, background=True)
    sim.run()
    replies, buf = [], bytes(reply_bytes)
    while buf:
        reply, used = decode_reply(buf)
        assert reply is not None, f"incomplete reply bytes {buf!r}"
        replies.append(reply)
        buf = buf[used:]
    return replies, fed


@pytest.mark.parametrize("registered_feed", [False, True])
def test_link_good_and_bad_frames(registered_feed):
    rng = np.random.default_rng(7)
    frames = [rng.integers(0, 16, IN_FMT.elements) for _ in range(3)]
    good = [encode_request(IN_FMT.pack(x)) for x in frames]
    bad_crc = bytearray(encode_request(IN_FMT.pack(frames[1])))
    bad_crc[-2] ^= 0x40
    bad_payload = bytearray(good[2])
    bad_payload[5] ^= 0x01
    wrong_length = encode_request(bytes(7))
    chunks = [good[0], bytes(bad_crc), wrong_length, bytes(bad_payload), good[1],
              good[2][:6], 300, good[2]]
    replies, fed = run_link(chunks, registered_feed=registered_feed)
    expected_status = [Status.OK, Status.BAD_CRC, Status.BAD_LENGTH, Status.BAD_CRC,
                       Status.OK, Status.TIMEOUT, Status.OK]
    assert [status for status, _ in replies] == expected_status
    assert len(fed) == 3                                    # nothing bad reached the accelerator
    for x, got in zip(frames, fed):
        assert np.array_equal(got, x)
    outputs = [OUT_FMT.unpack(p) for s, p in replies if s == Status.OK]
    for x, out in zip(frames, outputs):
        assert np.array_equal(out, ref_accelerator(x))
    assert all(p == b"" for s, p in replies if s != Status.OK)


def test_registered_feed_has_no_skid_buffer():
    """A registered feed is the link's own registers (no skid buffer in front of an
    accelerator whose ready is a register), and the estimate drops that skid buffer."""
    from amaranth.hdl import Fragment
    from qloom.hw.estimate import Family, Features, calibrated
    from qloom.hw.link import estimate
    from qloom.hw.skid import skid_cost

    def submodules(link):
        return {sub[1] for sub in Fragment.get(link, None).subfragments}

    assert {"feed_skid", "result_skid"} <= submodules(Link(input_format=IN_FMT,
                                                            output_format=OUT_FMT))
    plain = submodules(Link(input_format=IN_FMT, output_format=OUT_FMT, registered_feed=True))
    assert "result_skid" in plain and "feed_skid" not in plain
    fmt = WireFormat(lanes=784, element_bits=1, signed=False, elements=784)
    for family in (Family.ICE40, Family.ECP5):
        skid = estimate(fmt, OUT_FMT, family)
        plain = estimate(fmt, OUT_FMT, family, registered_feed=True)
        feed = Features("link")
        ff, lut = skid_cost(fmt.data_bits + 1)
        feed.add("ff", "skid", ff)
        feed.add("lut", "skid", lut)
        want = calibrated(feed, family)
        assert want.ff > 1000
        assert abs(skid.ff - plain.ff - want.ff) <= 1 and abs(skid.lut - plain.lut - want.lut) <= 1
