"""Float tails after the last quantizer (a float bias Add, Softmax, Sigmoid, LogSoftmax),
computed on the host exactly as qonnx's ``execute_onnx`` computes them, frame for frame,
and said to be exact only when they are (``qloom.nn.passes.tail``)."""

import dataclasses
import warnings

import numpy as np
import pytest

from qloom.errors import UnsupportedModelError
from qloom.nn.check import compare_with_qonnx
from qloom.nn.load import load

from foreign_models import jet_inputs, jet_tagger
from graph_builder import GraphBuilder

FRAMES = 150


def _load(model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # the fixed-point input's warning
        return load(model)


@pytest.mark.parametrize("tail", [("Softmax",), ("Sigmoid",), ("LogSoftmax",), ()])
def test_qkeras_jet_tagger_tail_is_bit_for_bit(tail):
    model = jet_tagger(tail)
    net = _load(model)
    assert net.tail_exact and net.tail_ops == ("Add", *tail)
    assert "bit for bit as execute_onnx" in net.tail_note
    assert [l.op for l in net.layers].count("Dense") == 4      # all four in hardware
    report = compare_with_qonnx(model, net, jet_inputs(FRAMES))
    assert report.ok and not report.mismatches, report.summary()
    assert report.identical_outputs == FRAMES


def test_non_power_of_two_scales_move_the_last_layer_to_the_host():
    """qonnx's float32 sums round with such scales, so a Softmax cannot start from the
    integer accumulator: the last MatMul runs on the host too, from its quantized input.
    Every frame is then qonnx's output bit for bit, except frames whose earlier quantizer
    qonnx's own rounding decided (float ties, counted)."""
    model = jet_tagger(w_scale=0.03, a_scale=0.07)
    net = _load(model)
    assert net.tail_exact and net.tail_ops == ("MatMul", "Add", "Softmax")
    assert [l.op for l in net.layers].count("Dense") == 3
    assert net.tail_note.startswith("MatMul")
    report = compare_with_qonnx(model, net, jet_inputs(FRAMES))
    assert report.ok and not report.unexplained, report.summary()
    assert report.identical_outputs == FRAMES - report.tie_frames
    assert report.tie_frames < FRAMES // 10


def test_affine_tail_on_a_rounded_accumulator_is_not_called_exact():
    model = jet_tagger(tail=(), w_scale=0.03, a_scale=0.07)
    net = _load(model)
    assert not net.tail_exact and "not bit for bit" in net.tail_note
    assert [l.op for l in net.layers].count("Dense") == 4
    report = compare_with_qonnx(model, net, jet_inputs(50))
    assert report.ok and not report.exact_output
    assert "qonnx's float32 sums round" in report.summary()


def test_the_check_fails_a_tail_that_is_off_by_one_ulp():
    model = jet_tagger()
    net = _load(model)
    off = dataclasses.replace(net, tail=lambda y: np.nextafter(net.tail(y), np.float32(2)))
    report = compare_with_qonnx(model, off, jet_inputs(20))
    assert not report.ok and len(report.unexplained) == 20
    assert "where the tail is exact" in report.unexplained[0].detail


def test_softmax_on_a_rounded_residual_sum_is_refused():
    g = GraphBuilder()
    x = g.quant(g.input([1, 8]), 0.25, 4)
    rng = np.random.default_rng(0)
    branches = [g.node("MatMul", [x, g.quant(g.const(rng.normal(0, 1, (8, 4))
                                                     .astype(np.float32)), 0.3, 4)])
                for _ in range(2)]
    y = g.node("Softmax", [g.node("Add", branches)], axis=1)
    with pytest.raises(UnsupportedModelError, match=r"node 'Softmax\d+': the float tail "
                       r"\(Softmax\) reads an accumulator whose float32 value qonnx rounds"):
        _load(g.model(y))
