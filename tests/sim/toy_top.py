"""A hand-made ``qloom_top`` for the RTL runner's tests: elementwise saturating +1 through
a small stalling pipeline, emitted as Verilog into an OUT folder with a hand-written
manifest, plus deliberately broken variants.

Timing of the healthy toy with ``stages`` registers and one input word taken every
``period`` cycles: ``ii = words * period`` cycles per frame and
``latency = (words - 1) * period + stages`` cycles from frame 0's first input handshake
to its last output handshake.

Loaded by path (tests have no package), e.g. ``tests/flows`` uses ``load_toy()``.
"""

from __future__ import annotations

import json
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from qloom.hw.types import shape_of
from qloom.nn.dtypes import DataType
from qloom.sim.packing import words_per_frame

BROKEN = ("drop", "no_last", "hang", "corrupt", "pad", "extra")


def word_layout(dtype: DataType, lanes: int) -> data.StructLayout:
    return data.StructLayout({"data": data.ArrayLayout(shape_of(dtype), lanes), "last": 1})


class PlusOneTop(wiring.Component):
    """``o = min(i + 1, dtype.max)`` per lane through ``stages`` registers that stall
    under backpressure. ``period`` > 1 takes one input word every ``period`` cycles.
    ``broken`` makes it misbehave: ``drop`` loses word 1 of every frame, ``no_last``
    clears the flag on frame 1, ``hang`` stops taking input after 5 words, ``corrupt``
    adds 2 instead of 1 to lane 0 of word 0 of frame 1, ``pad`` adds 1 to the unused
    lanes of the final word too instead of keeping them zero, ``extra`` sends the last
    word of frame 2 twice."""

    def __init__(self, dtype: DataType, lanes: int, elements: int, *, stages: int = 2,
                 period: int = 1, broken: str | None = None):
        if broken not in (None, *BROKEN):
            raise ValueError(f"Broken mode must be one of {BROKEN}, not {broken!r}")
        self._dtype, self._lanes, self._elements = dtype, lanes, elements
        self._words = words_per_frame(elements, lanes)
        self._stages, self._period, self._broken = stages, period, broken
        layout = word_layout(dtype, lanes)
        super().__init__({"i": In(stream.Signature(layout)), "o": Out(stream.Signature(layout))})

    def elaborate(self, platform):
        m = Module()
        layout = word_layout(self._dtype, self._lanes)
        n = self._stages
        valid = [Signal(name=f"valid{k}") for k in range(n)]
        regs = [Signal(layout, name=f"word{k}") for k in range(n)]
        # stage k may load when empty or when its content moves on this cycle
        moves = [Signal(name=f"moves{k}") for k in range(n)]
        m.d.comb += moves[n - 1].eq(self.o.ready)
        if self._broken == "extra":
            frames_out, replayed = Signal(16), Signal()
            replay = self.o.payload.last & (frames_out == 2) & ~replayed
            with m.If(self.o.valid & self.o.ready & self.o.payload.last):
                with m.If(replay):
                    m.d.sync += replayed.eq(1)
                with m.Else():
                    m.d.sync += frames_out.eq(frames_out + 1)
            m.d.comb += moves[n - 1].eq(self.o.ready & ~replay)
        for k in range(n - 1):
            m.d.comb += moves[k].eq(~valid[k + 1] | moves[k + 1])
        load = [Signal(name=f"load{k}") for k in range(n)]
        for k in range(n):
            m.d.comb += load[k].eq(~valid[k] | moves[k])

        tick = Signal(range(self._period))
        if self._period > 1:
            m.d.sync += tick.eq(Mux(tick == self._period - 1, 0, tick + 1))
        taken = Signal(16)
        word_in = Signal(range(self._words + 1))
        frame_in = Signal(16)
        open_ = tick == 0
        if self._broken == "hang":
            open_ = open_ & (taken < 5)
        m.d.comb += self.i.ready.eq(load[0] & open_)

        incoming = Signal(layout)
        m.d.comb += incoming.last.eq(self.i.payload.last)
        top = int(self._dtype.encode(self._dtype.max))
        for lane in range(self._lanes):
            x = self.i.payload.data[lane]
            plus = 1
            if self._broken == "corrupt" and lane == 0:
                plus = 1 + ((frame_in == 1) & (word_in == 0))
            with m.If(x >= top):
                m.d.comb += incoming.data[lane].eq(x)
            with m.Else():
                m.d.comb += incoming.data[lane].eq(x + plus)
            unused = lane >= self._elements - (self._words - 1) * self._lanes
            if unused and self._broken != "pad":
                with m.If(self.i.payload.last):
                    m.d.comb += incoming.data[lane].eq(0)
        if self._broken == "no_last":
            with m.If(frame_in == 1):
                m.d.comb += incoming.last.eq(0)
        keep = Signal(init=1)
        if self._broken == "drop":
            m.d.comb += keep.eq(word_in != 1)

        with m.If(self.i.valid & self.i.ready):
            m.d.sync += taken.eq(taken + 1)
            with m.If(self.i.payload.last):
                m.d.sync += [word_in.eq(0), frame_in.eq(frame_in + 1)]
            with m.Else():
                m.d.sync += word_in.eq(word_in + 1)

        with m.If(load[0]):
            m.d.sync += [valid[0].eq(self.i.valid & self.i.ready & keep),
                         regs[0].eq(incoming)]
        for k in range(1, n):
            with m.If(load[k]):
                m.d.sync += [valid[k].eq(valid[k - 1]), regs[k].eq(regs[k - 1])]
        m.d.comb += [self.o.valid.eq(valid[n - 1]), self.o.payload.eq(regs[n - 1])]
        return m


def port_json(dtype: DataType, lanes: int, elements: int) -> dict:
    return {"port": "i", "lanes": lanes, "element_bits": dtype.bits, "signed": dtype.signed,
            "payload_bits": lanes * dtype.bits + 1, "last_bit": lanes * dtype.bits,
            "words_per_frame": words_per_frame(elements, lanes),
            "elements_per_frame": elements, "shape": [elements], "dtype": dtype.to_json(),
            "encoding": "two's complement" if dtype.signed else "unsigned"}


def write_toy_out(out: Path, dtype: DataType, lanes: int, elements: int, **toy) -> Path:
    """Emit the toy into ``out`` with a manifest obeying the compiler's contract."""
    words = words_per_frame(elements, lanes)
    top = PlusOneTop(dtype, lanes, elements, **toy)
    (out / "rtl").mkdir(parents=True, exist_ok=True)
    (out / "rtl" / "qloom_top.v").write_text(verilog.convert(top, name="qloom_top"))
    period = toy.get("period", 1)
    manifest = {
        "format": 1, "qloom_version": "0.1.0", "top": "qloom_top", "rtl": ["rtl/qloom_top.v"],
        "model_file": "model.onnx", "load_options": {}, "clock_mhz": 100.0,
        "input": port_json(dtype, lanes, elements),
        "output": dict(port_json(dtype, lanes, elements), port="o"),
        "host": {}, "layers": [{"name": "plus_one", "op": "MultiThreshold",
                                "cycles_per_frame": words * period}],
        "ideal_ii_cycles": words * period, "board": None,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return out
