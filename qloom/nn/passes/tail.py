"""The host tail: the float ops after the last integer tensor (a float bias Add, Softmax,
Sigmoid, LogSoftmax, ...), computed on the host by qonnx exactly as ``execute_onnx``
computes them, never approximately.

qonnx runs the tail on the float32 value of its input tensor. When that tensor is a
quantizer's output, its float32 value is ``value * scale`` exactly. When it is a linear
layer's accumulator, qonnx computes it as a float32 MatMul/Conv of the float32 inputs and
weights, which equals the integer accumulator times its scale exactly only when every
product and partial sum is a float32 number: power-of-two scales, no offset, and sums
within 2**24 steps (``accumulator_is_exact``). Then the host tail starts from the
hardware's integer output. Otherwise a tail of ops that are not affine (Softmax, Sigmoid,
...) would differ from qonnx by the rounding of its float32 sums, so the last linear layer
moves to the host too (``TailPlan.host_layer``): the hardware emits that layer's quantized
input and the host runs the layer and the tail with qonnx. An affine tail (bias Add, Sub,
Mul, Div) or none is left on the exact accumulator and said to agree with qonnx within its
float32 rounding (``TailPlan.note``), never called exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import UnsupportedModelError
from .. import ir
from .values import FloatChain, Int

__all__ = ["TailPlan", "plan_tail", "accumulator_is_exact", "AFFINE_OPS"]

# Ops after which a float32 rounding of the input stays a float32 rounding of the output.
AFFINE_OPS = ("Add", "Sub", "Mul", "Div", "Identity", "Reshape", "Flatten", "Transpose",
              "Squeeze", "Unsqueeze")
FLOAT32_EXACT = 2 ** 24


@dataclass(frozen=True)
class TailPlan:
    source: Int             # the integer tensor the host tail starts from
    nodes: tuple            # the ONNX nodes the host runs, in order
    exact: bool             # Network.execute's output is execute_onnx's, bit for bit
    note: str               # how the tail is computed, for the report
    host_layer: str | None = None   # the linear layer moved to the host, if any


def _pow2(values) -> bool:
    v = np.abs(np.asarray(values, np.float64).ravel())
    return bool(np.all(v > 0) and np.all(np.log2(v) == np.round(np.log2(v))))


def accumulator_is_exact(state, layer, src: Int) -> bool:
    """Whether qonnx's float32 result of linear ``layer`` (reading ``src``) equals its
    integer accumulator times its scale exactly."""
    if not isinstance(layer, (ir.Dense, ir.Conv)) or not src.quantized:
        return False
    info_in, info_out = state.tensors[src.ir], state.tensors[layer.output]
    if not (_pow2(info_in.scale) and _pow2(info_out.scale)) or np.any(src.offset):
        return False
    weights = layer.weights.reshape(layer.weights.shape[0], -1)
    biggest = max(abs(info_in.dtype.min), abs(info_in.dtype.max))
    return bool(np.abs(weights).sum(axis=1).max(initial=0) * biggest < FLOAT32_EXACT)


def plan_tail(state, chain: FloatChain, output_name: str) -> TailPlan:
    src, nodes = chain.source, tuple(chain.nodes)
    ops = ", ".join(n.op_type for n in nodes) or "none"
    if not nodes:
        return _plain_output(state, src, nodes)
    if src.quantized:
        return TailPlan(src, nodes, True, f"{ops} on the host in float32 (qonnx) from the "
                        f"quantized output: bit for bit as execute_onnx")
    layer = state.producer_layer(src.ir)
    reads = state.int_of(layer.inputs[0]) if layer is not None else None
    if layer is not None and reads is not None and not np.any(src.offset) \
            and accumulator_is_exact(state, layer, reads):
        return TailPlan(src, nodes, True, f"{ops} on the host in float32 (qonnx) from the "
                        f"integer accumulator of {layer.name}: bit for bit as execute_onnx "
                        f"(power-of-two scales: qonnx's float32 sums are exact)")
    if all(n.op_type in AFFINE_OPS for n in nodes):
        return TailPlan(src, nodes, False, f"{ops} on the host in float32 from the integer "
                        f"accumulator, which is exact; qonnx's own float32 sums round "
                        f"(scales that are not powers of two), so float outputs agree with "
                        f"execute_onnx within float32 rounding, not bit for bit")
    return _host_layer(state, chain, layer, reads, ops)


def _plain_output(state, src: Int, nodes) -> TailPlan:
    layer = state.producer_layer(src.ir)
    reads = state.int_of(layer.inputs[0]) if layer is not None else None
    if src.quantized or (reads is not None and not np.any(src.offset)
                         and accumulator_is_exact(state, layer, reads)):
        return TailPlan(src, nodes, True, "none: the output is the integer output times its "
                        "scale, bit for bit as execute_onnx")
    return TailPlan(src, nodes, False, "none: the output is the exact integer accumulator "
                    "times its scale; qonnx's float32 sums round (scales that are not powers "
                    "of two), so float outputs agree within float32 rounding, not bit for bit")


def _host_layer(state, chain: FloatChain, layer, reads: Int | None, ops: str) -> TailPlan:
    """The last linear layer and the tail on the host, from the layer's quantized input."""
    node = state.node_of(layer.name) if layer is not None else None
    movable = (node is not None and reads is not None and reads.quantized
               and state.layers and state.layers[-1] is layer
               and not any(layer.output in l.inputs for l in state.layers)
               and node.input[0] == reads.onnx)
    if not movable:
        raise UnsupportedModelError(
            f"the float tail ({ops}) reads an accumulator whose float32 value qonnx rounds "
            f"(scales that are not powers of two) and is not a linear layer's output on a "
            f"quantized tensor: the host cannot compute the tail exactly as execute_onnx; "
            f"quantize the tail's input or use power-of-two scales", chain.nodes[0].name)
    state.layers.pop()
    return TailPlan(reads, (node, *chain.nodes), True,
                    f"{layer.name} and {ops} on the host in float32 (qonnx) from the quantized "
                    f"input of {layer.name}, bit for bit as execute_onnx: with scales that "
                    f"are not powers of two qonnx's float32 sums round, so the layer cannot "
                    f"start from the integer accumulator", host_layer=layer.name)
