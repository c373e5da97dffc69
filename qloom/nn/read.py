"""Reading a QONNX model and cleaning it for qloom: the file checked (present, readable,
external data in place), input shapes fixed, the nodes validated, qonnx's cleanup and
shape inference run once, Gemm lowered to MatMul. ``load`` and the float-model rewrite
(``quantize``) both start here.
"""

from __future__ import annotations

import os
import warnings
from contextlib import contextmanager

import onnx

from ..errors import QloomError, UnsupportedModelError
from .names import SourceNames, tag
from .passes.gemm_to_matmul import GemmToMatMul
from .passes.infer_shapes import InferShapes
from .passes.readable_names import GiveReadableTensorNames
from .passes.validate_nodes import validate_model

__all__ = ["read_model", "prepare", "quiet_qonnx", "fix_input_shapes"]


@contextmanager
def quiet_qonnx():
    """Silence qonnx's notes about old-style ``finn`` domains (harmless), nothing else."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"(?s).*domain=finn.*")
        warnings.filterwarnings("ignore", message=r"(?s).*[Oo]ld-style domain.*")
        yield


def read_model(model) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"Model must be a path or an onnx.ModelProto, not {model!r}")
    path = os.fspath(model)
    if not os.path.isfile(path):
        raise QloomError(f"model file not found: {path}")
    if os.path.getsize(path) == 0:
        raise QloomError(f"cannot read ONNX model {path}: the file is empty")
    try:
        proto = onnx.load(path)
    except Exception as e:  # onnx raises DecodeError, ValueError, ... on damaged files
        problem = _external_data_problem(path)
        if problem:
            raise QloomError(f"cannot read ONNX model {path}: {problem}") from None
        raise QloomError(f"cannot read ONNX model {path}: the file is truncated or not an "
                         f"ONNX model ({type(e).__name__}: {e})") from e
    if not proto.HasField("graph") or not proto.graph.node:
        # protobuf parses many non-ONNX files (text, zeros) as an empty message
        raise QloomError(f"cannot read ONNX model {path}: it holds no graph (not an ONNX "
                         f"model, or an empty one)")
    return proto


def _external_data_problem(path: str) -> str | None:
    """What is wrong with the external data files of a model that fails to load (None
    when the model file itself is the problem): a file that is missing, or outside the
    model's folder (onnx refuses to read those)."""
    from onnx.external_data_helper import ExternalDataInfo, uses_external_data
    try:
        head = onnx.load(path, load_external_data=False)
    except Exception:
        return None
    folder = os.path.realpath(os.path.dirname(path) or ".")
    for tensor in head.graph.initializer:
        if not uses_external_data(tensor):
            continue
        location = ExternalDataInfo(tensor).location
        data = os.path.realpath(os.path.join(folder, location))
        if os.path.commonpath([folder, data]) != folder:
            return (f"the external data of tensor '{tensor.name}' is {location!r}, outside "
                    f"the model's folder {folder}; onnx reads data files only from there")
        if not os.path.isfile(data):
            return (f"the external data file {location!r} of tensor '{tensor.name}' is "
                    f"missing (expected at {data})")
    return None


def fix_input_shapes(proto: onnx.ModelProto):
    """A symbolic batch dimension becomes 1; any other unknown dimension is an error."""
    initializers = {i.name for i in proto.graph.initializer}
    inputs = [i for i in proto.graph.input if i.name not in initializers]
    if len(inputs) != 1:
        raise UnsupportedModelError(
            f"the model has {len(inputs)} graph inputs "
            f"({', '.join(i.name for i in inputs) or 'none'}); qloom needs exactly one")
    for inp in inputs:
        dims = inp.type.tensor_type.shape.dim
        if not dims:
            raise UnsupportedModelError("dynamic shape: the input has no static shape; export "
                                        "the model with a fixed input shape", inp.name)
        for i, d in enumerate(dims):
            if d.HasField("dim_value") and d.dim_value > 0:
                continue
            if i == 0:
                d.Clear()
                d.dim_value = 1
                continue
            raise UnsupportedModelError(
                f"dynamic shape: input dimension {i} is {d.dim_param or '?'}; qloom needs "
                f"static shapes (only the batch dimension may be symbolic)", inp.name)


def _cleanup(wrapper):
    """qonnx's ``cleanup_model`` (its passes, in its order, with its result) with qloom's
    ``InferShapes``, which infers the shapes of qonnx's channels-last ops without building
    constants of their whole output (``passes/infer_shapes.py``), and a one-sweep
    ``GiveReadableTensorNames`` (``passes/readable_names.py``): shapes are inferred once."""
    from qonnx.transformation.fold_constants import FoldConstants
    from qonnx.transformation.general import (GiveUniqueNodeNames, GiveUniqueParameterTensors,
                                              RemoveStaticGraphInputs, RemoveUnusedTensors)
    from qonnx.transformation.quant_constant_folding import FoldTransposeIntoQuantInit

    for node in wrapper.graph.node:     # as cleanup_model: qonnx's quantizers' domain
        if node.op_type in ("Quant", "Trunc", "BipolarQuant"):
            node.domain = "qonnx.custom_op.general"
    for t in (InferShapes(), GiveUniqueParameterTensors(),
              FoldConstants(exclude_op_types=["Quant", "BipolarQuant", "QuantizeLinear",
                                              "DequantizeLinear"]),
              FoldTransposeIntoQuantInit(), RemoveUnusedTensors(), RemoveStaticGraphInputs(),
              GiveUniqueNodeNames(), GiveReadableTensorNames()):
        wrapper = wrapper.transform(t)
    return wrapper


def prepare(model, names: SourceNames | None = None):
    """Read and clean a QONNX model: qonnx cleanup, shape inference, Gemm -> MatMul.

    Returns the qonnx ``ModelWrapper``; errors from qonnx/onnx become ``QloomError``s.
    ``names`` (when given) receives the map from cleaned names to the file's.
    """
    from qonnx.core.modelwrapper import ModelWrapper

    proto = onnx.ModelProto()
    proto.CopyFrom(read_model(model))
    fix_input_shapes(proto)
    validate_model(proto)
    if names is not None:
        tag(proto)
    with quiet_qonnx():
        try:
            wrapper = _cleanup(ModelWrapper(proto))
            wrapper = wrapper.transform(GemmToMatMul())     # shapes its new tensors
        except QloomError:
            raise
        except Exception as e:
            raise UnsupportedModelError(
                f"qonnx could not clean up or infer shapes ({type(e).__name__}: {e}); the "
                f"model may use an op qonnx does not know") from e
    if names is not None:
        collected = SourceNames.collect(wrapper.graph)
        names.nodes.update(collected.nodes)
        names.tensors.update(collected.tensors)
    for node in wrapper.graph.node:
        for out in node.output:
            shape = wrapper.get_tensor_shape(out)
            if shape is None or any((not isinstance(d, int)) or d <= 0 for d in shape):
                raise UnsupportedModelError(
                    f"dynamic shape: the output of {node.op_type} has shape {shape}; "
                    f"qloom needs static shapes", node.name)
    return wrapper
