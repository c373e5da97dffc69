# amaranth: UnusedElaboratable=no
"""The skid buffer: nothing lost, duplicated or reordered under stalls, full rate, and a
ready that does not depend on the downstream ready within the cycle."""

import pytest
from amaranth.lib import data
from amaranth.hdl import signed

from qloom.hw.skid import SkidBuffer
from qloom.sim.pysim import run_stream


@pytest.mark.parametrize("stall", [0.0, 0.3, 0.7])
def test_skid_passes_every_word_in_order(stall):
    words = [[k % 7 - 3, -k % 5] for k in range(60)]
    dut = SkidBuffer(shape=data.ArrayLayout(signed(4), 2))
    run = run_stream(dut, words, len(words), in_stall=stall, out_stall=stall, seed=3)
    assert run.outputs == words


def test_skid_full_rate():
    dut = SkidBuffer(shape=data.ArrayLayout(signed(4), 1))
    run = run_stream(dut, [[k % 8 - 4] for k in range(30)], 30)
    assert all(b - a == 1 for a, b in zip(run.out_cycles, run.out_cycles[1:]))
    assert run.out_cycles[0] - run.in_cycles[0] == 1


def test_skid_verilog_starts_clean():
    from amaranth.back import verilog

    from qloom.sim.rtl_check import comb_processes_without_reset
    text = verilog.convert(SkidBuffer(shape=data.ArrayLayout(signed(4), 1)), name="skid")
    assert comb_processes_without_reset(text) == []


@pytest.mark.parametrize("stall", [0.0, 0.3])
def test_wide_skid_with_copied_flags_passes_every_word(stall):
    """100 bits: four copies of the flags (GROUP_BITS 32), each steering its own bits."""
    words = [[(k * 37 + j * 11) % 1000 - 500 for j in range(10)] for k in range(80)]
    dut = SkidBuffer(shape=data.ArrayLayout(signed(10), 10))
    run = run_stream(dut, words, len(words), in_stall=stall, out_stall=stall, seed=5)
    assert run.outputs == words
