"""Replace a many-level MultiThreshold by a shift-and-round requantization when, and only
when, the two are provably equal over the layer's whole input range.

With power-of-two scales (the jet tagger: 2**-15 accumulators into 2**-6 activations) an
activation quantizer is ``clip(round((x + b) / 2**s))``: one adder, a shift and a clamp per
lane instead of up to 255 stored thresholds per channel. The thresholds found by bisection
are exact; this pass searches a shift, rounding mode and per-channel offset whose level
boundaries, clamped to each channel's input range, are the same integers. Equal boundaries
mean equal functions on that range, so nothing is approximated; anything else keeps its
thresholds.

Works on the integer network (not the ONNX graph) with the QONNX ``Transformation``
contract: ``apply(net) -> (net, changed)``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..dtypes import DataType
from ..ir import MultiThreshold, Network, Requant, Rounding, round_shift

__all__ = ["ThresholdsToRequant", "MIN_LEVELS"]

# Below this many thresholds per channel a threshold unit is as cheap as a requantizer.
MIN_LEVELS = 7


def _boundaries(levels: np.ndarray, shift: int, rounding: Rounding) -> np.ndarray:
    """Per level L, the least integer y with round(y / 2**shift) >= L."""
    if shift == 0:
        return levels.copy()
    step, half = 1 << shift, 1 << (shift - 1)
    base = {Rounding.FLOOR: levels * step,
            Rounding.CEIL: (levels - 1) * step + 1,
            Rounding.HALF_UP: levels * step - half,
            Rounding.HALF_EVEN: levels * step - half + (levels & 1)}[rounding]
    # The closed forms above, checked once against the definition.
    assert np.all(round_shift(base, shift, rounding) >= levels)
    assert np.all(round_shift(base - 1, shift, rounding) < levels)
    return base


def _input_range(net: Network, layer: MultiThreshold) -> tuple[np.ndarray, np.ndarray]:
    """Per channel, the exact range of the threshold layer's input."""
    producer = net.producer(layer.inputs[0])
    if producer is not None:
        return producer.output_range(net)
    dtype = net.tensors[layer.inputs[0]].dtype
    return np.full(layer.channels, dtype.min), np.full(layer.channels, dtype.max)


def _fit(layer: MultiThreshold, lo, hi, shift: int, rounding: Rounding):
    """Per-channel offsets making requantization equal to ``layer`` on [lo, hi], or None."""
    code_lo = int(layer.bias[0])
    levels = np.arange(code_lo + 1, code_lo + layer.num_thresholds + 1, dtype=np.int64)
    bounds = _boundaries(levels, shift, rounding)
    want = np.clip(layer.thresholds, lo[:, None], hi[:, None] + 1)
    t = layer.thresholds
    # per channel: the first threshold inside (lo, hi] fixes the offset; without one the
    # layer is constant on the range, n levels always on and the rest never
    inside = (t > lo[:, None]) & (t <= hi[:, None])
    first = inside.argmax(axis=1)
    n = (t <= lo[:, None]).sum(axis=1)
    constant = np.where(n > 0, bounds[np.maximum(n - 1, 0)] - lo, bounds[0] - (hi + 1))
    offsets = np.where(inside.any(axis=1),
                       bounds[first] - t[np.arange(layer.channels), first], constant)
    got = np.clip(bounds[None, :] - offsets[:, None], lo[:, None], hi[:, None] + 1)
    return offsets if np.array_equal(got, want) else None


def _reached_levels(layer: MultiThreshold, lo, hi) -> MultiThreshold:
    """The same function without the levels no channel leaves or reaches on its range:
    thresholds every channel passes at ``lo`` (a ReLU before a signed quantizer makes the
    negative codes unreachable) and ones none reaches by ``hi``. The requantizer then
    clamps to the codes actually produced."""
    t = layer.thresholds
    first = int(np.min(np.sum(t <= lo[:, None], axis=1)))
    last = t.shape[1] - int(np.min(np.sum(t > hi[:, None], axis=1)))
    if first == 0 and last == t.shape[1]:
        return layer
    return dataclasses.replace(layer, thresholds=t[:, first:last],
                               bias=layer.bias + first * layer.sign)


def _requant(net: Network, layer: MultiThreshold) -> Requant | None:
    in_type: DataType = net.tensors[layer.inputs[0]].dtype
    # The requantizer adds offsets to integers: bipolar inputs and outputs keep their
    # thresholds.
    if layer.num_thresholds < MIN_LEVELS or layer.out_type.bipolar or in_type.bipolar:
        return None
    if np.any(layer.sign != 1) or np.any(layer.bias != layer.bias[0]):
        return None
    lo, hi = (np.asarray(a, dtype=np.int64) for a in _input_range(net, layer))
    layer = _reached_levels(layer, lo, hi)
    if layer.num_thresholds < MIN_LEVELS:
        return None
    for shift in range(in_type.bits + 2):
        for rounding in Rounding:
            offsets = _fit(layer, lo, hi, shift, rounding)
            if offsets is not None:
                return Requant(layer.name, layer.inputs, layer.output, bias=offsets,
                               shift=shift, rounding=rounding, lo=int(layer.bias[0]),
                               hi=int(layer.bias[0]) + layer.num_thresholds,
                               in_type=in_type, out_type=layer.out_type)
    return None


class ThresholdsToRequant:
    """Swap each many-level MultiThreshold for an equal ``Requant``, where one exists."""

    def apply(self, net: Network) -> tuple[Network, bool]:
        layers, changed = [], False
        for layer in net.layers:
            new = _requant(net, layer) if isinstance(layer, MultiThreshold) else None
            layers.append(new if new is not None else layer)
            changed |= new is not None
        return (dataclasses.replace(net, layers=layers) if changed else net), changed
