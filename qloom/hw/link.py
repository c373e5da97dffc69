"""The host link: a framed, checksummed byte protocol between a host and the accelerator's
streams, carried over a UART. The Python codec here is the one the host driver
(``qloom.flows.host``) and the simulation tests use; ``Link`` is the board side.

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
from amaranth.hdl import Cat, Module, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..errors import QloomError

__all__ = ["REQUEST_SYNC", "REPLY_SYNC", "Status", "ProtocolError", "crc16", "crc16_step",
           "WireFormat", "encode_request", "decode_request", "encode_reply", "decode_reply",
           "frame_layout", "Link"]

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


def frame_layout(fmt: WireFormat) -> data.StructLayout:
    """The accelerator stream payload for ``fmt``: its lanes (as raw codes) and ``last``."""
    return data.StructLayout({"data": data.ArrayLayout(unsigned(fmt.element_bits), fmt.lanes),
                              "last": 1})


class Link(wiring.Component):
    """The board side of the protocol.

    ``i`` takes request bytes from the UART receiver, ``o`` gives reply bytes to the UART
    transmitter; ``feed`` streams checked input frames into the accelerator and ``result``
    takes its output frames. ``rx_error`` is the UART receiver's error pulse; ``error``
    pulses (one cycle late) whenever an error reply is queued, for an LED. ``timeout`` is the number of
    idle clock cycles after which a half-received request is dropped.
    """

    def __init__(self, *, input_format: WireFormat, output_format: WireFormat,
                 timeout: int = 1 << 20):
        for name, fmt in (("Input format", input_format), ("Output format", output_format)):
            if not isinstance(fmt, WireFormat):
                raise TypeError(f"{name} must be a WireFormat, not {fmt!r}")
        if input_format.frame_bytes > 0xFFFF or output_format.frame_bytes > 0xFFFF:
            raise ValueError(f"Frames must be at most 65535 bytes, not "
                             f"{input_format.frame_bytes} / {output_format.frame_bytes}")
        if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 1:
            raise TypeError(f"Timeout must be a positive integer, not {timeout!r}")
        self.input_format, self.output_format, self.timeout = input_format, output_format, timeout
        super().__init__({
            "i": In(stream.Signature(8)), "o": Out(stream.Signature(8)),
            "feed": Out(stream.Signature(frame_layout(input_format))),
            "result": In(stream.Signature(frame_layout(output_format))),
            "rx_error": In(1), "error": Out(1)})

    def elaborate(self, platform):
        m = Module()
        fin, fout = self.input_format, self.output_format
        # The request is buffered as bytes (one block RAM even for wide, shallow frames);
        # words are assembled from it while feeding, two cycles a byte.
        m.submodules.buffer = buffer = Memory(shape=unsigned(8), depth=fin.frame_bytes,
                                              init=[])
        wp, rp = buffer.write_port(), buffer.read_port()

        err_code = Signal(3)           # the error reply waiting for the transmitter (0: none)
        new_error = Signal(3)
        report = Signal(3)             # an error the receiver waits to hand over
        sent_error = Signal()
        m.d.sync += self.error.eq(new_error != 0)       # for an LED: registered
        with m.If(new_error != 0):
            m.d.sync += err_code.eq(new_error)
        with m.Elif(sent_error):
            m.d.sync += err_code.eq(0)

        # Receiver: hunt, length, payload into the buffer, CRC check, then feed.
        rx_crc = Signal(16)
        word = Signal(8 * fin.bytes_per_word)
        nbyte = Signal(range(fin.bytes_per_word))
        nword = Signal(range(fin.words))
        addr = Signal(range(fin.frame_bytes + 1))
        idle = Signal(range(self.timeout + 1))
        expired = Signal()
        len_lo_ok, crc_lo_ok, addr_last = Signal(), Signal(), Signal()

        # Input stage: each byte is registered together with the comparisons the receiver
        # needs, so that no path runs from the UART through a wide compare into the state
        # machine. (A byte arrives at most every 10 * divisor cycles: this costs nothing.)
        b, byte, b_error, take = Signal(8), Signal(), Signal(), Signal()
        b_sync, b_len_lo, b_len_hi, b_crc_hi = Signal(), Signal(), Signal(), Signal()
        payload = self.i.payload
        m.d.comb += self.i.ready.eq(~byte)
        # ``idle`` counts the cycles since the last byte; every request state is entered
        # right after one, so a stalled request times out ``timeout`` cycles after its
        # last byte.
        with m.If(self.i.valid & ~byte):
            m.d.sync += idle.eq(0)
        with m.Else():
            m.d.sync += idle.eq(idle + 1)
        with m.If(self.i.valid & ~byte):
            m.d.sync += [b.eq(payload), byte.eq(1), b_sync.eq(payload == REQUEST_SYNC),
                         b_len_lo.eq(payload == (fin.frame_bytes & 0xFF)),
                         b_len_hi.eq(payload == (fin.frame_bytes >> 8)),
                         b_crc_hi.eq(payload == rx_crc[8:])]
        with m.Elif(take):
            m.d.sync += byte.eq(0)
        m.d.sync += [b_error.eq(self.rx_error),
                     expired.eq((idle == self.timeout - 1) & ~byte)]
        m.d.comb += [wp.addr.eq(addr), wp.data.eq(b), rp.addr.eq(addr),
                     self.feed.payload.data.eq(word[:fin.data_bits])]

        with m.FSM(name="rx"):
            with m.State("HUNT"):
                m.d.comb += take.eq(1)
                m.d.sync += [rx_crc.eq(CRC_INIT), nbyte.eq(0), nword.eq(0), addr.eq(0),
                             addr_last.eq(fin.frame_bytes == 1)]
                with m.If(byte & b_sync):
                    m.next = "LEN0"

            with m.State("REPORT"):    # one error reply at a time; bytes wait meanwhile
                with m.If(err_code == 0):
                    m.d.comb += new_error.eq(report)
                    m.next = "HUNT"

            def receiving(next_state, *, crc=True):
                """Common to the states that take a byte: CRC, timeout, UART errors."""
                with m.If(b_error):
                    m.d.sync += report.eq(Status.UART_ERROR)
                    m.next = "REPORT"
                with m.Elif(expired):
                    m.d.sync += report.eq(Status.TIMEOUT)
                    m.next = "REPORT"
                with m.Elif(byte):
                    m.d.comb += take.eq(1)
                    if crc:
                        m.d.sync += rx_crc.eq(crc16_step(rx_crc, b))
                    if next_state is not None:
                        m.next = next_state

            with m.State("LEN0"):
                receiving("LEN1")
                m.d.sync += len_lo_ok.eq(b_len_lo)
            with m.State("LEN1"):
                receiving(None)
                with m.If(byte & ~b_error):
                    with m.If(len_lo_ok & b_len_hi):
                        m.next = "DATA"
                    with m.Else():
                        m.d.sync += report.eq(Status.BAD_LENGTH)
                        m.next = "REPORT"
            with m.State("DATA"):
                receiving(None)
                with m.If(byte & ~b_error):
                    m.d.comb += wp.en.eq(1)
                    m.d.sync += [addr.eq(addr + 1), addr_last.eq(addr == fin.frame_bytes - 2)]
                    with m.If(addr_last):
                        m.next = "CRC0"
            with m.State("CRC0"):
                receiving("CRC1", crc=False)
                m.d.sync += crc_lo_ok.eq(b == rx_crc[:8])
            with m.State("CRC1"):
                receiving(None, crc=False)
                with m.If(byte & ~b_error):
                    with m.If(crc_lo_ok & b_crc_hi):
                        m.d.sync += addr.eq(0)
                        m.next = "READ"
                    with m.Else():
                        m.d.sync += report.eq(Status.BAD_CRC)
                        m.next = "REPORT"
            with m.State("READ"):      # the read port fetches buffer[addr]
                m.next = "SHIFT"
            with m.State("SHIFT"):
                m.d.sync += [word.eq(Cat(word[8:], rp.data)), addr.eq(addr + 1),
                             nbyte.eq(nbyte + 1)]
                m.next = "READ"
                with m.If(nbyte == fin.bytes_per_word - 1):
                    m.d.sync += nbyte.eq(0)
                    m.next = "FEED"
            with m.State("FEED"):
                last = nword == fin.words - 1
                m.d.comb += [self.feed.valid.eq(1), self.feed.payload.last.eq(last)]
                with m.If(self.feed.ready):
                    m.d.sync += nword.eq(nword + 1)
                    m.next = "READ"
                    with m.If(last):
                        m.next = "HUNT"

        # Transmitter: error replies between output frames, output frames as they come.
        tx_crc = Signal(16)
        out_word = Signal(8 * fout.bytes_per_word)
        out_byte = Signal(range(fout.bytes_per_word))
        out_nword = Signal(range(fout.words))
        status = Signal(8)
        tx_len = Signal(16)
        send = self.o.valid & self.o.ready

        def emit(value, next_state, *, crc=True):
            m.d.comb += [self.o.payload.eq(value), self.o.valid.eq(1)]
            with m.If(self.o.ready):
                if crc:
                    m.d.sync += tx_crc.eq(crc16_step(tx_crc, self.o.payload))
                if next_state is not None:
                    m.next = next_state

        with m.FSM(name="tx"):
            with m.State("IDLE"):
                m.d.sync += [tx_crc.eq(CRC_INIT), out_byte.eq(0), out_nword.eq(0)]
                with m.If(err_code != 0):
                    m.d.comb += sent_error.eq(1)
                    m.d.sync += [status.eq(err_code), tx_len.eq(0)]
                    m.next = "SYNC"
                with m.Elif(self.result.valid):
                    m.d.sync += [status.eq(Status.OK), tx_len.eq(fout.frame_bytes)]
                    m.next = "SYNC"
            with m.State("SYNC"):
                emit(REPLY_SYNC, "STATUS", crc=False)
            with m.State("STATUS"):
                emit(status, "LEN0")
            with m.State("LEN0"):
                emit(tx_len[:8], "LEN1")
            with m.State("LEN1"):
                emit(tx_len[8:], None)
                with m.If(send):
                    m.next = "CRC0"
                    with m.If(status == Status.OK):
                        m.next = "LOAD"
            with m.State("LOAD"):
                m.d.comb += self.result.ready.eq(1)
                with m.If(self.result.valid):
                    m.d.sync += out_word.eq(self.result.payload.data.as_value())
                    m.next = "WORD"
            with m.State("WORD"):
                emit(out_word[:8], None)
                with m.If(send):
                    m.d.sync += [out_word.eq(out_word >> 8), out_byte.eq(out_byte + 1)]
                    with m.If(out_byte == fout.bytes_per_word - 1):
                        m.d.sync += [out_byte.eq(0), out_nword.eq(out_nword + 1)]
                        m.next = "LOAD"
                        with m.If(out_nword == fout.words - 1):
                            m.next = "CRC0"
            with m.State("CRC0"):
                emit(tx_crc[:8], "CRC1", crc=False)
            with m.State("CRC1"):
                emit(tx_crc[8:], "IDLE", crc=False)
        return m
