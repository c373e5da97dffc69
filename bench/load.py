"""Seconds to load, to compile and to search ``--fold auto`` for models of realistic image
sizes, written with onnx.helper the way qonnx's ``ConvertToChannelsLastAndClean`` writes
them (Conv, BatchNormalization in the ``qonnx.custom_op.channels_last`` domain,
``[OC, KH, KW, IC]`` weights, NHWC input, a shape for every tensor) or channels-first.

The models: separable CNNs of 40 layers (a 3x3 stem with stride 2, 19 depthwise 3x3 +
pointwise 1x1 blocks, each convolution with BatchNorm, ReLU and a 4-bit quantizer, a
global average pool and a dense classifier), and MobileNet-v1 (28 layers; full width at
224x224 and a quarter of its width at 96x96), 4-bit weights, 8-bit input.

Usage: python bench/load.py [--only NAME] [--no-compile] [--keep DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QONNX = "qonnx.custom_op.general"
CHANNELS_LAST = "qonnx.custom_op.channels_last"
# (stride, output channels) of each separable block
BLOCKS = [(1, 32), (2, 32), (1, 32), (2, 64), (1, 64), (2, 64), (1, 64), (1, 64), (1, 64),
          (1, 64), (1, 64), (2, 128), (1, 128), (1, 128), (1, 128), (1, 128), (1, 128),
          (1, 128), (1, 128)]


class _Builder:
    """Nodes, initializers and the shape of every tensor (as qonnx leaves them)."""

    def __init__(self, channels_last: bool, seed: int):
        self.cl, self.rng = channels_last, np.random.default_rng(seed)
        self.nodes, self.inits, self.shapes, self.count = [], [], {}, 0

    def name(self, base):
        self.count += 1
        return f"{base}_{self.count}"

    def const(self, value):
        n = self.name("param")
        self.inits.append(onnx.numpy_helper.from_array(np.asarray(value, np.float32), n))
        return n

    def node(self, op, inputs, shape, domain="", **attrs):
        out = self.name(op)
        self.nodes.append(helper.make_node(op, inputs, [out], name=self.name(op + "_n"),
                                           domain=domain, **attrs))
        self.shapes[out] = list(shape)
        return out

    def quant(self, x, scale, bits, signed, shape):
        return self.node("Quant", [x, self.const(scale), self.const(0.0), self.const(bits)],
                         shape, domain=QONNX, signed=int(signed), narrow=0,
                         rounding_mode="ROUND")

    def image(self, h, w, c):
        return [1, h, w, c] if self.cl else [1, c, h, w]

    def conv(self, x, hw, cin, cout, k, stride, group):
        """Conv -> BatchNorm -> Relu -> 4-bit Quant; returns the tensor and its side."""
        w = self.rng.normal(0, 1 / np.sqrt(k * k * cin / group), (cout, cin // group, k, k))
        if self.cl:
            w = np.transpose(w, (0, 2, 3, 1))
        wq = self.quant(self.const(w), 1 / 8, 4, True, w.shape)
        out_hw = (hw + 2 * (k // 2) - k) // stride + 1
        shape = self.image(out_hw, out_hw, cout)
        domain = CHANNELS_LAST if self.cl else ""
        y = self.node("Conv", [x, wq], shape, domain=domain, kernel_shape=[k, k],
                      strides=[stride, stride], pads=[k // 2] * 4, dilations=[1, 1],
                      group=group)
        bn = [self.rng.uniform(0.5, 1.5, cout), self.rng.uniform(-0.3, 0.3, cout),
              self.rng.uniform(-0.5, 0.5, cout), self.rng.uniform(0.5, 2.0, cout)]
        y = self.node("BatchNormalization", [y] + [self.const(p) for p in bn], shape,
                      domain=domain, epsilon=1e-5, momentum=0.9)
        y = self.node("Relu", [y], shape)
        return self.quant(y, 1 / 4, 4, False, shape), out_hw


# MobileNet-v1's separable blocks (stride, output channels) after its 32-channel stem
MOBILENET_V1 = [(1, 64), (2, 128), (1, 128), (2, 256), (1, 256), (2, 512), (1, 512),
                (1, 512), (1, 512), (1, 512), (1, 512), (2, 1024), (1, 1024)]


def separable_model(side: int, *, channels_last: bool = True, seed: int = 0,
                    blocks=tuple(BLOCKS), stem: int = 16):
    """A separable CNN on ``side`` x ``side`` x 3 images: the 40-layer one by default,
    MobileNet-v1 (28 layers, 4.2 million weights) with ``blocks=MOBILENET_V1, stem=32``."""
    b = _Builder(channels_last, seed)
    inp = helper.make_tensor_value_info("global_in", TensorProto.FLOAT, b.image(side, side, 3))
    x = b.quant("global_in", 1 / 256, 8, False, b.image(side, side, 3))
    x, hw = b.conv(x, side, 3, stem, 3, 2, 1)
    cin = stem
    for stride, cout in blocks:
        x, hw = b.conv(x, hw, cin, cin, 3, stride, cin)
        x, hw = b.conv(x, hw, cin, cout, 1, 1, 1)
        cin = cout
    if channels_last:       # qonnx leaves the pool channels-first behind a Transpose
        x = b.node("Transpose", [x], [1, cin, hw, hw], perm=[0, 3, 1, 2])
    x = b.node("GlobalAveragePool", [x], [1, cin, 1, 1])
    x = b.quant(x, 1 / 16, 6, False, [1, cin, 1, 1])
    x = b.node("Flatten", [x], [1, cin], axis=1)
    w = b.quant(b.const(b.rng.normal(0, 0.2, (cin, 10))), 1 / 16, 4, True, [cin, 10])
    y = b.node("MatMul", [x, w], [1, 10])
    out = helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 10])
    infos = [helper.make_tensor_value_info(t, TensorProto.FLOAT, s)
             for t, s in b.shapes.items() if t != y]
    graph = helper.make_graph(b.nodes, f"separable{side}", [inp], [out], b.inits,
                              value_info=infos)
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid(QONNX, 1)]
    if channels_last:
        opsets.append(helper.make_opsetid(CHANNELS_LAST, 13))
    return helper.make_model(graph, opset_imports=opsets)


# name: (model, board for the `--fold auto` search or None)
MODELS = {
    "separable512_nhwc": (lambda: separable_model(512), None),
    "separable512_nchw": (lambda: separable_model(512, channels_last=False), None),
    "separable64_nhwc": (lambda: separable_model(64), "ulx3s-85f"),
    "mobilenet_v1_224": (lambda: separable_model(224, blocks=MOBILENET_V1, stem=32),
                         "ulx3s-85f"),
    "mobilenet_v1_025_96": (lambda: separable_model(96, blocks=[(s, c // 4) for s, c in
                                                               MOBILENET_V1], stem=8),
                            "ulx3s-85f"),
}


def _timed(fn):
    """(result or the QloomError raised, wall seconds, CPU seconds of this process)."""
    from qloom.errors import QloomError
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        result = fn()
    except QloomError as e:
        result = e
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(MODELS))
    parser.add_argument("--no-compile", action="store_true",
                        help="time the load (and the --fold auto search) only")
    parser.add_argument("--keep", type=Path, help="write the models and outputs here")
    args = parser.parse_args(argv)
    import qloom
    from qloom.flows.compile.steps import CompileConfig, run_steps
    work = args.keep or Path(tempfile.mkdtemp(prefix="qloom_load_"))
    work.mkdir(parents=True, exist_ok=True)
    print("seconds: wall (CPU of this process; the machine may be shared)")
    print(f"{'model':<20} {'layers':>6} {'load':>13} {'compile':>15} {'fold auto':>15}  "
          f"fold auto result")
    for name, (make, board) in MODELS.items():
        if args.only and name != args.only:
            continue
        path = work / f"{name}.onnx"
        onnx.save(make(), path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            net, load_s, load_cpu = _timed(lambda: qloom.load(path))
            compile_s = auto_s = "-"
            outcome = ""
            if not args.no_compile:
                _, wall, cpu = _timed(lambda: qloom.compile(path, work / f"{name}_out"))
                compile_s = f"{wall:.1f} ({cpu:.1f})"
            if board is not None:
                cfg = CompileConfig(fold="auto", board=board)
                state, wall, cpu = _timed(lambda: run_steps(path, cfg, until="fold"))
                auto_s = f"{wall:.1f} ({cpu:.1f})"
                outcome = (f"{board}: {str(state)[:70]}" if isinstance(state, Exception) else
                           f"{board}: II {state.plan.ideal_ii_cycles:,} cycles")
        layers = sum(l.op in ("Conv", "Dense") for l in net.layers)
        print(f"{name:<20} {layers:>6} {f'{load_s:.1f} ({load_cpu:.1f})':>13} "
              f"{compile_s:>15} {auto_s:>15}  {outcome}", flush=True)


if __name__ == "__main__":
    main()
