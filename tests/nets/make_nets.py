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
    side: int             # input images are side x side
    channels: int         # grey digits repeated over this many channels
    epochs: int
    batch: int
    lr: float


def _cnv(weight_bits: int, act_bits: int):
    from brevitas_examples.bnn_pynq.models.CNV import CNV
    return CNV(num_classes=10, weight_bit_width=weight_bits, act_bit_width=act_bits,
               in_bit_width=8, in_ch=3)


def _lfc():
    from brevitas_examples.bnn_pynq.models.FC import FC
    return FC(num_classes=10, weight_bit_width=1, act_bit_width=1, in_bit_width=1,
              in_channels=1, out_features=[1024, 1024, 1024], in_features=(28, 28))


NETS = {spec.name: spec for spec in [
    # FINN's CNV: 6 3x3 convolutions (64, 64, 128, 128, 256, 256), 2 max pools, 3 dense layers
    NetSpec("cnv_w1a1", lambda: _cnv(1, 1), side=32, channels=3, epochs=3, batch=64, lr=5e-3),
    NetSpec("cnv_w2a2", lambda: _cnv(2, 2), side=32, channels=3, epochs=3, batch=64, lr=5e-3),
    # FINN's LFC: 784 binarized inputs, 3 x 1024 hidden, 10 outputs, all bipolar
    NetSpec("lfc_w1a1", _lfc, side=28, channels=1, epochs=4, batch=64, lr=5e-3),
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
    images = F.interpolate(images, size=(side, side), mode="bilinear", align_corners=False)
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(NETS), action="append",
                        help="make only this network (repeatable)")
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: here)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only or NETS:
        make(NETS[name], args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
