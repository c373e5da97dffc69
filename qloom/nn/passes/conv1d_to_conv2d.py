"""1D convolution networks -> 2D ones of height 1, for the float path (Keras Conv1D with
its Transpose pair, PyTorch Conv1d).

qloom's convolution and pooling engines are 2D. Every ``[N, C, W]`` tensor a 1D Conv,
MaxPool or AveragePool reads or writes is *lifted* to ``[N, C, 1, W]`` (the same elements
in the same order): 3-D weights ``[O, I, K]`` become ``[O, I, 1, K]`` with kernel, strides,
pads and dilations given a height of 1; elementwise ops on lifted tensors stay lifted (a
per-channel constant ``[C, 1]`` gets its height axis). At the region's edges:

- Keras' ``Transpose(perm=[0, 2, 1])`` from ``[N, W, C]`` into the region becomes
  ``Unsqueeze(1)`` + ``Transpose(perm=[0, 3, 1, 2])`` (NHWC -> NCHW of height 1), and the
  one out of it ``Transpose(perm=[0, 2, 3, 1])`` + ``Squeeze(1)``: the pair qloom follows;
- a Flatten reads the lifted tensor as it is (same element order);
- any other reader gets ``Squeeze(2)``; any other entry ``Unsqueeze(2)``.

qonnx ``Transformation`` contract (one sweep); float models (plain weight initializers).
"""

from __future__ import annotations

import numpy as np
from onnx import helper
from qonnx.transformation.base import Transformation

from .attrs import node_attr

__all__ = ["Conv1DToConv2D"]

_POOLS = ("MaxPool", "AveragePool")
_ELEMENTWISE = ("Relu", "LeakyRelu", "Sigmoid", "Tanh", "Elu", "Selu", "Add", "Sub", "Mul",
                "Div", "BatchNormalization", "Clip", "HardSigmoid", "Softplus", "Identity")


def _is_1d(model, node) -> bool:
    if node.op_type == "Conv":
        w = model.get_initializer(node.input[1])
        return w is not None and w.ndim == 3
    return node.op_type in _POOLS and len(node_attr(node, "kernel_shape", [])) == 1


def _lift_attrs(node) -> dict:
    attrs = {}
    for a in node.attribute:
        value = helper.get_attribute_value(a)
        if a.name in ("kernel_shape", "strides", "dilations"):
            value = [1, *value]
        elif a.name == "pads":
            value = [0, value[0], 0, value[1]]
        attrs[a.name] = value
    return attrs


class Conv1DToConv2D(Transformation):
    def apply(self, model):
        if not any(_is_1d(model, n) for n in model.graph.node):
            return model, False
        self.model, self.lifted, self.count = model, {}, 0    # 3-D name -> lifted name
        nodes = []
        for node in model.graph.node:
            nodes.extend(self._visit(node))
        outputs = {o.name for o in model.graph.output}
        for name in outputs & set(self.lifted):
            nodes.append(self._squeeze(self.lifted[name], name, 2))
        del model.graph.node[:]
        model.graph.node.extend(nodes)
        del model.graph.value_info[:]
        return model, False

    def _axes(self, axis):
        self.count += 1
        name = f"conv1d_lift_axes_{self.count}"
        self.model.set_initializer(name, np.array([axis], np.int64))
        return name

    def _squeeze(self, src, out, axis):
        return helper.make_node("Squeeze", [src, self._axes(axis)], [out],
                                name=f"{out}_squeeze")

    def _enter(self, tensor, new):
        """The lifted name of ``tensor`` (an Unsqueeze(2) into ``new`` when needed)."""
        if tensor in self.lifted:
            return self.lifted[tensor]
        lifted = f"{tensor}_h1"
        new.append(helper.make_node("Unsqueeze", [tensor, self._axes(2)], [lifted],
                                    name=f"{tensor}_unsqueeze"))
        self.lifted[tensor] = lifted
        return lifted

    def _visit(self, node):
        model, new = self.model, []
        reads = [t for t in node.input if t in self.lifted]
        if _is_1d(model, node):
            src = self._enter(node.input[0], new)
            if node.op_type == "Conv":
                w = model.get_initializer(node.input[1])
                model.set_initializer(node.input[1], w[:, :, None, :])
            out = f"{node.output[0]}_h1"
            lifted = helper.make_node(node.op_type, [src, *node.input[1:]], [out],
                                      name=node.name, **_lift_attrs(node))
            lifted.doc_string = node.doc_string
            self.lifted[node.output[0]] = out
            return new + [lifted]
        if node.op_type == "Transpose" and list(node_attr(node, "perm", [])) == [0, 2, 1]:
            return self._transpose(node)
        if not reads:
            return [node]
        if node.op_type in _ELEMENTWISE and all(
                t in self.lifted or model.get_initializer(t) is not None or not t
                for t in node.input):
            for i, t in enumerate(node.input):
                c = model.get_initializer(t) if t not in self.lifted else None
                if c is not None and c.ndim >= 2 and node.op_type != "BatchNormalization":
                    model.set_initializer(t, np.expand_dims(c, -2))
                elif t in self.lifted:
                    node.input[i] = self.lifted[t]
            self.lifted[node.output[0]] = f"{node.output[0]}_h1"
            node.output[0] = self.lifted[node.output[0]]
            return [node]
        if node.op_type == "Flatten" and int(node_attr(node, "axis", 1)) == 1:
            node.input[0] = self.lifted[node.input[0]]
            return [node]
        for t in reads:             # any other reader: the 3-D tensor back
            new.append(self._squeeze(self.lifted.pop(t), t, 2))
        return new + [node]

    def _transpose(self, node):
        """Keras' NWC <-> NCW transposes at the region's edges."""
        src, out = node.input[0], node.output[0]
        consumers = self.model.find_consumers(out) or []
        if src in self.lifted:       # NCW (lifted NC1W) -> NWC: NCHW -> NHWC, drop H
            mid = f"{out}_nhwc"
            return [helper.make_node("Transpose", [self.lifted[src]], [mid], name=node.name,
                                     perm=[0, 2, 3, 1]),
                    self._squeeze(mid, out, 1)]
        if any(_is_1d(self.model, c) for c in consumers):   # NWC -> NCW into the region
            mid, lifted = f"{src}_nhwc", f"{out}_h1"
            self.lifted[out] = lifted
            return [helper.make_node("Unsqueeze", [src, self._axes(1)], [mid],
                                     name=f"{node.name}_unsqueeze"),
                    helper.make_node("Transpose", [mid], [lifted], name=node.name,
                                     perm=[0, 3, 1, 2])]
        return [node]
