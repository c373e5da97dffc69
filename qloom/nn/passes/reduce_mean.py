"""A spatial ReduceMean (PyTorch's ``x.mean((2, 3))``, tf2onnx's Keras
GlobalAveragePooling2D) -> GlobalAveragePool, for the float path.

``ReduceMean`` over the two image axes of a 4-D tensor is a global average pool, which
qloom lowers (``avgpool.py``); as a ReduceMean it is refused inside the network. Two
layouts:

- ``[N, C, H, W]`` with ``axes`` {2, 3}: ``GlobalAveragePool`` (keepdims 1), followed by
  ``Squeeze(axes=[2, 3])`` when keepdims is 0;
- ``[N, H, W, C]`` with ``axes`` {1, 2} (Keras after its closing ``Transpose(perm=[0, 2, 3,
  1])``): the pool reads the Transpose's NCHW input, ``[N, C, 1, 1]``, and ``Squeeze`` or
  ``Transpose(perm=[0, 2, 3, 1])`` gives the ReduceMean's shape back.

Any other ReduceMean is left as it is (refused later naming the node, or a host tail).
``axes`` is an attribute up to opset 17 and an input from opset 18. qonnx
``Transformation`` contract (one sweep); shapes inferred.
"""

from __future__ import annotations

import numpy as np
from onnx import helper
from qonnx.transformation.base import Transformation

from .attrs import node_attr

__all__ = ["ReduceMeanToGlobalPool"]


def _axes(model, node, rank: int):
    if len(node.input) > 1 and node.input[1]:
        value = model.get_initializer(node.input[1])
        if value is None:
            return None
        axes = np.asarray(value).ravel().tolist()
    else:
        axes = node_attr(node, "axes", None)
        if axes is None:
            return None      # every axis: no pool
    return sorted(int(a) % rank for a in axes)


class ReduceMeanToGlobalPool(Transformation):
    def apply(self, model):
        graph = model.graph
        for index, node in enumerate(graph.node):
            if node.op_type != "ReduceMean":
                continue
            shape = model.get_tensor_shape(node.input[0])
            if shape is None or len(shape) != 4:
                continue
            axes = _axes(model, node, 4)
            keep = int(node_attr(node, "keepdims", 1))
            src = node.input[0]
            if axes == [2, 3]:
                tail = None if keep else ("Squeeze", [2, 3])
            elif axes == [1, 2]:
                producer = model.find_producer(src)
                if (producer is None or producer.op_type != "Transpose"
                        or list(node_attr(producer, "perm", [])) != [0, 2, 3, 1]):
                    continue
                src = producer.input[0]
                tail = ("Squeeze", [2, 3]) if not keep else ("Transpose", [0, 2, 3, 1])
            else:
                continue
            out = node.output[0]
            pooled = out if tail is None else f"{out}_pooled"
            new = [helper.make_node("GlobalAveragePool", [src], [pooled], name=node.name)]
            if tail is not None and tail[0] == "Squeeze":
                axes_name = f"{node.name}_squeeze_axes"
                model.set_initializer(axes_name, np.array(tail[1], np.int64))
                new.append(helper.make_node("Squeeze", [pooled, axes_name], [out],
                                            name=f"{node.name}_squeeze"))
            elif tail is not None:
                new.append(helper.make_node("Transpose", [pooled], [out],
                                            name=f"{node.name}_nhwc", perm=tail[1]))
            graph.node.remove(node)
            for k, n in enumerate(new):
                graph.node.insert(index + k, n)
            return model, True       # one at a time: the node list changed
        return model, False
