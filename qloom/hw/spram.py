"""Weights in the iCE40UP5K's single-port RAMs (SPRAM), loaded from the SPI flash at start-up.

The UP5K has four ``SB_SPRAM256KA`` blocks of 16K x 16 bits (1 Mbit, eight times its 30
block RAMs) but, unlike block RAM, the bitstream cannot initialize them: they power up
empty. Weights kept there need a load path, and of the three there are:

- the host link: every power-up would wait for the host to send the weights again (a
  second of UART at 1 Mbaud for 1 Mbit), and the link protocol would grow a command;
- a compact source on chip: there is none for real weights (a trained network's binary
  weights do not compress to the 120 Kbit of block RAM);
- the board's SPI flash, which holds the bitstream at offset 0 and has megabytes to spare
  (16 MB on the iCEBreaker): programmed once next to the bitstream
  (``iceprog -o 1M weights.bin``), read in a few milliseconds after configuration.

qloom uses the flash. ``FlashLoader`` wakes the flash (0xAB, release from deep power-down),
issues one READ (0x03) at ``FLASH_OFFSET`` and streams the image into the memories,
then raises ``done``; ``SpramRom`` is a read-only memory over one to four SPRAMs side by
side, which the matrix unit reads like a block RAM once ``done`` is high (it takes no
input before). The image is a sequence of 16-bit words, most significant byte first,
memory after memory, SPRAM after SPRAM, address after address (``SpramRom.image``).

Simulators do not know the primitive: ``SB_SPRAM256KA_MODEL`` is a Verilog model of it
(the semantics of Yosys' own ``cells_sim.v``: read-before-nothing, a registered output
that holds while the block is not selected, contents undefined until written), added to
simulations by ``qloom.hw.dsp.simulation_models`` like the ECP5 multiplier's.
``SpiFlashModel`` is the flash side of a simulation (READ and wake-up only).
"""

from __future__ import annotations

import math

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["SPRAM_DEPTH", "SPRAM_WIDTH", "UP5K_SPRAMS", "FLASH_OFFSET", "WAKE_CYCLES",
           "SpiSignature", "LoadSignature", "Spram", "SpramRom", "FlashLoader", "SpramLoader",
           "SpiFlashModel", "SB_SPRAM256KA_MODEL", "spram_image", "image_bytes", "simulation_models",
           "spram_blocks"]

SPRAM_DEPTH, SPRAM_WIDTH, UP5K_SPRAMS = 16384, 16, 4
# Where the weight image goes in the flash: 1 MiB, past any iCE40 bitstream (the UP5K's
# is 104 KB), the usual place for user data on the iCEBreaker.
FLASH_OFFSET = 0x100000
# Cycles to wait after the wake-up command (tRES1 is 3 us on the iCEBreaker's W25Q128;
# 512 cycles are 5 us at 100 MHz and longer at any slower clock).
WAKE_CYCLES = 512
_ADDR_BITS = 14
_READ, _WAKE = 0x03, 0xAB


class SpiSignature(wiring.Signature):
    """The controller's side of a single-bit SPI bus (mode 0)."""

    def __init__(self):
        super().__init__({"sck": Out(1), "cs_n": Out(1, init=1), "copi": Out(1),
                          "cipo": In(1)})


class LoadSignature(wiring.Signature):
    """The loader's side of a write bus into ``blocks`` SPRAMs: ``data`` goes to address
    ``addr`` of SPRAM ``block`` when ``en``; ``done`` once every word is in."""

    def __init__(self, blocks: int):
        if not isinstance(blocks, int) or blocks < 1:
            raise TypeError(f"SPRAM count must be a positive integer, not {blocks!r}")
        self.blocks = blocks
        super().__init__({"block": Out(range(blocks)), "addr": Out(_ADDR_BITS),
                          "data": Out(SPRAM_WIDTH), "en": Out(1), "done": Out(1)})

    def __eq__(self, other):
        return isinstance(other, LoadSignature) and other.blocks == self.blocks

    def __repr__(self):
        return f"LoadSignature({self.blocks})"


def spram_blocks(width: int) -> int:
    """SPRAMs side by side holding words of ``width`` bits."""
    return math.ceil(width / SPRAM_WIDTH)


class Spram(wiring.Component):
    """One ``SB_SPRAM256KA``: a write when ``cs & wren``, a read into ``data_out`` (one
    cycle later) when ``cs & ~wren``; ``data_out`` holds while ``cs`` is low."""

    def __init__(self):
        super().__init__({"addr": In(_ADDR_BITS), "data_in": In(SPRAM_WIDTH), "wren": In(1),
                          "cs": In(1), "data_out": Out(SPRAM_WIDTH)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.block = Instance(
            "SB_SPRAM256KA",
            i_ADDRESS=self.addr, i_DATAIN=self.data_in, i_MASKWREN=Const(0b1111, 4),
            i_WREN=self.wren, i_CHIPSELECT=self.cs, i_CLOCK=ClockSignal("sync"),
            i_STANDBY=Const(0), i_SLEEP=Const(0), i_POWEROFF=Const(1),
            o_DATAOUT=self.data_out)
        return m


class SpramRom(wiring.Component):
    """``init`` (a list of ``width``-bit words, at most 16K of them) in SPRAMs side by side:
    SPRAM ``j`` holds bits ``16j .. 16j+15`` of every word. Read like a memory's read
    port (``addr``, ``en``, ``data`` one cycle later, held while ``en`` is low) after
    ``load`` has written ``image`` into it."""

    def __init__(self, *, width: int, init: list[int]):
        if not isinstance(width, int) or width < 1:
            raise TypeError(f"Width must be a positive integer, not {width!r}")
        depth = len(init)
        if not 1 <= depth <= SPRAM_DEPTH:
            raise ValueError(f"An SPRAM memory holds 1 to {SPRAM_DEPTH} words, not {depth}")
        if spram_blocks(width) > UP5K_SPRAMS:
            raise ValueError(f"An SPRAM memory is at most {UP5K_SPRAMS * SPRAM_WIDTH} bits "
                             f"wide ({UP5K_SPRAMS} SPRAMs side by side), not {width}")
        self.width, self.depth = width, depth
        self.blocks = spram_blocks(width)
        self._init = [int(v) for v in init]
        super().__init__({"addr": In(range(depth)), "en": In(1), "data": Out(width),
                          "load": In(LoadSignature(self.blocks))})

    def image(self) -> list[int]:
        """The 16-bit words to load (``spram_image``)."""
        return spram_image(self.width, self._init)

    def elaborate(self, platform):
        m = Module()
        outs = []
        for j in range(self.blocks):
            m.submodules[f"spram{j}"] = block = Spram()
            write = self.load.en & (self.load.block == j)
            m.d.comb += [block.addr.eq(Mux(self.load.done, self.addr, self.load.addr)),
                         block.data_in.eq(self.load.data), block.wren.eq(write),
                         block.cs.eq(Mux(self.load.done, self.en, write))]
            outs.append(block.data_out)
        m.d.comb += self.data.eq(Cat(*outs)[:self.width])
        return m


class FlashLoader(wiring.Component):
    """Reads ``sum(blocks)`` 16-bit words from the SPI flash at byte ``offset`` after reset
    and writes them in order into SPRAM 0 (``blocks[0]`` words from address 0), SPRAM
    1, ...; raises ``load.done`` when the last is written. SCK runs at half the clock;
    ``cipo`` is sampled at the end of SCK's high phase."""

    def __init__(self, *, blocks: list[int], offset: int = FLASH_OFFSET,
                 wake_cycles: int = WAKE_CYCLES):
        if not blocks or any(not isinstance(n, int) or not 1 <= n <= SPRAM_DEPTH
                             for n in blocks):
            raise ValueError(f"SPRAM word counts must be 1 to {SPRAM_DEPTH} each, not "
                             f"{blocks!r}")
        if not isinstance(offset, int) or not 0 <= offset < 1 << 24:
            raise ValueError(f"Flash offset must be a 24-bit byte address, not {offset!r}")
        self.words, self.offset, self.wake_cycles = list(blocks), offset, wake_cycles
        super().__init__({"flash": Out(SpiSignature()),
                          "load": Out(LoadSignature(len(blocks)))})

    def elaborate(self, platform):
        m = Module()
        flash, load = self.flash, self.load
        shift_out = Signal(32)
        shift_in = Signal(SPRAM_WIDTH)
        bits = Signal(range(33))          # bits left in the current field
        wait = Signal(range(self.wake_cycles + 1))
        block = Signal(range(len(self.words)))
        addr = Signal(_ADDR_BITS)
        last_addr = Signal(_ADDR_BITS)
        # Whole-signal assignments (no comb If): see qloom.sim.rtl_check.
        last = self.words[-1] - 1
        for k in reversed(range(len(self.words) - 1)):
            last = Mux(block == k, self.words[k] - 1, last)
        m.d.comb += [flash.copi.eq(shift_out[-1]), last_addr.eq(last)]
        # Whether the word being received is its block's last and the block the last one,
        # as registers: address and block change only when a word is written, 32 cycles
        # or more before the next write looks at them. Compared in the WRITE state, the
        # block's last address (a mux), the compare and the flash select were 6 LUT
        # levels: 48.7 MHz on the iCEBreaker at 50.25.
        at_last, last_block = Signal(), Signal()
        m.d.sync += [at_last.eq(addr == last_addr), last_block.eq(block == len(self.words) - 1)]
        m.d.comb += [load.block.eq(block), load.addr.eq(addr), load.data.eq(shift_in)]

        def shifting(done_bits):
            """One SPI bit per two cycles; ``done_bits`` runs when the field is over."""
            with m.If(~flash.sck):
                m.d.sync += flash.sck.eq(1)
            with m.Else():
                m.d.sync += [flash.sck.eq(0), shift_out.eq(shift_out << 1),
                             shift_in.eq(Cat(flash.cipo, shift_in[:-1])), bits.eq(bits - 1)]
                with m.If(bits == 1):
                    done_bits()

        with m.FSM() as fsm:
            with m.State("START"):
                m.d.sync += [flash.cs_n.eq(0), shift_out.eq(_WAKE << 24), bits.eq(8)]
                m.next = "WAKE"
            with m.State("WAKE"):
                def woken():
                    m.d.sync += [flash.cs_n.eq(1), wait.eq(self.wake_cycles)]
                    m.next = "SLEEP"
                shifting(woken)
            with m.State("SLEEP"):
                m.d.sync += wait.eq(wait - 1)
                with m.If(wait == 0):
                    m.d.sync += [flash.cs_n.eq(0), shift_out.eq((_READ << 24) | self.offset),
                                 bits.eq(32)]
                    m.next = "COMMAND"
            with m.State("COMMAND"):
                def addressed():
                    m.d.sync += bits.eq(SPRAM_WIDTH)
                    m.next = "DATA"
                shifting(addressed)
            with m.State("DATA"):
                def word():
                    m.d.sync += bits.eq(SPRAM_WIDTH)
                    m.next = "WRITE"
                shifting(word)
            with m.State("WRITE"):
                # The word is in shift_in: written now (load.en), then the next address.
                m.d.sync += addr.eq(addr + 1)
                m.next = "DATA"
                with m.If(at_last):
                    m.d.sync += [addr.eq(0), block.eq(block + 1)]
                    with m.If(last_block):
                        m.d.sync += flash.cs_n.eq(1)
                        m.next = "DONE"
            with m.State("DONE"):
                pass
        # ``done`` from a flip-flop of its own: it gates the units' input.
        done = Signal()
        with m.If(fsm.ongoing("WRITE") & at_last & last_block):
            m.d.sync += done.eq(1)
        m.d.comb += [load.en.eq(fsm.ongoing("WRITE")), load.done.eq(done)]
        return m


def spram_image(width: int, words: list[int]) -> list[int]:
    """The 16-bit words that load ``words`` of ``width`` bits into SPRAMs side by side:
    SPRAM by SPRAM (low bits first), address by address."""
    mask = (1 << SPRAM_WIDTH) - 1
    return [(int(word) >> (SPRAM_WIDTH * j)) & mask
            for j in range(spram_blocks(width)) for word in words]


class SpramLoader(wiring.Component):
    """One ``FlashLoader`` for several SPRAM memories (``images``: each memory's
    ``image()``, ``blocks``: its SPRAM count), in that order in the flash image; memory
    ``k`` is written through port ``load<k>``."""

    def __init__(self, *, images: list[list[int]], blocks: list[int],
                 offset: int = FLASH_OFFSET, wake_cycles: int = WAKE_CYCLES):
        if len(images) != len(blocks) or not images:
            raise ValueError("SpramLoader needs one image per memory, and at least one")
        self.images, self.blocks = images, blocks
        self.offset, self.wake_cycles = offset, wake_cycles
        super().__init__({"flash": Out(SpiSignature()),
                          **{f"load{k}": Out(LoadSignature(n)) for k, n in enumerate(blocks)}})

    def image(self) -> list[int]:
        """The whole flash image: every memory's words in order."""
        return [word for image in self.images for word in image]

    def elaborate(self, platform):
        m = Module()
        counts = [len(image) // n for image, n in zip(self.images, self.blocks)
                  for _ in range(n)]
        m.submodules.loader = loader = FlashLoader(blocks=counts, offset=self.offset,
                                                   wake_cycles=self.wake_cycles)
        wiring.connect(m, loader.flash, wiring.flipped(self.flash))
        base = 0
        for k, n in enumerate(self.blocks):
            port = getattr(self, f"load{k}")
            mine = (loader.load.block >= base) & (loader.load.block < base + n)
            m.d.comb += [port.block.eq(loader.load.block - base), port.addr.eq(loader.load.addr),
                         port.data.eq(loader.load.data), port.en.eq(loader.load.en & mine),
                         port.done.eq(loader.load.done)]
            base += n
        return m


def image_bytes(words: list[int]) -> bytes:
    """The flash bytes of a 16-bit word image (most significant byte first)."""
    return b"".join(int(w).to_bytes(2, "big") for w in words)


class SpiFlashModel(wiring.Component):
    """The flash side of a simulation: ``data`` (bytes) at byte address ``offset``,
    answering READ (0x03) in SPI mode 0 (the wake-up command is accepted and ignored).
    It samples the bus on the system clock, so SCK must run at most at half of it (as
    ``FlashLoader``'s does). Bytes outside ``data`` read as 0xFF, like erased flash."""

    def __init__(self, *, data: bytes, offset: int = FLASH_OFFSET):
        if not data:
            raise ValueError("The flash model needs at least one byte of data")
        self.data, self.offset = bytes(data), offset
        super().__init__({"flash": In(SpiSignature())})

    def elaborate(self, platform):
        m = Module()
        flash = self.flash
        # Named for the harness, which keeps this memory's initial values
        # (qloom.sim.harness.harness_verilog).
        m.submodules.flash_image = mem = Memory(shape=8, depth=len(self.data) + 1,
                                                init=list(self.data) + [0xFF])
        port = mem.read_port(domain="comb")
        sck_prev = Signal()
        command = Signal(32)
        count = Signal(range(33))
        reading = Signal()
        addr = Signal(24)
        bit = Signal(range(8))
        byte = Signal(8)
        inside = Signal()
        m.d.comb += [inside.eq((addr >= self.offset) & (addr < self.offset + len(self.data))),
                     port.addr.eq(Mux(inside, addr - self.offset, len(self.data))),
                     byte.eq(port.data)]
        m.d.sync += sck_prev.eq(flash.sck)
        rising, falling = flash.sck & ~sck_prev, ~flash.sck & sck_prev
        with m.If(flash.cs_n):
            m.d.sync += [count.eq(0), reading.eq(0), bit.eq(0)]
        with m.Elif(rising & ~reading):
            m.d.sync += [command.eq(Cat(flash.copi, command[:-1])), count.eq(count + 1)]
            with m.If((count == 31) & (command[23:31] == _READ)):
                m.d.sync += [reading.eq(1), addr.eq(Cat(flash.copi, command[:23]))]
        with m.Elif(falling & reading):
            # The next bit, most significant first, leaves on the falling edge.
            m.d.sync += [flash.cipo.eq(Cat(*reversed(list(byte))).bit_select(bit, 1)),
                         bit.eq(bit + 1)]
            with m.If(bit == 7):
                m.d.sync += addr.eq(addr + 1)
        return m


# The semantics of Yosys' share/ice40/cells_sim.v model (Lattice's SB_SPRAM256KA): a
# registered read when selected and not writing, held otherwise; nibble write masks.
SB_SPRAM256KA_MODEL = """\
// Simulation model of the iCE40UP5K SB_SPRAM256KA (16K x 16 single-port RAM), as qloom
// instantiates it (qloom.hw.spram): contents undefined until written.
module SB_SPRAM256KA (
    input [13:0] ADDRESS,
    input [15:0] DATAIN,
    input [3:0] MASKWREN,
    input WREN, CHIPSELECT, CLOCK, STANDBY, SLEEP, POWEROFF,
    output reg [15:0] DATAOUT
);
    reg [15:0] mem [0:16383];
    always @(posedge CLOCK) begin
        if (CHIPSELECT && !STANDBY && !SLEEP && POWEROFF) begin
            if (!WREN) begin
                DATAOUT <= mem[ADDRESS];
            end else begin
                if (MASKWREN[0]) mem[ADDRESS][3:0] <= DATAIN[3:0];
                if (MASKWREN[1]) mem[ADDRESS][7:4] <= DATAIN[7:4];
                if (MASKWREN[2]) mem[ADDRESS][11:8] <= DATAIN[11:8];
                if (MASKWREN[3]) mem[ADDRESS][15:12] <= DATAIN[15:12];
            end
        end
    end
endmodule
"""


def simulation_models(verilog: str) -> dict[str, str]:
    """File name -> Verilog of the SPRAM model when ``verilog`` instantiates the block."""
    return {"SB_SPRAM256KA.v": SB_SPRAM256KA_MODEL} if "SB_SPRAM256KA " in verilog else {}
