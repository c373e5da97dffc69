"""Float model -> QONNX model at a fixed-point precision: insert qonnx ``Quant`` nodes.

Where the quantizers go (hls4ml's places for its ``ap_fixed`` types):

- the graph input: the input precision;
- every MatMul/Conv weight and bias (a Conv's third input, or the constant of the Add
  right after the layer): the layer's weight and bias precisions;
- a layer's accumulator after its bias (hls4ml's ``accum_t``, which starts from the bias),
  only when the precision file sets one: qloom's accumulators are otherwise exact
  integers, wide enough never to overflow;
- a layer's result (after its bias): the layer's result precision. A ReLU right after
  the layer takes the quantizer after it instead: with a saturating quantizer ``q`` that
  maps 0 to 0, ``relu(q(x)) == q(relu(x))``, so this saves a layer and changes no value;
- the result of every other op that computes new values (activations, a BatchNorm that
  could not be folded, AveragePool, Add of two tensors, scalings): that node's result
  precision. Ops that only move or select values (MaxPool, Flatten, Reshape, Transpose,
  Squeeze, Unsqueeze, Identity, Concat) keep the grid and get none; a Softmax (or any
  op after the last quantizer) stays float: the host tail.

A nonlinear activation (Sigmoid, Tanh, Elu, Selu, LeakyRelu, ...) is computed by a table,
as in hls4ml: its input is quantized to the table index (``table``, default fixed<12,4>:
4,096 entries over [-8, 8); hls4ml's 1,024 are fixed<10,4>) and its output to its result precision, Quant -> op -> Quant;
the lowering makes the pair a lookup table (``passes/lookup.py``).

Follows qonnx's ``Transformation`` contract; the precision comes in a ``PrecisionConfig``.
"""

from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper
from qonnx.transformation.base import Transformation

from ...errors import UnsupportedModelError
from ..precision import Precision, PrecisionConfig, PrecisionError
from .quantizers import QUANTIZERS

__all__ = ["InsertQuantizers", "KEEPS_GRID", "LINEAR"]

QONNX_DOMAIN = "qonnx.custom_op.general"
LINEAR = ("MatMul", "Conv")
# Ops whose outputs are values of their input: no quantizer after them.
KEEPS_GRID = ("MaxPool", "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze",
              "Identity", "Concat", "Dropout", "Resize", "Upsample", "Pad", "Slice")
# Ops left float (run on the host after the last quantizer).
HOST_TAIL = ("Softmax", "LogSoftmax", "ArgMax", "Hardmax")
# Nonlinear activations computed by a table of their quantized input.
TABLE_OPS = ("Sigmoid", "Tanh", "Elu", "Selu", "LeakyRelu", "Softplus", "Softsign",
             "HardSigmoid", "HardSwish", "Gelu", "Mish", "Celu", "ThresholdedRelu", "Exp",
             "Erf", "PRelu")


class InsertQuantizers(Transformation):
    """Insert the Quant nodes of ``config`` into a float model (shapes inferred)."""

    def __init__(self, config: PrecisionConfig):
        super().__init__()
        if not isinstance(config, PrecisionConfig):
            raise TypeError(f"Config must be a PrecisionConfig, not {config!r}")
        self.config = config

    def apply(self, model):
        graph = model.graph
        quantized = [n for n in graph.node if n.op_type in QUANTIZERS]
        if quantized:
            raise UnsupportedModelError(
                f"the model is already quantized ({quantized[0].op_type}); a precision "
                f"applies to float models only: load it without one", quantized[0].name)
        names = {n.name for n in graph.node}
        unknown = sorted(set(self.config.layers) - names)
        if unknown:
            raise PrecisionError(
                f"the precision file names layer '{unknown[0]}', which is no node of the "
                f"model (its nodes: {', '.join(sorted(names)[:12])}"
                f"{', ...' if len(names) > 12 else ''})")
        plan = _Plan(model, self.config)
        plan.make()
        plan.write()
        return model, False


class _Plan:
    """Where each quantizer goes, then the rewrite."""

    def __init__(self, model, config: PrecisionConfig):
        self.model, self.graph, self.config = model, model.graph, config
        self.consts = {i.name for i in self.graph.initializer}
        self.consumers = {}
        for node in self.graph.node:
            for t in node.input:
                self.consumers.setdefault(t, []).append(node)
        self.outputs = {o.name for o in self.graph.output}
        self.on_consts = []          # (node, input index, precision, quant name) before node
        self.after = {}              # tensor -> (precision, quant name)
        self.absorbed = set()        # node names whose quantizer a layer placed

    def _sole_consumer(self, tensor):
        users = self.consumers.get(tensor, [])
        return users[0] if len(users) == 1 and tensor not in self.outputs else None

    def make(self):
        inp = self.graph.input[0].name
        self.after[inp] = (self.config.input_precision, "input_quant")
        for node in self.graph.node:
            if node.name in self.absorbed or all(t in self.consts or not t for t in node.input):
                continue
            if node.op_type in LINEAR and len(node.input) > 1 and node.input[1] in self.consts:
                self._linear(node)
            elif node.op_type in KEEPS_GRID or node.op_type in HOST_TAIL:
                continue
            else:
                own = self.config.layer(node.name)
                if node.op_type in TABLE_OPS:
                    self.on_consts.append((node, 0, own.table, f"{node.name}_table_quant"))
                self.after[node.output[0]] = (own.result, f"{node.name}_result_quant")

    def _linear(self, node):
        own = self.config.layer(node.name)
        self.on_consts.append((node, 1, own.weight, f"{node.name}_weight_quant"))
        if node.op_type == "Conv" and len(node.input) > 2 and node.input[2]:
            self.on_consts.append((node, 2, own.bias, f"{node.name}_bias_quant"))
        end = node.output[0]
        nxt = self._sole_consumer(end)
        if nxt is not None and nxt.op_type == "Add" and nxt.name not in self.config.layers:
            const = [i for i, t in enumerate(nxt.input) if t in self.consts]
            if len(const) == 1:
                self.on_consts.append((nxt, const[0], own.bias, f"{node.name}_bias_quant"))
                self.absorbed.add(nxt.name)
                end = nxt.output[0]
        if own.accumulator is not None:
            self._accumulator(node, own)
            self.after[end] = (own.accumulator, f"{node.name}_accumulator_quant")
        nxt = self._sole_consumer(end)
        if nxt is not None and nxt.op_type == "Relu" and nxt.name not in self.config.layers:
            self.absorbed.add(nxt.name)
            end = nxt.output[0]
        self.after[end] = (own.result, f"{node.name}_result_quant")

    @staticmethod
    def _accumulator(node, own):
        """An accumulator precision the result can be requantized from: a shift right."""
        acc, res = own.accumulator, own.result
        if acc.frac_bits < res.frac_bits:
            raise PrecisionError(
                f"layer '{node.name}': accumulator {acc} has a coarser step "
                f"(2**-{acc.frac_bits}) than its result {res} (2**-{res.frac_bits}); qloom "
                f"requantizes by shifting right: give the accumulator at least "
                f"{res.frac_bits} fractional bits")

    # ---- the rewrite ------------------------------------------------------------------
    def _quant(self, x, out, precision: Precision, name):
        rnd = self.config.rounding.value
        inits = [numpy_helper.from_array(np.asarray(v, np.float32), f"{name}_{what}")
                 for what, v in (("scale", precision.scale), ("zeropt", 0.0),
                                 ("bitwidth", float(precision.width)))]
        self.graph.initializer.extend(inits)
        return helper.make_node("Quant", [x] + [i.name for i in inits], [out], name=name,
                                domain=QONNX_DOMAIN, signed=int(precision.signed), narrow=0,
                                rounding_mode=rnd)

    def write(self):
        used = {n.name for n in self.graph.node}
        unique = _Unique(used)
        before = {}
        for node, index, precision, name in self.on_consts:
            q_name = unique(name)
            q = self._quant(node.input[index], f"{q_name}_out", precision, q_name)
            node.input[index] = q.output[0]
            before.setdefault(id(node), []).append(q)
        nodes = []
        inp = self.graph.input[0].name
        if inp in self.after:
            precision, name = self.after.pop(inp)
            q = self._quant(inp, f"{inp}_quantized", precision, unique(name))
            for users in self.consumers.get(inp, []):
                for i, t in enumerate(users.input):
                    if t == inp:
                        users.input[i] = q.output[0]
            nodes.append(q)
        for node in self.graph.node:
            nodes.extend(before.get(id(node), []))
            nodes.append(node)
            for k, out in enumerate(node.output):
                if out in self.after:
                    precision, name = self.after[out]
                    raw = f"{out}_float"
                    node.output[k] = raw
                    nodes.append(self._quant(raw, out, precision, unique(name)))
        del self.graph.node[:]
        self.graph.node.extend(nodes)


class _Unique:
    def __init__(self, used):
        self.used = set(used)

    def __call__(self, name):
        base, k = name, 1
        while name in self.used:
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name
