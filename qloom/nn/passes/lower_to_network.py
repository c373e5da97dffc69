"""Walk a cleaned QONNX graph in topological order and build the integer ``Network``.

Every ONNX tensor gets one of four meanings:

- ``_Int``: the tensor equals ``value * scale + offset`` of an integer IR tensor (quantizer
  outputs exactly; Dense/Conv/Add accumulators up to qonnx's float32 rounding).
- ``_Float``: float arithmetic on an ``_Int`` (elementwise ops, a MaxPool). A quantizer
  consuming it becomes a MultiThreshold; a graph output reached by it is the host tail.
  ``blocker`` is the first op that cannot be folded into thresholds.
- ``_Prefix``: float arithmetic on the graph input. The first quantizer ends it (the host
  ``quantize``); a linear layer consuming it makes the input fixed point.
- constants (``consts``).
"""

from __future__ import annotations

import os
import traceback

import numpy as np
import onnx

from ...errors import QloomError, UnsupportedModelError
from .. import ir
from ..thresholds import FloatFunction, NotMonotoneError, derive_thresholds
from . import avgpool, concat, resize
from .activations import ACTIVATIONS, non_monotone
from .direct_requant import DIRECT_LEVELS, direct_requant
from .lookup import MAX_INPUT_BITS, is_narrow, lower_lookup
from .layer_builders import LayerBuilders
from .lowering import Lowering
from .quantizers import QUANTIZERS, quant_spec
from .reshape import lower_reshape
from .values import FloatChain, Int, Prefix

__all__ = ["LoweringState", "ELEMENTWISE", "LOWERINGS", "supported_ops", "from_runtime"]

_RUNTIMES = tuple(f"{os.sep}{p}{os.sep}" for p in ("qonnx", "onnx", "onnxruntime"))


def from_runtime(e: BaseException) -> bool:
    """Whether ``e`` was raised inside qonnx, onnx or onnxruntime (executing or inferring
    a node qloom handed them), not by qloom itself."""
    frames = traceback.extract_tb(e.__traceback__)
    return bool(frames) and any(p in frames[-1].filename for p in _RUNTIMES)

# Ops that move no element: followed on integer tensors, host ops in the prefix.
# The most thresholds (levels x channels) one quantizer may become.
MAX_THRESHOLDS = 1 << 20

SHAPE_OPS = ("Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze")

# Elementwise ops that may sit between an accumulator and the next quantizer.
ELEMENTWISE = ("Add", "Sub", "Mul", "Div", "BatchNormalization", "Identity", "Neg", "Max",
               "Min", "Floor", "Ceil", "Round") + tuple(ACTIVATIONS)


def _broadcasts_into(const_shape, shape) -> bool:
    """Whether a constant broadcasts against ``shape`` without enlarging it."""
    try:
        return np.broadcast_shapes(const_shape, shape) == shape
    except ValueError:
        return False


class LoweringState(LayerBuilders):
    """The walk itself; layer construction lives in ``LayerBuilders``."""

    def __init__(self, model, consts, *, input_type, input_scale, warn):
        super().__init__(model, consts, input_type=input_type, input_scale=input_scale,
                         warn=warn)
        self.env = {}
        graph_input = model.graph.input[0].name
        self.env[graph_input] = Prefix()

    def run(self):
        for node in self.model.graph.node:
            if all(t in self.consts or not t for t in node.input):
                continue
            try:
                self.visit(node)
            except QloomError:
                raise
            except Exception as e:
                if not from_runtime(e):
                    raise
                first = (str(e).strip().splitlines() or [""])[0][:300]
                raise UnsupportedModelError(
                    f"qonnx cannot execute this {node.op_type} ({type(e).__name__}: {first})",
                    node.name) from e
        return self.finish()

    # ---- dispatch ---------------------------------------------------------------------
    def visit(self, node):
        op = node.op_type
        data = [self.env.get(t) for t in node.input if t and t not in self.consts]
        if any(d is None for d in data):
            raise UnsupportedModelError(f"{op} reads a tensor qloom cannot trace", node.name)
        lowering = LOWERINGS.get(op)
        if lowering is None or not lowering.lower(self, node, data):
            self.on_other(node, data)

    # Each returns whether it lowered the node (False: ``on_other`` decides).
    def _quantizer(self, node, data):
        self.on_quantizer(node, data[0])
        return True

    def _linear(self, node, data):
        self.env[node.output[0]] = self.on_linear(node, data)
        return True

    def _add(self, node, data):
        if len(data) == 2:
            self.env[node.output[0]] = self.on_add(node, data)
            return True
        return self._elementwise(node, data)

    def _elementwise(self, node, data):
        if len(data) != 1:
            return False
        self.on_elementwise(node, data[0])
        return True

    def _maxpool(self, node, data):
        self.on_maxpool(node, data[0])
        return True

    def _shape(self, node, data):
        self.on_reshape(node, data[0])
        return True

    def _blocked(self, node, data):
        for d in data:
            if isinstance(d, (FloatChain, Prefix)) and d.blocker is not None:
                return d.blocker
        return None

    def on_other(self, node, data):
        """An op qloom cannot integerize: fine in the host tail, an error anywhere else."""
        src = data[0]
        if isinstance(src, Prefix):
            self.env[node.output[0]] = Prefix(src.nodes + [node], affine=False,
                                              blocker=src.blocker or node)
        elif len(data) == 1:
            chain = src if isinstance(src, FloatChain) else FloatChain(src)
            self.env[node.output[0]] = FloatChain(chain.source, chain.nodes + [node],
                                                  chain.pool, chain.blocker or node)
        else:
            raise self.unsupported(node)

    def on_elementwise(self, node, src):
        shape = tuple(self.shape_of(node.output[0]))
        if node.op_type != "BatchNormalization" and any(
                not _broadcasts_into(np.shape(self.consts[t]), shape)
                for t in node.input if t in self.consts):
            return self.on_other(node, [src])
        if isinstance(src, Prefix):
            self.env[node.output[0]] = self.extend_prefix(src, node)
            return
        chain = src if isinstance(src, FloatChain) else FloatChain(src)
        self.env[node.output[0]] = FloatChain(chain.source, chain.nodes + [node], chain.pool,
                                              chain.blocker)

    def extend_prefix(self, src: Prefix, node) -> Prefix:
        alpha, beta, affine = src.alpha, src.beta, src.affine
        consts = [self.consts[t] for t in node.input if t in self.consts]
        scalar = len(consts) == 1 and np.size(consts[0]) == 1
        c = float(np.asarray(consts[0]).ravel()[0]) if scalar else None
        first = node.input[0] in self.consts
        op = node.op_type
        if not scalar and op != "Identity":
            affine = False
        elif op == "Add":
            beta += c
        elif op == "Sub":
            alpha, beta = (-alpha, c - beta) if first else (alpha, beta - c)
        elif op == "Mul":
            alpha, beta = alpha * c, beta * c
        elif op == "Div" and not first:
            alpha, beta = alpha / c, beta / c
        elif op != "Identity":
            affine = False
        return Prefix(src.nodes + [node], alpha, beta, affine, src.blocker)

    def on_reshape(self, node, src):
        if isinstance(src, Prefix):
            # a host op before the input quantizer; only Reshape/Flatten keep a fixed-point
            # input's layout (``fixed_point_input`` folds them)
            affine = src.affine and node.op_type in ("Reshape", "Flatten")
            self.env[node.output[0]] = Prefix(src.nodes + [node], src.alpha, src.beta,
                                              affine, src.blocker)
        elif isinstance(src, Int):
            self.env[node.output[0]] = lower_reshape(self, node, src)
        else:
            self.on_other(node, [src])

    def unsupported(self, node):
        lowering = LOWERINGS.get(node.op_type)
        if lowering is not None and lowering.refusal is not None:
            return UnsupportedModelError(lowering.refusal(node), node.name)
        where = "here" if node.op_type in LOWERINGS else "inside the network"
        return UnsupportedModelError(
            f"op {node.op_type} is not supported {where} (only in the host tail after the "
            f"last quantized tensor); qloom lowers {supported_ops()}", node.name)

    def on_maxpool(self, node, src):
        if isinstance(src, Int):
            self.env[node.output[0]] = self.maxpool(node, src)
            if src.quantized:
                self.onnx_names[self.env[node.output[0]].ir] = node.output[0]
                self.onnx_layouts[self.env[node.output[0]].ir] = src.layout.to_onnx
        elif isinstance(src, FloatChain) and src.pool is None:
            self.env[node.output[0]] = FloatChain(src.source, src.nodes + [node], node,
                                                  src.blocker)
        else:
            self.on_other(node, [src])

    # ---- quantizers -------------------------------------------------------------------
    def on_quantizer(self, node, src):
        spec = quant_spec(node, self.consts)
        blocker = self._blocked(node, [src])
        if blocker is not None:
            raise self.unsupported(blocker)
        if isinstance(src, Prefix):
            self.env[node.output[0]] = self.input_quantizer(node, src, spec)
        else:
            chain = src if isinstance(src, FloatChain) else FloatChain(src)
            self.env[node.output[0]] = self.threshold(node, chain, spec)

    @staticmethod
    def threshold_nodes(chain: FloatChain, quantizer):
        """The chain's nodes and its quantizer, without the MaxPool (which moves after the
        thresholds)."""
        if chain.pool is None:
            return list(chain.nodes) + [quantizer]
        alias = {chain.pool.output[0]: chain.pool.input[0]}
        nodes = []
        for n in chain.nodes + [quantizer]:
            if n is chain.pool:
                continue
            copy = onnx.NodeProto()
            copy.CopyFrom(n)
            for i, t in enumerate(copy.input):
                copy.input[i] = alias.get(t, t)
            nodes.append(copy)
        return nodes

    def threshold(self, node, chain: FloatChain, spec):
        src = chain.source
        info = self.tensors[src.ir]
        channels = info.shape[-1]
        fn = FloatFunction(self.threshold_nodes(chain, node), self.consts, src.onnx,
                           node.output[0], self.shape_of, self.opsets)
        scale = np.broadcast_to(info.scale, (channels,))
        offset = np.broadcast_to(src.offset, (channels,))
        rank = len(self.shape_of(src.onnx))
        axis = src.layout.channel_axis(rank)
        q_scale = self.channel_scale(spec.scale, node.name, (rank, axis))
        out_scale = np.broadcast_to(q_scale, (channels,))

        def code_fn(a):
            x = (a * scale + offset).astype(np.float32)
            # one candidate per channel, on the channel axis of the ONNX tensor
            shape = [1] * rank
            shape[0], shape[axis] = a.shape[0], channels
            y = fn(x.reshape(shape)).reshape(a.shape[0], channels)
            return spec.dtype.encode(spec.values(y, out_scale))

        lo, hi = self.ranges[src.ir]
        culprit = non_monotone(chain.nodes, self.consts)
        out = node.output[0] if chain.pool is None else f"{node.output[0]}_unpooled"
        layer = None if culprit else \
            self.wide_requant(node, code_fn, src, scale, out_scale, spec, out)
        if layer is None and culprit is None and self.too_many_levels(spec, lo):
            # a monotone nonlinear op into a wide quantizer (a Sigmoid at fixed<16,6>):
            # a table of its narrow input, or the refusal naming the sizes
            if not is_narrow(lo, hi):
                raise self.too_many_thresholds(node, spec)
            culprit = chain.nodes[-1] if chain.nodes else node
            return lower_lookup(self, node, chain, spec, code_fn, culprit, q_scale)
        if layer is None:
            try:
                ts = None if culprit else derive_thresholds(code_fn, lo, hi, spec.dtype,
                                                            node=node.name)
            except NotMonotoneError:
                if not is_narrow(lo, hi):
                    raise
                ts, culprit = None, chain.nodes[-1] if chain.nodes else node
            if ts is None:   # not monotone: a lookup table (or a refusal naming culprit)
                return lower_lookup(self, node, chain, spec, code_fn, culprit, q_scale)
            layer = ir.MultiThreshold(
                name=node.name, inputs=(src.ir,), output=out, thresholds=ts.thresholds,
                bias=ts.bias, sign=ts.sign, in_type=ts.in_type, out_type=spec.dtype)
        self.new_tensor(out, info.shape, spec.dtype, q_scale, spec.dtype.min, spec.dtype.max,
                        spec.zero_point)
        self.layers.append(layer)
        result = Int(out, node.output[0], src.layout, -spec.zero_point * q_scale, True)
        if chain.pool is not None:
            if isinstance(layer, ir.MultiThreshold) and np.any(layer.sign < 0):
                raise UnsupportedModelError(
                    "a MaxPool before a decreasing activation cannot be moved after the "
                    "thresholds", chain.pool.name)
            result = self.maxpool(chain.pool, result, out=node.output[0])
            result = Int(result.ir, node.output[0], result.layout, result.offset, True)
        self.onnx_names[result.ir] = node.output[0]
        self.onnx_layouts[result.ir] = src.layout.to_onnx
        return result

    @staticmethod
    def _levels(spec) -> int:
        return int(spec.dtype.encode(spec.dtype.max) - spec.dtype.encode(spec.dtype.min))

    def too_many_levels(self, spec, lo) -> bool:
        """Beyond 4,096 levels (or ``MAX_THRESHOLDS`` in all) bisection and its check cost
        more memory than any threshold unit is worth."""
        levels = self._levels(spec)
        return levels > 4096 or levels * len(np.atleast_1d(lo)) > MAX_THRESHOLDS

    def too_many_thresholds(self, node, spec) -> UnsupportedModelError:
        levels = self._levels(spec)
        return UnsupportedModelError(
            f"this {spec.dtype} quantizer ({levels:,} levels) after float arithmetic is no "
            f"shift-and-round of the accumulator (scales not powers of two apart, or a "
            f"nonlinear op on a wide input): as thresholds it would need {levels:,} per "
            f"channel; qloom builds at most {MAX_THRESHOLDS:,} thresholds per layer, and a "
            f"table at most {1 << MAX_INPUT_BITS:,} entries", node.name)

    def wide_requant(self, node, code_fn, src, in_scale, out_scale, spec, out):
        """A quantizer of ``DIRECT_LEVELS`` or more levels as a ``Requant`` found directly
        (``direct_requant``); None: not one (thresholds or a table then)."""
        if self._levels(spec) < DIRECT_LEVELS:
            return None
        lo, hi = self.ranges[src.ir]
        return direct_requant(code_fn, lo, hi, in_scale, out_scale, spec.dtype,
                              name=node.name, inputs=(src.ir,), output=out,
                              in_type=self.tensors[src.ir].dtype)

    def finish(self):
        outputs = self.model.graph.output
        if len(outputs) != 1:
            raise UnsupportedModelError(
                f"models with {len(outputs)} outputs are not supported (exactly one)")
        final = self.env.get(outputs[0].name)
        if final is None or isinstance(final, Prefix):
            raise UnsupportedModelError(
                "the model output does not depend on any quantized layer; qloom needs at "
                "least one quantized MatMul/Gemm/Conv layer", outputs[0].name)
        chain = final if isinstance(final, FloatChain) else FloatChain(final)
        return self.assemble(chain, outputs[0].name)


# ONNX op -> its lowering: the one table the walk dispatches on and the messages quote.
# An op lowered in a file of its own brings its entries from there (``**module.LOWERINGS``).
LOWERINGS = {
    **{op: Lowering(LoweringState._quantizer, "quantizers (thresholds, shifts, integer "
                                              "weights)") for op in QUANTIZERS},
    **{op: Lowering(LoweringState._linear, "quantized dense (Gemm too) and convolution "
                                           "layers (grouped and depthwise too)")
       for op in ("MatMul", "Conv")},
    **{op: Lowering(LoweringState._elementwise, "float elementwise ops between a layer and "
                                                "the next quantizer (scales, biases, "
                                                "BatchNorm, activations): thresholds, or a "
                                                "lookup table over a narrow input where "
                                                "not monotone")
       for op in ELEMENTWISE if op != "Add"},
    "Add": Lowering(LoweringState._add, "residual Add (scales equal or an integer factor "
                                        "apart), or a float bias"),
    "MaxPool": Lowering(LoweringState._maxpool, "MaxPool"),
    **avgpool.LOWERINGS,
    **concat.LOWERINGS,
    **resize.LOWERINGS,
    **{op: Lowering(LoweringState._shape, "shape ops that keep the channels-last order")
       for op in SHAPE_OPS},
}


def supported_ops() -> str:
    """The ops qloom lowers, grouped by what they become (from ``LOWERINGS``)."""
    groups = {}
    for op, lowering in LOWERINGS.items():
        groups.setdefault(lowering.becomes, []).append(op)
    return "; ".join(f"{'/'.join(ops)} as {becomes}" for becomes, ops in groups.items())
