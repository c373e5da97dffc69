"""``--precision auto[:TOL]``: the narrowest uniform ``fixed<W,I>`` within a tolerance.

The integer bits I come from the float model itself: the largest magnitude of any weight,
bias or intermediate tensor (onnxruntime on the calibration inputs), plus the sign. The
width W then grows from I + 2 until the argmax agreement with the float model on the
same inputs reaches TOL (default 0.99); W = 16 (qloom's widest quantizer) is the last
try, and not reaching TOL there is an error quoting what it reached. Per-layer widths are
not searched: one precision for the whole model, like ``--precision``.
"""

from __future__ import annotations

import math

import numpy as np

from qloom.errors import QloomError
from qloom.nn.precision import MAX_BITS, Precision, PrecisionConfig

__all__ = ["parse_auto", "auto_precision", "DEFAULT_TOLERANCE"]

DEFAULT_TOLERANCE = 0.99


def parse_auto(text) -> float | None:
    """The tolerance of ``auto`` / ``auto:0.995``; None for any other precision string."""
    if not isinstance(text, str) or not text.strip().lower().startswith("auto"):
        return None
    rest = text.strip()[4:]
    if not rest:
        return DEFAULT_TOLERANCE
    try:
        tol = float(rest.removeprefix(":"))
    except ValueError:
        tol = None
    if not rest.startswith(":") or tol is None or not 0 < tol <= 1:
        raise QloomError(f"--precision {text!r}: write auto or auto:TOL with TOL the argmax "
                         f"agreement to reach, in (0, 1] (default {DEFAULT_TOLERANCE})")
    return tol


def _largest_magnitude(float_model, x) -> float:
    """max |value| over the model's constants and every tensor it computes on ``x``."""
    import onnx
    import onnxruntime as ort
    model = onnx.ModelProto()
    model.CopyFrom(float_model)
    known = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for out in node.output:
            if out and out not in known:
                model.graph.output.append(onnx.ValueInfoProto(name=out))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    top = max((float(np.abs(onnx.numpy_helper.to_array(i)).max())
               for i in model.graph.initializer
               if onnx.numpy_helper.to_array(i).dtype.kind == "f"
               and onnx.numpy_helper.to_array(i).size), default=0.0)
    for i in range(len(x)):
        for value in sess.run(None, {name: x[i:i + 1]}):
            value = np.asarray(value)
            if value.dtype.kind == "f" and value.size:
                top = max(top, float(np.abs(value).max()))
    return top


def auto_precision(model, tolerance: float, x, inputs: str, *, load_options=None):
    """``(PrecisionConfig, tries)``: the narrowest fixed<W,I> reaching ``tolerance``;
    ``tries`` lists each width tried with its argmax agreement."""
    from qloom.nn.load import load
    from qloom.nn.quantize import float_reference, quantize_float
    from qloom.flows.compile.precision_cost import measure
    reference = float_reference(model)
    top = _largest_magnitude(reference, x)
    integer = max(1, math.floor(math.log2(top)) + 2) if top > 0 else 1
    if integer + 2 > MAX_BITS:
        raise QloomError(f"--precision auto: the model's values reach {top:.3g}, which "
                         f"needs {integer} integer bits; qloom quantizes to {MAX_BITS} bits")
    tries = []
    for width in range(integer + 2, MAX_BITS + 1):
        config = PrecisionConfig(default=Precision(width, integer))
        net = load(quantize_float(model, config), **(load_options or {}))
        cost = measure(reference, net, x, inputs)
        tries.append({"precision": str(config.default), "argmax_agreement":
                      cost.argmax_agreement, "max_abs_error": cost.max_abs_error})
        if cost.argmax_agreement >= tolerance:
            return config, tries
    raise QloomError(f"--precision auto:{tolerance:g}: even fixed<{MAX_BITS},{integer}> agrees "
                     f"with the float model on {100 * tries[-1]['argmax_agreement']:.1f}% of "
                     f"the frames ({inputs}); choose a precision yourself")
