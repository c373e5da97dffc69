"""A small builder of QONNX graphs with onnx.helper, shared by the frontend and compiler
tests: ``x = b.quant(b.input([1, 8]), scale, bits)``."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

QONNX_DOMAIN = "qonnx.custom_op.general"


class GraphBuilder:
    """Builds a QONNX graph node by node: ``x = b.quant(b.input([1, 8]), ...)``."""

    def __init__(self):
        self.nodes, self.inits, self.inputs = [], [], []
        self.count = 0

    def name(self, base):
        self.count += 1
        return f"{base}{self.count}"

    def const(self, value, dtype=np.float32):
        n = self.name("c")
        self.inits.append(onnx.numpy_helper.from_array(np.asarray(value, dtype=dtype), n))
        return n

    def input(self, shape, name="x"):
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
        return name

    def node(self, op, inputs, domain="", **attrs):
        out = self.name(op.lower() + "_")
        self.nodes.append(helper.make_node(op, inputs, [out], name=self.name(op), domain=domain,
                                           **attrs))
        return out

    def quant(self, x, scale, bits, signed=True, narrow=False, zero=0.0):
        return self.node("Quant", [x, self.const(scale), self.const(zero), self.const(bits)],
                         domain=QONNX_DOMAIN, signed=int(signed), narrow=int(narrow),
                         rounding_mode="ROUND")

    def bipolar(self, x, scale=1.0):
        return self.node("BipolarQuant", [x, self.const(scale)], domain=QONNX_DOMAIN)

    def model(self, output, opset=13):
        out = helper.make_tensor_value_info(output, TensorProto.FLOAT, None)
        graph = helper.make_graph(self.nodes, "test", self.inputs, [out], self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
