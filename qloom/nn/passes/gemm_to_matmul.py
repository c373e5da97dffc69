"""Gemm -> (Transpose) MatMul (Mul alpha) (Add beta*C), also for a Gemm without bias.

qonnx's own GemmToMatMul crashes on a Gemm without its optional C input; this pass handles
both, keeps the weight quantizer in front of the new Transpose (so the weight stays a
quantized constant), and refuses ``transA`` (a transposed activation) clearly.
"""

from __future__ import annotations

import numpy as np
from onnx import helper
from qonnx.transformation.base import Transformation

from ...errors import UnsupportedModelError
from .attrs import node_attr

__all__ = ["GemmToMatMul"]


def _shape_new_tensors(model, nodes, b: str, out: str) -> None:
    """Shapes for the tensors the rewrite adds, where the Gemm's are known (so that no
    second shape inference is needed): B transposed, and the output's for the others."""
    b_shape, out_shape = model.get_tensor_shape(b), model.get_tensor_shape(out)
    for n in nodes:
        tensor = n.output[0]
        if tensor == out:
            continue
        shape = b_shape[::-1] if n.op_type == "Transpose" else out_shape
        if shape is not None:
            model.set_tensor_shape(tensor, list(shape))


def _new_name(model, base: str) -> str:
    """A tensor name for ``base`` that the graph does not use yet. Named after the Gemm,
    not qonnx's ``make_new_valueinfo_name`` (random letters): the same model must compile
    to the same Verilog (UNSW-NB15's edges were named differently on every compile)."""
    used = ({t for n in model.graph.node for t in (*n.input, *n.output)}
            | {t.name for t in model.graph.initializer}
            | {t.name for t in model.graph.value_info})
    name, k = base, 1
    while name in used:
        name, k = f"{base}{k}", k + 1
    return name


class GemmToMatMul(Transformation):
    """Replace every Gemm by MatMul plus elementwise Mul/Add nodes."""

    def apply(self, model):
        graph = model.graph
        for index, node in enumerate(graph.node):
            if node.op_type != "Gemm":
                continue
            if node_attr(node, "transA", 0):
                raise UnsupportedModelError(
                    "Gemm with transA=1 is not supported (only transB)", node.name)
            alpha = float(node_attr(node, "alpha", 1.0))
            beta = float(node_attr(node, "beta", 1.0))
            a, b = node.input[0], node.input[1]
            c = node.input[2] if len(node.input) > 2 and node.input[2] else None
            new = []
            if node_attr(node, "transB", 0):
                b_t = _new_name(model, f"{node.name}_b_t")
                new.append(helper.make_node("Transpose", [b], [b_t], perm=[1, 0],
                                            name=f"{node.name}_transpose_b"))
                b = b_t
            out = node.output[0]
            y = _new_name(model, f"{node.name}_product") if (alpha != 1.0 or c) else out
            new.append(helper.make_node("MatMul", [a, b], [y], name=f"{node.name}_matmul"))
            if alpha != 1.0:
                k = _new_name(model, f"{node.name}_alpha_value")
                model.set_initializer(k, np.asarray(alpha, dtype=np.float32))
                y_alpha = _new_name(model, f"{node.name}_scaled") if c else out
                new.append(helper.make_node("Mul", [y, k], [y_alpha], name=f"{node.name}_alpha"))
                y = y_alpha
            if c:
                if beta != 1.0:
                    c_const = model.get_initializer(c)
                    if c_const is None:
                        raise UnsupportedModelError(
                            "Gemm with beta != 1 needs a constant C", node.name)
                    c = _new_name(model, f"{node.name}_beta_c")
                    model.set_initializer(c, (np.float32(beta) * c_const).astype(np.float32))
                new.append(helper.make_node("Add", [y, c], [out], name=f"{node.name}_bias"))
            _shape_new_tensors(model, new, node.input[1], out)
            graph.node.remove(node)
            for offset, n in enumerate(new):
                n.doc_string = node.doc_string     # the Gemm's name in the user's file
                graph.node.insert(index + offset, n)
            return model, True
        return model, False
