"""Check an integer ``Network`` against qonnx's execution of the original model.

``compare_with_qonnx`` runs ``qonnx.core.onnx_exec.execute_onnx`` on the model as given
(after qonnx cleanup and shape inference only) frame by frame, and the ``Network`` on the
same inputs. Every quantized tensor present in both (``Network.onnx_names``) must be
identical (``value * scale`` against qonnx's float32, no tolerance); the final outputs
must be identical when the network says its output is (``Network.tail_exact``: the host
tail computes it as execute_onnx does), else agree within ``rtol`` relative to the frame's
largest output magnitude (at least one step, ``scale``, of the integer output tensor:
qonnx's float sums of non-power-of-two scaled terms leave noise where the exact integer
result is 0). ``identical_outputs`` counts the frames whose output is bit for bit qonnx's.

A mismatch is a *float tie* when qonnx's float input of the quantizer lies within
``tie_rel`` (relative to the largest magnitude in that quantizer's input tensor) of a
rounding boundary: there qonnx's own float32 rounding error (sums of products with
non-power-of-two scales, cancellation in BatchNorm) decides the side, while the
``Network`` computes the exact integer. Ties are counted and reported, never hidden: a
frame whose first mismatching tensor is a tie is a tie frame (later mismatches in that frame
follow from it); any other mismatch is unexplained and fails the check.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import onnx

from ..errors import QloomError
from .ir import Network

__all__ = ["Mismatch", "CheckReport", "compare_with_qonnx", "qonnx_reference"]


@dataclass(frozen=True)
class Mismatch:
    frame: int
    tensor: str              # ONNX tensor name (the graph output for output mismatches)
    elements: int            # how many elements differ
    tie: bool                # explained as a float tie
    detail: str


@dataclass(frozen=True)
class CheckReport:
    frames: int
    tensors: tuple[str, ...]            # the ONNX tensors compared exactly, per frame
    mismatches: tuple[Mismatch, ...]    # the first mismatch of each mismatching frame
    max_output_rel_error: float         # over frames without mismatch
    rtol: float
    details: list = field(default_factory=list, repr=False)
    identical_outputs: int = 0          # frames whose output is bit for bit qonnx's
    exact_output: bool = False          # the network claims bit-identical outputs

    @property
    def tie_frames(self) -> int:
        return sum(m.tie for m in self.mismatches)

    @property
    def unexplained(self) -> tuple[Mismatch, ...]:
        return tuple(m for m in self.mismatches if not m.tie)

    @property
    def ok(self) -> bool:
        return not self.unexplained and self.max_output_rel_error <= self.rtol

    def summary(self) -> str:
        lines = [f"{self.frames} frames, {len(self.tensors)} quantized tensors compared "
                 f"exactly: {self.frames - len(self.mismatches)} identical, "
                 f"{self.tie_frames} float ties, {len(self.unexplained)} unexplained; "
                 f"outputs bit for bit qonnx's in {self.identical_outputs} frames "
                 + ("(required: the tail is exact)" if self.exact_output else
                    f"(max relative error {self.max_output_rel_error:.3g}, limit "
                    f"{self.rtol:g}: qonnx's float32 sums round)")]
        lines += [f"  frame {m.frame} {m.tensor}: {m.elements} elements "
                  f"({'float tie' if m.tie else 'MISMATCH'}) {m.detail}"
                  for m in self.mismatches[:20]]
        return "\n".join(lines)


def qonnx_reference(model):
    """The model as qonnx executes it: cleanup and shape inference only."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.infer_shapes import InferShapes
    from qonnx.util.cleanup import cleanup_model

    from .read import fix_input_shapes as _fix_input_shapes, quiet_qonnx as _quiet_qonnx, read_model as _read
    proto = onnx.ModelProto()
    proto.CopyFrom(_read(model))
    _fix_input_shapes(proto)
    with _quiet_qonnx():
        return cleanup_model(ModelWrapper(proto)).transform(InferShapes())


def _to_onnx_layout(values: np.ndarray) -> np.ndarray:
    return np.moveaxis(values, -1, 1) if values.ndim == 4 else values


def _boundary_distance(node, ctx, scale) -> np.ndarray:
    """Distance of the quantizer's float input to its nearest rounding boundary, relative to
    the largest magnitude in that input."""
    x = np.asarray(ctx[node.input[0]], dtype=np.float64)
    if node.op_type == "BipolarQuant" or node.op_type == "MultiThreshold":
        if node.op_type == "MultiThreshold":
            thr = np.asarray(ctx[node.input[1]], dtype=np.float64)
            shape = (1, -1) + (1,) * (x.ndim - 2)
            d = np.min(np.abs(x[..., None] - thr.reshape(*shape, thr.shape[-1])), axis=-1)
        else:
            d = np.abs(x)
    else:
        r = x / scale
        d = np.abs(r - (np.floor(r) + 0.5)) * scale
        d = np.minimum(d, np.abs(r - np.round(r)) * scale) if node.op_type == "Trunc" else d
    return d / max(float(np.abs(x).max()), 1e-30)


def compare_with_qonnx(model, net: Network, x, *, rtol: float = 1e-5,
                       tie_rel: float = 2.0 ** -17) -> CheckReport:
    """Run qonnx and ``net`` on the float inputs ``x`` (``[N, *net.input_shape[1:]]``)."""
    from qonnx.core.onnx_exec import execute_onnx

    x = np.asarray(x, dtype=np.float32)
    if x.shape[1:] != tuple(net.input_shape[1:]):
        raise QloomError(f"inputs must have shape [N, {', '.join(map(str, net.input_shape[1:]))}]"
                         f", not {list(x.shape)}")
    ref = qonnx_reference(model)
    producers = {o: n for n in ref.graph.node for o in n.output}
    out_name = ref.graph.output[0].name
    ints = net.execute_int(net.quantize(x), all_tensors=True)
    ours_out = net.execute(x)
    pairs = [(t, o) for t, o in net.onnx_names.items() if o in producers or o == net.input_name]
    mismatches, worst, identical = [], 0.0, 0
    # an output that is exactly 0 in integers may carry float noise in qonnx: errors are
    # relative to the frame's largest output, but at least one step of the output tensor
    lsb = float(np.min(np.abs(net.tensors[net.output].scale)))
    for i in range(x.shape[0]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ctx = execute_onnx(ref, {net.input_name: x[i:i + 1]}, return_full_exec_context=True)
        first = None
        for tensor, onnx_name in pairs:
            info = net.tensors[tensor]
            to_onnx = net.onnx_layouts.get(tensor, _to_onnx_layout)
            ours = to_onnx(((ints[tensor][i:i + 1] - info.zero_point) * info.scale)
                           .astype(np.float32))
            theirs = np.asarray(ctx[onnx_name], dtype=np.float32).reshape(ours.shape)
            bad = ours != theirs
            if bad.any():
                node = producers[onnx_name]
                scale = to_onnx(np.broadcast_to(info.scale, ints[tensor].shape[1:])
                                [None]).reshape(ours.shape)
                comparable = np.shape(ctx[node.input[0]]) == ours.shape
                dist = _boundary_distance(node, ctx, scale)[bad] if comparable else None
                tie = dist is not None and bool(np.all(dist <= tie_rel))
                where = "" if dist is None else \
                    f", relative distance to the rounding boundary {np.max(dist):.3g}"
                first = Mismatch(i, onnx_name, int(bad.sum()), tie,
                                 f"at {node.op_type} '{node.name}'{where}")
                break
        ours_o, theirs_o = ours_out[i].astype(np.float64), np.asarray(ctx[out_name],
                                                                        np.float64).ravel()
        err = float(np.max(np.abs(ours_o.ravel() - theirs_o), initial=0.0)
                    / max(float(np.abs(theirs_o).max(initial=0.0)), lsb))
        identical += bool(np.array_equal(ours_o.ravel(), theirs_o))
        if first is None and (err > rtol or (net.tail_exact and err > 0)):
            first = Mismatch(i, out_name, int(np.sum(ours_o.ravel() != theirs_o)), False,
                             f"output relative error {err:.3g}"
                             + (" where the tail is exact" if net.tail_exact else ""))
        if first is None:
            worst = max(worst, err)
        else:
            mismatches.append(first)
    return CheckReport(x.shape[0], tuple(o for _, o in pairs), tuple(mismatches), worst, rtol,
                       identical_outputs=identical, exact_output=net.tail_exact)
