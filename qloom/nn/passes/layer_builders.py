"""Building IR layers from ONNX nodes during lowering: linear layers (MatMul, Conv) with
their quantized weights, residual Add, MaxPool, Flatten, the input (quantized or fixed
point) and the final ``Network`` with its host prefix and tail."""

from __future__ import annotations

import warnings

import numpy as np

from ...errors import QloomError, UnsupportedModelError
from .. import ir
from ..dtypes import BIPOLAR, DataType, int_type, smallest_type
from ..thresholds import FloatFunction
from .quantizers import quantized_constant
from .values import NCHW, PLAIN, FloatChain, Int, Layout, Prefix
from .attrs import node_attr

__all__ = ["LayerBuilders", "FixedPointInputWarning", "DEFAULT_INPUT_TYPE",
           "DEFAULT_INPUT_SCALE"]

DEFAULT_INPUT_TYPE = int_type(16)
DEFAULT_INPUT_SCALE = 2.0 ** -10      # hls4ml's default ap_fixed<16,6>


class FixedPointInputWarning(UserWarning):
    """The model has no input quantizer and qloom chose a default fixed-point input."""




def _annotation_type(name: str) -> DataType | None:
    if name == "BIPOLAR":
        return BIPOLAR
    for prefix, signed in (("UINT", False), ("INT", True)):
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            return DataType(int(name[len(prefix):]), signed)
    return {"BINARY": DataType(1, False)}.get(name)


class LayerBuilders:
    def __init__(self, model, consts, *, input_type, input_scale, warn):
        self.model = model
        self.consts = consts
        self.opsets = list(model.model.opset_import)
        self.producers = {o: n for n in model.graph.node for o in n.output}
        self.annotations = {a.tensor_name: p.value for a in model.graph.quantization_annotation
                            for p in a.quant_parameter_tensor_names if p.key == "finn_datatype"}
        self.graph_input = model.graph.input[0].name
        self.input_type, self.input_scale, self.warn = input_type, input_scale, warn
        self.tensors: dict[str, ir.TensorInfo] = {}
        self.ranges: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.layers: list[ir.Layer] = []
        self.onnx_names: dict[str, str] = {}
        self.input = None
        self.quantize = None
        self.prefix_ops: tuple[str, ...] = ()

    def shape_of(self, name):
        shape = self.model.get_tensor_shape(name)
        if shape is None:
            raise UnsupportedModelError("tensor shape unknown after shape inference", name)
        return list(shape)

    def ir_shape(self, onnx_name) -> tuple[int, ...]:
        shape = self.shape_of(onnx_name)[1:]
        return tuple(shape[1:] + shape[:1]) if len(shape) == 3 else tuple(shape)

    def new_tensor(self, name, shape, dtype, scale, lo, hi):
        if len(shape) == 0:
            raise UnsupportedModelError("the tensor has no dimension besides the batch (qloom "
                                        "needs [batch, features...] or [batch, C, H, W])", name)
        channels = shape[-1]
        self.tensors[name] = ir.TensorInfo(name, tuple(shape), dtype,
                                           np.asarray(scale, dtype=np.float64).ravel())
        self.ranges[name] = (np.broadcast_to(np.asarray(lo, np.int64), (channels,)).copy(),
                             np.broadcast_to(np.asarray(hi, np.int64), (channels,)).copy())
        return name

    def channel_scale(self, scale, node_name):
        """A quantizer's scale as one value or one per channel of the IR tensor."""
        s = np.asarray(scale, dtype=np.float64)
        if s.size == 1:
            return s.reshape(1)
        squeezed = s.squeeze()
        if squeezed.ndim != 1:
            raise UnsupportedModelError("only per-tensor or per-channel scales are supported",
                                        node_name)
        return squeezed

    # ---- the input ------------------------------------------------------------------
    def _claim_input(self, node):
        if self.input is not None:
            raise UnsupportedModelError(
                "the graph input feeds more than one quantizer or layer; qloom needs one "
                "input path", node.name)

    def input_quantizer(self, node, prefix: Prefix, spec):
        self._claim_input(node)
        fn = FloatFunction(prefix.nodes + [node], self.consts, self.graph_input,
                           node.output[0], self.shape_of, self.opsets)
        layout = NCHW if len(self.shape_of(node.output[0])) == 4 else PLAIN
        name = self.new_tensor(node.output[0], self.ir_shape(node.output[0]), spec.dtype,
                               self.channel_scale(spec.scale, node.name), spec.dtype.min,
                               spec.dtype.max)
        self.input, self.quantize = name, lambda x: layout.to_ir(spec.values(fn(x)))
        self.prefix_ops = fn.op_types
        self.onnx_names[name] = node.output[0]
        return Int(name, node.output[0], layout, np.zeros(1), True)

    def fixed_point_input(self, node, prefix: Prefix):
        """A linear layer reads the float input: quantize it onto a fixed-point grid and fold
        the scalar affine prefix into the layer's accumulator scale and offset."""
        self._claim_input(node)
        if prefix.blocker is not None:
            raise self.unsupported(prefix.blocker)
        if not prefix.affine:
            culprit = next(n for n in prefix.nodes if n.op_type not in
                           ("Add", "Sub", "Mul", "Div", "Reshape", "Flatten", "Identity"))
            raise UnsupportedModelError(
                f"{node.op_type} reads the float graph input without an input quantizer "
                f"through {culprit.op_type} '{culprit.name}'; only scalar Add/Sub/Mul/Div "
                f"and Reshape/Flatten can be folded", node.name)
        annotated = _annotation_type(self.annotations.get(self.graph_input, ""))
        dtype = self.input_type or annotated or DEFAULT_INPUT_TYPE
        if self.input_scale is not None:
            scale = float(self.input_scale)
        else:
            scale = 1.0 if (self.input_type or annotated) else DEFAULT_INPUT_SCALE
        if self.input_type is None and annotated is None and self.warn:
            warnings.warn(
                f"'{node.name}' reads the float input without an input quantizer: qloom "
                f"quantizes the input to {dtype} with scale {scale:g}; pass input_type= and "
                f"input_scale= to choose. The integer network equals the model on inputs "
                f"rounded to that grid.", FixedPointInputWarning, stacklevel=6)
        if scale <= 0 or not np.isfinite(scale):
            raise QloomError(f"input_scale must be a positive number, not {self.input_scale!r}")
        tensor = node.input[0]
        shape = self.shape_of(tensor)
        layout = NCHW if len(shape) == 4 else PLAIN
        name = self.new_tensor(self.graph_input, self.ir_shape(tensor), dtype, [scale],
                               dtype.min, dtype.max)

        def quantize(x):
            x = np.asarray(x, dtype=np.float64).reshape(-1, *shape[1:])
            if dtype.bipolar:
                return layout.to_ir(np.where(x / scale >= 0, 1, -1))
            return layout.to_ir(np.clip(np.round(x / scale), dtype.min, dtype.max)
                                .astype(np.int64))

        self.input, self.quantize = name, quantize
        self.prefix_ops = tuple(n.op_type for n in prefix.nodes)
        return Int(name, tensor, layout, np.zeros(1), True)

    # ---- linear layers ----------------------------------------------------------------
    def on_linear(self, node, data):
        if node.input[1] not in self.consts:
            raise UnsupportedModelError(
                f"{node.op_type} of two activations is not supported (weights must be "
                f"quantized constants)", node.name)
        src, alpha, beta = data[0], 1.0, 0.0
        if isinstance(src, Prefix):
            alpha, beta = src.alpha, src.beta
            src = self.fixed_point_input(node, src)
        elif isinstance(src, FloatChain) or not src.quantized:
            blocker = src.blocker if isinstance(src, FloatChain) else None
            if blocker is not None:
                raise self.unsupported(blocker)
            raise UnsupportedModelError(
                f"unquantized float layer: the input of this {node.op_type} is not quantized; "
                f"qloom needs a Quant/BipolarQuant between layers", node.name)
        in_scale = np.unique(self.tensors[src.ir].scale)
        if in_scale.size != 1:
            raise UnsupportedModelError(
                "the input of a linear layer must have one scale for all channels", node.name)
        ints, scale, w_type = quantized_constant(node.input[1], self.producers, self.consts,
                                                 self.annotations, node.name)
        self._check_linear_shapes(node, ints, src)
        build = self._dense if node.op_type == "MatMul" else self._conv
        layer, w_scale, ints_rowsum = build(node, src, ints, scale, w_type)
        lo, hi = layer.acc_range() if isinstance(layer, ir.Dense) else \
            layer.acc_range(self.tensors[src.ir].shape[-1])
        out_scale = alpha * in_scale[0] * w_scale
        offset = beta * w_scale * ints_rowsum
        if len(node.input) > 2 and node.input[2]:
            offset = offset + np.asarray(self.consts[node.input[2]], np.float64).ravel()
        shape = self.ir_shape(node.output[0])
        dtype = layer.acc_type if isinstance(layer, ir.Dense) else \
            layer.acc_type(self.tensors[src.ir].shape[-1])
        self.new_tensor(layer.output, shape, dtype, out_scale, lo, hi)
        self.layers.append(layer)
        return Int(layer.output, node.output[0], PLAIN if isinstance(layer, ir.Dense)
                   else NCHW, offset, False)

    def _check_linear_shapes(self, node, ints, src):
        """qonnx's shape inference leaves a layer whose shapes do not fit without a shape
        (or with a scalar one) instead of failing: refuse it here, naming the shapes."""
        in_shape = self.shape_of(node.input[0])
        out_shape = self.shape_of(node.output[0])
        if node.op_type == "MatMul":
            fits = ints.ndim == 2 and len(in_shape) >= 2 and in_shape[-1] == ints.shape[0]
        else:
            group = node_attr(node, "group", 1)
            fits = (ints.ndim == 4 and len(in_shape) == 4 and isinstance(group, int)
                    and group >= 1 and in_shape[1] == ints.shape[1] * group)
        if not fits or len(out_shape) < 2:
            raise UnsupportedModelError(
                f"{node.op_type} of an input {list(in_shape)} by weights "
                f"{list(ints.shape)}: the shapes do not fit (the output's inferred shape is "
                f"{list(out_shape)})", node.name)

    @staticmethod
    def _per_output(scale2d, node):
        """``scale2d[out, ...]`` must be constant along every axis but the first."""
        flat = scale2d.reshape(scale2d.shape[0], -1)
        if not np.all(flat == flat[:, :1]):
            raise UnsupportedModelError(
                "weight scales must be per tensor or per output channel", node.name)
        return flat[:, 0]

    def _dense(self, node, src, ints, scale, w_type):
        if ints.ndim != 2 or len(self.shape_of(node.input[0])) != 2:
            raise UnsupportedModelError("only 2D MatMul ([1, K] x [K, N]) is supported",
                                        node.name)
        weights = src.layout.to_ir(ints.T)
        if src.layout.kind == "nchw":
            raise UnsupportedModelError("MatMul on a 4D tensor is not supported", node.name)
        layer = ir.Dense(name=node.name, inputs=(src.ir,), output=node.output[0],
                         weights=weights, w_type=w_type, in_type=self.tensors[src.ir].dtype)
        return layer, self._per_output(scale.T, node), weights.sum(axis=1).astype(np.float64)

    def _conv(self, node, src, ints, scale, w_type):
        if src.layout.kind != "nchw" or ints.ndim != 4:
            raise UnsupportedModelError("only 2D convolutions on [N, C, H, W] are supported",
                                        node.name)
        if node_attr(node, "auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET") or \
                any(d != 1 for d in node_attr(node, "dilations", [1, 1])):
            raise UnsupportedModelError("Conv with auto_pad or dilations is not supported",
                                        node.name)
        pads = tuple(node_attr(node, "pads", [0, 0, 0, 0]))
        layer = ir.Conv(name=node.name, inputs=(src.ir,), output=node.output[0],
                        weights=np.transpose(ints, (0, 2, 3, 1)).copy(), w_type=w_type,
                        in_type=self.tensors[src.ir].dtype,
                        stride=tuple(node_attr(node, "strides", [1, 1])),
                        pads=(pads[0], pads[1], pads[2], pads[3]),
                        groups=int(node_attr(node, "group", 1)))
        rowsum = ints.reshape(ints.shape[0], -1).sum(axis=1).astype(np.float64)
        return layer, self._per_output(scale, node), rowsum

    # ---- exact integer ops ------------------------------------------------------------
    def on_add(self, node, data):
        a, b = data
        if not (isinstance(a, Int) and isinstance(b, Int)):
            raise UnsupportedModelError(
                "Add of two tensors needs both to be quantized (or accumulators) with one "
                "scale; a float residual cannot be integerized", node.name)
        sa, sb = self.tensors[a.ir].scale, self.tensors[b.ir].scale
        if a.layout != b.layout or self.tensors[a.ir].shape != self.tensors[b.ir].shape:
            raise UnsupportedModelError("Add of tensors of different shapes", node.name)
        if not np.array_equal(np.broadcast_to(sa, sb.shape), np.broadcast_to(sb, sa.shape)):
            raise UnsupportedModelError(
                f"Add of tensors with different scales ({sa.tolist()} and {sb.tolist()}) is "
                f"not supported; residual branches need one shared scale", node.name)
        layer = ir.Add(name=node.name, inputs=(a.ir, b.ir), output=node.output[0])
        (la, ha), (lb, hb) = self.ranges[a.ir], self.ranges[b.ir]
        lo, hi = la + lb, ha + hb
        self.new_tensor(layer.output, self.tensors[a.ir].shape,
                        smallest_type(lo.min(), hi.max()), sa, lo, hi)
        self.layers.append(layer)
        return Int(layer.output, node.output[0], a.layout, a.offset + b.offset, False)

    def maxpool(self, node, src: Int, out: str | None = None):
        kernel = list(node_attr(node, "kernel_shape", []))
        strides = list(node_attr(node, "strides", kernel))
        if (len(kernel) != 2 or kernel[0] != kernel[1] or strides[0] != strides[1]
                or any(node_attr(node, "pads", [0, 0, 0, 0])) or node_attr(node, "ceil_mode", 0)
                or any(d != 1 for d in node_attr(node, "dilations", [1, 1]))
                or src.layout.kind != "nchw"):
            raise UnsupportedModelError(
                "only square MaxPool on [N, C, H, W] with equal strides, no padding and "
                "ceil_mode 0 is supported", node.name)
        if np.any(self.tensors[src.ir].scale <= 0):
            raise UnsupportedModelError("MaxPool of a tensor with a negative scale", node.name)
        out = out or node.output[0]
        layer = ir.MaxPool(name=node.name, inputs=(src.ir,), output=out, kernel=kernel[0],
                           stride=strides[0])
        info = self.tensors[src.ir]
        self.new_tensor(out, self.ir_shape(node.output[0]), info.dtype, info.scale,
                        *self.ranges[src.ir])
        self.layers.append(layer)
        return Int(out, node.output[0], src.layout, src.offset, src.quantized)

    def flatten(self, node, src: Int):
        in_shape = self.shape_of(node.input[0])
        if len(in_shape) == 2:
            return Int(src.ir, node.output[0], src.layout, src.offset, src.quantized)
        if len(in_shape) != 4 or np.any(src.offset != 0):
            raise UnsupportedModelError("only flattening [N, C, H, W] quantized tensors is "
                                        "supported", node.name)
        c, h, w = in_shape[1:]
        layout = PLAIN if (h, w) == (1, 1) else Layout("flat_chw", (c, h, w))
        layer = ir.Flatten(name=node.name, inputs=(src.ir,), output=node.output[0])
        info = self.tensors[src.ir]
        lo, hi = self.ranges[src.ir]
        scale = np.tile(info.scale, h * w) if info.scale.size > 1 else info.scale
        self.new_tensor(layer.output, (h * w * c,), info.dtype, scale, np.tile(lo, h * w),
                        np.tile(hi, h * w))
        self.layers.append(layer)
        return Int(layer.output, node.output[0], layout, src.offset, src.quantized)

    # ---- the network --------------------------------------------------------------------
    def assemble(self, chain: FloatChain, output_name: str) -> ir.Network:
        src = chain.source
        fn = FloatFunction(chain.nodes, self.consts, src.onnx, output_name, self.shape_of,
                           self.opsets)
        layout, offset = src.layout, np.asarray(src.offset, np.float64)
        rank = len(self.shape_of(src.onnx))

        def tail(y):
            x = layout.to_onnx(np.asarray(y, np.float64))
            if np.any(offset != 0):
                x = x + (offset.reshape(-1, 1, 1) if rank == 4 else offset)
            return fn(x.astype(np.float32))

        if self.input is None:
            raise UnsupportedModelError("the model input reaches no quantized layer")
        shape = self.shape_of(self.graph_input)
        return ir.Network(
            name=self.model.graph.name or "model", input_name=self.graph_input,
            input_shape=tuple(shape), input=self.input, output=src.ir,
            layers=self.layers, tensors=self.tensors, quantize=self.quantize, tail=tail,
            prefix_ops=self.prefix_ops, tail_ops=fn.op_types,
            input_scale=self.tensors[self.input].scale, onnx_names=self.onnx_names)
