"""The board top: the compiled accelerator (``qloom_top`` Verilog) behind a UART host link,
with a PLL to the accelerator clock, a reset synchronizer, a heartbeat LED and an error LED.

``LinkCore`` is everything that runs in the accelerator clock domain and has only four pins
(``uart_rx``, ``uart_tx``, ``led_beat``, ``led_error``), so it simulates without a board (a
small ``divisor`` makes the UART fast). ``BoardTop`` adds the board's clocking and pins.
The host protocol is described in ``qloom.hw.link``.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import ClockDomain, ClockSignal, Const, Elaboratable, Instance, Module, \
    ResetSignal, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import ResetSynchronizer
from amaranth.lib.wiring import In, Out

from ..manifest import input_registered
from .link import Link, frame_layout
from .protocol import WireFormat
from .spram import SpiSignature
from .target import Family
from .uart import UARTRx, UARTTx, check_divisor, divisor_for

__all__ = ["PLLPlan", "ice40_pll", "ecp5_pll", "pll_plan", "VerilogAccelerator", "LinkCore",
           "BoardTop", "link_core_verilog"]


@dataclass(frozen=True)
class PLLPlan:
    """Divider settings of a PLL and the frequency they achieve."""

    primitive: str
    input_mhz: float
    target_mhz: float
    achieved_mhz: float
    params: dict

    @property
    def error(self) -> float:
        return abs(self.achieved_mhz - self.target_mhz) / self.target_mhz


def ice40_pll(input_mhz: float, target_mhz: float) -> PLLPlan:
    """SB_PLL40 settings (simple feedback) closest to ``target_mhz``, as icepll computes
    them: PFD 10-133 MHz, VCO 533-1066 MHz, output = VCO / 2**DIVQ (16-275 MHz)."""
    if not 16 <= target_mhz <= 275:
        raise ValueError(f"iCE40 PLL output must be within 16..275 MHz, not {target_mhz}")
    best = None
    for divr in range(16):
        pfd = input_mhz / (divr + 1)
        if not 10 <= pfd <= 133:
            continue
        for divf in range(128):
            vco = pfd * (divf + 1)
            if not 533 <= vco <= 1066:
                continue
            for divq in range(1, 7):
                out = vco / (1 << divq)
                if best is None or abs(out - target_mhz) < abs(best[0] - target_mhz):
                    best = (out, divr, divf, divq, pfd)
    if best is None:
        raise ValueError(f"No iCE40 PLL setting makes {target_mhz} MHz from {input_mhz} MHz")
    out, divr, divf, divq, pfd = best
    filter_range = next(k for k, hi in enumerate((17, 26, 44, 66, 101, 1e9), 1) if pfd < hi)
    return PLLPlan("SB_PLL40_PAD", input_mhz, target_mhz, round(out, 4), {
        "FEEDBACK_PATH": "SIMPLE", "DIVR": divr, "DIVF": divf, "DIVQ": divq,
        "FILTER_RANGE": filter_range})


def ecp5_pll(input_mhz: float, target_mhz: float) -> PLLPlan:
    """EHXPLLL settings (feedback from CLKOP) closest to ``target_mhz``, as ecppll computes
    them: PFD >= 3.125 MHz, VCO 400-800 MHz."""
    if not 3.125 <= target_mhz <= 400:
        raise ValueError(f"ECP5 PLL output must be within 3.125..400 MHz, not {target_mhz}")
    best = None
    for in_div in range(1, 129):
        pfd = input_mhz / in_div
        if pfd < 3.125:
            break
        for fb_div in range(1, 81):
            out = pfd * fb_div
            for op_div in range(1, 129):
                if 400 <= out * op_div <= 800:
                    if best is None or abs(out - target_mhz) < abs(best[0] - target_mhz):
                        best = (out, in_div, fb_div, op_div)
                    break
    if best is None:
        raise ValueError(f"No ECP5 PLL setting makes {target_mhz} MHz from {input_mhz} MHz")
    out, in_div, fb_div, op_div = best
    return PLLPlan("EHXPLLL", input_mhz, target_mhz, round(out, 4), {
        "CLKI_DIV": in_div, "CLKFB_DIV": fb_div, "CLKOP_DIV": op_div,
        "CLKOP_CPHASE": op_div - 1, "CLKOP_FPHASE": 0})


# The PLL of each family that has one qloom drives.
_PLLS = {Family.ICE40: ice40_pll, Family.ECP5: ecp5_pll}


def pll_plan(family: Family, input_mhz: float, target_mhz: float) -> PLLPlan | None:
    """The PLL settings that make ``target_mhz`` from the ``input_mhz`` oscillator on
    ``family``; None for a family whose board top runs on the oscillator as it is (Xilinx 7,
    built by the vendor's tools)."""
    pll = _PLLS.get(family)
    return pll(input_mhz, target_mhz) if pll is not None else None


class VerilogAccelerator(wiring.Component):
    """The compiled accelerator (Verilog module ``top``, added to the platform separately)
    as a component with the qloom stream contract on ``i`` and ``o``. ``registered_input``:
    its ``i.ready`` is a register and ``i`` goes into registers only (the manifest's
    ``input.registered``), so the link feeds it with no skid buffer."""

    def __init__(self, input_format: WireFormat, output_format: WireFormat, *,
                 top: str = "qloom_top", flash: bool = False, registered_input: bool = False):
        self.top, self.registered_input = top, bool(registered_input)
        members = {"i": In(stream.Signature(frame_layout(input_format))),
                   "o": Out(stream.Signature(frame_layout(output_format)))}
        if flash:       # weights in SPRAM, loaded from the SPI flash (qloom.hw.spram)
            members["flash"] = Out(SpiSignature())
        super().__init__(members)

    @classmethod
    def from_manifest(cls, manifest: dict) -> "VerilogAccelerator":
        """The accelerator a compiled design's ``manifest`` describes."""
        return cls(WireFormat.from_manifest(manifest["input"]),
                   WireFormat.from_manifest(manifest["output"]),
                   top=manifest.get("top", "qloom_top"), flash="flash" in manifest,
                   registered_input=input_registered(manifest))

    def elaborate(self, platform):
        m = Module()
        ports = {}
        if "flash" in self.signature.members:
            ports = {"o_flash__sck": self.flash.sck, "o_flash__cs_n": self.flash.cs_n,
                     "o_flash__copi": self.flash.copi, "i_flash__cipo": self.flash.cipo}
        m.submodules.accelerator = Instance(
            self.top, i_clk=ClockSignal(), i_rst=ResetSignal(),
            i_i__payload=self.i.payload.as_value(), i_i__valid=self.i.valid,
            o_i__ready=self.i.ready,
            o_o__payload=self.o.payload.as_value(), o_o__valid=self.o.valid,
            i_o__ready=self.o.ready, **ports)
        return m


class LinkCore(wiring.Component):
    """UART receiver -> ``Link`` -> ``accelerator`` -> ``Link`` -> UART transmitter, with
    the LEDs. ``clock_hz`` sets the heartbeat (about 1 Hz), the error LED's flash (1/8 to
    1/4 s) and the link timeout (50 ms without a byte inside a request). An accelerator
    whose ``registered_input`` is true (``VerilogAccelerator``) is fed with no skid buffer
    (``Link``'s ``registered_feed``)."""

    def __init__(self, accelerator: wiring.Component, *, input_format: WireFormat,
                 output_format: WireFormat, divisor: int, clock_hz: float):
        if not isinstance(accelerator, wiring.Component):
            raise TypeError(f"Accelerator must be a wiring.Component, not {accelerator!r}")
        if not clock_hz > 0:
            raise ValueError(f"Clock frequency must be positive, not {clock_hz!r}")
        self.accelerator = accelerator
        self.input_format, self.output_format = input_format, output_format
        self.divisor, self.clock_hz = divisor, clock_hz
        check_divisor(divisor)
        members = {"uart_rx": In(1, init=1), "uart_tx": Out(1, init=1),
                   "led_beat": Out(1), "led_error": Out(1)}
        if "flash" in accelerator.signature.members:
            members["flash"] = Out(SpiSignature())
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.rx = rx = UARTRx(divisor=self.divisor)
        m.submodules.tx = tx = UARTTx(divisor=self.divisor)
        timeout = max(20 * self.divisor, int(self.clock_hz * 0.05))
        m.submodules.link = link = Link(
            input_format=self.input_format, output_format=self.output_format,
            timeout=timeout,
            registered_feed=getattr(self.accelerator, "registered_input", False))
        m.submodules.accelerator = acc = self.accelerator
        m.d.comb += [rx.rx.eq(self.uart_rx), self.uart_tx.eq(tx.tx),
                     link.rx_error.eq(rx.error)]
        wiring.connect(m, rx.o, link.i)
        wiring.connect(m, link.o, tx.i)
        wiring.connect(m, link.feed, acc.i)
        wiring.connect(m, acc.o, link.result)
        if "flash" in self.signature.members:
            wiring.connect(m, acc.flash, wiring.flipped(self.flash))

        # One free-running counter: bit n toggles about once a second (heartbeat); an error
        # lights the error LED for 1/8 to 1/4 s, counted on the edges of bit n - 3.
        n = max(4, int(self.clock_hz).bit_length() - 1)
        count = Signal(n + 1)
        m.d.sync += count.eq(count + 1)
        m.d.comb += self.led_beat.eq(count[n])
        eighth, eighth_prev, armed = Signal(), Signal(), Signal()
        m.d.comb += eighth.eq(count[n - 3])
        m.d.sync += eighth_prev.eq(eighth)
        with m.If(link.error):
            m.d.sync += [self.led_error.eq(1), armed.eq(0)]
        with m.Elif(eighth & ~eighth_prev):
            m.d.sync += armed.eq(1)
            with m.If(armed):
                m.d.sync += self.led_error.eq(0)
        return m


def _leds(platform):
    """(heartbeat, error) LED output signals of a board."""
    names = {name for name, _ in platform.resources}
    if "led" in names:
        return platform.request("led", 0).o, platform.request("led", 1).o
    rgb = platform.request("rgb_led", 0)
    return rgb.g.o, rgb.r.o


class BoardTop(Elaboratable):
    """``LinkCore`` on a board: the oscillator through a PLL (``pll``: a ``PLLPlan`` from
    ``ice40_pll``/``ecp5_pll``, or None to run at the oscillator frequency) into the
    ``sync`` domain, held in reset until the PLL locks."""

    def __init__(self, *, accelerator: wiring.Component, input_format: WireFormat,
                 output_format: WireFormat, baud: int, pll: PLLPlan | None,
                 oscillator_mhz: float):
        self.pll, self.baud = pll, baud
        self.clock_mhz = pll.achieved_mhz if pll else oscillator_mhz
        self.divisor = divisor_for(self.clock_mhz * 1e6, baud)
        self.core = LinkCore(accelerator, input_format=input_format,
                             output_format=output_format, divisor=self.divisor,
                             clock_hz=self.clock_mhz * 1e6)

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = ClockDomain("sync")
        locked = Signal()
        clk = Signal()
        m.d.comb += ClockSignal("sync").eq(clk)
        if self.pll is None:
            m.d.comb += [clk.eq(platform.request(platform.default_clk).i), locked.eq(1)]
        elif self.pll.primitive == "SB_PLL40_PAD":
            pin = platform.request(platform.default_clk, dir="-")
            params = {f"p_{k}": v for k, v in self.pll.params.items()}
            m.submodules.pll = Instance(
                "SB_PLL40_PAD", **params, i_PACKAGEPIN=pin.io, i_RESETB=Const(1),
                i_BYPASS=Const(0), o_PLLOUTGLOBAL=clk, o_LOCK=locked)
        else:
            params = {f"p_{k}": v for k, v in self.pll.params.items()}
            m.submodules.pll = Instance(
                "EHXPLLL", **params, p_FEEDBK_PATH="CLKOP", p_CLKOP_ENABLE="ENABLED",
                p_CLKOS_ENABLE="DISABLED", p_CLKOS2_ENABLE="DISABLED",
                p_CLKOS3_ENABLE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_PLLRST_ENA="DISABLED",
                p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED", p_DPHASE_SOURCE="DISABLED",
                p_PLL_LOCK_MODE=0, i_CLKI=platform.request(platform.default_clk).i, o_CLKOP=clk, i_CLKFB=clk, i_RST=Const(0),
                i_STDBY=Const(0), i_PHASESEL0=Const(0), i_PHASESEL1=Const(0),
                i_PHASEDIR=Const(1), i_PHASESTEP=Const(1), i_PHASELOADREG=Const(1),
                i_PLLWAKESYNC=Const(0), i_ENCLKOP=Const(0), o_LOCK=locked)
        if self.pll is not None:
            platform.add_clock_constraint(clk, self.clock_mhz * 1e6)
        if self.pll is not None and self.pll.primitive == "EHXPLLL":
            # On the ECP5 the synchronized reset goes through a DCCA onto a global line,
            # which nextpnr routes to every flip-flop's LSR (it promotes only clocks by
            # itself): in general routing, the reset's route to the far flip-flops was the
            # critical path of the jet tagger at 150 MHz on the ULX3S-85F (8.4 ns).
            m.domains.reset_local = ClockDomain("reset_local")
            m.d.comb += ClockSignal("reset_local").eq(clk)
            m.submodules.reset_sync = ResetSynchronizer(~locked, domain="reset_local")
            m.submodules.reset_global = Instance(
                "DCCA", i_CLKI=ResetSignal("reset_local"), i_CE=Const(1),
                o_CLKO=ResetSignal("sync"))
        else:
            m.submodules.reset_sync = ResetSynchronizer(~locked, domain="sync")

        m.submodules.core = core = self.core
        uart = platform.request("uart", 0)
        beat, error = _leds(platform)
        m.d.comb += [core.uart_rx.eq(uart.rx.i), uart.tx.o.eq(core.uart_tx),
                     beat.eq(core.led_beat), error.eq(core.led_error)]
        if "uart_tx_enable" in {name for name, _ in platform.resources}:
            m.d.comb += platform.request("uart_tx_enable", 0).o.eq(1)   # ULX3S
        if "flash" in core.signature.members:
            # The configuration flash, free after configuration: the SPRAM weights' source.
            # (amaranth-boards inverts cs, wp and hold: 1 selects, 0 leaves wp/hold high.)
            pins = platform.request("spi_flash_1x", 0)
            m.d.comb += [pins.cs.o.eq(~core.flash.cs_n), pins.clk.o.eq(core.flash.sck),
                         pins.copi.o.eq(core.flash.copi), core.flash.cipo.eq(pins.cipo.i)]
            m.d.comb += [getattr(pins, name).o.eq(0) for name in ("wp", "hold")
                         if hasattr(pins, name)]
        return m


def link_core_verilog(manifest: dict, *, divisor: int = 4, clock_hz: float = 1e5,
                      name: str = "board_top") -> str:
    """Verilog of ``LinkCore`` around the compiled accelerator of ``manifest`` (module
    ``qloom_top``, compiled separately), for simulating the whole host link: ports ``clk``,
    ``rst``, ``uart_rx``, ``uart_tx``, ``led_beat``, ``led_error``. A small ``divisor`` and
    ``clock_hz`` keep the UART and the timeout short in simulation."""
    from amaranth.back import verilog
    acc = VerilogAccelerator.from_manifest(manifest)
    core = LinkCore(acc, input_format=WireFormat.from_manifest(manifest["input"]),
                    output_format=WireFormat.from_manifest(manifest["output"]),
                    divisor=divisor, clock_hz=clock_hz)
    return verilog.convert(core, name=name)
