"""The MVU as an Amaranth component (:class:`MVU`): the issue logic with its credit and
output queue, the weight port, the datapath (``qloom.hw.mvu.datapath``), the accumulators
and the fused thresholds, built from one :class:`~qloom.hw.mvu.MVUConfig`."""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Shape, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ..mvu_datapath import Datapath
from ..spram import LoadSignature, spram_blocks
from ..types import shape_of
from ..weight_mem import RamStyle, read_register
from .config import MVUConfig
from .datapath import adder_tree, dsp_feed, lane_terms, operands, tag_copies
from .weights import next_address, slice_roms, weight_port, weights_spram_image

__all__ = ["MVU"]


def _from_config(name: str, doc: str | None = None):
    return property(lambda self: getattr(self.config, name), doc=doc)


class MVU(wiring.Component):
    """A folded matrix-vector unit built from ``config`` (an :class:`MVUConfig`: the
    weights, datatypes, folding, fused thresholds, DSP lanes, memories and register
    stages, validated and resolved once). Ports: ``i`` takes ``SIMD`` input codes per
    word, ``o`` gives ``PE`` outputs per word (accumulator values, or the fused
    thresholds' codes); with the weights in SPRAM, ``load`` writes them at start-up and
    the unit takes no input until ``load.done``. The parameters and everything the
    configuration derives (``latency``, ``output_depth``, ``rom_slices``, ...) read
    through to ``config``."""

    def __init__(self, config: MVUConfig):
        if not isinstance(config, MVUConfig):
            raise TypeError(f"MVU configuration must be an MVUConfig, not {config!r}")
        self.config = config
        members = {
            "i": In(stream.Signature(data.ArrayLayout(shape_of(config.in_type),
                                                      config.simd))),
            "o": Out(stream.Signature(data.ArrayLayout(shape_of(config.out_type),
                                                       config.pe))),
        }
        if config.memories.weights is RamStyle.SPRAM:
            members["load"] = In(LoadSignature(spram_blocks(
                config.pe * config.simd * config.w_type.bits)))
        super().__init__(members)

    mh, mw, pe, simd = (_from_config(n) for n in ("mh", "mw", "pe", "simd"))
    weights, w_type, in_type = (_from_config(n) for n in ("weights", "w_type", "in_type"))
    threshold = _from_config("threshold")
    datapath = _from_config("datapath", "The selected :class:`Datapath`.")
    acc_type = _from_config("acc_type", "The narrowest type holding every accumulator value "
                                        "exactly.")
    out_type = _from_config("out_type", "The accumulator type, or the fused thresholds' "
                                        "output type.")
    dsp_count = _from_config("dsp_count", "Multipliers written as ``*`` (for Yosys to map to "
                                          "DSPs). iCE40 synthesis keeps products under 11 "
                                          "bits in LUTs anyway.")
    dsp_primitive = _from_config("dsp_primitive", "'ecp5' when the DSP lanes are MULT18X18D "
                                                  "blocks with their own registers (see "
                                                  "qloom.hw.dsp), else None.")
    (neuron_folds, synapse_folds, cycles_per_vector, latency, output_depth, tree_stages,
     tree_levels, fetch_register, rom_slices, thresholds_fetch, threshold_groups,
     weights_block, buffer_copies, bank_stages, operand_hop, weight_address_copies) = (
        _from_config(n) for n in (
            "neuron_folds", "synapse_folds", "cycles_per_vector", "latency", "output_depth",
            "tree_stages", "tree_levels", "fetch_register", "rom_slices", "thresholds_fetch",
            "threshold_groups", "weights_block", "buffer_copies", "bank_stages",
            "operand_hop", "weight_address_copies"))

    register_operands = property(lambda self: self.config.registers.operands)
    register_products = property(lambda self: self.config.registers.products)
    register_adder_tree = property(lambda self: self.config.registers.adder_tree)

    def spram_image(self) -> list[int]:
        """The 16-bit words ``load`` must write (``qloom.hw.spram.SpramRom.image``);
        empty unless the weights are in SPRAM."""
        return weights_spram_image(self.config)

    def elaborate(self, platform):
        cfg = self.config
        m = Module()
        spram = cfg.memories.weights is RamStyle.SPRAM
        # SPRAM weights: nothing is issued before they are loaded.
        loaded = self.load.done if spram else 1
        queue, issue, s_fold, s_last, from_stream, w_addr = self._elaborate_issue(m, loaded)
        w_data, w_layout = weight_port(m, cfg, self.load if spram else None, w_addr, issue)
        w, x, tag = operands(m, cfg, self.i.payload, w_data, w_layout, issue, s_fold, s_last,
                             from_stream)
        blocks = dsp_feed(m, cfg, w, x)
        terms, tag = lane_terms(m, cfg, w, x, blocks, tag)
        dots, tag = adder_tree(m, cfg, terms, tag)
        self._elaborate_accumulate(m, dots, tag, queue)
        return m

    def _elaborate_accumulate(self, m, dots, tag, queue):
        """Accumulate; on a vector fold's last step hand the sum on (through the fused
        thresholds if any) into the output queue."""
        cfg = self.config
        xnor = cfg.datapath is Datapath.XNOR_POPCOUNT
        acc_shape = unsigned(cfg.mw.bit_length()) if xnor else shape_of(cfg.acc_type)
        # The sum is handed on from the accumulator register, a cycle after the last
        # step: handed on from the adder, its output queue (or threshold) pulled the
        # adder away from the register (the jet tagger's iCEBreaker path: accumulator ->
        # 6.5 ns -> adder -> 7 ns -> accumulator).
        sums = []
        steer = tag_copies(m, cfg, tag, Shape.cast(acc_shape).width)
        for p, dot in enumerate(dots):
            # No reset ("first" clears it), so a whole-signal assignment (rtl_check).
            acc = Signal(acc_shape, name=f"acc{p}", reset_less=True)
            valid, first = steer[p]
            m.d.sync += acc.eq(Mux(valid, Mux(first, 0, acc) + dot, acc))
            sums.append(acc)
        done = Signal()
        m.d.sync += done.eq(tag["valid"] & tag["last"])
        result = Signal(self.o.payload.shape())
        if cfg.threshold is None:
            m.d.comb += queue.w_en.eq(done)
            for p, total in enumerate(sums):
                m.d.comb += result[p].eq((total << 1) - cfg.mw if xnor else total)
        else:
            m.d.comb += queue.w_en.eq(self._elaborate_thresholds(m, done, sums, result))
        m.d.comb += queue.w_data.eq(result)

    def _elaborate_issue(self, m, loaded):
        """The output queue, its credit and the fold counters: which (neuron fold,
        synapse fold) step is issued in each cycle. Returns the queue and the issue
        step's signals ``(queue, issue, s_fold, s_last, from_stream, w_addr)``."""
        cfg = self.config
        nf, sf = cfg.neuron_folds, cfg.synapse_folds
        # Credit: ``reserved`` counts the outputs issued and not yet taken from the
        # queue; a step that completes an output needs ``room`` (a register, so the
        # issue logic and ``i.ready`` depend on registers only).
        depth = cfg.output_depth
        m.submodules.queue = queue = SyncFIFO(width=Shape.cast(self.o.payload.shape()).width,
                                              depth=depth)
        reserved, room = Signal(range(depth + 1)), Signal(init=1)
        m.d.comb += [self.o.payload.eq(queue.r_data), self.o.valid.eq(queue.r_rdy),
                     queue.r_en.eq(self.o.ready)]

        # Issue: one (neuron fold, synapse fold) step per cycle when its input is there.
        # The flags "last synapse fold" and "first neuron fold" (the input comes from the
        # stream) are registers, not compares of the counters: they feed the issue logic,
        # and on iCE40 the compares made it the critical path.
        s_fold, n_fold = Signal(range(sf)), Signal(range(nf))
        s_last, n_last, from_stream = Signal(init=sf == 1), Signal(init=nf == 1), Signal(init=1)
        w_addr = Signal(range(nf * sf))
        issue, may_issue = Signal(), Signal()
        # ``i.ready`` is a register of its own, computed from the next values of the flags
        # it depends on: from ``room`` through the ready logic to the input skid buffer's
        # enables far across the die was the jet tagger's ULX3S path (7.1 ns at 150 MHz).
        ready = Signal(init=1)
        m.d.comb += [may_issue.eq(loaded & (room | ~s_last)),
                     issue.eq(may_issue & (self.i.valid | ~from_stream)),
                     self.i.ready.eq(ready & loaded)]
        reserve, release = issue & s_last, queue.r_rdy & self.o.ready
        s_next = Mux(s_last, 0, s_fold + 1)
        n_next = Mux(n_last, 0, n_fold + 1)
        # The next flags from compares of the counters' present values (not of the
        # incremented ones: an adder and a compare in series into ``ready`` were the
        # iCEBreaker's path). Whole-signal assignments (under `If`, comb values become
        # `always @*` blocks that Icarus does not run at time 0: qloom.sim.rtl_check).
        s_penult = (s_fold == sf - 2) if sf > 1 else Const(0)
        n_penult = (n_fold == nf - 2) if nf > 1 else Const(0)
        s_last_next, from_stream_next, room_next = Signal(), Signal(), Signal()
        m.d.comb += [
            s_last_next.eq(Mux(issue, Mux(s_last, sf == 1, s_penult), s_last)),
            from_stream_next.eq(Mux(issue & s_last, n_last, from_stream)),
            room_next.eq(Mux(reserve & ~release, reserved < depth - 1,
                             Mux(release & ~reserve, 1, room)))]
        with m.If(reserve & ~release):
            m.d.sync += reserved.eq(reserved + 1)
        with m.Elif(release & ~reserve):
            m.d.sync += reserved.eq(reserved - 1)
        with m.If(issue):
            m.d.sync += [s_fold.eq(s_next),
                         w_addr.eq(next_address(w_addr, nf * sf - 1))]
            with m.If(s_last):
                m.d.sync += [n_fold.eq(n_next), n_last.eq(Mux(n_last, nf == 1, n_penult))]
        m.d.sync += [s_last.eq(s_last_next), from_stream.eq(from_stream_next),
                     room.eq(room_next),
                     ready.eq(from_stream_next & (room_next | ~s_last_next))]
        return queue, issue, s_fold, s_last, from_stream, w_addr

    def _elaborate_thresholds(self, m, done, sums, result):
        """Fused thresholds: register the sums, read the fold's thresholds, compare
        into ``result``; returns the signal that says ``result`` is valid."""
        cfg = self.config
        table = cfg.table
        fold = Signal(range(cfg.neuron_folds))
        with m.If(done):
            m.d.sync += fold.eq(Mux(fold == cfg.neuron_folds - 1, 0, fold + 1))
        if cfg.thresholds_fetch:
            # Read from registers of ``fold`` (equal to it when read: sums come at least
            # two cycles apart), one per ROM (``threshold_groups``): from ``fold`` itself,
            # synthesis built the ROM from the fold's increment (CNV-w1a1's Conv_4:
            # increment -> 4 LUT levels of ROM -> register, the deepest logic of the
            # design).
            words, layout = table.parallel_words()
            read = slice_roms(m, words, cfg.threshold_slices(layout.size // cfg.pe),
                              cfg.memories.thresholds, fold, "thresholds", "thresholds_addr")
        else:
            mem, layout = table.parallel_memory(cfg.memories.thresholds)
            m.submodules.thresholds = mem
            port = mem.read_port()
            m.d.comb += [port.addr.eq(fold), port.en.eq(1)]
            read = port.data
        held = [Signal.like(total, name=f"held{p}") for p, total in enumerate(sums)]
        held_valid = Signal()
        if (cfg.registers.threshold_read and cfg.synapse_folds >= 2
                and cfg.memories.thresholds is RamStyle.BLOCK):
            read = read_register(m, read, 1, "thresholds_read")
        rows = layout(read)
        m.d.sync += [held_valid.eq(done)]
        m.d.sync += [reg.eq(total) for reg, total in zip(held, sums)]
        metas = [rows[p].meta if table.meta_layout is not None else None
                 for p in range(cfg.pe)]
        counts, metas = table.counted(m, held, [rows[p].t for p in range(cfg.pe)], metas,
                                      "thresholds")
        if table.compare_register:
            crossed_valid = Signal()
            m.d.sync += crossed_valid.eq(held_valid)
            held_valid = crossed_valid
        for p, (count, meta) in enumerate(zip(counts, metas)):
            m.d.comb += result[p].eq(table.code(count, meta))
        return held_valid
