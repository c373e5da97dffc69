"""A stream FIFO with every handshake output a flip-flop.

Used between layers to absorb rate differences (and on the short branch of a residual
connection, where the long branch's latency must be buffered).
"""

from amaranth.hdl import Module, Mux, Shape, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .estimate import fifo_block_ram, has_lutram
from .target import Family
from .weight_mem import RamStyle, read_register

__all__ = ["StreamFIFO", "fifo_storage", "fifo_registered_read"]


def fifo_storage(depth: int, width: int, family: Family | None) -> RamStyle:
    """Where the storage of a ``depth``-word FIFO of ``width`` bits goes on ``family``:
    block RAM where a block is cheaper than the cells (``fifo_block_ram``), else
    distributed RAM cells (ECP5) or flip-flops; for no family, where Yosys decides. Said
    explicitly, so that what is built is what the estimate counts: left to Yosys, LFC-w1a1's
    512 x 2-bit FIFO went to a block where the rule counted 32 RAM cells."""
    if family is None or depth < 3:
        return RamStyle.AUTO
    if fifo_block_ram(depth - 1, width, family):
        return RamStyle.BLOCK
    return RamStyle.LUTRAM if has_lutram(family) else RamStyle.DISTRIBUTED


def fifo_registered_read(depth: int, width: int, family: Family | None) -> bool:
    """Whether a ``depth``-word FIFO of ``width`` bits registers its storage's read data
    once more: on the ECP5 when the storage is block RAM, whose read data leave 5.83 ns
    after the clock unless the block's own output register holds them
    (``qloom.flows.toolchain.ecp5_outreg`` moves this register there). LFC-w1a1 at default folding:
    FIFO block -> width converter -> skid buffer was its critical path (89.2 MHz at 100)."""
    return (family is Family.ECP5 and depth >= 4
            and fifo_storage(depth, width, family) is RamStyle.BLOCK)


class StreamFIFO(wiring.Component):
    """First-in first-out buffer of ``depth`` payloads of ``shape``.

    Words are delivered in order, each exactly once. The output is registered (the memory's
    read register), so a word written while the FIFO is empty leaves one cycle later at the
    earliest; full throughput (one word per cycle) in steady state. ``i.ready`` and
    ``o.valid`` are flip-flops.

    Built here rather than with Amaranth's ``SyncFIFOBuffered`` (which the shallow cases
    still use) because that FIFO derives ``w_rdy`` by comparing its level counter in logic:
    on the UP5K that compare drove the enable of every payload register of the skid buffer
    in front (TFC-w1a1 with ``--fold auto``: 21.2 ns, 15.9 of them routing). Here "room"
    and "not empty" are next-state registers, exact, so the capacity is still ``depth``.

    ``ram_style`` places the storage (``fifo_storage``). With ``registered_read=True``
    (``fifo_registered_read``; depth 4 or more) the memory's read data pass through one
    more register (no reset, one enable: the one an ECP5 block RAM holds itself) before
    the output register: the two move together when the output is free or being taken, a
    word leaves two cycles after it is read, and the memory holds two words fewer.
    """

    def __init__(self, *, shape, depth: int, registered_read: bool = False,
                 ram_style: RamStyle = RamStyle.AUTO):
        try:
            Shape.cast(shape)
        except TypeError as exc:
            raise TypeError(f"Payload shape must be a shape-like object, not {shape!r}") from exc
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
            raise TypeError(f"FIFO depth must be a positive integer, not {depth!r}")
        if not isinstance(registered_read, bool):
            raise TypeError(f"Registered read must be a bool, not {registered_read!r}")
        if not isinstance(ram_style, RamStyle) or ram_style is RamStyle.SPRAM:
            raise TypeError(f"FIFO storage style must be a RamStyle other than SPRAM, not "
                            f"{ram_style!r}")
        if registered_read and depth < 4:
            raise ValueError(f"A FIFO with a registered read needs a depth of 4 or more, not "
                             f"{depth}")
        self._shape = shape
        self._depth = depth
        self._registered_read = registered_read
        self._ram_style = ram_style
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    @property
    def shape(self):
        return self._shape

    @property
    def depth(self) -> int:
        return self._depth

    @property
    def registered_read(self) -> bool:
        return self._registered_read

    def elaborate(self, platform):
        m = Module()
        width = Shape.cast(self._shape).width
        if self._depth < 3:
            # One or two words: Amaranth's level compares are single flip-flops already.
            m.submodules.fifo = fifo = SyncFIFOBuffered(width=width, depth=self._depth)
            m.d.comb += [
                fifo.w_data.eq(self.i.payload),
                fifo.w_en.eq(self.i.valid),
                self.i.ready.eq(fifo.w_rdy),
                self.o.payload.eq(fifo.r_data),
                self.o.valid.eq(fifo.r_rdy),
                fifo.r_en.eq(self.o.ready),
            ]
            return m

        # Words in the memory; its read register holds one, the extra read register one.
        stored = self._depth - 1 - self._registered_read
        # The memory is never read where it is written in the same cycle (a word is read
        # only once the level counts it, written only where none is waiting), so a
        # collision needs no handling (no_rw_check). Yosys honours that only when it
        # makes the synchronous read port itself, from an asynchronous one and the
        # register after it (memory_dff): a synchronous port emitted as such kept its
        # read-before-write emulation, a mux and registers after an ECP5 block's outputs.
        m.submodules.storage = storage = Memory(
            shape=width, depth=stored, init=[],
            attrs={**self._ram_style.attrs, "no_rw_check": 1})
        w_port = storage.write_port()
        r_port = storage.read_port(domain="comb")
        r_en = Signal()
        r_data = read_register(m, r_port.data, r_en, "read")
        produce, consume = Signal(range(stored)), Signal(range(stored))
        level = Signal(range(stored + 1))          # words in the memory
        room, filled = Signal(init=1), Signal()   # level < stored, level > 0
        out_valid = Signal()
        write = self.i.valid & room
        advance = ~out_valid | self.o.ready
        read = filled & advance
        m.d.comb += [
            self.i.ready.eq(room),
            w_port.addr.eq(produce), w_port.data.eq(self.i.payload), w_port.en.eq(write),
            r_port.addr.eq(consume), self.o.valid.eq(out_valid),
        ]
        with m.If(write):
            m.d.sync += produce.eq(Mux(produce == stored - 1, 0, produce + 1))
        with m.If(read):
            m.d.sync += consume.eq(Mux(consume == stored - 1, 0, consume + 1))
        if self._registered_read:
            # The read register, the one after it and the output move together (each
            # holds its word while they wait).
            fetched = Signal()                      # the read port holds a word
            m.d.comb += [r_en.eq(advance),
                         self.o.payload.eq(read_register(m, r_data, advance, "data"))]
            with m.If(advance):
                m.d.sync += [fetched.eq(read), out_valid.eq(fetched)]
        else:
            m.d.comb += [r_en.eq(read), self.o.payload.eq(r_data)]
            with m.If(read):
                m.d.sync += out_valid.eq(1)
            with m.Elif(self.o.ready):
                m.d.sync += out_valid.eq(0)
        # The flags follow the level one step ahead, from the level before the step.
        with m.If(write & ~read):
            m.d.sync += [level.eq(level + 1), room.eq(level < stored - 1), filled.eq(1)]
        with m.If(read & ~write):
            m.d.sync += [level.eq(level - 1), room.eq(1), filled.eq(level > 1)]
        return m
