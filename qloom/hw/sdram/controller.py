"""An SDR SDRAM controller: burst reads and writes over streams, open-row bank management,
auto-refresh, the power-up sequence.

Requests come in on ``cmd``, one burst of ``burst_length`` words each; ``addr`` counts
bursts, not words. Write data come on ``w`` (``burst_length`` words per write request, in
request order; they may come before or after the request); read data leave on ``r`` in
request order. Requests run strictly in order, so a read after a write to the same
address returns the written data.

Address map (burst number, most significant first): row, bank, column. A sequential stream
fills a row of one bank, then the same row of the next bank.

Scheduling, one command per cycle, all chip outputs registered:

- every bank keeps its row open after an access (open-row policy); a request to an open
  row issues READ/WRITE at once, to another row PRECHARGE then ACTIVATE;
- per bank, three down-counters hold the cycles until ACTIVATE (tRP, tRC), READ/WRITE
  (tRCD) and PRECHARGE (tRAS, the end of a read burst, write recovery) are allowed; shared
  ones hold tRRD, the burst in progress, the read-to-write bus turnaround and tRFC/tMRD;
- a refresh falls due ``refresh_period`` cycles after the last one (``t_refi`` less the
  longest the controller can take to get to it): no new burst starts, the open banks are
  precharged together, REFRESH is issued;
- a READ is issued only when the read FIFO has room for its whole burst (data cannot be
  held back once the chip sends them), a WRITE only when its whole burst is in the write
  FIFO.

For the clock, the request being served sits decoded in registers with its bank's state
(row open, row hit) and every timer's "done" is a register: the choice of command is a
few LUTs from registers. Placed alone on the ULX3S-85F it takes 576 LUT4 and 297 FF and
reaches 141.8 MHz (133 MHz constraint; 140.1 MHz against the chip's 143).

The controller counts in ``SdramCycles`` (``SdramChip.cycles``); it trusts them, and the
simulation model (``qloom.sim.sdram_model``) checks the chip's own.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from .bus import A10_ALL_BANKS, Command, SdramBusSignature, mode_register
from .chip import BURST_LENGTHS, SdramCycles, SdramGeometry
from .timer import WaitTimer

__all__ = ["SdramController", "request_layout", "refresh_period", "sequential_read_efficiency"]


def request_layout(geometry: SdramGeometry, burst_length: int) -> data.StructLayout:
    """A request: ``write`` (1) or read (0) of burst number ``addr``."""
    burst_bits = (geometry.words // burst_length).bit_length() - 1
    return data.StructLayout({"addr": burst_bits, "write": 1})


def refresh_period(cycles: SdramCycles, burst_length: int) -> int:
    """Cycles from one REFRESH to the next falling due: ``t_refi`` less the longest the
    controller can take from then to the REFRESH (the last burst's precharge wait, tRAS
    or write recovery, then tRP), with a few cycles to spare."""
    slack = max(cycles.t_ras, burst_length + cycles.t_wr) + cycles.t_rp + cycles.t_rrd + 4
    return cycles.t_refi - slack


def sequential_read_efficiency(cycles: SdramCycles, burst_length: int, columns: int) -> float:
    """The share of cycles that carry a word when the controller reads consecutive bursts
    and the reader always takes them (the planner's figure; ``bench/sdram.py`` measures it
    in simulation). A refresh stops the reads for tRP + tRFC + tRCD (PRECHARGE ALL after
    the last burst, REFRESH, ACTIVATE again) once per refresh spacing (the period, then
    on average half a burst and tRP until REFRESH goes). A new row costs
    1 + tRP + tRCD cycles beyond the previous burst, less the burst it overlaps; counting
    that for every row is conservative, as a refresh leaves the banks closed and a closed
    bank needs no PRECHARGE (``bench/sdram.py``: 0.974 estimated, 0.982 measured for
    bursts of 4 at 143 MHz; equal within 0.3% for bursts of 8)."""
    period = refresh_period(cycles, burst_length) + cycles.t_rp + burst_length // 2
    refresh = cycles.t_rp + cycles.t_rfc + cycles.t_rcd
    row = max(0, 1 + cycles.t_rp + cycles.t_rcd - burst_length)
    return (1 - refresh / period) * columns / (columns + row)


class SdramController(wiring.Component):
    """Drives one SDRAM of ``geometry`` at the timing ``cycles``, in bursts of
    ``burst_length`` (1, 2, 4 or 8) words.

    ``read_fifo_depth`` words of read data are buffered (at least two bursts; the default,
    four bursts, keeps back-to-back reads going through the CAS latency);
    ``write_fifo_depth`` words of write data (at least one burst). ``read_delay`` is the
    count of registers the board puts between the ``dq`` pins and ``bus.dq_i`` beyond
    the controller's own capture register (0 in simulation). ``ready`` rises once the
    chip is initialized.
    """

    def __init__(self, *, geometry: SdramGeometry, cycles: SdramCycles, burst_length: int = 8,
                 read_fifo_depth: int | None = None, write_fifo_depth: int | None = None,
                 read_delay: int = 0):
        if not isinstance(geometry, SdramGeometry):
            raise TypeError(f"SDRAM geometry must be an SdramGeometry, not {geometry!r}")
        if not isinstance(cycles, SdramCycles):
            raise TypeError(f"SDRAM timing must be an SdramCycles, not {cycles!r}")
        if burst_length not in BURST_LENGTHS:
            raise ValueError(f"Burst length must be one of 1, 2, 4, 8, not {burst_length!r}")
        if burst_length > geometry.columns:
            raise ValueError(f"Burst length ({burst_length}) exceeds the row's "
                             f"{geometry.columns} columns")
        read_fifo_depth = 4 * burst_length if read_fifo_depth is None else read_fifo_depth
        write_fifo_depth = 2 * burst_length if write_fifo_depth is None else write_fifo_depth
        for what, value, least in (("Read FIFO depth", read_fifo_depth, 2 * burst_length),
                                   ("Write FIFO depth", write_fifo_depth, burst_length)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{what} must be an integer, not {value!r}")
            if value < least:
                raise ValueError(f"{what} must be at least {least} words, not {value}")
        if not isinstance(read_delay, int) or isinstance(read_delay, bool) or read_delay < 0:
            raise TypeError(f"Read delay must be a non-negative integer, not {read_delay!r}")
        if refresh_period(cycles, burst_length) < 2 * burst_length:
            raise ValueError(f"Refresh interval of {cycles.t_refi} cycles leaves no time for "
                             f"bursts (tRAS {cycles.t_ras}, tRP {cycles.t_rp})")
        self._geometry = geometry
        self._cycles = cycles
        self._bl = burst_length
        self._rdepth = read_fifo_depth
        self._wdepth = write_fifo_depth
        self._read_delay = read_delay
        dw = geometry.data_bits
        super().__init__({
            "cmd": In(stream.Signature(request_layout(geometry, burst_length))),
            "w": In(stream.Signature(dw)),
            "r": Out(stream.Signature(dw)),
            "bus": Out(SdramBusSignature(geometry)),
            "ready": Out(1),
        })

    @property
    def geometry(self) -> SdramGeometry:
        return self._geometry

    @property
    def cycles(self) -> SdramCycles:
        return self._cycles

    @property
    def burst_length(self) -> int:
        return self._bl

    @property
    def read_latency(self) -> int:
        """Cycles from the cycle a READ is decided to the cycle its first word enters the
        read FIFO: the command register, the CAS latency, the capture register and the
        board's ``read_delay``."""
        return 1 + self._cycles.cas_latency + 1 + self._read_delay

    def locate(self, burst: int) -> tuple[int, int, int]:
        """(bank, row, first column) of burst number ``burst``."""
        g = self._geometry
        per_row = g.columns // self._bl
        return (burst // per_row) % g.banks, burst // (per_row * g.banks), \
            (burst % per_row) * self._bl

    def elaborate(self, platform):
        m = Module()
        g = self._geometry
        m.submodules.wfifo = wfifo = SyncFIFO(width=g.data_bits, depth=self._wdepth)
        m.submodules.rfifo = rfifo = SyncFIFOBuffered(width=g.data_bits, depth=self._rdepth)
        m.d.comb += [wfifo.w_data.eq(self.w.payload), wfifo.w_en.eq(self.w.valid),
                     self.w.ready.eq(wfifo.w_rdy),
                     self.r.payload.eq(rfifo.r_data), self.r.valid.eq(rfifo.r_rdy),
                     rfifo.r_en.eq(self.r.ready)]

        issue = {cmd: Signal(name=f"issue_{cmd.name.lower()}") for cmd in Command}
        pre_all = Signal()      # with issue[PRECHARGE]: every bank, else the request's
        take = Signal()          # the head request's READ or WRITE goes this cycle
        m.d.comb += take.eq(issue[Command.READ] | issue[Command.WRITE])
        is_open = [Signal(name=f"open{k}") for k in range(g.banks)]
        open_row = [Signal(g.row_bits, name=f"row{k}") for k in range(g.banks)]
        head, bank, sel, row, col = self._head(m, take, issue, pre_all, is_open, open_row)
        timers = self._timers(m, issue, pre_all, sel)

        self._command_register(m, issue, pre_all, bank, row, col)
        self._write_path(m, issue, wfifo)
        credit = self._read_path(m, issue, rfifo)
        refresh_due = self._refresh_counter(m, issue)
        self._sequence(m, issue, pre_all, timers, head, sel, credit, refresh_due, wfifo,
                       is_open)
        return m

    def _head(self, m, take, issue, pre_all, is_open, open_row):
        """The request being served, decoded into registers: a new one is taken from
        ``cmd`` when there is none or this one's READ/WRITE goes. Its bank's state is kept
        in registers too: ``open`` (the bank has a row open) and ``hit`` (the request's
        row), compared with every bank's open row as the request is taken and updated
        by the ACTIVATE and PRECHARGE issued for it. Returns (the flags ``valid``,
        ``write``, ``open``, ``hit``; bank number, one-hot bank, row, first column)."""
        g, bl = self._geometry, self._bl
        addr = self.cmd.payload.addr
        cbits = g.column_bits - (bl.bit_length() - 1)
        head = data.Signal(data.StructLayout({"valid": 1, "write": 1, "open": 1, "hit": 1}))
        bank = Signal(range(g.banks))
        sel = [Signal(name=f"sel_bank{k}") for k in range(g.banks)]
        row = Signal(g.row_bits)
        col = Signal(g.column_bits)
        new_bank = addr[cbits:cbits + g.bank_bits] if g.bank_bits else 0
        new_row = addr[cbits + g.bank_bits:]
        new_sel = [new_bank == k for k in range(g.banks)]
        # a request is taken with no ACTIVATE or single-bank PRECHARGE going (those serve
        # the head), but maybe a refresh's PRECHARGE ALL
        closing = issue[Command.PRECHARGE] & pre_all
        still_open = [o & ~closing for o in is_open]
        m.d.comb += self.cmd.ready.eq(~head.valid | take)
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += [
                head.valid.eq(1), head.write.eq(self.cmd.payload.write),
                head.open.eq(Cat(*(n & o for n, o in zip(new_sel, still_open))).any()),
                head.hit.eq(Cat(*(n & o & (r == new_row) for n, o, r
                                  in zip(new_sel, still_open, open_row))).any()),
                bank.eq(new_bank), row.eq(new_row),
                col.eq(addr[:cbits] << (bl.bit_length() - 1) if cbits else 0)]
            m.d.sync += [s.eq(n) for s, n in zip(sel, new_sel)]
        with m.Else():
            with m.If(take):
                m.d.sync += head.valid.eq(0)
            with m.If(issue[Command.ACTIVATE]):
                m.d.sync += [head.open.eq(1), head.hit.eq(1)]
            with m.If(issue[Command.PRECHARGE]):
                m.d.sync += [head.open.eq(0), head.hit.eq(0)]
        for k, s in enumerate(sel):
            with m.If(issue[Command.PRECHARGE] & (pre_all | s)):
                m.d.sync += is_open[k].eq(0)
            with m.If(issue[Command.ACTIVATE] & s):
                m.d.sync += [is_open[k].eq(1), open_row[k].eq(row)]
        return head, bank, sel, row, col

    def _timers(self, m, issue, pre_all, sel):
        c, bl = self._cycles, self._bl
        I = issue
        act, rw, pre = [], [], []
        for k, s in enumerate(sel):
            a, r, p = (WaitTimer(f"{w}_wait{k}") for w in ("act", "rw", "pre"))
            a.load(I[Command.ACTIVATE] & s, c.t_rc)
            a.load(I[Command.PRECHARGE] & (pre_all | s), c.t_rp)
            r.load(I[Command.ACTIVATE] & s, c.t_rcd)
            p.load(I[Command.ACTIVATE] & s, c.t_ras)
            # a read burst ends BL cycles on; a write needs tWR after its last word
            p.load(I[Command.READ] & s, bl)
            p.load(I[Command.WRITE] & s, bl - 1 + c.t_wr)
            act.append(a), rw.append(r), pre.append(p)
        rrd, cas, turn, any_ = (WaitTimer(n) for n in ("rrd_wait", "cas_wait", "turn_wait",
                                                     "cmd_wait"))
        rrd.load(I[Command.ACTIVATE], c.t_rrd)
        cas.load(I[Command.READ] | I[Command.WRITE], bl)
        # a WRITE drives dq: the read burst's last word and the chip's hold time first
        turn.load(I[Command.READ], c.cas_latency + bl + 1)
        any_.load(I[Command.REFRESH], c.t_rfc)
        any_.load(I[Command.MODE], c.t_mrd)
        for timer in [*act, *rw, *pre, rrd, cas, turn, any_]:
            timer.elaborate(m)
        return {"act": act, "rw": rw, "pre": pre, "rrd": rrd, "cas": cas, "turn": turn,
                "any": any_}

    def _command_register(self, m, issue, pre_all, bank, row, col):
        bus = self.bus
        m.d.comb += [bus.clk_en.eq(1), bus.cs.eq(1), bus.dqm.eq(0)]
        code = Signal(3)
        for cmd, sig in issue.items():
            with m.If(sig):
                m.d.comb += code.eq(cmd)
        m.d.sync += Cat(bus.we, bus.cas, bus.ras).eq(code)
        mode = mode_register(self._bl, self._cycles.cas_latency)
        with m.If(issue[Command.ACTIVATE]):
            m.d.sync += [bus.ba.eq(bank), bus.a.eq(row)]
        with m.If(issue[Command.READ] | issue[Command.WRITE]):
            m.d.sync += [bus.ba.eq(bank), bus.a.eq(col)]
        with m.If(issue[Command.PRECHARGE]):
            m.d.sync += [bus.ba.eq(bank), bus.a.eq(Mux(pre_all, A10_ALL_BANKS, 0))]
        with m.If(issue[Command.MODE]):
            m.d.sync += [bus.ba.eq(0), bus.a.eq(mode)]

    def _write_path(self, m, issue, wfifo):
        """Pops one burst from the write FIFO onto dq, starting with the WRITE command."""
        left = Signal(range(self._bl))
        popping = Signal()
        m.d.comb += [popping.eq(issue[Command.WRITE] | (left != 0)), wfifo.r_en.eq(popping)]
        with m.If(issue[Command.WRITE]):
            m.d.sync += left.eq(self._bl - 1)
        with m.Elif(left != 0):
            m.d.sync += left.eq(left - 1)
        m.d.sync += [self.bus.dq_oe.eq(popping), self.bus.dq_o.eq(wfifo.r_data)]

    def _read_path(self, m, issue, rfifo):
        """Marks the cycles a READ's words leave the chip, delays the mark to when they
        are in the capture register, and pushes them into the read FIFO. Returns whether
        the FIFO has room for one more burst beyond the words already on their way."""
        bl = self._bl
        left = Signal(range(bl))
        word = Signal()
        m.d.comb += word.eq(issue[Command.READ] | (left != 0))
        with m.If(issue[Command.READ]):
            m.d.sync += left.eq(bl - 1)
        with m.Elif(left != 0):
            m.d.sync += left.eq(left - 1)
        marks = Signal(self.read_latency)
        m.d.sync += marks.eq(Cat(word, marks[:-1]))
        captured = Signal.like(self.bus.dq_i)
        m.d.sync += captured.eq(self.bus.dq_i)
        m.d.comb += [rfifo.w_en.eq(marks[-1]), rfifo.w_data.eq(captured)]

        reserved = Signal(range(self._rdepth + 1))
        taken = self.r.valid & self.r.ready
        m.d.sync += reserved.eq(reserved + Mux(issue[Command.READ], bl, 0) - taken)
        credit = Signal()
        m.d.comb += credit.eq(reserved <= self._rdepth - bl)
        return credit

    def _refresh_counter(self, m, issue):
        period = refresh_period(self._cycles, self._bl)
        count = Signal(range(period), init=period - 1)
        with m.If(issue[Command.REFRESH]):
            m.d.sync += count.eq(period - 1)
        with m.Elif(count != 0):
            m.d.sync += count.eq(count - 1)
        due = Signal()          # count == 0, as a register
        m.d.sync += due.eq((count <= 1) & ~issue[Command.REFRESH])
        return due

    def _sequence(self, m, issue, pre_all, timers, head, sel, credit, refresh_due, wfifo,
                  is_open):
        """The power-up sequence, then per cycle the one command the head request (or a
        due refresh) needs and the timers allow."""
        c, bl = self._cycles, self._bl
        free = timers["any"].done
        any_open = Cat(*is_open).any()

        def of_bank(flags):
            # the head request's bank's flag: one-hot select, no multiplexer tree
            return Cat(*(s & f for s, f in zip(sel, flags))).any()

        bank_open, hit = head.open, head.hit
        idle = Signal()        # every bank closed and past tRP / tRC: REFRESH, MODE may go
        m.d.comb += idle.eq(~any_open & Cat(*(t.done for t in timers["act"])).all() & free)
        closable = Signal()    # every open bank may be precharged
        m.d.comb += closable.eq(Cat(*(~o | t.done for o, t in zip(is_open, timers["pre"])))
                                .all() & free)
        power = Signal(range(c.power_up + 1), init=c.power_up)
        refreshes = Signal(range(c.init_refreshes + 1))
        with m.FSM():
            with m.State("POWER-UP"):
                m.d.sync += power.eq(power - 1)
                with m.If(power == 0):
                    m.d.comb += [issue[Command.PRECHARGE].eq(1), pre_all.eq(1)]
                    m.next = "INIT-REFRESH"
            with m.State("INIT-REFRESH"):
                with m.If(idle & (refreshes == c.init_refreshes)):
                    m.d.comb += issue[Command.MODE].eq(1)
                    m.next = "RUN"
                with m.Elif(idle):
                    m.d.comb += issue[Command.REFRESH].eq(1)
                    m.d.sync += refreshes.eq(refreshes + 1)
            with m.State("RUN"):
                m.d.comb += self.ready.eq(1)
                with m.If(refresh_due):
                    with m.If(idle):
                        m.d.comb += issue[Command.REFRESH].eq(1)
                    with m.Elif(any_open & closable):
                        m.d.comb += [issue[Command.PRECHARGE].eq(1), pre_all.eq(1)]
                with m.Elif(head.valid & free):
                    rw_ok = of_bank([t.done for t in timers["rw"]]) & timers["cas"].done
                    with m.If(hit & rw_ok):
                        with m.If(head.write):
                            with m.If(timers["turn"].done & (wfifo.level >= bl)):
                                m.d.comb += issue[Command.WRITE].eq(1)
                        with m.Elif(credit):
                            m.d.comb += issue[Command.READ].eq(1)
                    with m.Elif(bank_open & ~hit
                                & of_bank([t.done for t in timers["pre"]])):
                        m.d.comb += issue[Command.PRECHARGE].eq(1)
                    with m.Elif(~bank_open & of_bank([t.done for t in timers["act"]])
                                & timers["rrd"].done):
                        m.d.comb += issue[Command.ACTIVATE].eq(1)
