"""A cycle-accurate model of an SDR SDRAM for Amaranth simulations: it stores data, returns
read bursts after the programmed CAS latency, and checks every command against the chip's
timing, raising ``SdramViolation`` (naming the parameter, the bank and the cycle) at the
first one broken.

The model samples the controller's pins (``qloom.hw.sdram.SdramBusSignature``) at each
rising clock edge, as the chip does, and drives ``dq_i`` so that a read word is there at
the edge the chip would present it (READ seen at edge ``n``: word ``k`` at edge
``n + CL + k``). Between bursts ``dq_i`` carries junk, so a controller that captures a
cycle early or late reads wrong data.

What it checks, in cycles of ``SdramCycles`` (the chip's timing at the simulated clock):

- power-up: no command but NOP for ``power_up`` cycles, then PRECHARGE ALL,
  ``init_refreshes`` REFRESHes, MODE REGISTER SET before any ACTIVATE, READ or WRITE;
- tRCD (ACTIVATE to READ/WRITE), tRP (PRECHARGE to ACTIVATE/REFRESH/MODE), tRAS (ACTIVATE
  to PRECHARGE, and its maximum), tRC (ACTIVATE to ACTIVATE, same bank), tRRD (ACTIVATE to
  ACTIVATE, any bank), tRFC (REFRESH to any ACTIVATE/REFRESH/MODE), tMRD, tWR (last
  write word to PRECHARGE), a read burst not cut short by PRECHARGE;
- the CAS latency programmed is at least the chip's at this clock (``cas_latency``);
- the refresh interval: no more than ``t_refi`` cycles from one REFRESH to the next once
  the chip is initialized (stricter than the datasheet's 8192 refreshes per 64 ms, which
  lets a few be postponed; a controller that never postpones meets both);
- bank state (READ/WRITE to a closed bank, ACTIVATE of an open one, REFRESH with a bank
  open), bursts not interrupted by the next READ/WRITE, write data driven during a write
  burst, and no contention on DQ (the controller driving while the chip does).
"""

from __future__ import annotations

import random
from collections import Counter

from ..errors import QloomError
from ..hw.sdram.bus import A10_ALL_BANKS, Command, decode_mode_register
from ..hw.sdram.chip import SdramCycles, SdramGeometry

__all__ = ["SdramViolation", "SdramModel"]


class SdramViolation(QloomError):
    """A command the chip would not accept: ``parameter`` (e.g. ``"tRCD"``) broken on
    ``bank`` (None for the whole chip) at clock edge ``cycle``."""

    def __init__(self, parameter: str, bank: int | None, cycle: int, detail: str):
        self.parameter, self.bank, self.cycle, self.detail = parameter, bank, cycle, detail
        where = f"bank {bank}" if bank is not None else "the chip"
        super().__init__(f"SDRAM {parameter} violated on {where} at cycle {cycle}: {detail}")


class _Bank:
    __slots__ = ("row", "activated", "precharged", "read", "write")

    def __init__(self):
        never = -(1 << 40)
        self.row = None                  # the open row, None when precharged
        self.activated = never           # cycle of the last ACTIVATE
        self.precharged = never          # of the last PRECHARGE closing it
        self.read = never                # of the last READ
        self.write = never               # of the last WRITE


class SdramModel:
    """The chip behind ``bus`` (a controller's ``bus`` port) of ``geometry``, with timing
    ``cycles``. Add ``model.process`` to a simulator as a background testbench. ``memory``
    maps (bank, row, column) to words; ``poke``/``peek`` reach it directly."""

    def __init__(self, bus, *, geometry: SdramGeometry, cycles: SdramCycles, seed: int = 0):
        if not isinstance(geometry, SdramGeometry):
            raise TypeError(f"SDRAM geometry must be an SdramGeometry, not {geometry!r}")
        if not isinstance(cycles, SdramCycles):
            raise TypeError(f"SDRAM timing must be an SdramCycles, not {cycles!r}")
        self.bus, self.geometry, self.t = bus, geometry, cycles
        self.memory: dict[tuple[int, int, int], int] = {}
        self.commands: Counter = Counter()
        self.max_refresh_gap = 0
        self._rng = random.Random(seed)
        self._mask = (1 << geometry.data_bits) - 1
        self._banks = [_Bank() for _ in range(geometry.banks)]
        never = -(1 << 40)
        self._last_act = self._last_ref = self._last_mode = self._last_cas = never
        self._precharged_all = False
        self._init_refreshes = 0
        self.cas_latency = self.burst_length = None      # from MODE REGISTER SET
        self._reads: dict[int, int] = {}                 # edge -> word the chip drives
        self._drive_until = never                        # last edge the chip holds dq
        self._writes: dict[int, tuple] = {}              # edge -> (bank, row, column)
        self.cycle = 0

    @property
    def initialized(self) -> bool:
        return self.cas_latency is not None

    def poke(self, bank: int, row: int, column: int, value: int) -> None:
        self.memory[bank, row, column] = value & self._mask

    def peek(self, bank: int, row: int, column: int) -> int | None:
        return self.memory.get((bank, row, column))

    def driven(self, edge: int) -> int | None:
        """The word the chip presents on dq at ``edge`` (None when it sends none)."""
        return self._reads.get(edge)

    async def process(self, ctx):
        b = self.bus
        pins = (b.clk_en, b.cs, b.ras, b.cas, b.we, b.ba, b.a, b.dq_oe, b.dq_o)
        driving = False
        while True:
            sampled = await ctx.tick().sample(*pins)
            self.cycle += 1
            self.edge(self.cycle, *sampled[2:])
            word = self._reads.pop(self.cycle + 1, None)
            if word is not None:
                ctx.set(b.dq_i, word)
                driving = True
            elif driving:
                ctx.set(b.dq_i, self._rng.getrandbits(self.geometry.data_bits))
                driving = False

    def edge(self, cycle, clk_en, cs, ras, cas, we, ba, a, dq_oe, dq_o) -> None:
        """What the chip does at rising edge ``cycle`` with these pins."""
        if not clk_en:
            raise SdramViolation("clock enable", None, cycle,
                                 "CKE low (power-down and self refresh are not modelled)")
        if cs:
            command = Command(ras << 2 | cas << 1 | we)
            if command is not Command.NOP:
                self._command(cycle, command, ba, a)
        if self._init_refreshes and cycle - self._last_ref > self.t.t_refi:
            raise SdramViolation("refresh interval", None, cycle,
                                 f"no REFRESH for {cycle - self._last_ref} cycles, the chip "
                                 f"needs one every {self.t.t_refi}")
        if dq_oe and cycle <= self._drive_until:
            raise SdramViolation("DQ contention", None, cycle,
                                 "the controller drives dq while the chip sends read data")
        target = self._writes.pop(cycle, None)
        if target is not None:
            if not dq_oe:
                raise SdramViolation("write data", target[0], cycle,
                                     "dq not driven during a write burst")
            self.memory[target] = dq_o

    def _need(self, parameter, bank, cycle, since, need, what) -> None:
        if cycle - since < need:
            raise SdramViolation(parameter, bank, cycle,
                                 f"{what} {cycle - since} cycles after it, the chip needs "
                                 f"{need}")

    def _command(self, cycle, command, ba, a) -> None:
        self.commands[command.name] += 1
        t = self.t
        if cycle <= t.power_up:
            raise SdramViolation("power-up", None, cycle,
                                 f"{command.name} before the {t.power_up}-cycle power-up "
                                 f"pause ended")
        if command not in (Command.PRECHARGE, Command.REFRESH, Command.MODE) \
                and not self.initialized:
            raise SdramViolation("initialization", None, cycle,
                                 f"{command.name} before the mode register was set")
        self._need("tMRD", None, cycle, self._last_mode, t.t_mrd,
                   f"{command.name} after MODE REGISTER SET:")
        handler = {Command.ACTIVATE: self._activate, Command.READ: self._read_write,
                   Command.WRITE: self._read_write, Command.PRECHARGE: self._precharge,
                   Command.REFRESH: self._refresh, Command.MODE: self._mode}.get(command)
        if handler is None:
            raise SdramViolation("command", None, cycle,
                                 f"{command.name} is not supported by the model")
        handler(cycle, command, ba, a)

    def _activate(self, cycle, command, ba, a) -> None:
        t, bank = self.t, self._banks[ba]
        if bank.row is not None:
            raise SdramViolation("bank state", ba, cycle,
                                 f"ACTIVATE of row {a} while row {bank.row} is open")
        self._need("tRP", ba, cycle, bank.precharged, t.t_rp, "ACTIVATE after PRECHARGE:")
        self._need("tRC", ba, cycle, bank.activated, t.t_rc, "ACTIVATE after ACTIVATE:")
        self._need("tRRD", ba, cycle, self._last_act, t.t_rrd,
                   "ACTIVATE after another bank's ACTIVATE:")
        self._need("tRFC", ba, cycle, self._last_ref, t.t_rfc, "ACTIVATE after REFRESH:")
        bank.row, bank.activated, self._last_act = a, cycle, cycle

    def _read_write(self, cycle, command, ba, a) -> None:
        t, g, bank = self.t, self.geometry, self._banks[ba]
        if bank.row is None:
            raise SdramViolation("bank state", ba, cycle, f"{command.name} to a closed bank")
        self._need("tRCD", ba, cycle, bank.activated, t.t_rcd,
                   f"{command.name} after ACTIVATE:")
        self._need("burst", ba, cycle, self._last_cas, self.burst_length,
                   f"{command.name} interrupting the burst of the READ/WRITE")
        if a & A10_ALL_BANKS or a >> g.column_bits:
            raise SdramViolation("command", ba, cycle,
                                 f"{command.name} column address {a:#x}: auto-precharge and "
                                 f"columns beyond {g.columns} are not supported")
        bl = self.burst_length
        columns = [(a & ~(bl - 1)) | ((a + k) & (bl - 1)) for k in range(bl)]
        self._last_cas = cycle
        if command is Command.READ:
            bank.read = cycle
            first = cycle + self.cas_latency
            for k, column in enumerate(columns):
                word = self.memory.get((ba, bank.row, column))
                self._reads[first + k] = (self._rng.getrandbits(g.data_bits)
                                          if word is None else word)
            # the last word is held until tOH into the next cycle
            self._drive_until = first + bl
        else:
            bank.write = cycle
            for k, column in enumerate(columns):
                self._writes[cycle + k] = (ba, bank.row, column)

    def _close(self, cycle, ba) -> None:
        t, bank = self.t, self._banks[ba]
        if bank.row is None:
            return
        self._need("tRAS", ba, cycle, bank.activated, t.t_ras, "PRECHARGE after ACTIVATE:")
        if cycle - bank.activated > t.t_ras_max:
            raise SdramViolation("tRAS max", ba, cycle,
                                 f"row open {cycle - bank.activated} cycles, at most "
                                 f"{t.t_ras_max}")
        self._need("burst", ba, cycle, bank.read, self.burst_length,
                   "PRECHARGE cutting short the read burst of the READ")
        self._need("tWR", ba, cycle, bank.write + self.burst_length - 1, t.t_wr,
                   "PRECHARGE after the last word of a write burst:")
        bank.row, bank.precharged = None, cycle

    def _precharge(self, cycle, command, ba, a) -> None:
        if a & A10_ALL_BANKS:
            for k in range(self.geometry.banks):
                self._close(cycle, k)
            self._precharged_all = True
        else:
            self._close(cycle, ba)

    def _idle(self, cycle, what) -> None:
        t = self.t
        if not self._precharged_all:
            raise SdramViolation("initialization", None, cycle,
                                 f"{what} before the first PRECHARGE ALL")
        for k, bank in enumerate(self._banks):
            if bank.row is not None:
                raise SdramViolation("bank state", k, cycle, f"{what} with row {bank.row} open")
            self._need("tRP", k, cycle, bank.precharged, t.t_rp, f"{what} after PRECHARGE:")
        self._need("tRFC", None, cycle, self._last_ref, t.t_rfc, f"{what} after REFRESH:")

    def _refresh(self, cycle, command, ba, a) -> None:
        self._idle(cycle, "REFRESH")
        if self._init_refreshes:
            self.max_refresh_gap = max(self.max_refresh_gap, cycle - self._last_ref)
        self._init_refreshes += 1
        self._last_ref = cycle

    def _mode(self, cycle, command, ba, a) -> None:
        t = self.t
        self._idle(cycle, "MODE REGISTER SET")
        if self._init_refreshes < t.init_refreshes:
            raise SdramViolation("initialization", None, cycle,
                                 f"MODE REGISTER SET after {self._init_refreshes} REFRESHes, "
                                 f"the chip needs {t.init_refreshes}")
        bl, cl, other = decode_mode_register(a)
        if bl is None or cl is None or other or ba:
            raise SdramViolation("mode register", None, cycle,
                                 f"value {a:#x} (bank {ba}) is not a mode the model supports "
                                 f"(sequential bursts of 1-8, CAS latency 2 or 3)")
        if cl < t.cas_latency:
            raise SdramViolation("CAS latency", None, cycle,
                                 f"CL {cl} programmed, the chip needs {t.cas_latency} at "
                                 f"{t.clock_mhz:g} MHz")
        self.cas_latency, self.burst_length, self._last_mode = cl, bl, cycle
