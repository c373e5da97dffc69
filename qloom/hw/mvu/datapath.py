"""The MVU's datapath from the weight and input words to each PE's dot product, as
functions of the unit's configuration (``cfg``, an :class:`~qloom.hw.mvu.MVUConfig`): the
operand registers and their copies (``operands``), the lanes on ECP5 DSP blocks
(``dsp_feed``), the lanes' products (``lane_terms``) and the registered adder tree
(``adder_tree``). A pipeline tag (``Tag``: valid, first and last fold step) travels beside
the data through every register stage (``stage``); nothing stalls once issued. The lane
arithmetic itself is ``qloom.hw.mvu_datapath``'s."""

from __future__ import annotations

from amaranth.hdl import Const, Mux, Signal, Value
from amaranth.lib.memory import Memory

from ..dsp import Ecp5Multiplier
from ..mvu_datapath import (Datapath, is_select_type, multiply, nibble_counts, partial_sums,
                            product_parts, select_product, tree_sum, value_of)
from ..weight_mem import kept_register, read_register
from .registers import DSP_FEED, OPERAND_PES, accumulators_per_copy, operand_spread, pe_groups

__all__ = ["operands", "chosen", "dsp_feed", "lane_terms", "adder_tree", "stage",
           "tag_copies", "Tag"]


def operands(m, cfg, payload, w_data, w_layout, issue, s_fold, s_last, from_stream):
    """The weight word and the input word (from the stream or the buffer) of each
    issued step, with the pipeline tag that travels beside them: ``(w, x, tag)``, ``x``
    one input word per PE (equal words, copies of each other's registers)."""
    nf = cfg.neuron_folds
    issued = {"valid": issue, "first": s_fold == 0, "last": s_last}
    tag = Tag({key: Signal(name=f"issue_{key}") for key in issued}, "issue", issued)
    x_reg = Signal.like(payload, reset_less=True)
    x_from_stream = Signal()
    m.d.sync += [*(tag[key].eq(value) for key, value in issued.items()),
                 x_reg.eq(payload), x_from_stream.eq(from_stream)]
    # The weights come a cycle later when they are read from a register of their own
    # (``w_addr_fetch``), and one or two more when they are read in banks
    # (``BankedRom``, ``bank_stages``): the input words and the tag wait for them.
    waits = (["fetch"] if cfg.fetch_register else []) + \
        [f"bank{k}_" for k in range(cfg.bank_stages)]
    groups = cfg.operand_groups
    # Registers beside ``x_reg`` that the copies read, a few copies each
    # (``operand_spread``).
    hop = cfg.operand_hop
    spread = [(kept_register(m, payload, f"operand_spread{k}"),
               kept_register(m, from_stream, f"operand_spread_from_stream{k}"), None)
              for k in range(operand_spread(groups, len(waits) + hop)
                             if cfg.registers.operands else 0)]
    in_layout = payload.shape()
    x_buffered = (_input_buffer(m, cfg, payload, issue, s_fold, from_stream, x_reg,
                                tag["valid"], x_from_stream)
                  if nf > 1 else None)
    # The input words and the tag wait for the weights (the buffer keeps its read
    # address, so its write/read order is unchanged).
    for wait in waits:
        rows = [[x_reg]] + ([[x_buffered]] if x_buffered is not None else [])
        regs, tag = stage(m, wait, rows, tag, extra={"from_stream": x_from_stream})
        x_reg, x_from_stream = in_layout(regs[0][0]), tag.pop("from_stream")
        if x_buffered is not None:
            x_buffered = in_layout(regs[1][0])
    shared = x_buffered is not None and not cfg.buffer_copies
    if hop:
        # The weights a cycle more; the input word, its choice and (with copies) the
        # buffer's word to a register per OPERAND_PES copies, the tag beside them.
        w_data = read_register(m, w_data, Const(1), "weights_hop")
        spread = [(kept_register(m, x_reg, f"operand_hop{k}"),
                   kept_register(m, x_from_stream, f"operand_hop_from_stream{k}"),
                   None if x_buffered is None or shared else
                   kept_register(m, x_buffered, f"operand_hop_buffered{k}"))
                  for k in range(-(-groups // OPERAND_PES))]
        regs, tag = stage(m, "hop", [[x_buffered]] if shared else [], tag)
        if shared:
            x_buffered = in_layout(regs[0][0])
    w = w_layout(w_data)
    if not cfg.registers.operands:
        return w, [chosen(m, x_reg, x_buffered, x_from_stream, "")] * cfg.pe, tag
    # The memories' read data go straight into the operand registers, the input
    # buffer's beside the stream's and the choice after them: nothing but a register
    # follows a block RAM read, which the ECP5 block can then hold itself
    # (qloom.flows.toolchain.ecp5_outreg; the mux behind the buffer's block RAM cost TFC-w2a2
    # 1.5 ns of 9.1 at 150 MHz). The input words (and the choice) are registered once
    # per group of PEs or per PE (``operand_groups``), each copy near its PEs: one
    # register read by all 16 PEs of CNV-w1a1's Conv_3 was its ECP5 critical path (14 ns
    # of route to a PE 30 rows away). A block RAM buffer's word keeps one register, in
    # the block.
    rows = [[w]] + ([[x_buffered]] if shared else [])
    regs, tag = stage(m, "operand", rows, tag)
    w = w_layout(regs[0][0])
    words = []
    for group in range(groups):
        x_src, from_src, buffered_src = (spread[group // OPERAND_PES] if spread
                                         else (x_reg, x_from_stream, None))
        x = kept_register(m, x_src, f"operand_x{group}")
        from_stream = kept_register(m, from_src, f"operand_from_stream{group}")
        buffered = (in_layout(regs[1][0]) if shared else
                    None if x_buffered is None else
                    kept_register(m, x_buffered if buffered_src is None else buffered_src,
                                  f"operand_buffered{group}"))
        words.append(chosen(m, x, buffered, from_stream, str(group)))
    return w, [words[g] for g, pes in enumerate(pe_groups(cfg.pe, groups))
               for _ in pes], tag


def _input_buffer(m, cfg, payload, issue, s_fold, from_stream, x_reg, issued,
                  x_from_stream):
    """The buffer of the input words that later neuron folds read again: its read data
    at ``s_fold`` (``issued``, ``x_reg`` and ``x_from_stream``: the issue's registers)."""
    sf = cfg.synapse_folds
    # A read of the word being written (the first neuron fold's) is never used:
    # the stream's word is chosen then. ``no_rw_check`` tells Yosys so; without it
    # a block RAM read and write on different ports (a buffer over 18 bits wide on
    # the ECP5) get soft collision logic between the block and its register.
    m.submodules.buffer = buffer = Memory(
        shape=payload.shape(), depth=sf, init=[],
        attrs={**cfg.memories.buffer.attrs, "no_rw_check": 1})
    b_write, b_read = buffer.write_port(), buffer.read_port()
    m.d.comb += [b_read.addr.eq(s_fold), b_read.en.eq(1)]
    if sf > 1:
        # Written a cycle late, from the registered word, address and enable (the
        # stream's handshake into the write enable of a LUT RAM buffer 15 columns
        # away was the jet tagger's ULX3S path). The next read of that word comes
        # ``sf`` issues later, after the write.
        s_fold_w = Signal.like(s_fold, name="s_fold_w")
        m.d.sync += s_fold_w.eq(s_fold)
        m.d.comb += [b_write.addr.eq(s_fold_w), b_write.data.eq(x_reg),
                     b_write.en.eq(issued & x_from_stream)]
    else:
        m.d.comb += [b_write.addr.eq(s_fold), b_write.data.eq(payload),
                     b_write.en.eq(issue & from_stream)]
    return b_read.data


def chosen(m, x, x_buffered, from_stream, suffix):
    """The stream's word ``x`` or (when there is a buffer) the buffer's, by
    ``from_stream``."""
    if x_buffered is None:
        return x
    # One signal, not a Mux expression: a view over an expression writes the
    # expression again for every lane that reads it (SIMD x PE copies).
    x_sel = Signal.like(x, name=f"x_sel{suffix}")
    m.d.comb += Value.cast(x_sel).eq(Mux(from_stream, Value.cast(x),
                                         Value.cast(x_buffered)))
    return x_sel


def dsp_feed(m, cfg, w, x) -> dict:
    """The lanes on ECP5 DSP blocks: lane -> the block's product.

    DSP blocks with their own registers take the operands through ``DSP_FEED`` more
    registers of their own, which placement spreads along the route to the block (a
    design using most of the ECP5-85F's blocks has some of them across the chip:
    from the operand register the route alone took 9.75 ns to a block 107 columns
    away on the jet tagger, 8.6 ns through one register placed beside its source),
    and give the product two cycles later; the other lanes wait in the product stage
    and ``DSP_FEED + 1`` more register stages (fed straight from the input buffer's
    LUT RAM, the blocks' input registers were the ECP5 critical path: 16.6 ns, 9.2 of
    them routing)."""
    blocks = {}
    if cfg.dsp_primitive:
        for lane in range(cfg.dsp_count):
            p, s = divmod(lane, cfg.simd)
            a, b = w[p][s], x[p][s]
            for k in range(DSP_FEED):
                a_reg = Signal.like(Value.cast(a), name=f"to_dsp{lane}_a{k}",
                                    reset_less=True)
                b_reg = Signal.like(Value.cast(b), name=f"to_dsp{lane}_b{k}",
                                    reset_less=True)
                m.d.sync += [a_reg.eq(a), b_reg.eq(b)]
                a, b = a_reg, b_reg
            block = Ecp5Multiplier(a.shape(), b.shape())
            m.submodules[f"dsp{lane}"] = block
            m.d.comb += [block.a.eq(a), block.b.eq(b), block.ce.eq(1)]
            blocks[lane] = block.p
    return blocks


def lane_terms(m, cfg, w, x, blocks, tag):
    """Each PE's terms for the adder tree, through the product register stages:
    ``(terms per PE, tag)``.

    Each lane gives one or more terms of its PE's sum: a lane on a DSP block a
    placeholder its product replaces once the other lanes caught up; a registered LUT
    multiplier its partial sums of two partial products each (``product_parts``),
    added in the adder tree after the register."""
    terms, placeholders = [[] for _ in range(cfg.pe)], {}
    xnor = cfg.datapath is Datapath.XNOR_POPCOUNT
    if xnor:
        # A PE's XNORs as one vector (a signal per PE, not one per lane: the Verilog
        # of a CNV layer was 2.7 MB of per-lane assignments); its bits are the terms.
        terms = [[~(Value.cast(w[p]) ^ Value.cast(x[p]))] for p in range(cfg.pe)]
    for lane in range(0 if xnor else cfg.pe * cfg.simd):
        p, s = divmod(lane, cfg.simd)
        if lane in blocks:
            placeholders[lane] = len(terms[p])
            terms[p].append(Const(0))
        elif (cfg.datapath is Datapath.MAC and lane >= cfg.dsp_count
              and cfg.registers.products):
            parts = product_parts(Value.cast(w[p][s]).shape().width,
                                  Value.cast(x[p][s]).shape().width)
            terms[p] += partial_sums(w[p][s], x[p][s], parts)
        else:
            terms[p].append(_product(cfg, w[p][s], x[p][s], lane))
    if cfg.registers.products:
        # Products of `*` lanes keep a reset: Yosys 0.70's ice40_dsp packs a reset-less
        # product register into one SB_MAC16 as its output register and into the
        # next lane's as its C/D input register, then leaves that input undriven (a
        # PE's two products summed: 2 SB_MAC16 for 4 multipliers, the netlist's sums
        # X in simulation, tests/hw/test_mvu.py). With a reset, neither is absorbed.
        soft = cfg.dsp_count > 0 and not cfg.dsp_primitive
        terms, tag = stage(m, "product", terms, tag, reset=soft)
    if xnor:
        terms = [nibble_counts(vector, cfg.simd) for (vector,) in terms]
    if cfg.dsp_primitive:
        terms, tag = stage(m, "aligned", terms, tag)
        for k in range(DSP_FEED):
            terms, tag = stage(m, f"aligned_route{k}", terms, tag)
    for lane, product in blocks.items():
        terms[lane // cfg.simd][placeholders[lane]] = product
    if cfg.dsp_primitive:
        # The route from a block to the adder tree gets a cycle of its own (with the
        # tree after it, 15.6 ns on the jet tagger, 8.2 of them that route). It is still
        # the jet tagger's path (8.4 ns from a block 76 columns away): a second register
        # stage here did not help, placement put both beside the tree (8.5 ns).
        terms, tag = stage(m, "from_dsp", terms, tag)
    return terms, tag


def adder_tree(m, cfg, terms, tag):
    """Each PE's terms summed into its dot product, registered every ``tree_levels``
    adder levels: ``(dots, tag)``."""
    first, rest = cfg.tree_levels
    group = 1 << first
    for n in range(cfg.tree_stages):
        # Sum groups of ``group`` terms (its adder levels), register, repeat.
        terms = [[tree_sum(lane[k:k + group]) for k in range(0, len(lane), group)]
                 for lane in terms]
        terms, tag = stage(m, f"partial{n}_", terms, tag)
        group = 1 << rest
    assert not cfg.registers.adder_tree or all(len(lane) <= 1 << rest
                                               for lane in terms), \
        "tree_stages disagrees with the terms"
    dots = [tree_sum(lane) for lane in terms]
    if cfg.registers.adder_tree:
        dots, tag = stage(m, "dot", [dots], tag)
        dots = dots[0]
    return dots, tag


def _product(cfg, w_code, x_code, lane):
    """The value ``w * x`` of one lane (XNOR-popcount lanes are built per PE)."""
    w_type, in_type = cfg.w_type, cfg.in_type
    if cfg.datapath is Datapath.ADD_SUB:
        if is_select_type(w_type):
            return select_product(w_code, w_type, value_of(x_code, in_type))
        return select_product(x_code, in_type, value_of(w_code, w_type))
    return multiply(w_code, x_code, dsp=lane < cfg.dsp_count)


def stage(m, name, rows, tag, extra=None, reset=False):
    """Register every value of ``rows`` (a list of lists) and the pipeline tag (with
    ``extra`` control bits travelling beside it for this stage). Data registers have no
    reset unless ``reset`` (the tag's ``valid`` says when they count), so a register
    behind a block RAM read can move into the block (qloom.flows.toolchain.ecp5_outreg) and the
    reset net reaches only the control bits."""
    registered = []
    for p, row in enumerate(rows):
        regs = [Signal(Value.cast(v).shape(), name=f"{name}{p}_{s}", reset_less=not reset)
                for s, v in enumerate(row)]
        registered.append(regs)
    previous = tag if isinstance(tag, Tag) else None
    tag = {**tag, **(extra or {})}
    new_tag = Tag({key: Signal(name=f"{name}_{key}") for key in tag}, name, tag,
                   previous)
    for row, regs in zip(rows, registered):
        m.d.sync += [reg.eq(v) for reg, v in zip(regs, row)]
    m.d.sync += [new_tag[key].eq(tag[key]) for key in tag]
    return registered, new_tag


def tag_copies(m, cfg, tag, acc_bits):
    """``(valid, first)`` for each PE's accumulator: copies of ``tag``'s registers,
    one per group of accumulators of about ``GROUP_BITS`` bits, with no latency. One
    pair steering every accumulator was the jet tagger's ULX3S critical path
    (``dot_first`` to accumulators 38 columns away, 5.3 ns of route); a copy
    registered from the tag's source then sat by the source, 51 columns from its
    accumulators (3.1 ns of a 6.7 ns path). So each copy is two registers from the
    source's source where the stage before has one (the pipeline never stalls: a
    register chain is the tag's delay line), one hop each for placement. The copies
    are kept apart ("keep": Yosys would merge them)."""
    per_copy = accumulators_per_copy(acc_bits)
    if cfg.pe <= per_copy:
        return [(tag["valid"], tag["first"])] * cfg.pe
    chained = _chained(tag)
    steer = []
    for p in range(cfg.pe):
        if p % per_copy == 0:
            copy = []
            for key in ("valid", "first"):
                group = p // per_copy
                value = tag.source[key]
                if chained:
                    near = Signal(name=f"{tag.name}{group}_{key}_hop", attrs={"keep": 1})
                    m.d.sync += near.eq(tag.previous.source[key])
                    value = near
                reg = Signal(name=f"{tag.name}{group}_{key}", attrs={"keep": 1})
                m.d.sync += reg.eq(value)
                copy.append(reg)
        steer.append(tuple(copy))
    return steer


class Tag(dict):
    """A stage's registered pipeline tag, with the stage's name, the tag it registers
    (from which ``tag_copies`` registers copies in the same cycle) and the stage before's
    ``Tag`` if there is one."""

    def __init__(self, registers, name, source, previous=None):
        super().__init__(registers)
        self.name, self.source, self.previous = name, source, previous


def _chained(tag) -> bool:
    """Whether ``tag_copies`` can copy ``tag`` through two registers: the stage before
    registers the valid and first bits too."""
    return tag.previous is not None and all(key in tag.previous.source
                                            for key in ("valid", "first"))
