"""qonnx's ``GiveReadableTensorNames`` in one sweep: the same names (``<node>_out<k>`` for
outputs, ``<node>_param<j>`` for initializer inputs, ``global_in``/``global_out`` for the
graph's), which qloom's exactness check relies on (it matches the tensors of qloom's
network with those of qonnx's cleaned model by name). qonnx renames one tensor at a time,
each rename scanning the whole graph; on a 40-layer model that alone took seconds."""

from __future__ import annotations

__all__ = ["GiveReadableTensorNames"]


def _names(graph) -> dict[str, str]:
    """Old name -> qonnx's readable name, in qonnx's order (later renames win)."""
    initializers = {i.name for i in graph.initializer}
    rename = {}
    for n in graph.node:
        if not n.name:
            raise ValueError("Found empty node name")
        for k, o in enumerate(n.output):
            rename[o] = f"{n.name}_out{k}"
        j = 0
        for i in n.input:
            if i in initializers:
                rename[i] = f"{n.name}_param{j}"
                j += 1
    for k, inp in enumerate(graph.input):
        rename[inp.name] = "global_in" if k == 0 else f"global_in_{k}"
    for k, out in enumerate(graph.output):
        rename[out.name] = "global_out" if k == 0 else f"global_out_{k}"
    return rename


class GiveReadableTensorNames:
    """qonnx's ``Transformation`` contract: ``apply(model) -> (model, False)``. Falls back to
    qonnx's pass where one tensor name would be given twice (qonnx's own answer then)."""

    def apply(self, model):
        graph = model.graph
        rename = _names(graph)
        if len(set(rename.values())) != len(rename):
            from qonnx.transformation.general import GiveReadableTensorNames as Qonnx
            return Qonnx().apply(model)
        for collection in (graph.input, graph.output, graph.value_info, graph.initializer):
            for v in collection:
                v.name = rename.get(v.name, v.name)
        for a in graph.quantization_annotation:
            a.tensor_name = rename.get(a.tensor_name, a.tensor_name)
        for n in graph.node:
            for k, t in enumerate(n.input):
                n.input[k] = rename.get(t, t)
            for k, t in enumerate(n.output):
                n.output[k] = rename.get(t, t)
        return model, False
