"""The host link's protocol: a framed, checksummed byte protocol between a host and the
accelerator's streams, carried over a UART. This codec is the one the host driver
(``qloom.flows.deploy.host``) and the simulation tests use; ``qloom.hw.link.Link`` is the board
side, built from the same constants and CRC step.

Protocol (all multi-byte integers little endian)::

    host -> board   0xA5 | LEN (2) | PAYLOAD (LEN bytes) | CRC (2)
    board -> host   0x5A | STATUS (1) | LEN (2) | PAYLOAD (LEN bytes) | CRC (2)

- ``PAYLOAD`` of a request is one input frame: its stream words in order, each word padded
  to whole bytes (lane k at bits [k*element_bits, (k+1)*element_bits) of the word, two's
  complement for signed types, unused lanes zero). The ``last`` flag is not sent: the board
  sets it on the final word. ``LEN`` must equal words_per_frame * bytes_per_word.
- ``CRC`` is CRC-16/CCITT-FALSE (polynomial 0x1021, initial value 0xFFFF, no reflection, no
  final XOR) over every byte after the sync byte and before the CRC.
- The board buffers the whole request and checks ``LEN`` and ``CRC`` before it feeds a single
  word to the accelerator. A bad request is answered with a reply of ``STATUS`` != 0 and an
  empty payload, and is never fed: 1 wrong length (answered right after the length bytes;
  the rest of the request is skipped as noise), 2 bad CRC, 3 timeout (the request stalled
  mid-way for longer than the board's timeout), 4 UART error (framing error or overrun).
  While one error reply waits to be sent, the board receives nothing (bytes arriving then
  are lost to a UART overrun, which is harmless: the host resends after an error).
- A good request produces one reply with ``STATUS`` 0 whose payload is the output frame,
  packed the same way. Requests are answered in order; the host sends the next request
  after the reply to the previous one (the board receives nothing while it feeds a frame).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Cat

from ..errors import QloomError

__all__ = ["REQUEST_SYNC", "REPLY_SYNC", "CRC_INIT", "Status", "ProtocolError", "crc16",
           "crc16_step", "WireFormat", "encode_request", "decode_request", "encode_reply",
           "decode_reply"]


REQUEST_SYNC = 0xA5
REPLY_SYNC = 0x5A
CRC_INIT = 0xFFFF


class Status(enum.IntEnum):
    OK = 0
    BAD_LENGTH = 1
    BAD_CRC = 2
    TIMEOUT = 3
    UART_ERROR = 4


class ProtocolError(QloomError):
    """A byte sequence that is not a well-formed frame."""


def crc16_step(crc, byte):
    """One byte of CRC-16/CCITT-FALSE: on Python ints, or on Amaranth values (16-bit crc,
    8-bit byte), giving the unrolled XOR network in hardware."""
    c = [(crc >> k) & 1 for k in range(16)] if isinstance(crc, int) else [crc[k] for k in range(16)]
    d = [(byte >> k) & 1 for k in range(8)] if isinstance(byte, int) else [byte[k] for k in range(8)]
    for k in range(7, -1, -1):
        fb = c[15] ^ d[k]
        c = [fb, *c[:15]]
        c[5] = c[5] ^ fb
        c[12] = c[12] ^ fb
    if isinstance(crc, int):
        return sum(bit << k for k, bit in enumerate(c))
    return Cat(*c)


def crc16(payload: bytes, crc: int = CRC_INIT) -> int:
    for byte in payload:
        crc = crc16_step(crc, byte)
    return crc


@dataclass(frozen=True)
class WireFormat:
    """How one frame of a stream travels as bytes: ``elements`` values of ``element_bits``
    each (``signed``: two's complement), ``lanes`` per stream word."""

    lanes: int
    element_bits: int
    signed: bool
    elements: int

    def __post_init__(self):
        for name in ("lanes", "element_bits", "elements"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise TypeError(f"Wire format {name} must be a positive integer, not {value!r}")

    @classmethod
    def from_manifest(cls, port: dict) -> "WireFormat":
        """From a manifest's ``input`` / ``output`` entry."""
        return cls(lanes=int(port["lanes"]), element_bits=int(port["element_bits"]),
                   signed=bool(port["signed"]), elements=int(port["elements_per_frame"]))

    @property
    def data_bits(self) -> int:
        return self.lanes * self.element_bits

    @property
    def words(self) -> int:
        return math.ceil(self.elements / self.lanes)

    @property
    def bytes_per_word(self) -> int:
        return math.ceil(self.data_bits / 8)

    @property
    def frame_bytes(self) -> int:
        return self.words * self.bytes_per_word

    def word_values(self, codes) -> list[int]:
        """Wire codes of one frame -> the stream words' data bits as unsigned integers."""
        codes = np.asarray(codes, dtype=np.int64).reshape(-1)
        if codes.size != self.elements:
            raise ProtocolError(f"a frame has {self.elements} elements, not {codes.size}")
        lo = -(1 << (self.element_bits - 1)) if self.signed else 0
        hi = lo + (1 << self.element_bits) - 1
        if codes.size and (codes.min() < lo or codes.max() > hi):
            raise ProtocolError(f"codes outside [{lo}, {hi}] for {self.element_bits}-bit "
                                f"{'signed' if self.signed else 'unsigned'} lanes")
        mask = (1 << self.element_bits) - 1
        padded = np.zeros(self.words * self.lanes, dtype=np.int64)
        padded[:codes.size] = codes
        words = []
        for w in range(self.words):
            lanes = padded[w * self.lanes:(w + 1) * self.lanes]
            words.append(sum((int(v) & mask) << (k * self.element_bits)
                             for k, v in enumerate(lanes)))
        return words

    def pack(self, codes) -> bytes:
        """Wire codes of one frame -> the frame's payload bytes."""
        return b"".join(w.to_bytes(self.bytes_per_word, "little")
                        for w in self.word_values(codes))

    def unpack(self, payload: bytes) -> np.ndarray:
        """A frame's payload bytes -> its wire codes (int64)."""
        if len(payload) != self.frame_bytes:
            raise ProtocolError(f"a frame is {self.frame_bytes} bytes, not {len(payload)}")
        mask = (1 << self.element_bits) - 1
        codes = []
        for w in range(self.words):
            chunk = payload[w * self.bytes_per_word:(w + 1) * self.bytes_per_word]
            word = int.from_bytes(chunk, "little")
            for k in range(self.lanes):
                v = (word >> (k * self.element_bits)) & mask
                if self.signed and v >> (self.element_bits - 1):
                    v -= 1 << self.element_bits
                codes.append(v)
        return np.array(codes[:self.elements], dtype=np.int64)


def encode_request(payload: bytes) -> bytes:
    body = len(payload).to_bytes(2, "little") + bytes(payload)
    return bytes([REQUEST_SYNC]) + body + crc16(body).to_bytes(2, "little")


def encode_reply(status: Status, payload: bytes = b"") -> bytes:
    body = bytes([int(status)]) + len(payload).to_bytes(2, "little") + bytes(payload)
    return bytes([REPLY_SYNC]) + body + crc16(body).to_bytes(2, "little")


def _decode(buf: bytes, sync: int, header: int):
    """(body, consumed) of the first complete frame in ``buf``, or (None, skipped) when
    ``buf`` holds no complete frame yet. Bytes before a sync byte are skipped."""
    start = bytes(buf).find(bytes([sync]))
    if start < 0:
        return None, len(buf)
    if len(buf) < start + 1 + header:
        return None, start
    length = int.from_bytes(buf[start + header - 1:start + header + 1], "little")
    end = start + 1 + header + length + 2
    if len(buf) < end:
        return None, start
    body = bytes(buf[start + 1:end - 2])
    if crc16(body) != int.from_bytes(buf[end - 2:end], "little"):
        raise ProtocolError(f"frame CRC mismatch: computed {crc16(body):#06x}, received "
                            f"{int.from_bytes(buf[end - 2:end], 'little'):#06x}")
    return body, end


def decode_request(buf: bytes):
    """(payload, consumed): the first request in ``buf``, payload None if incomplete."""
    body, consumed = _decode(buf, REQUEST_SYNC, 2)
    return (None if body is None else body[2:]), consumed


def decode_reply(buf: bytes):
    """((status, payload), consumed): the first reply in ``buf``, None if incomplete."""
    body, consumed = _decode(buf, REPLY_SYNC, 3)
    return (None if body is None else (Status(body[0]), body[3:])), consumed
