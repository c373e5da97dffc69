"""A float ONNX model (Keras, PyTorch) at a fixed-point precision: the quantized QONNX model.

``quantize_float(model, config)`` returns the QONNX ``ModelProto`` that qloom then loads
like any quantized model; ``qloom compile`` saves it as ``OUT/quantized.onnx``, the model
whose qonnx execution the hardware equals. The steps, in order:

1. ``UpgradeOpset``: an old standard opset is upgraded with onnx's version converter;
2. a fixed leading batch dimension (PyTorch exports the batch it was traced with) becomes
   a batch of 1 (qonnx's ``ChangeBatchSize``); qloom streams frames one by one anyway;
3. qloom's ``prepare`` (qonnx cleanup, shapes, Gemm -> MatMul), then the nodes get their
   names from the user's file back (cleanup renames them), so the precision file and the
   quantized model speak of the same layers;
4. constants folded, identities removed (qonnx's ``FoldConstants``,
   ``RemoveIdentityOps``; ``RemoveInferenceDropout`` for Dropouts of any ratio); a
   spatial ReduceMean becomes a GlobalAveragePool (``ReduceMeanToGlobalPool``); 1D
   convolutions become 2D ones of height 1 (``Conv1DToConv2D``); ``FoldBatchNorm``:
   BatchNorms next to a layer are folded into its float weights;
5. ``InsertQuantizers``: the Quant nodes of the precision.
"""

from __future__ import annotations

import onnx

from ..errors import QloomError, UnsupportedModelError
from .names import SourceNames
from .passes.conv1d_to_conv2d import Conv1DToConv2D
from .passes.dropout import RemoveInferenceDropout
from .passes.fold_batchnorm import FoldBatchNorm
from .passes.insert_quantizers import InsertQuantizers
from .passes.quantizers import QUANTIZERS
from .passes.reduce_mean import ReduceMeanToGlobalPool
from .passes.upgrade_opset import UpgradeOpset
from .precision import PrecisionConfig

__all__ = ["quantize_float", "precision_config", "float_reference"]


def precision_config(precision=None, precision_file=None, rounding=None,
                     overflow=None) -> PrecisionConfig | None:
    """The ``PrecisionConfig`` of the load options; None when no precision is asked for."""
    if isinstance(precision, PrecisionConfig):
        return precision
    if isinstance(precision, str) and precision.strip().lower().startswith("auto"):
        raise QloomError("precision 'auto' is a search that `qloom compile --precision auto` "
                         "runs; loading takes one precision, such as 'fixed<16,6>'")
    if precision is None and precision_file is None:
        if rounding is not None or overflow is not None:
            raise QloomError("a rounding or overflow mode needs a precision "
                             "(precision='fixed<16,6>' or a precision file)")
        return None
    return PrecisionConfig.make(precision, precision_file, rounding=rounding,
                                overflow=overflow)


def _batch_of_one(proto: onnx.ModelProto) -> None:
    """A fixed leading batch dimension > 1 of the graph input becomes 1 (in place): the
    input's, the outputs' and the first entry of constant Reshape shapes that name it
    (what qonnx's ``ChangeBatchSize`` does, for Constant nodes too)."""
    from onnx import numpy_helper

    initializers = {i.name: i for i in proto.graph.initializer}
    inputs = [i for i in proto.graph.input if i.name not in initializers]
    if len(inputs) != 1:
        return                       # refused by prepare, with its message
    dims = inputs[0].type.tensor_type.shape.dim
    if not dims or not dims[0].HasField("dim_value") or dims[0].dim_value <= 1:
        return
    batch = dims[0].dim_value
    dims[0].dim_value = 1
    for out in proto.graph.output:
        d = out.type.tensor_type.shape.dim
        if d and d[0].HasField("dim_value") and d[0].dim_value == batch:
            d[0].dim_value = 1
    del proto.graph.value_info[:]
    constants = {n.output[0]: n for n in proto.graph.node if n.op_type == "Constant"}
    for node in proto.graph.node:
        if node.op_type != "Reshape" or len(node.input) < 2:
            continue
        holder = initializers.get(node.input[1])
        if holder is None and node.input[1] in constants:
            holder = next((a.t for a in constants[node.input[1]].attribute if a.name == "value"),
                          None)
        if holder is None:
            continue
        shape = numpy_helper.to_array(holder).copy()
        if shape.ndim == 1 and shape.size and shape[0] == batch:
            shape[0] = 1
            holder.CopyFrom(numpy_helper.from_array(shape, holder.name))


def _restore_names(wrapper, names: SourceNames) -> None:
    """Each node takes its name in the user's file again. Where one node became several
    (Gemm -> MatMul + Add), the MatMul/Conv keeps the name and the others add their op."""
    groups = {}
    for node in wrapper.graph.node:
        old = names.nodes.get(node.name)
        if old:
            groups.setdefault(old, []).append(node)
    taken = {n.name for n in wrapper.graph.node}
    for old, nodes in groups.items():
        main = next((n for n in nodes if n.op_type in ("MatMul", "Conv")), nodes[0]) \
            if len(nodes) > 1 else nodes[0]
        for node in nodes:
            new = old if node is main else f"{old}_{node.op_type.lower()}"
            if new != node.name and new not in taken:
                taken.discard(node.name)
                node.name = new
                taken.add(new)


def float_reference(model) -> onnx.ModelProto:
    """The float model as qloom reads it: opset upgraded, batch of 1 (steps 1 and 2), for
    onnxruntime to run as the reference of the precision's cost."""
    from .read import read_model as _read
    proto = onnx.ModelProto()
    proto.CopyFrom(_read(model))
    proto, _ = UpgradeOpset().apply(proto)
    _batch_of_one(proto)
    return proto


def quantize_float(model, config: PrecisionConfig) -> onnx.ModelProto:
    """The QONNX model of float ``model`` (path or ModelProto) at ``config``'s precision."""
    from qonnx.transformation.fold_constants import FoldConstants
    from qonnx.transformation.infer_shapes import InferShapes
    from qonnx.transformation.remove import RemoveIdentityOps

    from .read import prepare, read_model as _read
    if not isinstance(config, PrecisionConfig):
        raise TypeError(f"Config must be a PrecisionConfig, not {config!r}")
    proto = _read(model)
    quantized = [n for n in proto.graph.node if n.op_type in QUANTIZERS]
    if quantized:      # before the version converter, which knows no qonnx ops
        raise UnsupportedModelError(
            f"the model is already quantized ({quantized[0].op_type}); a precision applies "
            f"to float models only: load it without one", quantized[0].name or None)
    proto = float_reference(proto)
    names = SourceNames()
    wrapper = prepare(proto, names)
    _restore_names(wrapper, names)
    try:
        wrapper = wrapper.transform(FoldConstants())     # a Gemm's transposed weight
        wrapper = wrapper.transform(RemoveInferenceDropout())
        wrapper = wrapper.transform(RemoveIdentityOps())  # Identity, Dropout, x*1, x+0
        wrapper = wrapper.transform(ReduceMeanToGlobalPool())
        wrapper = wrapper.transform(FoldBatchNorm())
        wrapper = wrapper.transform(Conv1DToConv2D())
        wrapper = wrapper.transform(InferShapes())
        wrapper = wrapper.transform(InsertQuantizers(config))
        wrapper = wrapper.transform(InferShapes())
    except QloomError:
        raise
    except Exception as e:
        raise UnsupportedModelError(
            f"qonnx could not infer the shapes of the quantized model ({type(e).__name__}: "
            f"{e})") from e
    return wrapper.model
