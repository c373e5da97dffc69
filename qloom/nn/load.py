"""QONNX model -> integer ``Network``: the frontend's one entry point.

``load`` reads the model, runs qonnx's cleanup and shape inference plus qloom's passes,
evaluates constant sub-graphs (quantized weights) once, and lowers the graph into the IR
(see ``passes/lower_to_network.py``):

- The ops from the graph input to the first quantizer are the host *prefix*
  (``Network.quantize``, executed by qonnx). When a linear layer reads the float input
  directly (no input quantizer), the input becomes fixed point: ``input_type`` and
  ``input_scale`` (default: the graph input's integer datatype annotation with scale 1,
  else INT16 with scale 2**-10, with a ``FixedPointInputWarning``); a scalar affine prefix
  is folded into the first layer. For such models ``Network.execute(x)`` equals qonnx on
  ``x`` rounded to that grid.
- Float arithmetic between two quantizers becomes a ``MultiThreshold`` layer whose
  thresholds reproduce qonnx's float32 results exactly (``thresholds.py``).
- The ops after the last integer tensor are the host *tail* (``Network.tail``, executed
  by qonnx on ``value * scale`` of that tensor).
"""

from __future__ import annotations

import os
import traceback
import warnings
from collections import Counter
from contextlib import contextmanager

import numpy as np
import onnx

from ..errors import InternalError, QloomError, UnsupportedModelError, raise_interrupt
from .dtypes import DataType
from .ir import Network
from .names import SourceNames
from .passes.layer_builders import FixedPointInputWarning
from .passes.lower_to_network import LoweringState, from_runtime
from .passes.thresholds_to_requant import ThresholdsToRequant
from .passes.validate_nodes import check_tensor_sizes
from .read import prepare, quiet_qonnx

__all__ = ["load", "prepare", "FixedPointInputWarning", "LoadWarning"]


class LoadWarning(UserWarning):
    """Warnings of numpy, qonnx and onnxruntime during a load, collected into one."""


@contextmanager
def _collected_warnings(names: SourceNames):
    """qloom's own warnings pass through (naming the user's nodes); everything numpy, qonnx
    and onnxruntime warn about becomes one ``LoadWarning`` line. After an error, the error
    alone is the story: the collected warnings are dropped."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    others = Counter()
    for w in caught:
        if issubclass(w.category, FixedPointInputWarning):
            warnings.warn_explicit(names.text(str(w.message)), w.category, w.filename,
                                   w.lineno)
        else:
            first = str(w.message).strip().splitlines()[0] if str(w.message).strip() else ""
            others[f"{w.category.__name__}: {names.text(first)[:120]}"] += 1
    if others:
        shown = "; ".join(f"{text} (x{n})" if n > 1 else text
                          for text, n in others.most_common(2))
        more = len(others) - 2
        warnings.warn(f"{sum(others.values())} warnings from numpy/qonnx/onnxruntime while "
                      f"loading: {shown}{f'; and {more} other kinds' if more > 0 else ''}",
                      LoadWarning, stacklevel=3)


def _constants(wrapper) -> dict:
    """Every tensor computed from initializers alone, evaluated once by qonnx."""
    from qonnx.core.onnx_exec import execute_node

    consts = {i.name: onnx.numpy_helper.to_array(i) for i in wrapper.graph.initializer}
    opsets = {o.domain: o.version for o in wrapper.model.opset_import}
    for node in wrapper.graph.node:
        if node.input and all((t in consts) or not t for t in node.input):
            context = dict(consts)
            for out in node.output:
                context[out] = np.zeros(wrapper.get_tensor_shape(out) or [], np.float32)
            try:
                with quiet_qonnx():
                    execute_node(node, context, wrapper.graph, opsets.get(node.domain, 11))
            except Exception as e:
                raise UnsupportedModelError(
                    f"cannot evaluate constant {node.op_type} ({type(e).__name__}: {e})",
                    node.name) from e
            for out in node.output:
                consts[out] = np.asarray(context[out])
    _check_annotations(wrapper, consts)
    return consts


def _check_annotations(wrapper, consts):
    """A constant annotated with an integer datatype must hold values of it: qonnx refuses
    to execute the model otherwise (its datatype sanitizer), so qloom must not accept it."""
    for name, values in consts.items():
        dtype = wrapper.get_tensor_datatype(name)
        if not dtype.is_integer() or values.size == 0:
            continue
        if not np.all(dtype.allowed(np.asarray(values, np.float64))):
            bad = np.asarray(values, np.float64).ravel()[
                ~np.asarray(dtype.allowed(np.asarray(values, np.float64))).ravel()][0]
            raise UnsupportedModelError(
                f"tensor '{name}' is annotated {dtype.name} but holds {bad:g}; qonnx refuses "
                f"such a model", name)


def load(model, *, input_type: DataType | None = None,
         input_scale: float | None = None, warn: bool = True,
         requant: bool = True, precision=None, precision_file=None, rounding=None,
         overflow=None) -> Network:
    """Load a QONNX model (path or ``onnx.ModelProto``) into an integer ``Network``.

    ``input_type``/``input_scale`` set the fixed-point input grid of a model whose first
    linear layer reads the float input without a quantizer (ignored otherwise). ``warn``
    enables the ``FixedPointInputWarning`` when that grid is a default. ``requant``
    replaces many-level thresholds by an equal shift-and-round requantization where one
    exists (``passes.thresholds_to_requant``).

    ``precision`` (``"fixed<16,6>"``, ``"int<8>"``, ... or a ``PrecisionConfig``) and/or
    ``precision_file`` (per-layer overrides, TOML or JSON) load a *float* model at that
    fixed-point precision: it is first rewritten into a QONNX model (``quantize.py``);
    ``rounding`` ("round", default, or "truncate") and ``overflow`` ("saturate") select
    the modes (see ``precision.py``).
    """
    from .quantize import precision_config, quantize_float
    config = precision_config(precision, precision_file, rounding, overflow)
    if input_type is not None and not isinstance(input_type, DataType):
        raise TypeError(f"Input type must be a DataType, not {input_type!r}")
    if input_scale is not None:
        if isinstance(input_scale, bool) or not isinstance(input_scale, (int, float)):
            raise TypeError(f"Input scale must be a number, not {input_scale!r}")
        if not (np.isfinite(input_scale) and input_scale > 0):
            raise ValueError(f"Input scale must be positive and finite, not {input_scale!r}")
    if not isinstance(model, (onnx.ModelProto, str, os.PathLike)):
        raise TypeError(f"Model must be a path or an onnx.ModelProto, not {model!r}")
    names = SourceNames()
    with _collected_warnings(names):
        try:
            if config is not None:
                model = quantize_float(model, config)
            wrapper = prepare(model, names)
            check_tensor_sizes(wrapper)
            consts = _constants(wrapper)
            state = LoweringState(wrapper, consts, input_type=input_type,
                                  input_scale=input_scale, warn=warn)
            net = state.run()
            if requant:
                net, _ = ThresholdsToRequant().apply(net)
        except QloomError as e:
            raise names.error(e) from e
        except Exception as e:      # a bug in qloom: one line for the user, chained cause
            raise_interrupt(e)
            where = traceback.extract_tb(e.__traceback__)[-1]
            raise InternalError(
                f"qloom failed to load the model: {type(e).__name__}: {names.text(str(e))} "
                f"(at {os.path.basename(where.filename)}:{where.lineno}; this is a bug in "
                f"qloom, please report it with the model)", e) from e
    return net
