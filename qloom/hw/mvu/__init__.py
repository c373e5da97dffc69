"""The matrix-vector unit (MVU): a folded, fully pipelined ``y = W @ x`` over streams.

FINN-style folding: ``PE`` output channels and ``SIMD`` input elements per cycle. A vector of
``MW`` inputs arrives as ``SF = MW/SIMD`` words (word ``j`` lane ``s`` is element
``j*SIMD + s``); the ``MH`` outputs leave as ``NF = MH/PE`` words (word ``j`` lane ``p`` is
output ``j*PE + p``). The unit loops over ``NF`` neuron folds of ``SF`` synapse folds each:
during the first neuron fold it takes the input words from the stream and keeps them in a
buffer, later folds read the buffer, and the next vector's first fold follows the last fold
without a gap. So a vector takes exactly ``NF * SF`` cycles in steady state, and the input
is ready during ``SF`` of them.

Pipeline: issue (weight memory and buffer addresses) -> [fetch register: the weights
addressed a cycle later, when they are a ROM in logic] -> operands -> [operand register]
-> [products register] -> [adder tree register] -> accumulate -> output queue, plus a
compare stage when thresholds are fused. The stages have no enable: nothing stalls once
issued. Flow control is by credit instead of a global stall (whose fan-out to every
register's enable, every DSP block's clock enable among them, was the critical path): a
fold step that completes an output is issued only when the output queue
(``output_depth`` words, ``amaranth.lib.fifo.SyncFIFO``) has a word reserved for it, and
a register counts the words issued and not yet taken. So ``i.ready`` depends on
registers only, never on ``o.ready``. ``latency`` counts cycles from a vector's
first input word being taken to its first output word being taken, with no stalls on
either side: ``SF - 1 + 3 + fetch_register + bank_stages + operand_hop + register_operands +
register_products + register_adder_tree + tree_stages + (1 if thresholds are fused, 2 if
their compares are registered: ``qloom.hw.threshold.compare_register``) + (``DSP_FEED +
2`` with ECP5 DSP blocks, see qloom.hw.dsp)`` (the 3: issue, the accumulator, the sum
handed on from it); a registered adder tree has a register after every ``TREE_LEVELS``
adder levels, the first one level sooner for XNOR lanes, every level behind ECP5 DSP blocks (``tree_levels``;
``tree_stages`` of them inside it). The operand register holds the weight and input
buffer reads as they leave their memories (the stream/buffer select
follows it) and takes them off the path into the multipliers (on
the ECP5-85F that path was 22.9 ns into the jet tagger's DSP blocks; with the register,
19 ns of register -> DSP -> register remained, most of it routing to DSPs placed far
away, which the blocks' own registers remove: ``dsp_primitive="ecp5"``, see qloom.hw.dsp).

Weights live in a read-only :class:`amaranth.lib.memory.Memory` of ``NF*SF`` words of
``PE*SIMD`` lanes, read synchronously, placed by ``MVUMemories.weights`` (the fused
thresholds by ``MVUMemories.thresholds``, the input vector buffer by
``MVUMemories.buffer``); in block RAM deeper than one block, in banks of
``MVUMemories.bank_depth`` words (``qloom.hw.weight_mem.BankedRom``, the rule in
``qloom.hw.mem_pack.bank_depth``; a cycle or two more, ``bank_stages`` above). The
accumulator is exactly as wide as the worst case of the actual weights over every input of
``in_type``. With ``MVUMemories.weights`` at ``RamStyle.SPRAM`` (iCE40UP5K) the weights
are in SPRAMs instead (``qloom.hw.spram``), written through the ``load`` port at start-up:
the unit takes no input until ``load.done``.

The package, by concern: ``config`` (:class:`MVUConfig`, the one validated configuration
that the unit, its estimate and the planner read), ``registers`` (:class:`MVURegisters` and
the register rules), ``memories`` (:class:`MVUMemories` and their placement), ``weights``
(the weight memory), ``datapath`` (operands to dot products), ``unit`` (:class:`MVU`, the
component) and ``estimate`` (:func:`estimate`).
"""

from ..mvu_datapath import Datapath, tree_terms
from ..weight_mem import RamStyle
from .config import MVUConfig, threshold_lane_bits, threshold_table
from .estimate import estimate
from .memories import SPRAM_FROM_BRAMS, MVUMemories, weights_in_spram
from .registers import (DSP_FEED, OPERAND_PES, MVURegisters, fetch_register,
                        fetches_thresholds, group_slices, latency, operand_copies,
                        operand_copy_registers, operand_groups, operand_hop, operand_register,
                        operand_spread, output_depth, pe_groups, tag_copy_registers,
                        thresholds_fetch)
from .unit import MVU
from .weights import (FEW_WORDS, ROM_SLICE_LOADS, bank_stages, rom_slices, weight_address_copies,
                      weight_codes, weight_columns)

__all__ = ["MVU", "MVUConfig", "MVURegisters", "MVUMemories", "Datapath", "RamStyle",
           "estimate", "threshold_lane_bits", "threshold_table", "weights_in_spram",
           "SPRAM_FROM_BRAMS", "DSP_FEED", "OPERAND_PES", "FEW_WORDS", "ROM_SLICE_LOADS",
           "fetch_register", "fetches_thresholds", "group_slices", "latency",
           "operand_copies", "operand_copy_registers", "operand_groups", "operand_hop",
           "operand_register", "operand_spread", "output_depth", "pe_groups",
           "tag_copy_registers", "thresholds_fetch", "tree_terms", "bank_stages",
           "rom_slices", "weight_address_copies", "weight_codes", "weight_columns"]
