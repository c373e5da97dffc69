"""The MVU's resource estimate (:func:`estimate`), from its configuration: what the unit
built from the same :class:`~qloom.hw.mvu.MVUConfig` is made of, as
:class:`qloom.hw.estimate.Features` for a device family."""

from __future__ import annotations

from ...nn.dtypes import BINARY
from ..estimate import (Features, Resources, adder_tree_luts, comparator_luts,
                        lut_multiplier_luts, memory_cost, ram_cost, use_block_ram)
from ..mvu_datapath import (Datapath, is_select_type, partial_sum_bits, product_parts,
                            tree_groups)
from ..spram import spram_blocks
from ..types import shape_of
from ..weight_mem import RamStyle, word_slices
from .memories import block
from .registers import DSP_FEED, operand_copy_registers, tag_copy_registers
from .weights import weight_address_copies, weight_columns

__all__ = ["estimate"]


def estimate(cfg, family) -> Features:
    """The resources of the MVU built from ``cfg`` (an ``MVUConfig``) on ``family``, as
    :class:`qloom.hw.estimate.Features`: its lanes (``cfg.dsp_count`` of them on DSP
    blocks, ECP5 MULT18X18D blocks with their own registers when ``cfg.dsp_primitive``),
    its register stages (``cfg.registers``) and its memories where ``cfg.memories`` puts
    them (SPRAM weights: their address and select muxes are the logic they add); a shallow
    weight memory in logic is as wide as its distinct bit columns (``weight_columns``);
    the fused thresholds' memory as wide as the unit's table (``cfg.threshold_lane_bits``)."""
    path, pe, simd = cfg.datapath, cfg.pe, cfg.simd
    w_type, in_type, r = cfg.w_type, cfg.in_type, cfg.registers
    f = Features("mvu_" + {Datapath.XNOR_POPCOUNT: "xnor", Datapath.ADD_SUB: "addsub",
                           Datapath.MAC: "mac"}[path])
    f.add("lut", "control", 40)
    f.add("ff", "control", 30)
    # The fold counters and the weight address, each with its wrap compare.
    nf, sf = cfg.neuron_folds, cfg.synapse_folds
    counter_bits = sum((n - 1).bit_length() for n in (nf, sf, nf * sf))
    f.add("lut", "counters", 2 * counter_bits)
    f.add("ff", "counters", counter_bits)
    dsps, dsp_blocks = cfg.dsp_count, cfg.dsp_primitive is not None
    _datapath_estimate(f, path, pe=pe, simd=simd, w_type=w_type, in_type=in_type, dsps=dsps,
                       products=r.products, adder_tree=r.adder_tree, dsp_blocks=dsp_blocks)
    fetch, waits, slices = cfg.fetch_register, cfg.bank_stages, cfg.rom_slices
    spram = cfg.memories.weights is RamStyle.SPRAM
    weights_block = block(cfg.memories.weights)
    word_bits = _weight_word_bits(nf * sf, pe * simd * w_type.bits, family=family,
                                  weights_block=weights_block, weights_spram=spram,
                                  weight_columns=weight_columns(cfg.weights, w_type, pe,
                                                                simd, slices))
    if r.operands:
        # The weights (a one-word memory's are constants: see memory_cost; twice with
        # ``operand_hop``) and the input word's copies; with later neuron folds also the
        # buffer's (chosen after them).
        f.add("ff", "operands", (word_bits if nf * sf > 1 else 1) * (1 + cfg.operand_hop)
              + operand_copy_registers(pe=pe, word_bits=simd * in_type.bits,
                                       buffered=nf > 1, buffer_copies=cfg.buffer_copies,
                                       copies=r.operand_copies,
                                       weights_block=cfg.weights_block,
                                       waits=fetch + waits))
    acc_bits = cfg.acc_type.bits
    f.add("lut", "accumulator", pe * (acc_bits + 2))
    f.add("ff", "accumulator", pe * acc_bits * (2 if r.adder_tree else 1)
          + tag_copy_registers(pe, acc_bits, chained=r.adder_tree))
    _tree_estimate(f, cfg)
    _memories_estimate(f, cfg, word_bits=word_bits, family=family)
    if cfg.threshold is not None:
        _thresholds_estimate(f, cfg, family=family)
    # The registers on the way from the memories, and the output queue (in logic: a few
    # words read asynchronously) with its credit.
    if fetch:
        # The address's copies (one per ROM) and the inputs and tag that wait for it.
        f.add("ff", "fetch", simd * in_type.bits * (2 if nf > 1 else 1)
              + len(slices) * (nf * sf - 1).bit_length() + 4)
    # The inputs and the tag wait for the banks' registers.
    f.add("ff", "bank", waits * (simd * in_type.bits * (2 if nf > 1 else 1) + 4))
    depth = cfg.output_depth
    f.add_memory("output", ram_cost(depth, pe * cfg.out_type.bits, family, block=False))
    f.add("ff", "credit", 2 * depth.bit_length())
    f.add("lut", "credit", 2 * depth.bit_length() + 4)
    return f


def _thresholds_estimate(f: Features, cfg, *, family):
    """The fused thresholds (``cfg.threshold_lane_bits`` per PE in their memory): each
    PE's compares (registered, ``compare_register``), their memory, and with
    ``cfg.thresholds_fetch`` the fold counter's register per ROM (``threshold_groups``)."""
    pe, thresholds, acc_bits = cfg.pe, cfg.thresholds, cfg.acc_type.bits
    lane = cfg.threshold_lane_bits
    f.add("lut", "compare", pe * (thresholds * comparator_luts(acc_bits)
                                  + adder_tree_luts(thresholds, 1)))
    f.add("ff", "compare", pe * cfg.out_type.bits * 2)
    if cfg.registers.compares:
        f.add("ff", "crossed", pe * thresholds)
    nf = cfg.neuron_folds
    f.add_memory("thresholds", memory_cost(nf, pe * lane, family, block(cfg.memories.thresholds)),
                 bits=cfg.mh * lane)
    if cfg.thresholds_fetch:
        f.add("ff", "fetch", (nf - 1).bit_length() * cfg.threshold_groups)


def _datapath_estimate(f: Features, path: Datapath, *, pe, simd, w_type, in_type, dsps,
                       products, adder_tree, dsp_blocks):
    """The lanes' products and the adder tree's logic, the products' registers (with
    ``products``) and the MAC tree's output register (with ``adder_tree``)."""
    ib, wb = in_type.bits, w_type.bits
    if path is Datapath.XNOR_POPCOUNT:
        # An XNOR per lane, a table per four lanes (a LUT4 per count bit, see
        # nibble_counts), then the tree over the counts.
        nibbles = -(-simd // 4)
        f.add("lut", "xnor", pe * simd)
        f.add("lut", "nibbles", pe * nibbles * 3)
        f.add("lut", "tree", pe * adder_tree_luts(nibbles, 3))
        if products:
            # The product register holds the XNORs.
            f.add("ff", "products", pe * simd)
    elif path is Datapath.ADD_SUB:
        # A select of the other operand or its negation: as wide as that operand. The
        # negation is a subtraction of its own (Yosys maps it to a carry chain before LUT
        # mapping, so it does not merge into the select's LUTs: a ternary weight on a
        # 2-bit input took 5.5 LUT4s per lane on the iCE40, not 3).
        select, other = (w_type, ib) if is_select_type(w_type) else (in_type, wb)
        f.add("lut", "select", pe * simd * (other + 1))
        if select != BINARY:
            f.add("lut", "negate", pe * simd * (other + 1))
        f.add("lut", "tree", pe * adder_tree_luts(simd, other + 1))
        if products:
            f.add("ff", "products", pe * simd * (other + 1))
    else:
        # A shift-and-add multiplier per lane not on a DSP block.
        f.add("lut", "multiplier", (pe * simd - dsps) * lut_multiplier_luts(ib, wb))
        f.add("lut", "tree", pe * adder_tree_luts(simd, ib + wb))
        f.dsp = dsps
        if products:
            # The products' register (``product_parts`` partial sums for a LUT
            # multiplier) and the adder tree's. With ECP5 DSP blocks (which hold their
            # lanes' product registers) every lane has two more stages, and a DSP lane's
            # operands take DSP_FEED + 1 registers on their way to the block. LUT and
            # DSP lanes apart: Yosys puts DSP lanes' registers into the blocks where it
            # can, so the two grow differently.
            in_blocks = dsps if dsp_blocks else 0
            product_stages = DSP_FEED + 3 if in_blocks else 1
            part_bits = partial_sum_bits(shape_of(w_type), shape_of(in_type),
                                         product_parts(wb, ib))
            f.add("ff", "products", (pe * simd - dsps) * part_bits * product_stages)
            f.add("ff", "dsp_products", dsps * (ib + wb) * (DSP_FEED + 1 if in_blocks else 1))
        if adder_tree and simd > 1:
            f.add("ff", "tree", pe * (ib + wb + (simd - 1).bit_length()))


def _weight_word_bits(depth: int, bits: int, *, family, weights_block, weights_spram,
                      weight_columns) -> int:
    """Bits of a ``depth`` x ``bits`` weight memory's word as built: one in logic, and the
    registers after it, are as wide as its distinct columns."""
    in_logic = not weights_spram and not (use_block_ram(depth, bits, family)
                                          if weights_block is None else weights_block)
    return weight_columns if in_logic and weight_columns is not None else bits


def _tree_estimate(f: Features, cfg):
    """The registers inside the adder tree (a partial sum per group of terms per stage,
    ``cfg.tree_stages`` of them)."""
    first, rest = levels = cfg.tree_levels
    groups = tree_groups(cfg.tree_terms, levels) if cfg.registers.adder_tree else []
    in_bits, w_bits = cfg.in_type.bits, cfg.w_type.bits
    term_bits = {Datapath.XNOR_POPCOUNT: 3, Datapath.MAC: in_bits + w_bits}.get(
        cfg.datapath, max(in_bits, w_bits) + 1)
    f.add("ff", "tree_stages", cfg.pe * sum(n * (term_bits + first + rest * k)
                                            for k, n in enumerate(groups)))


def _memories_estimate(f: Features, cfg, *, word_bits, family):
    """The weight memory (block RAM, SPRAM or logic; ``word_bits`` wide, see
    ``_weight_word_bits``) and the input buffer that the later neuron folds read."""
    mh, mw, pe, simd = cfg.mh, cfg.mw, cfg.pe, cfg.simd
    w_type, in_type = cfg.w_type, cfg.in_type
    style, bank = cfg.memories.weights, cfg.memories.bank_depth
    depth = cfg.cycles_per_vector
    if style is RamStyle.SPRAM:
        f.spram = spram_blocks(pe * simd * w_type.bits)
        f.add("lut", "spram_mux", f.spram * (14 + 3))
    elif style is RamStyle.BLOCK:
        # A memory per slice of the word, each (per group of banks) from an address
        # register of its own (``MVUConfig.weight_address_copies``): counters like the
        # address.
        f.add_memory("weights", sum((memory_cost(depth, width, family, True, bank=bank)
                                     for _, width in word_slices(word_bits)), Resources()),
                     bits=mh * mw * w_type.bits)
        copies = weight_address_copies(word_bits, depth, bank)
        f.add("ff", "counters", copies * (depth - 1).bit_length())
        f.add("lut", "counters", copies * 2 * (depth - 1).bit_length())
    else:
        f.add_memory("weights", memory_cost(depth, word_bits, family, block(style), bank=bank),
                     bits=mh * mw * w_type.bits)
    # The input vector is buffered for the later neuron folds (only when there are some).
    f.add("ff", "input", simd * in_type.bits)
    if mh // pe > 1:
        f.add_memory("buffer", ram_cost(mw // simd, simd * in_type.bits, family,
                                        block(cfg.memories.buffer)))
        if mw // simd > 1:
            f.add("ff", "input", (mw // simd - 1).bit_length())    # the write address copy
