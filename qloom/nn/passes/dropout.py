"""Remove inference Dropout nodes, whatever their ratio.

In inference a Dropout is the identity: before opset 12 always (``is_test`` went away in
opset 7, and the ratio only scales in training), from opset 12 unless its
``training_mode`` input is true. qonnx's ``RemoveIdentityOps`` removes a Dropout only when
its ratio is 0, and onnx's version converter gives an upgraded Keras or PyTorch Dropout
its default ratio 0.5 as an input, so such a node would stay and be refused inside the
network. A Dropout whose ``mask`` output is read, or whose ``training_mode`` is not a
constant false, is left alone (refused later, naming it). qonnx ``Transformation``
contract.
"""

from __future__ import annotations

import numpy as np
from qonnx.transformation.base import Transformation

__all__ = ["RemoveInferenceDropout"]


def _inference(model, node) -> bool:
    if len(node.input) > 2 and node.input[2]:
        mode = model.get_initializer(node.input[2])
        if mode is None or bool(np.asarray(mode).ravel()[0]):
            return False
    mask_read = len(node.output) > 1 and node.output[1] and (
        model.find_consumers(node.output[1]) or
        node.output[1] in {o.name for o in model.graph.output})
    return not mask_read


class RemoveInferenceDropout(Transformation):
    def apply(self, model):
        graph = model.graph
        outputs = {o.name for o in graph.output}
        for node in graph.node:
            if node.op_type != "Dropout" or not _inference(model, node):
                continue
            src, out = node.input[0], node.output[0]
            if out in outputs:          # the graph's output keeps its name
                producer = model.find_producer(src)
                if producer is None or src in outputs:
                    continue
                producer.output[list(producer.output).index(src)] = out
                for consumer in model.find_consumers(src) or []:
                    consumer.input[:] = [out if t == src else t for t in consumer.input]
            else:
                for consumer in model.find_consumers(out) or []:
                    consumer.input[:] = [src if t == out else t for t in consumer.input]
            graph.node.remove(node)
            return model, True
        return model, False
