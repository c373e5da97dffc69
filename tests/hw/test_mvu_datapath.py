import itertools

import pytest
from amaranth.hdl import Module, Signal, signed, unsigned
from amaranth.sim import Simulator

from qloom.hw.mvu_datapath import (Datapath, multiply, select_datapath, select_product,
                                   tree_sum)
from qloom.hw.types import shape_of
from qloom.nn.dtypes import BINARY, BIPOLAR, TERNARY, int_type, uint_type


def rtl_eval(shapes, build, operands):
    """Evaluate the combinational ``build(*signals)`` for every tuple in ``operands``."""
    m = Module()
    inputs = [Signal(shape) for shape in shapes]
    expr = build(*inputs)
    out = Signal(expr.shape())
    m.d.comb += out.eq(expr)
    results = []

    async def bench(ctx):
        for values in operands:
            for signal, value in zip(inputs, values):
                ctx.set(signal, value)
            results.append(ctx.get(out))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return results


def every_value(shape):
    lo, hi = (-(1 << (shape.width - 1)), (1 << (shape.width - 1)) - 1) if shape.signed \
        else (0, (1 << shape.width) - 1)
    return range(lo, hi + 1)


@pytest.mark.parametrize("a_shape,b_shape", [
    (signed(4), signed(3)), (unsigned(4), signed(3)), (signed(3), unsigned(4)),
    (unsigned(3), unsigned(3)), (signed(5), signed(1)), (unsigned(2), signed(5))])
@pytest.mark.parametrize("dsp", [False, True])
def test_multiply_is_exact_for_every_operand(a_shape, b_shape, dsp):
    pairs = list(itertools.product(every_value(a_shape), every_value(b_shape)))
    got = rtl_eval([a_shape, b_shape], lambda a, b: multiply(a, b, dsp=dsp), pairs)
    assert got == [a * b for a, b in pairs]


@pytest.mark.parametrize("select_type", [BIPOLAR, BINARY, TERNARY, int_type(1)])
def test_select_product_is_exact(select_type):
    other = signed(4)
    values = [-1, 1] if select_type.bipolar else range(select_type.min, select_type.max + 1)
    codes = [int(c) for c in select_type.encode(values)]
    pairs = list(itertools.product(codes, every_value(other)))
    got = rtl_eval([shape_of(select_type), other],
                   lambda s, x: select_product(s, select_type, x), pairs)
    assert got == [int(select_type.decode(c)) * x for c, x in pairs]


def test_tree_sum_is_balanced_and_exact():
    values = [(k * 37) % 16 for k in range(255)]
    got = rtl_eval([unsigned(4)] * len(values), lambda *s: tree_sum(list(s)), [values])
    assert got == [sum(values)]


def test_datapath_names_the_datatypes_it_rejects():
    with pytest.raises(ValueError, match=r"Input type UINT40 is wider than the 32 bits a "
                                         r"matrix-vector unit supports \(weights INT8, "
                                         r"inputs UINT40\)"):
        select_datapath(int_type(8), uint_type(40))
    assert select_datapath(int_type(32), int_type(32)) is Datapath.MAC


@pytest.mark.parametrize("a_bits,b_bits", [(6, 6), (8, 8), (3, 8), (4, 2)])
def test_partial_sum_bits_counts_the_registers_of_the_partial_sums(a_bits, b_bits):
    """One part is the whole sum; with more parts each group's sum loses its constant-zero
    low bits (below its first partial product's shift) and nothing else."""
    from amaranth.hdl import Value
    from qloom.hw.mvu_datapath import partial_sum_bits, partial_sums, product_parts
    a, b = signed(a_bits), unsigned(b_bits)
    whole = sum(Value.cast(v).shape().width for v in partial_sums(Signal(a), Signal(b), 1))
    assert partial_sum_bits(a, b, 1) == whole
    parts = product_parts(a_bits, b_bits)
    sums = partial_sums(Signal(a), Signal(b), parts)
    size = -(-min(a_bits, b_bits) // parts)
    widths = [Value.cast(v).shape().width for v in sums]
    assert partial_sum_bits(a, b, parts) == sum(widths) - size * sum(range(len(sums)))
