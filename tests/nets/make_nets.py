"""Make the real test networks in this folder: brevitas' own example topologies, trained
briefly on scikit-learn's digits, exported to QONNX and cleaned with qonnx.

    .venv/bin/python tests/nets/make_nets.py [--only NAME] [--out DIR]

Needs the ``train`` extra (torch, brevitas, onnxoptimizer, scikit-learn). For each network
NAME it writes ``NAME.onnx`` (as a user would bring it: ``export_qonnx`` then qonnx's
``cleanup_model``) and ``NAME_inputs.npy`` (200 held-out digits in the model's input
layout, float32 on the k/255 pixel grid). Accuracy is not the point: a few epochs in train
mode give the BatchNorm layers realistic running statistics, which is what the thresholds
and the hardware see.

Everything is seeded and runs on one thread, so a rerun on the same versions writes the
same files.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

HERE = Path(__file__).resolve().parent
SEED = 0
TEST_FRAMES = 200


@dataclass(frozen=True)
class NetSpec:
    """One network: its brevitas topology, its input size and a short training schedule."""

    name: str
    build: Callable[[], "torch.nn.Module"]  # noqa: F821 (torch is imported lazily)
    side: int | tuple[int, int]  # input images are side x side (or height x width)
    channels: int         # grey digits repeated over this many channels
    epochs: int
    batch: int
    lr: float


def _cnv(weight_bits: int, act_bits: int):
    from brevitas_examples.bnn_pynq.models.CNV import CNV
    return CNV(num_classes=10, weight_bit_width=weight_bits, act_bit_width=act_bits,
               in_bit_width=8, in_ch=3)


def _cnv_small():
    """brevitas' CNV at an eighth of its channels (convolutions 8, 8, 16, 16, 32, 32; dense
    32-64-64-10): a CNV-class accelerator that Yosys maps into the iCE40UP5K's 5,280 LUT4s
    and 30 block RAMs at default folding (5,067 and 22), for the cost model's check on the
    iCE40. (qloom's fit check refuses it on the iCEBreaker at every folding once the host
    link is added: its eleven engines take about 200-300 LUT4 each at any width.) The CNV
    module reads its widths from module constants: patched for the construction only."""
    import importlib
    from unittest import mock
    module = importlib.import_module("brevitas_examples.bnn_pynq.models.CNV")
    with mock.patch.multiple(module, CNV_OUT_CH_POOL=[(8, False), (8, True), (16, False),
                                                      (16, True), (32, False), (32, False)],
                             INTERMEDIATE_FC_FEATURES=[(32, 64), (64, 64)],
                             LAST_FC_IN_FEATURES=64):
        return _cnv(1, 1)


def _lfc():
    from brevitas_examples.bnn_pynq.models.FC import FC
    return FC(num_classes=10, weight_bit_width=1, act_bit_width=1, in_bit_width=1,
              in_channels=1, out_features=[1024, 1024, 1024], in_features=(28, 28))


def _mobilenet():
    """brevitas' MobileNet-v1 (its DwsConvBlock: depthwise 3x3 then pointwise 1x1, each
    with BatchNorm and a 4-bit QuantReLU, per-channel activation scales into the depthwise
    convolutions, TruncAvgPool2d before the classifier) at a width for 24x24 digits, behind
    an 8-bit input quantizer."""
    import torch
    from brevitas.nn import QuantIdentity
    from brevitas_examples.imagenet_classification.models.mobilenetv1 import MobileNet
    body = MobileNet(channels=[[8], [16], [32, 32], [64]], first_stage_stride=False,
                     act_bit_width=4, weight_bit_width=4, first_layer_bit_width=8,
                     last_layer_bit_width=8, avg_pool_kernel_size=3, first_layer_stride=2,
                     in_channels=1, num_classes=10)
    return torch.nn.Sequential(QuantIdentity(bit_width=8, return_quant_tensor=True), body)


class _ResNet8:
    """ResNet-8 as in MLPerf Tiny (a 3x3 stem, three residual stacks of two 3x3 convolutions,
    the second and third with stride 2 and a 1x1 convolution on the shortcut, global average
    pooling, a dense classifier) at 8/16/32 channels for 16x16 digits. 4-bit weights,
    fixed-point (power-of-two scale) activations: each residual Add sums a 6-bit signed
    branch and a shortcut of its own learned scale, which qloom aligns exactly."""

    @staticmethod
    def build():
        import torch
        from brevitas.nn import QuantConv2d, QuantIdentity, QuantLinear, QuantReLU
        from brevitas.nn import TruncAvgPool2d
        from brevitas.quant import (Int8ActPerTensorFixedPoint, Int8WeightPerTensorFixedPoint,
                                    Uint8ActPerTensorFixedPoint)

        def conv(cin, cout, k, stride=1):
            return QuantConv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False,
                               weight_quant=Int8WeightPerTensorFixedPoint, weight_bit_width=4)

        def relu():
            return QuantReLU(act_quant=Uint8ActPerTensorFixedPoint, bit_width=4,
                             return_quant_tensor=True)

        def signed():
            return QuantIdentity(act_quant=Int8ActPerTensorFixedPoint, bit_width=6)

        class Block(torch.nn.Module):
            def __init__(self, cin, cout, stride):
                super().__init__()
                self.conv1, self.bn1, self.act1 = conv(cin, cout, 3, stride), \
                    torch.nn.BatchNorm2d(cout), relu()
                self.conv2, self.bn2, self.q2 = conv(cout, cout, 3), torch.nn.BatchNorm2d(cout), \
                    signed()
                self.short = None if stride == 1 and cin == cout else torch.nn.Sequential(
                    conv(cin, cout, 1, stride), torch.nn.BatchNorm2d(cout), signed())
                self.act = relu()

            def forward(self, x):
                y = self.q2(self.bn2(self.conv2(self.act1(self.bn1(self.conv1(x))))))
                skip = x.value if self.short is None else self.short(x)   # float add
                return self.act(y + skip)

        class ResNet8(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inp = QuantIdentity(act_quant=Uint8ActPerTensorFixedPoint, bit_width=8)
                self.stem = torch.nn.Sequential(conv(1, 8, 3), torch.nn.BatchNorm2d(8), relu())
                self.stacks = torch.nn.Sequential(Block(8, 8, 1), Block(8, 16, 2),
                                                  Block(16, 32, 2))
                self.pool = TruncAvgPool2d(kernel_size=4, stride=1, bit_width=8,
                                           float_to_int_impl_type="ROUND")
                self.fc = QuantLinear(32, 10, bias=False,
                                      weight_quant=Int8WeightPerTensorFixedPoint,
                                      weight_bit_width=8)

            def forward(self, x):
                x = self.pool(self.stacks(self.stem(self.inp(x))))
                return self.fc(x.flatten(1))

        return ResNet8()


def _dscnn():
    """DS-CNN as in MLPerf Tiny's keyword spotting (a 10x4 convolution with stride 2 and
    "same" padding on a tall, narrow input, then depthwise-separable blocks, average pooling
    over the whole map, a dense classifier) at 24 channels on 24x10 digits. The stem's
    activation is an asymmetric unsigned quantizer (brevitas' ShiftedUint8: a zero point),
    so the first depthwise convolution pads with that zero point."""
    import torch
    from brevitas.nn import QuantConv2d, QuantIdentity, QuantLinear, QuantReLU
    from brevitas.nn import TruncAvgPool2d
    from brevitas.quant import ShiftedUint8ActPerTensorFloat

    def conv(cin, cout, k, stride=1, padding=0, groups=1):
        return QuantConv2d(cin, cout, k, stride=stride, padding=padding, groups=groups,
                           bias=False, weight_bit_width=4)

    def block(c):
        return [conv(c, c, 3, padding=1, groups=c), torch.nn.BatchNorm2d(c),
                QuantReLU(bit_width=4, return_quant_tensor=True),
                conv(c, c, 1), torch.nn.BatchNorm2d(c),
                QuantReLU(bit_width=4, return_quant_tensor=True)]

    c = 24
    layers = [QuantIdentity(bit_width=8, return_quant_tensor=True),
              # TensorFlow's "same" for 24x10 input, 10x4 kernel, stride 2: pads 4 and 1
              conv(1, c, (10, 4), stride=2, padding=(4, 1)), torch.nn.BatchNorm2d(c),
              QuantIdentity(act_quant=ShiftedUint8ActPerTensorFloat, bit_width=4,
                            return_quant_tensor=True)]
    for _ in range(3):
        layers += block(c)
    layers += [TruncAvgPool2d(kernel_size=(12, 5), stride=1, bit_width=8,
                              float_to_int_impl_type="ROUND"),
               torch.nn.Flatten(), QuantLinear(c, 10, bias=False, weight_bit_width=8)]
    return torch.nn.Sequential(*layers)


NETS = {spec.name: spec for spec in [
    # FINN's CNV: 6 3x3 convolutions (64, 64, 128, 128, 256, 256), 2 max pools, 3 dense layers
    NetSpec("cnv_w1a1", lambda: _cnv(1, 1), side=32, channels=3, epochs=3, batch=64, lr=5e-3),
    NetSpec("cnv_w2a2", lambda: _cnv(2, 2), side=32, channels=3, epochs=3, batch=64, lr=5e-3),
    # CNV at an eighth of the channels (8, 8, 16, 16, 32, 32; dense 32-64-64-10)
    NetSpec("cnv_small_w1a1", _cnv_small, side=32, channels=3, epochs=3, batch=64, lr=5e-3),
    # FINN's LFC: 784 binarized inputs, 3 x 1024 hidden, 10 outputs, all bipolar
    NetSpec("lfc_w1a1", _lfc, side=28, channels=1, epochs=4, batch=64, lr=5e-3),
    NetSpec("mobilenet_w4a4", _mobilenet, side=24, channels=1, epochs=4, batch=64, lr=5e-3),
    NetSpec("resnet8_w4a4", _ResNet8.build, side=16, channels=1, epochs=4, batch=64,
            lr=5e-3),
    NetSpec("dscnn_w4a4", _dscnn, side=(24, 10), channels=1, epochs=4, batch=64, lr=5e-3),
]}


def digits(side: int, channels: int):
    """scikit-learn's 8x8 digits resized to ``side`` x ``side`` (bilinear), rounded to 8-bit
    pixels k/255 like a camera image, grey repeated over ``channels``; NCHW float32.
    Returns (x_train, y_train, x_test, y_test) with TEST_FRAMES test images."""
    import torch
    import torch.nn.functional as F
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    images = torch.from_numpy(data.images.astype(np.float32) / 16.0)[:, None]
    size = (side, side) if isinstance(side, int) else tuple(side)
    images = F.interpolate(images, size=size, mode="bilinear", align_corners=False)
    images = (torch.round(images.clamp(0, 1) * 255) / 255).repeat(1, channels, 1, 1)
    x = images.numpy().astype(np.float32)
    x_train, x_test, y_train, y_test = train_test_split(
        x, data.target, test_size=TEST_FRAMES, random_state=SEED, stratify=data.target)
    return x_train, y_train.astype(np.int64), x_test, y_test.astype(np.int64)


def _seed():
    import torch
    torch.manual_seed(SEED)
    np.random.seed(SEED)
    torch.set_num_threads(1)           # float reduction order independent of the machine
    torch.use_deterministic_algorithms(True)


def train(model, spec: NetSpec, x, y) -> None:
    """A few epochs of Adam with cross-entropy, in train mode (BatchNorm statistics move),
    clipping the latent weights to [-1, 1] after each step as brevitas' bnn_pynq trainer
    does."""
    import torch
    gen = torch.Generator().manual_seed(SEED)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    opt = torch.optim.Adam(model.parameters(), lr=spec.lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()
    for epoch in range(spec.epochs):
        order = torch.randperm(len(xt), generator=gen)
        total = 0.0
        for start in range(0, len(xt), spec.batch):
            idx = order[start:start + spec.batch]
            if len(idx) < 2:           # BatchNorm needs two samples
                continue
            opt.zero_grad()
            loss = loss_fn(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
            if hasattr(model, "clip_weights"):
                model.clip_weights(-1.0, 1.0)
            total += float(loss.detach()) * len(idx)
        print(f"  epoch {epoch + 1}/{spec.epochs}: loss {total / len(xt):.3f}", flush=True)
    model.eval()


def accuracy(model, x, y) -> float:
    import torch
    with torch.no_grad():
        return float((model(torch.from_numpy(x)).argmax(1).numpy() == y).mean())


def export(model, example: np.ndarray, path: Path) -> None:
    """brevitas' QONNX export (the TorchScript exporter: dynamo=False), then qonnx's
    cleanup, as a user would hand the file over."""
    import torch
    from brevitas.export import export_qonnx
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.util.cleanup import cleanup_model

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = Path(tmp) / "raw.onnx"
        export_qonnx(model, input_t=torch.from_numpy(example), export_path=str(raw),
                     dynamo=False)
        cleanup_model(ModelWrapper(str(raw))).save(str(path))


def qonnx_agrees(path: Path, model, x: np.ndarray) -> float:
    """Largest absolute difference between torch and qonnx's execute_onnx on a few frames
    (a sanity check of the export, not the exactness check: that is test_nets.py)."""
    import torch
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx

    wrapper = ModelWrapper(str(path))
    iname, oname = wrapper.graph.input[0].name, wrapper.graph.output[0].name
    worst = 0.0
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for frame in x:
            ours = execute_onnx(wrapper, {iname: frame[None]})[oname]
            theirs = model(torch.from_numpy(frame[None])).numpy()
            worst = max(worst, float(np.max(np.abs(ours - theirs))))
    return worst


def make(spec: NetSpec, out: Path) -> None:
    print(f"{spec.name}:", flush=True)
    _seed()
    x_train, y_train, x_test, y_test = digits(spec.side, spec.channels)
    model = spec.build()
    t0 = time.perf_counter()
    train(model, spec, x_train, y_train)
    t1 = time.perf_counter()
    path = out / f"{spec.name}.onnx"
    export(model, x_test[:1], path)
    np.save(out / f"{spec.name}_inputs.npy", x_test)
    t2 = time.perf_counter()
    diff = qonnx_agrees(path, model, x_test[:4])
    print(f"  test accuracy {accuracy(model, x_test, y_test):.3f} (torch); "
          f"torch vs execute_onnx max |diff| {diff:.3g} on 4 frames")
    print(f"  train {t1 - t0:.1f} s, export+cleanup {t2 - t1:.1f} s; "
          f"{path.name} {os.path.getsize(path) / 1e6:.1f} MB", flush=True)


class _QKerasLike:
    """A graph as a Keras/QKeras export reaches ONNX, built node by node with onnx.helper:
    NHWC input transposed to NCHW, an asymmetric 8-bit input quantizer (zero point 128),
    power-of-two weight and activation scales (QKeras' ``quantized_bits(alpha=1)``),
    "same" padding as ``auto_pad=SAME_UPPER`` (odd total: one pixel more at the bottom
    and right), two branches of different scales joined by Concat and read by a depthwise
    convolution (so the scales stay per channel), an asymmetric 4-bit activation (zero
    point 6) before a 1x1 convolution, MaxPool, and a Transpose back to NHWC before
    Reshape and the dense classifier. Weights are random (He), biases small; the
    BatchNorm statistics are the digits' own (each BatchNormalization's mean and variance
    measured on the training digits by qonnx, in order)."""

    name = "qkeras_cnn"
    side = 16

    def __init__(self, rng):
        self.rng, self.nodes, self.inits, self.count = rng, [], [], 0
        self.bns = []

    def _name(self, base):
        self.count += 1
        return f"{base}_{self.count}"

    def const(self, value):
        name = self._name("c")
        self.inits.append(onnx_numpy(np.asarray(value, np.float32), name))
        return name

    def node(self, op, inputs, domain="", **attrs):
        from onnx import helper
        out = self._name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=self._name(op),
                                           domain=domain, **attrs))
        return out

    def quant(self, x, scale, bits, signed, zero=0.0, narrow=False):
        return self.node("Quant", [x, self.const(scale), self.const(zero), self.const(bits)],
                         domain="qonnx.custom_op.general", signed=int(signed),
                         narrow=int(narrow), rounding_mode="ROUND")

    def conv(self, x, cin, cout, k, stride=1, group=1, bias=True, **pad):
        fan_in = (cin // group) * k * k
        w = self.rng.normal(0, np.sqrt(2 / fan_in), (cout, cin // group, k, k))
        wq = self.quant(self.const(w), 2.0 ** -2, 4, True, narrow=True)
        inputs = [x, wq] + ([self.const(self.rng.normal(0, 0.05, cout))] if bias else [])
        return self.node("Conv", inputs, kernel_shape=[k, k], strides=[stride, stride],
                         group=group, **pad)

    def bn(self, x, c):
        gamma = self.const(self.rng.uniform(0.5, 1.5, c))
        beta = self.const(self.rng.normal(0, 0.1, c))
        mean, var = self.const(np.zeros(c)), self.const(np.ones(c))
        self.bns.append((x, mean, var))
        return self.node("BatchNormalization", [x, gamma, beta, mean, var], epsilon=1e-3)

    def model(self):
        from onnx import TensorProto, helper
        x = self.node("Sub", ["input", self.const(0.5)])
        x = self.quant(x, 1 / 256, 8, False, zero=128.0)
        x = self.node("Transpose", [x], perm=[0, 3, 1, 2])
        x = self.conv(x, 1, 8, 3, stride=2, auto_pad="SAME_UPPER")
        a1 = self.quant(self.node("Relu", [self.bn(x, 8)]), 2.0 ** -2, 4, False)
        a = self.quant(self.node("Relu", [self.conv(a1, 8, 4, 1)]), 2.0 ** -2, 4, False)
        b = self.quant(self.node("Relu", [self.conv(a1, 8, 4, 3, auto_pad="SAME_UPPER")]),
                       2.0 ** -3, 4, False)
        x = self.node("Concat", [a, b], axis=1)
        x = self.conv(x, 8, 8, 3, group=8, bias=False, pads=[1, 1, 1, 1])
        x = self.quant(self.bn(x, 8), 2.0 ** -2, 4, False, zero=6.0)
        x = self.quant(self.node("Relu", [self.conv(x, 8, 8, 1)]), 2.0 ** -2, 4, False)
        x = self.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
        x = self.node("Transpose", [x], perm=[0, 2, 3, 1])
        x = self.node("Reshape", [x, self._shape_const()])
        w = self.quant(self.const(self.rng.normal(0, 0.1, (128, 10))), 2.0 ** -4, 4, True,
                       narrow=True)
        x = self.node("Add", [self.node("MatMul", [x, w]),
                              self.const(self.rng.normal(0, 0.05, 10))])
        inp = helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                            [1, self.side, self.side, 1])
        out = helper.make_tensor_value_info(x, TensorProto.FLOAT, None)
        graph = helper.make_graph(self.nodes, "qkeras_cnn", [inp], [out], self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])

    def _shape_const(self):
        name = self._name("shape")
        self.inits.append(onnx_numpy(np.array([-1, 128], np.int64), name))
        return name

    def calibrate(self, model, x):
        """Each BatchNormalization's mean and variance set to its input's statistics on
        ``x``, in graph order (a later layer sees the earlier ones calibrated)."""
        import onnx
        from qonnx.core.modelwrapper import ModelWrapper
        from qonnx.core.onnx_exec import execute_onnx
        from qonnx.transformation.infer_shapes import InferShapes
        for tensor, mean, var in self.bns:
            batch = onnx.ModelProto()
            batch.CopyFrom(model)
            batch.graph.input[0].type.tensor_type.shape.dim[0].dim_value = len(x)
            wrapper = ModelWrapper(batch).transform(InferShapes())
            ctx = execute_onnx(wrapper, {"input": x}, return_full_exec_context=True)
            acts = np.asarray(ctx[tensor], np.float64)
            for init in model.graph.initializer:
                if init.name in (mean, var):
                    stat = acts.mean(axis=(0, 2, 3)) if init.name == mean else \
                        acts.var(axis=(0, 2, 3))
                    init.CopyFrom(onnx_numpy(stat.astype(np.float32), init.name))
        return model


def onnx_numpy(value, name):
    import onnx
    return onnx.numpy_helper.from_array(value, name)


def make_qkeras_like(out: Path) -> None:
    """The QKeras-like graph (no training: random weights, BatchNorm calibrated)."""
    import onnx
    print(f"{_QKerasLike.name}:", flush=True)
    x_train, _, x_test, _ = digits(_QKerasLike.side, 1)
    to_nhwc = (lambda a: np.ascontiguousarray(np.transpose(a, (0, 2, 3, 1))))
    builder = _QKerasLike(np.random.default_rng(SEED))
    model = builder.calibrate(builder.model(), to_nhwc(x_train[:400]))
    path = out / f"{_QKerasLike.name}.onnx"
    onnx.save(model, str(path))
    np.save(out / f"{_QKerasLike.name}_inputs.npy", to_nhwc(x_test))
    print(f"  {path.name} {os.path.getsize(path) / 1e3:.1f} kB", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(NETS) + [_QKerasLike.name], action="append",
                        help="make only this network (repeatable)")
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: here)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only or list(NETS) + [_QKerasLike.name]:
        if name == _QKerasLike.name:
            make_qkeras_like(args.out)
        else:
            make(NETS[name], args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
