"""Shape inference for QONNX models, qonnx's ``InferShapes`` without its cost on big images.

qonnx infers a custom op's shapes by putting a "shape-compatible" standard op in its
place; for its channels-last ops that stand-in is a ``Constant`` of random numbers the
size of the op's whole output (4 million floats for a 512x512x16 map), which qonnx then
prints to a string twice to find it again: minutes per pass on a 512x512 model.
``InferShapes`` here runs ONNX's shape inference on a copy of the graph in which each
channels-last op is the standard op between two Transposes (no constant at all) and every
other custom op is qonnx's own stand-in, then copies the shapes of the graph's tensors
back. Same contract and result as qonnx's pass.
"""

from __future__ import annotations

import onnx
from onnx import helper

from ...errors import UnsupportedModelError
from .channels_last import is_channels_last

__all__ = ["InferShapes", "channels_last_stand_in"]


def _perms(ndim: int) -> tuple[list[int], list[int]]:
    """(channels-last -> channels-first, channels-first -> channels-last) of a rank."""
    first = [0, ndim - 1] + list(range(1, ndim - 1))
    last = [0] + list(range(2, ndim)) + [1]
    return first, last


def channels_last_stand_in(node, rank: int) -> list:
    """A channels-last node as Transposes around its standard op (for shapes only)."""
    to_first, to_last = _perms(rank)
    tag = f"{node.output[0]}__qloom_shape"
    inputs = list(node.input)
    nodes = [helper.make_node("Transpose", [inputs[0]], [f"{tag}_in"], perm=to_first)]
    inputs[0] = f"{tag}_in"
    if node.op_type == "Conv":
        nodes.append(helper.make_node("Transpose", [node.input[1]], [f"{tag}_w"],
                                      perm=to_first))
        inputs[1] = f"{tag}_w"
    std = onnx.NodeProto()
    std.CopyFrom(node)
    std.domain = ""
    del std.input[:]
    std.input.extend(inputs)
    del std.output[:]
    std.output.append(f"{tag}_out")
    nodes += [std, helper.make_node("Transpose", [f"{tag}_out"], [node.output[0]],
                                    perm=to_last)]
    return nodes


def _rank(model, node, ranks: dict) -> int:
    """The rank of a channels-last node's tensors: from its kernel, else from its input
    (an earlier channels-last op's output, or a shape the model gives)."""
    kernel = next((a.ints for a in node.attribute if a.name == "kernel_shape"), None)
    if kernel:
        return len(kernel) + 2
    if node.input[0] in ranks:
        return ranks[node.input[0]]
    shape = model.get_tensor_shape(node.input[0])
    if shape is None:
        raise UnsupportedModelError(
            f"the rank of this channels-last {node.op_type}'s input '{node.input[0]}' is "
            f"unknown: the model gives no shape for it (qonnx's "
            f"ConvertToChannelsLastAndClean writes them)", node.name)
    return len(shape)


class InferShapes:
    """Every tensor of the model gets a shape (``ValueInfo``): qonnx's ``Transformation``
    contract, ``apply(model) -> (model, False)``."""

    def apply(self, model):
        from qonnx.core.modelwrapper import ModelWrapper
        from qonnx.custom_op.registry import getCustomOp, is_custom_op

        proxy = onnx.ModelProto()
        proxy.CopyFrom(model.model)
        nodes, ranks = [], {}
        for node in model.graph.node:
            if is_channels_last(node):
                ranks[node.output[0]] = _rank(model, node, ranks)
                nodes += channels_last_stand_in(node, ranks[node.output[0]])
            elif is_custom_op(node.domain):
                stand_in = getCustomOp(node).make_shape_compatible_op(model)
                stand_in.name = node.name
                nodes.append(stand_in)
            else:
                nodes.append(node)
        del proxy.graph.node[:]
        proxy.graph.node.extend(nodes)
        inferred = onnx.shape_inference.infer_shapes(proxy).graph
        kept = [v for v in inferred.value_info if "__qloom_shape" not in v.name]
        del model.graph.value_info[:]
        model.graph.value_info.extend(kept)
        del model.graph.output[:]
        model.graph.output.extend(inferred.output)
        return ModelWrapper(model.model), False
