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
from .channels_last import check_node, image_layout_of, is_channels_last, weights_oihw
from .quantizers import quantized_constant
from .tail import plan_tail
from .values import NCHW, NHWC, PLAIN, FloatChain, Int, Layout, Prefix
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


def conv_pads(node, in_hw, kernel, stride) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) of a Conv: its ``pads``, or what ``auto_pad`` means
    (SAME_UPPER puts the odd pixel at the bottom/right, as TensorFlow's "same" does)."""
    auto = node_attr(node, "auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto == "NOTSET":
        pads = tuple(node_attr(node, "pads", [0, 0, 0, 0]))
        return (pads[0], pads[1], pads[2], pads[3])
    if auto == "VALID":
        return (0, 0, 0, 0)
    before, after = [], []
    for size, k, s in zip(in_hw, kernel, stride):
        total = max((-(-size // s) - 1) * s + k - size, 0)
        small = total // 2
        before.append(small if auto == "SAME_UPPER" else total - small)
        after.append(total - before[-1])
    return (before[0], before[1], after[0], after[1])


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
        self.input_layout = None
        self.input_elements: dict = {}    # see ``reshape._relayout_input``
        self.onnx_layouts: dict = {}
        self.quantize = None
        self.prefix_ops: tuple[str, ...] = ()

    def shape_of(self, name):
        shape = self.model.get_tensor_shape(name)
        if shape is None:
            raise UnsupportedModelError("tensor shape unknown after shape inference", name)
        return list(shape)

    def input_layout_for(self, tensor: str) -> Layout:
        """The layout of the network input tensor ``tensor``: plain unless 4-D; an image
        read only by channels-last ops is NHWC, any other image NCHW."""
        if len(self.shape_of(tensor)) != 4:
            return PLAIN
        readers = [n for n in self.model.graph.node if tensor in n.input]
        if readers and all(is_channels_last(n) for n in readers):
            return NHWC
        return NCHW

    def ir_shape(self, onnx_name, layout: Layout | None = None) -> tuple[int, ...]:
        shape = self.shape_of(onnx_name)
        if layout is None:
            layout = NCHW if len(shape) == 4 else PLAIN
        return layout.ir_shape(shape)

    def new_tensor(self, name, shape, dtype, scale, lo, hi, zero_point: int = 0):
        if len(shape) == 0:
            raise UnsupportedModelError("the tensor has no dimension besides the batch (qloom "
                                        "needs [batch, features...] or [batch, C, H, W])", name)
        channels = shape[-1]
        self.tensors[name] = ir.TensorInfo(name, tuple(shape), dtype,
                                           np.asarray(scale, dtype=np.float64).ravel(),
                                           int(zero_point))
        self.ranges[name] = (np.broadcast_to(np.asarray(lo, np.int64), (channels,)).copy(),
                             np.broadcast_to(np.asarray(hi, np.int64), (channels,)).copy())
        return name

    def channel_scale(self, scale, node_name, axis: tuple[int, int] | None = None):
        """A quantizer's scale as one value or one per channel of the IR tensor; ``axis``
        (when given) is the ONNX tensor's rank and the axis that holds the IR's channels."""
        s = np.asarray(scale, dtype=np.float64)
        if s.size == 1:
            return s.reshape(1)
        squeezed = s.squeeze()
        if squeezed.ndim != 1:
            raise UnsupportedModelError("only per-tensor or per-channel scales are supported",
                                        node_name)
        if axis is not None:
            rank, channel_axis = axis
            along = rank - s.ndim + [i for i, d in enumerate(s.shape) if d != 1][0]
            if along != channel_axis:
                raise UnsupportedModelError(
                    f"a per-channel scale along axis {along} of a tensor whose channels are "
                    f"on axis {channel_axis}: qloom quantizes per channel of the channel "
                    f"axis only", node_name)
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
        layout = self.input_layout_for(node.output[0])
        self.input_layout = layout
        rank = len(self.shape_of(node.output[0]))
        scale = self.channel_scale(spec.scale, node.name, (rank, layout.channel_axis(rank)))
        name = self.new_tensor(node.output[0], self.ir_shape(node.output[0], layout),
                               spec.dtype, scale, spec.dtype.min, spec.dtype.max,
                               spec.zero_point)
        # The host lays the input out; ``relayout_input`` may still change how (an NHWC
        # input transposed to NCHW before its first layer), so read the layout per call.
        self.input, self.quantize = name, \
            lambda x: self.input_layout.to_ir(spec.values(fn(x)))
        self.prefix_ops = fn.op_types
        self.onnx_names[name] = node.output[0]
        self.onnx_layouts[name] = layout.to_onnx
        return Int(name, node.output[0], layout, -spec.zero_point * scale, True)

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
        layout = image_layout_of(node) if len(shape) == 4 else PLAIN
        name = self.new_tensor(self.graph_input, self.ir_shape(tensor, layout), dtype, [scale],
                               dtype.min, dtype.max)

        def quantize(x):
            x = np.asarray(x, dtype=np.float64).reshape(-1, *shape[1:])
            if dtype.bipolar:
                return layout.to_ir(np.where(x / scale >= 0, 1, -1))
            return layout.to_ir(np.clip(np.round(x / scale), dtype.min, dtype.max)
                                .astype(np.int64))

        self.input, self.quantize = name, quantize
        self.input_layout = layout
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
                f"qloom needs a Quant/BipolarQuant between layers (a float model compiles "
                f"at a fixed-point precision: --precision 'fixed<16,6>')", node.name)
        ints, scale, w_type = quantized_constant(node.input[1], self.producers, self.consts,
                                                 self.annotations, node.name)
        if node.op_type == "Conv":
            check_node(node, len(self.shape_of(node.input[0])))
            ints, scale = weights_oihw(node, ints), weights_oihw(node, scale)
        self._check_linear_shapes(node, ints, src)
        build = self._dense if node.op_type == "MatMul" else self._conv
        layer, w_scale, ints_rowsum = build(node, src, ints, scale, w_type)
        in_channels = self.tensors[src.ir].shape[-1]
        in_scale = self._input_scale(node, layer, src)
        lo, hi = layer.acc_range() if isinstance(layer, ir.Dense) else \
            layer.acc_range(in_channels)
        out_scale = alpha * in_scale * w_scale
        offset = beta * w_scale * ints_rowsum + self._input_offset(layer, src, w_scale,
                                                                   in_channels)
        if len(node.input) > 2 and node.input[2]:
            offset = offset + np.asarray(self.consts[node.input[2]], np.float64).ravel()
        layout = image_layout_of(node) if isinstance(layer, ir.Conv) else \
            (src.layout if src.layout.kind == "image" else PLAIN)
        shape = self.ir_shape(node.output[0], layout)
        dtype = layer.acc_type if isinstance(layer, ir.Dense) else \
            layer.acc_type(in_channels)
        self.new_tensor(layer.output, shape, dtype, out_scale, lo, hi)
        self.layers.append(layer)
        return Int(layer.output, node.output[0], layout, offset, False)

    def _input_scale(self, node, layer, src) -> np.ndarray:
        """The input's scale as the accumulator sees it, per output channel: one scale for
        all channels, or (grouped and depthwise convolutions) one per group, which then
        stays per output channel."""
        scale = self.tensors[src.ir].scale
        channels = self.tensors[src.ir].shape[-1]
        if np.unique(scale).size == 1:
            return np.asarray(scale[:1])
        groups = layer.groups if isinstance(layer, ir.Conv) else 1
        per_group = np.broadcast_to(scale, (channels,)).reshape(groups, -1)
        if groups > 1 and np.all(per_group == per_group[:, :1]):
            return np.repeat(per_group[:, 0], layer.out_channels // groups)
        raise UnsupportedModelError(
            f"the input of this {node.op_type} has one scale per channel "
            f"({np.unique(scale).size} different) and the layer sums across channels"
            f"{f' within its {groups} groups' if groups > 1 else ''}: no integer form is "
            f"exact; qloom needs one input scale per tensor, or per group of a grouped "
            f"(depthwise) convolution", node.name)

    def _input_offset(self, layer, src: Int, w_scale, in_channels) -> np.ndarray:
        """The accumulator offset of an input with an offset (an asymmetric quantizer's
        zero point, ``float = (value - z) * scale``): the weights times the input offset.
        A padded convolution pads with the value of float 0, the zero point itself."""
        off = np.broadcast_to(np.asarray(src.offset, np.float64), (in_channels,))
        if not np.any(off):
            return np.zeros(1)
        if isinstance(layer, ir.Dense):
            return w_scale * (layer.weights @ off)
        kh, kw = layer.kernel
        return w_scale * (layer.dense_weights(in_channels) @ np.tile(off, kh * kw))

    def _check_linear_shapes(self, node, ints, src):
        """qonnx's shape inference leaves a layer whose shapes do not fit without a shape
        (or with a scalar one) instead of failing: refuse it here, naming the shapes."""
        in_shape = self.shape_of(node.input[0])
        out_shape = self.shape_of(node.output[0])
        if node.op_type == "MatMul":
            fits = ints.ndim == 2 and len(in_shape) >= 2 and in_shape[-1] == ints.shape[0]
        else:
            group = node_attr(node, "group", 1)
            channels = image_layout_of(node).channel_axis(4)
            fits = (ints.ndim == 4 and len(in_shape) == 4 and isinstance(group, int)
                    and group >= 1 and in_shape[channels] == ints.shape[1] * group)
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
        rank = len(self.shape_of(node.input[0]))
        if ints.ndim != 2 or (src.layout.kind == "image" and src.layout.perm != (0, 1, 2)):
            raise UnsupportedModelError(
                f"MatMul of an input {self.shape_of(node.input[0])} by weights "
                f"{list(ints.shape)}: qloom maps MatMul with 2-D weights on the last axis of "
                f"a [N, K], [N, ..., K] or channels-last [N, H, W, C] input", node.name)
        weights = src.layout.to_ir(ints.T) if rank == 2 else ints.T
        layer = ir.Dense(name=node.name, inputs=(src.ir,), output=node.output[0],
                         weights=weights, w_type=w_type, in_type=self.tensors[src.ir].dtype)
        return layer, self._per_output(scale.T, node), weights.sum(axis=1).astype(np.float64)

    def _conv(self, node, src, ints, scale, w_type):
        want = image_layout_of(node)
        reads = "[N, H, W, C]" if is_channels_last(node) else "[N, C, H, W]"
        if src.layout.kind == "image" and src.layout != want:
            raise UnsupportedModelError(
                f"the input of this Conv is transposed (its channels-last order is not "
                f"[H, W, C] of {reads}): the hardware would have to reorder a whole "
                f"frame; qloom follows NCHW <-> NHWC transposes that cancel out before a "
                f"convolution", node.name)
        if src.layout != want or ints.ndim != 4:
            raise UnsupportedModelError(f"only 2D convolutions on {reads} are supported",
                                        node.name)
        if any(d != 1 for d in node_attr(node, "dilations", [1, 1])):
            raise UnsupportedModelError(
                f"Conv with dilations {list(node_attr(node, 'dilations', []))} is not "
                f"supported (only 1)", node.name)
        stride = tuple(node_attr(node, "strides", [1, 1]))
        in_hw = want.ir_shape(self.shape_of(node.input[0]))[:2]
        pads = conv_pads(node, in_hw, ints.shape[2:], stride)
        info = self.tensors[src.ir]
        layer = ir.Conv(name=node.name, inputs=(src.ir,), output=node.output[0],
                        weights=np.transpose(ints, (0, 2, 3, 1)).copy(), w_type=w_type,
                        in_type=info.dtype, stride=stride, pads=pads,
                        groups=int(node_attr(node, "group", 1)),
                        pad_value=self._pad_value(node, src, any(pads)))
        rowsum = ints.reshape(ints.shape[0], -1).sum(axis=1).astype(np.float64)
        return layer, self._per_output(scale, node), rowsum

    def _pad_value(self, node, src: Int, padded: bool) -> int:
        """The value a padded convolution pads with: the one meaning float 0 (the input's
        zero point; 0 without one)."""
        info = self.tensors[src.ir]
        off = np.broadcast_to(np.asarray(src.offset, np.float64), (info.shape[-1],))
        if not padded or not np.any(off):
            return 0
        z = -off / np.broadcast_to(info.scale, off.shape)
        if np.all(z == z[0]) and z[0] == round(z[0]) and info.dtype.min <= z[0] <= info.dtype.max:
            return int(round(z[0]))
        raise UnsupportedModelError(
            f"padded Conv of an input with offsets {sorted(set(off.tolist()))[:4]}: float 0 "
            f"is no {info.dtype} value, so no integer padding is exact (qloom pads with an "
            f"asymmetric quantizer's one zero point)", node.name)

    # ---- exact integer ops ------------------------------------------------------------
    def on_add(self, node, data):
        a, b = data
        if not (isinstance(a, Int) and isinstance(b, Int)):
            raise UnsupportedModelError(
                "Add of two tensors needs both to be quantized (or accumulators) with one "
                "scale; a float residual cannot be integerized", node.name)
        if a.layout != b.layout or self.tensors[a.ir].shape != self.tensors[b.ir].shape:
            raise UnsupportedModelError("Add of tensors of different shapes", node.name)
        a_ir, b_ir, scale = self._align(node, a, b)
        layer = ir.Add(name=node.name, inputs=(a_ir, b_ir), output=node.output[0])
        (la, ha), (lb, hb) = self.ranges[a_ir], self.ranges[b_ir]
        lo, hi = la + lb, ha + hb
        self.new_tensor(layer.output, self.tensors[a.ir].shape,
                        smallest_type(lo.min(), hi.max()), scale, lo, hi)
        self.layers.append(layer)
        return Int(layer.output, node.output[0], a.layout, a.offset + b.offset, False)

    def _align(self, node, a: Int, b: Int):
        """The two inputs of a residual Add on one integer grid: where one scale is an
        integer multiple ``m`` of the other (powers of two with fixed-point quantizers),
        the coarser branch is multiplied by ``m`` (an exact ``IntMul``), so that
        ``va * sa + vb * sb == (m * va + vb) * sb``. Returns both IR tensors and the scale."""
        sa, sb = self.tensors[a.ir].scale, self.tensors[b.ir].scale
        channels = self.tensors[a.ir].shape[-1]
        fa, fb = (np.broadcast_to(x, (channels,)) for x in (sa, sb))
        if np.array_equal(fa, fb):
            return a.ir, b.ir, sa if sa.size >= sb.size else sb
        for big, small, src, fine in ((fa, fb, a, sb), (fb, fa, b, sa)):
            ratio = big / small
            m = ratio[0]
            if np.all(ratio == m) and m > 1 and m == round(m) and m < 2 ** 16 and \
                    np.array_equal(small * m, big):
                scaled = self._int_mul(node, src, int(round(m)))
                return (scaled, b.ir, fine) if src is a else (a.ir, scaled, fine)
        shown = [float(x) for x in np.unique(fa)[:3]], [float(x) for x in np.unique(fb)[:3]]
        raise UnsupportedModelError(
            f"Add of tensors with scales {shown[0]} and {shown[1]} (ratio "
            f"{float(fa[0] / fb[0]):.6g}): no exact integer alignment exists, since neither "
            f"scale is an integer multiple of the other for every channel; qloom adds "
            f"residual branches whose scales are equal or differ by an integer factor "
            f"(e.g. power-of-two, fixed-point quantizers)", node.name)

    def _int_mul(self, node, src: Int, factor: int) -> str:
        out = f"{src.ir}_x{factor}"
        if out in self.tensors:         # one alignment of a tensor serves every Add
            return out
        info = self.tensors[src.ir]
        lo, hi = self.ranges[src.ir]
        self.layers.append(ir.IntMul(name=f"{node.name}_align", inputs=(src.ir,),
                                     output=out, factor=factor))
        self.new_tensor(out, info.shape, smallest_type(lo.min() * factor, hi.max() * factor),
                        info.scale / factor, lo * factor, hi * factor)
        return out

    def maxpool(self, node, src: Int, out: str | None = None):
        kernel = tuple(int(k) for k in node_attr(node, "kernel_shape", []))
        strides = tuple(int(s) for s in node_attr(node, "strides", [1] * len(kernel)))
        reads = "[N, H, W, C]" if is_channels_last(node) else "[N, C, H, W]"
        problems = []
        if len(kernel) != 2:
            problems.append(f"a {len(kernel)}-D kernel")
        if node_attr(node, "ceil_mode", 0):
            problems.append("ceil_mode 1")
        if any(d != 1 for d in node_attr(node, "dilations", [1] * len(kernel))):
            problems.append(f"dilations {list(node_attr(node, 'dilations', []))}")
        if len(node.output) > 1 and node.output[1]:
            problems.append("an Indices output")
        if src.layout != image_layout_of(node):
            problems.append(f"an input that is not {reads}")
        if problems:
            raise UnsupportedModelError(
                f"MaxPool with {', '.join(problems)} is not supported; qloom pools 2-D "
                f"windows (a 1-D pool after a 1-D Conv is lifted to 2-D) on {reads}, "
                f"ceil_mode 0, no dilation", node.name)
        shape = self.shape_of(node.input[0])
        in_hw = shape[1:3] if is_channels_last(node) else shape[2:4]
        pads = conv_pads(node, in_hw, kernel, strides)
        if max(pads[0], pads[2]) >= kernel[0] or max(pads[1], pads[3]) >= kernel[1]:
            raise UnsupportedModelError(
                f"MaxPool with pads {list(pads)} not smaller than its kernel {list(kernel)}: "
                f"a window could hold padding only (ONNX requires pads below the kernel)",
                node.name)
        if np.any(self.tensors[src.ir].scale <= 0):
            raise UnsupportedModelError("MaxPool of a tensor with a negative scale", node.name)
        out = out or node.output[0]
        layer = ir.MaxPool(name=node.name, inputs=(src.ir,), output=out, kernel=kernel,
                           stride=strides, pads=pads)
        info = self.tensors[src.ir]
        self.new_tensor(out, self.ir_shape(node.output[0], src.layout), info.dtype, info.scale,
                        *self.ranges[src.ir], info.zero_point)
        self.layers.append(layer)
        return Int(out, node.output[0], src.layout, src.offset, src.quantized)

    # ---- the network --------------------------------------------------------------------
    def producer_layer(self, tensor: str):
        return next((l for l in self.layers if l.output == tensor), None)

    def int_of(self, tensor: str) -> Int | None:
        """The lowering's value for IR tensor ``tensor`` (a quantizer's output first)."""
        found = [v for v in self.env.values() if isinstance(v, Int) and v.ir == tensor]
        return next((v for v in found if v.quantized), found[0] if found else None)

    def node_of(self, name: str):
        return next((n for n in self.model.graph.node if n.name == name), None)

    def assemble(self, chain: FloatChain, output_name: str) -> ir.Network:
        plan = plan_tail(self, chain, output_name)
        src = plan.source
        fn = FloatFunction(list(plan.nodes), self.consts, src.onnx, output_name,
                           self.shape_of, self.opsets)
        info = self.tensors[src.ir]
        # ``Network.dequantize`` already subtracts the tensor's zero point
        layout = src.layout
        offset = np.asarray(src.offset, np.float64) + info.zero_point * info.scale

        def tail(y):
            x = np.asarray(y, np.float64)
            if np.any(offset != 0):
                x = x + offset
            return fn(layout.to_onnx(x).astype(np.float32))

        if self.input is None:
            raise UnsupportedModelError("the model input reaches no quantized layer")
        shape = self.shape_of(self.graph_input)
        return ir.Network(
            name=self.model.graph.name or "model", input_name=self.graph_input,
            input_shape=tuple(shape), input=self.input, output=src.ir,
            layers=self.layers, tensors=self.tensors, quantize=self.quantize, tail=tail,
            prefix_ops=self.prefix_ops, tail_ops=fn.op_types,
            input_scale=self.tensors[self.input].scale, onnx_names=self.onnx_names,
            onnx_layouts=self.onnx_layouts, tail_exact=plan.exact, tail_note=plan.note,
            output_shape=tuple(self.shape_of(output_name)))
