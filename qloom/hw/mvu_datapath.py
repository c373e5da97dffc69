"""The arithmetic of a matrix-vector unit lane: which datapath a pair of datatypes gets,
and the per-lane product, popcount and adder trees that build it.

Products take wire *codes* and return exact integer *values* (bipolar codes 0/1 mean
-1/+1). Multipliers come in two forms: ``a * b``, which Yosys maps to a DSP block
(``SB_MAC16`` with ``synth_ice40 -dsp``, ``MULT18X18D`` with ``synth_ecp5``), and a
shift-and-add form built from AND gates and adders, which no Yosys pass turns back into a
``$mul`` and so always stays in LUTs.
"""

from __future__ import annotations

import enum

from amaranth.hdl import Const, Mux, Shape, Signal, Value

from ..nn.dtypes import TERNARY, DataType

__all__ = ["Datapath", "MAX_BITS", "TREE_LEVELS", "tree_groups", "tree_levels", "tree_stages",
           "tree_terms",
           "is_select_type", "select_datapath", "select_product", "multiply", "nibble_counts",
           "product_parts", "partial_sums", "partial_sum_bits", "tree_sum", "value_of"]

MAX_BITS = 32


# Adder levels between registers in a registered adder tree. Measured: an MVU's tree of
# three levels after the product register (eight partial sums of 8 x 8 LUT products) was the
# critical path, 22.1 ns on the UP5K (50 MHz needs 20) and 7.3 ns on the ECP5-85F (150 MHz
# needs 6.7); two levels leave both with margin.
TREE_LEVELS = 2


def tree_groups(terms: int, levels: tuple = (TREE_LEVELS, TREE_LEVELS)) -> list[int]:
    """The partial sums a registered adder tree over ``terms`` terms registers inside it,
    per stage: a register after ``levels[0]`` adder levels, then after every ``levels[1]``
    more, but not after the last ones (the tree's output register is extra); see
    ``tree_levels``."""
    first, rest = levels
    groups, group = [], 1 << first
    while terms > 1 << rest or (not groups and terms > group):
        terms = -(-terms // group)
        groups.append(terms)
        group = 1 << rest
    return groups


def tree_levels(datapath: "Datapath", dsp_blocks: bool = False) -> tuple:
    """Adder levels before a registered tree's first register and between the later
    ones. ``TREE_LEVELS``, but one fewer first for XNOR lanes, whose counts per four take a
    level of their own in that cycle (a count and two adder levels behind the product
    register were TFC-w1a1's UP5K path with ``--fold auto``: 21.4 ns at 50 MHz), and one
    level per stage behind ECP5 DSP blocks (``dsp_blocks``), whose 20-odd-bit products
    Yosys adds four at a time through two LUT levels and a carry chain (the jet tagger with
    its blocks placed in lane order: 8.4 ns at 150 MHz)."""
    if dsp_blocks:
        return 1, 1
    if datapath is Datapath.XNOR_POPCOUNT:
        return TREE_LEVELS - 1, TREE_LEVELS
    return TREE_LEVELS, TREE_LEVELS


def tree_stages(terms: int, levels: tuple = (TREE_LEVELS, TREE_LEVELS)) -> int:
    """Registers inside a registered adder tree over ``terms`` terms (``tree_groups``)."""
    return len(tree_groups(terms, levels))


class Datapath(enum.Enum):
    XNOR_POPCOUNT = "xnor_popcount"  # bipolar weights and inputs: popcount of XNORs
    ADD_SUB = "add_sub"              # one side in {-1, 0, +1}: add, subtract or skip
    MAC = "mac"                      # multi-bit both sides: multiply-accumulate


def tree_terms(*, pe: int, simd: int, datapath: Datapath, dsps: int, parts: int) -> int:
    """Terms of the largest PE's adder tree: a count per four lanes (XNOR), a term per
    lane, ``parts`` partial sums per registered LUT multiplier lane (MAC lanes from
    ``dsps`` on; the first ``dsps`` lanes are on DSP blocks)."""
    if datapath is Datapath.XNOR_POPCOUNT:
        return -(-simd // 4)
    if datapath is not Datapath.MAC:
        return simd
    lut_lanes = simd - max(0, min(simd, dsps - (pe - 1) * simd))   # the last PE's
    return (simd - lut_lanes) + lut_lanes * parts


def is_select_type(dtype: DataType) -> bool:
    """Whether every value of ``dtype`` is -1, 0 or +1 (a product with it is a select)."""
    return dtype.bits == 1 or dtype == TERNARY


def select_datapath(w_type: DataType, in_type: DataType) -> Datapath:
    """The cheapest exact datapath for weights of ``w_type`` times inputs of ``in_type``."""
    for role, dtype in (("Weight", w_type), ("Input", in_type)):
        if dtype.bits > MAX_BITS:
            raise ValueError(f"{role} type {dtype} is wider than the {MAX_BITS} bits a "
                             f"matrix-vector unit supports (weights {w_type}, "
                             f"inputs {in_type})")
    if w_type.bipolar and in_type.bipolar:
        return Datapath.XNOR_POPCOUNT
    if is_select_type(w_type) or is_select_type(in_type):
        return Datapath.ADD_SUB
    return Datapath.MAC


def value_of(code: Value, dtype: DataType) -> Value:
    """The integer value carried by ``code`` (only bipolar codes differ from values)."""
    return Mux(code, 1, -1) if dtype.bipolar else code


def select_product(select: Value, select_type: DataType, other: Value) -> Value:
    """``value(select) * other`` for a ``select`` code of a type with values in
    {-1, 0, +1}: a negate and a mux, no multiplier."""
    if select_type.bipolar:
        return Mux(select, other, -other)
    if select_type == TERNARY:
        return Mux(select == 0, 0, Mux(select[1], -other, other))
    if select_type.signed:  # INT1: code 1 is -1
        return Mux(select, -other, 0)
    return Mux(select, other, 0)  # BINARY


def partial_sums(a: Value, b: Value, parts: int = 2) -> list:
    """Up to ``parts`` values whose sum is exactly ``a * b``: the partial products of the
    narrower operand's bits (shifted copies of the other), summed in ``parts`` groups, so
    that a register can sit between the groups' sums and their total."""
    a, b = Value.cast(a), Value.cast(b)
    if len(b) > len(a):
        a, b = b, a
    terms = [Mux(b[k], a << k, 0) for k in range(len(b))]
    if b.shape().signed:  # two's complement: the top bit weighs -2**(width-1)
        terms[-1] = -terms[-1]
    size = -(-len(terms) // parts)
    return [tree_sum(terms[k:k + size]) for k in range(0, len(terms), size)]


def product_parts(a_bits: int, b_bits: int) -> int:
    """How many registered partial sums a LUT multiplier of ``a_bits`` x ``b_bits`` gives
    (``partial_sums``): two partial products each, so one adder level sits before the
    register (with two parts, the adder trees of an 8 x 8 product before the register were
    the critical path: 7 LUT levels, 22.8 ns on the UP5K; 7.2 ns on the ECP5)."""
    return max(1, -(-min(a_bits, b_bits) // 2))


def partial_sum_bits(a_shape, b_shape, parts: int) -> int:
    """The bits of the ``parts`` partial sums ``partial_sums`` gives for operands of these
    shapes that are not constant (what a LUT multiplier's product register holds: a
    group's sum is 0 below its first partial product's shift)."""
    sums = partial_sums(Signal(a_shape), Signal(b_shape), parts)
    size = -(-min(Shape.cast(a_shape).width, Shape.cast(b_shape).width) // parts)
    return sum(Value.cast(v).shape().width - k * size for k, v in enumerate(sums))


def multiply(a: Value, b: Value, *, dsp: bool) -> Value:
    """The exact product ``a * b``: a ``$mul`` (DSP-mappable) when ``dsp``, otherwise
    partial products of the narrower operand's bits, summed in a tree."""
    if dsp:
        return a * b
    return tree_sum(partial_sums(a, b))


def tree_sum(values: list) -> Value:
    """The exact sum of ``values`` as a balanced tree of adders (each widens by a bit)."""
    values = list(values)
    if not values:
        return Const(0)
    while len(values) > 1:
        values = [values[k] + values[k + 1] if k + 1 < len(values) else values[k]
                  for k in range(0, len(values), 2)]
    return values[0]


def nibble_counts(bits: Value, width: int) -> list:
    """The ones in ``bits`` (``width`` of them) as one count per group of four: each a
    table lookup, ``(T >> 4 * nibble)[:3]`` of a constant ``T``. Synthesis makes it one
    LUT4 per count bit; a simulator runs a shift and a mask instead of a sum of single
    bits (the XNOR popcount was most of a binary network's Verilator time: 12
    instructions per bit)."""
    counts = []
    for k in range(0, width, 4):
        n = min(4, width - k)
        table = Const(sum(bin(i).count("1") << (4 * i) for i in range(1 << n)), 4 << n)
        counts.append(table.word_select(bits[k:k + n], 4)[:n.bit_length()])
    return counts
