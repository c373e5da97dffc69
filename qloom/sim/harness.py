"""The stream harness: the per-cycle work of an RTL simulation, in hardware.

Python must not set the pace of a simulation (a cocotb coroutine woken on every edge runs
a few thousand cycles per second). ``StreamHarness`` wraps the compiled ``qloom_top``
(instantiated by name, from its own Verilog) and does on the HDL side what the per-cycle
bench did in Python:

- feeds the input words from a ring memory (``in_mem``), with random gaps before a word;
- takes output words into a ring memory (``out_mem``) with random stalls of ``ready``;
- stamps the cycle of every accepted input word (``in_cycle_mem``) and of every taken
  output word (``out_cycle_mem``); cycle 0 is the first cycle of the run, a word is
  stamped with the cycle that ends in its handshake;
- checks the output stream as it goes: ``last`` exactly on every frame's final word, no
  word beyond the expected count, and a handshake at least every ``idle_timeout`` cycles;
- raises ``done`` when everything came back and ``drain`` more cycles showed no extra
  word, or at the first error (``error`` holds its code, ``error_cycle`` its cycle).

The gaps and stalls come from two 32-bit xorshift generators seeded from ``seed``: a gap
starts before an input word, and goes on each cycle, with probability ``p_in / 2**16``;
``ready`` drops in a cycle with probability ``p_out / 2**16``.

The memories are rings of ``depth`` words, addressed by the low bits of the word
counters: a memory the size of a whole test set would make Amaranth's conversion (and
the simulator's build) take minutes, and would tie the build to the run's length. cocotb
(``qloom.sim.tb_harness``) loads the first ``depth`` input words and the control inputs
through VPI during reset, raises ``start`` a few cycles after reset (the generators take
their seed while ``start`` is low; control inputs act a cycle after they are set; the
design is held in reset until then, and ``cycle`` 0 is its first cycle out of reset),
and then wakes only when a counter crosses into the other half of its ring
(``in_half``, ``out_half``), to refill the half just consumed and read the records of the
half just filled, all in bulk; simulated time stands still meanwhile, so the harness
never waits for Python. The memories also have a read port (``rd_addr``, clocked by
``rd_clock``, which nothing needs to toggle) so that Amaranth's conversion (through
Yosys) keeps them.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

from amaranth.hdl import (Cat, ClockDomain, ClockSignal, Const, Instance, Module, Mux,
                          ResetSignal, Signal)
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .harness_codes import COUNT_BITS, CYCLE_BITS, PROBABILITY_ONE, STAMP_BITS, HarnessError

__all__ = ["HarnessError", "StreamHarness", "harness_verilog", "clock_verilog",
           "PROBABILITY_ONE", "CYCLE_BITS", "STAMP_BITS", "COUNT_BITS", "DEFAULT_DEPTH"]

DEFAULT_DEPTH = 2048
CLOCK_MODULE = "qloom_sim_clock"
_XORSHIFT_SEED_MIX = 0x9E3779B9   # any odd constant: the second generator's seed offset


def _xorshift32(state):
    """One step of Marsaglia's xorshift32 (13, 17, 5) as combinational logic."""
    a = (state ^ (state << 13))[:32]
    b = a ^ (a >> 17)
    return (b ^ (b << 5))[:32]


def _nonzero_seed(value):
    """xorshift never leaves the all-zero state: map seed 0 to a fixed non-zero one."""
    return value | Cat(Const(0, 31), value == 0)


class StreamHarness(wiring.Component):
    """Feeds and checks the accelerator ``top`` (a Verilog module name) in simulation.

    Parameters
    ----------
    top : the accelerator's module name (``qloom_top``), instantiated as ``dut``.
    in_bits, out_bits : payload widths of the top's ``i`` and ``o`` ports.
    out_last_bit : bit of the output payload that carries ``last``.
    clock_period_ps : period of the clock the harness makes itself (``clock``, see
        ``clock_verilog``); its ``reset`` input resets it and the design.
    clock_input : take the clock on a ``clock`` input instead (Verilator: the main loop
        of ``harness_main.cpp`` makes it; see there for why).

    The ``free_run`` input does nothing in the harness: it tells that main loop that the
    bench waits only for a change of ``in_half``, ``out_half`` or ``done`` or for a timer,
    so that it may run clock edges without calling into cocotb meanwhile.
    depth : words in each ring memory, a power of two (at least 4).
    lanes : words per memory row, a power of two from 2 to ``depth / 2``: cocotb moves a
        row per VPI call, and the call, not the width, is what costs. The row being
        filled is in ``in_cycle_row``, ``out_row`` and ``out_cycle_row`` (its ``k`` words
        in the top ``k`` lanes), the full ones in the memories.
    flash : the SPI flash's bytes at ``flash_offset`` for a design with weights in SPRAM
        (a ``flash`` port, see ``qloom.hw.spram``), answered by ``SpiFlashModel``.
    """

    def __init__(self, *, top: str, in_bits: int, out_bits: int, out_last_bit: int,
                 clock_period_ps: int, depth: int = DEFAULT_DEPTH, lanes: int = 2,
                 clock_input: bool = False, flash: bytes | None = None,
                 flash_offset: int = 0):
        for name, value in (("input payload width", in_bits), ("clock period", clock_period_ps),
                            ("output payload width", out_bits), ("ring depth", depth),
                            ("lane count", lanes)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise TypeError(f"The {name} must be a positive integer, not {value!r}")
        if depth < 4 or depth & (depth - 1):
            raise ValueError(f"The ring depth must be a power of two of at least 4, not {depth}")
        if lanes < 2 or lanes & (lanes - 1) or 2 * lanes > depth:
            raise ValueError(f"The lane count must be a power of two from 2 to half the ring "
                             f"depth ({depth}), not {lanes}")
        if not isinstance(out_last_bit, int) or not 0 <= out_last_bit < out_bits:
            raise ValueError(f"The output 'last' bit ({out_last_bit!r}) must lie inside the "
                             f"{out_bits}-bit output payload")
        if not isinstance(top, str) or not top.isidentifier():
            raise TypeError(f"The top module name must be a Verilog identifier, not {top!r}")
        self.top, self.in_bits, self.out_bits = top, in_bits, out_bits
        self.out_last_bit, self.depth, self.lanes = out_last_bit, depth, lanes
        self.clock_period_ps, self.clock_input = clock_period_ps, bool(clock_input)
        self.flash, self.flash_offset = flash, flash_offset
        super().__init__({
            "clock": In(1) if clock_input else Out(1),
            "reset": In(1),
            "free_run": In(1),
            # Control, set before start.
            "start": In(1),
            "n_in": In(COUNT_BITS),
            "n_out": In(COUNT_BITS),
            "words_out": In(COUNT_BITS),
            "p_in": In(range(PROBABILITY_ONE)),
            "p_out": In(range(PROBABILITY_ONE)),
            "seed": In(32),
            "idle_timeout": In(32),
            "drain": In(16),
            # Status.
            "done": Out(1),
            "error": Out(3),
            "error_cycle": Out(CYCLE_BITS),
            "cycle": Out(CYCLE_BITS),
            "in_count": Out(COUNT_BITS),
            "out_count": Out(COUNT_BITS),
            "in_half": Out(1),
            "out_half": Out(1),
            # Read-back port (the memories are read through VPI; see the module doc).
            "rd_clock": In(1),
            "rd_addr": In(range(depth // lanes)),
            "rd_in_cycle": Out(STAMP_BITS * lanes),
            "rd_out_payload": Out(out_bits * lanes),
            "rd_out_cycle": Out(STAMP_BITS * lanes),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._clock_and_controls(m)
        m.d.comb += [self.in_half.eq(self.in_count[self._bits - 1]),
                     self.out_half.eq(self.out_count[self._bits - 1])]

        i_payload, i_valid, i_ready = Signal(self.in_bits), Signal(), Signal()
        o_payload, o_valid, o_ready = Signal(self.out_bits), Signal(), Signal()
        # The design stays in reset until the run starts, so that cycle 0 is its first
        # cycle out of reset (as with the per-cycle bench), whatever the setup took.
        dut_reset = Signal()
        ports = {}
        if self.flash:
            from ..hw.spram import SpiFlashModel
            m.submodules.flash = flash = SpiFlashModel(data=self.flash,
                                                       offset=self.flash_offset)
            ports = {"o_flash__sck": flash.flash.sck, "o_flash__cs_n": flash.flash.cs_n,
                     "o_flash__copi": flash.flash.copi, "i_flash__cipo": flash.flash.cipo}
        m.submodules.dut = Instance(
            self.top, i_clk=ClockSignal(), i_rst=dut_reset,
            i_i__payload=i_payload, i_i__valid=i_valid, o_i__ready=i_ready,
            o_o__payload=o_payload, o_o__valid=o_valid, i_o__ready=o_ready, **ports)
        running = Signal()
        # ``powered`` makes the reset rise at the first clock edge instead of being high from
        # time 0: a Verilog simulator runs an ``always @*`` block (Yosys' next-state logic
        # of every register with a reset, ``x = d; if (rst) x = init;``) only on an event
        # at its inputs, and a reset held from time 0 is none (qloom.sim.rtl_check). A
        # block whose other inputs never change before the reset ends then holds X, the
        # register under it latches X in reset and shifts it on: Icarus, an unrolled
        # chain's valid chain behind a skid buffer whose valid was 0 from time 0.
        powered = Signal()
        m.d.inputs += powered.eq(1)
        m.d.comb += [running.eq(cfg.start & ~self.done),
                     dut_reset.eq((ResetSignal() | ~cfg.start) & powered)]

        draw_gap, draw_ready = self._generators(m, cfg, running)
        took_in = self._feed(m, cfg, running, draw_gap, i_payload, i_valid, i_ready)
        in_cycle_mem = self._recorder(m, "in_cycle", STAMP_BITS, self.in_count, took_in,
                                      self.cycle[:STAMP_BITS])

        # Output side: take a word unless ready is stalled; check it.
        m.d.comb += o_ready.eq(running & draw_ready)
        handshake = o_valid & o_ready
        idle = Signal(32)
        fault = self._check(m, cfg, running, handshake, o_payload[self.out_last_bit], idle)
        took_out = Signal()
        m.d.comb += took_out.eq(handshake & (fault == HarnessError.NONE))
        out_mem = self._recorder(m, "out", self.out_bits, self.out_count, took_out, o_payload)
        out_cycle_mem = self._recorder(m, "out_cycle", STAMP_BITS, self.out_count, took_out,
                                       self.cycle[:STAMP_BITS])
        with m.If(took_out):
            m.d.sync += self.out_count.eq(self.out_count + 1)

        drained = Signal(16)
        with m.If(running):
            m.d.sync += [self.cycle.eq(self.cycle + 1), idle.eq(idle + 1)]
            with m.If(took_in | handshake):
                m.d.sync += idle.eq(0)
            with m.If(fault != HarnessError.NONE):
                m.d.sync += [self.done.eq(1), self.error.eq(fault),
                             self.error_cycle.eq(self.cycle)]
            with m.Elif((self.out_count == cfg.n_out) & (self.in_count == cfg.n_in)):
                m.d.sync += drained.eq(drained + 1)
                with m.If(drained >= cfg.drain):
                    m.d.sync += self.done.eq(1)

        # Read-back port (keeps the record memories through Amaranth's conversion), on a
        # clock of its own that nothing toggles: on the harness's clock the simulator
        # copied three whole rows every cycle for nothing (a tenth of the harness's cost).
        m.domains.readback = ClockDomain("readback", reset_less=True)
        m.d.comb += ClockSignal("readback").eq(self.rd_clock)
        for mem, out in ((in_cycle_mem, self.rd_in_cycle), (out_mem, self.rd_out_payload),
                         (out_cycle_mem, self.rd_out_cycle)):
            port = mem.read_port(domain="readback")
            m.d.comb += [port.addr.eq(self.rd_addr), out.eq(port.data)]
        return m

    @property
    def _bits(self) -> int:
        """Bits of a word's position in a ring."""
        return (self.depth - 1).bit_length()

    def _row(self, count):
        """The ring row of word ``count``."""
        return count[(self.lanes - 1).bit_length():self._bits]

    def _row_ends(self, count):
        """Whether word ``count`` is the last of its row."""
        return count[:(self.lanes - 1).bit_length()] == self.lanes - 1

    def _clock_and_controls(self, m) -> SimpleNamespace:
        """The clock, and the reset and control inputs registered: logic fed straight from
        the top's inputs is evaluated by Verilator on every step (its input-combinational
        region), and with the design behind i_valid and o_ready that was most of the run
        time (the reset alone a fifth). They are registered in a domain without reset."""
        m.domains.sync = domain = ClockDomain("sync")
        m.domains.inputs = inputs = ClockDomain("inputs", reset_less=True)
        if self.clock_input:
            m.d.comb += domain.clk.eq(self.clock)
        else:
            m.submodules.clock = Instance(CLOCK_MODULE, o_clk=domain.clk)
            m.d.comb += self.clock.eq(domain.clk)
        reset = Signal(init=1)
        m.d.inputs += reset.eq(self.reset)
        m.d.comb += [inputs.clk.eq(domain.clk), domain.rst.eq(reset)]
        cfg = SimpleNamespace()
        for name in ("start", "n_in", "n_out", "words_out", "p_in", "p_out", "seed",
                     "idle_timeout", "drain"):
            port = getattr(self, name)
            register = Signal.like(port, name=f"cfg_{name}")
            m.d.inputs += register.eq(port)
            setattr(cfg, name, register)
        return cfg

    @staticmethod
    def _generators(m, cfg, running):
        """Two random streams, seeded until start and stepped each running cycle: whether
        an input gap starts or goes on, and whether ``ready`` is up this cycle."""
        rng_in, rng_out = Signal(32), Signal(32)
        with m.If(~cfg.start):
            m.d.sync += [rng_in.eq(_nonzero_seed(cfg.seed)),
                         rng_out.eq(_nonzero_seed(cfg.seed ^ _XORSHIFT_SEED_MIX))]
        with m.Elif(running):
            m.d.sync += [rng_in.eq(_xorshift32(rng_in)), rng_out.eq(_xorshift32(rng_out))]
        draw_gap, draw_ready = Signal(), Signal()
        m.d.comb += [draw_gap.eq(rng_in[16:] < cfg.p_in),
                     draw_ready.eq(rng_out[16:] >= cfg.p_out)]
        return draw_gap, draw_ready

    def _feed(self, m, cfg, running, draw_gap, i_payload, i_valid, i_ready):
        """The input side; returns the handshake. The current row sits in a one-row
        memory (see ``_row_register``) and shifts out a word per handshake; the ring
        reads the next row meanwhile (rows of at least two words leave it the cycle it
        needs). Before start, row 0 is loaded."""
        in_mem = Memory(shape=self.in_bits * self.lanes, depth=self.depth // self.lanes,
                        init=[])
        m.submodules.in_mem = in_mem
        in_row, in_row_load, in_row_next = self._row_register(m, "in_row",
                                                              self.in_bits * self.lanes)
        gap = Signal()
        next_row = in_mem.read_port()
        m.d.comb += [next_row.addr.eq(Mux(cfg.start, self._row(self.in_count) + 1, 0)),
                     # Every payload bit flips as the run starts: Icarus then runs each
                     # combinational process of the design that reads it at least once
                     # (see qloom.sim.rtl_check).
                     i_payload.eq(Mux(cfg.start, in_row[:self.in_bits],
                                      ~in_row[:self.in_bits])),
                     i_valid.eq(running & (self.in_count < cfg.n_in) & ~gap)]
        took_in = Signal()
        m.d.comb += took_in.eq(i_valid & i_ready)
        m.d.comb += [in_row_load.eq(~cfg.start | took_in),
                     in_row_next.eq(Mux(~cfg.start | self._row_ends(self.in_count),
                                        next_row.data, in_row >> self.in_bits))]
        with m.If(took_in):
            m.d.sync += [self.in_count.eq(self.in_count + 1), gap.eq(draw_gap)]
        with m.Elif(running & gap):
            m.d.sync += gap.eq(draw_gap)
        return took_in

    def _check(self, m, cfg, running, handshake, last, idle):
        """The fault this cycle (HarnessError), from the output word's ``last`` flag, its
        position in the frame and the idle count. Whole assignments, no `If`: see
        qloom.sim.rtl_check (Icarus leaves a process that no input has woken at X)."""
        frame_pos = Signal(COUNT_BITS)
        final = frame_pos == cfg.words_out - 1
        fault = Signal(3)
        m.d.comb += fault.eq(
            Mux(handshake,
                Mux(self.out_count >= cfg.n_out, HarnessError.EXTRA_WORD,
                    Mux(last & ~final, HarnessError.LAST_EARLY,
                        Mux(~last & final, HarnessError.LAST_MISSING, HarnessError.NONE))),
                Mux(running & (idle >= cfg.idle_timeout), HarnessError.TIMEOUT,
                    HarnessError.NONE)))
        with m.If(handshake & (fault == HarnessError.NONE)):
            m.d.sync += frame_pos.eq(Mux(final, 0, frame_pos + 1))
        return fault

    def _recorder(self, m, name, width, count, took, value):
        """A ring of records: words and stamps shift into a row register (``_row_register``,
        ``{name}_row``) from the top, so that a full row holds its first word in lane 0;
        full rows go to memory whole (a memory with a write enable per lane cost twice the
        design's own run time, and still a third more than this under Verilator)."""
        lanes = self.lanes
        mem = Memory(shape=width * lanes, depth=self.depth // lanes, init=[])
        m.submodules[f"{name}_mem"] = mem
        register, load, shifted = self._row_register(m, f"{name}_row", width * lanes)
        m.d.comb += [shifted.eq(Cat(register[width:], value)), load.eq(took)]
        write = mem.write_port()
        m.d.comb += [write.addr.eq(self._row(count)), write.data.eq(shifted),
                     write.en.eq(took & self._row_ends(count))]
        return mem

    @staticmethod
    def _row_register(m, name, width):
        """A register of a whole row as a one-row memory named ``name``: returns its value,
        a load enable and the value to load. A plain register is written every cycle in
        the Verilog Amaranth emits (``always @*`` computes its next value, the clock edge
        copies it), which for rows of a thousand bits was a third of the harness's cost
        in Verilator; a memory is written only when enabled. Its contents start undefined
        in Icarus (the initializers are dropped, see ``harness_verilog``): the bench reads
        only the lanes written."""
        row = Memory(shape=width, depth=1, init=[])
        m.submodules[name] = row
        read, write = row.read_port(domain="comb"), row.write_port()
        value, load, data = Signal(width), Signal(), Signal(width)
        m.d.comb += [read.addr.eq(0), value.eq(read.data), write.addr.eq(0),
                     write.en.eq(load), write.data.eq(data)]
        return value, load, data


# One `initial begin mem[k] = ...; ... end` block per memory, a line per word.
_MEMORY_INIT = re.compile(r"^ *initial begin\n(?: *\w+\[\d+\] = [^;\n]+;\n)+ *end\n", re.M)


def harness_verilog(harness: StreamHarness, name: str = "qloom_harness") -> str:
    """The harness as Verilog, without its memories' initial values.

    Amaranth writes an initializer line per memory word; for memories of a million words
    that is most of the file and most of Verilator's build time. The harness's memories
    are loaded through VPI before they are read, so their initial values never matter;
    the flash model's image (``SpiFlashModel``'s ``flash_image``) is kept."""
    from amaranth.back import verilog
    text = verilog.convert(harness, name=name, emit_src=False)
    return _MEMORY_INIT.sub(lambda m: m[0] if "flash_image[" in m[0] else "", text)


def clock_verilog(period_ps: int) -> str:
    """The harness's clock generator for Icarus, the one piece of hand-written Verilog
    here: Amaranth has no delays, and a clock toggled from cocotb costs a VPI round trip
    per edge. (Verilator takes the clock on an input from its own main loop instead, see
    ``harness_main.cpp``.) Delays are in ns (timescale 1ns/1ps)."""
    half_ns = period_ps / 2000
    return (f"module {CLOCK_MODULE}(output reg clk);\n"
            f"  initial clk = 1'b0;\n"
            f"  always #{half_ns:.3f} clk = ~clk;\n"
            f"endmodule\n")
