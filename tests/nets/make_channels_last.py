"""Make the channels-last test networks in this folder: small brevitas CNNs exported to
QONNX, cleaned, then rewritten by qonnx's ``ConvertToChannelsLastAndClean`` (Conv, MaxPool
and BatchNormalization in the ``qonnx.custom_op.channels_last`` domain), the way models
arrive from converters that work channels-last.

    .venv/bin/python tests/nets/make_channels_last.py [--out DIR]

Needs the ``train`` extra (torch, brevitas, onnxoptimizer). Writes

- ``channels_last_cnn.onnx``: ``make_input_channels_last=True``, input ``[N, 16, 16, 3]``;
- ``channels_last_cnn_nchw.onnx``: the same network with the default
  ``make_input_channels_last=False``: input ``[N, 3, 16, 16]``, a Transpose before the
  input quantizer.

The network (untrained: seeded weights, BatchNorm statistics drawn at random so that the
thresholds differ per channel): 8-bit input quantizer; 3x3 conv 3->8 with padding, BN,
4-bit ReLU; 2x2 MaxPool; 3x3 depthwise conv with stride 2 and padding, BN, 4-bit ReLU; 1x1
conv 8->16 with a bias, BN, 4-bit ReLU; flatten; dense 256->10 with a bias. 4-bit weights.
"""

from __future__ import annotations

import argparse
import tempfile
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _net():
    import torch
    import brevitas.nn as qnn

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q = qnn.QuantIdentity(bit_width=8, return_quant_tensor=True)
            self.c1 = qnn.QuantConv2d(3, 8, 3, padding=1, weight_bit_width=4, bias=False)
            self.bn1 = torch.nn.BatchNorm2d(8)
            self.r1 = qnn.QuantReLU(bit_width=4, return_quant_tensor=True)
            self.pool = torch.nn.MaxPool2d(2)
            self.dw = qnn.QuantConv2d(8, 8, 3, stride=2, groups=8, padding=1,
                                      weight_bit_width=4, bias=False)
            self.bn2 = torch.nn.BatchNorm2d(8)
            self.r2 = qnn.QuantReLU(bit_width=4, return_quant_tensor=True)
            self.pw = qnn.QuantConv2d(8, 16, 1, weight_bit_width=4, bias=True)
            self.bn3 = torch.nn.BatchNorm2d(16)
            self.r3 = qnn.QuantReLU(bit_width=4, return_quant_tensor=True)
            self.fc = qnn.QuantLinear(16 * 4 * 4, 10, weight_bit_width=4, bias=True)

        def forward(self, x):
            x = self.pool(self.r1(self.bn1(self.c1(self.q(x)))))
            x = self.r2(self.bn2(self.dw(x)))
            x = self.r3(self.bn3(self.pw(x)))
            return self.fc(torch.flatten(x, 1))

    torch.manual_seed(0)
    net = Net()
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.data.uniform_(-1, 1)
            m.running_var.data.uniform_(0.5, 2)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.5, 0.5)
    return net.eval()


def make(out: Path) -> list[Path]:
    import torch
    from brevitas.export import export_qonnx
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean
    from qonnx.util.cleanup import cleanup_model

    torch.set_num_threads(1)
    net = _net()
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = Path(tmp) / "raw.onnx"
        export_qonnx(net, torch.zeros(1, 3, 16, 16), str(raw), dynamo=False)
        clean = cleanup_model(ModelWrapper(str(raw)))
        made = []
        for name, input_last in (("channels_last_cnn", True),
                                 ("channels_last_cnn_nchw", False)):
            model = clean.transform(ConvertToChannelsLastAndClean(
                make_input_channels_last=input_last))
            path = out / f"{name}.onnx"
            cleanup_model(model).save(str(path))
            made.append(path)
    return made


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE)
    for p in make(parser.parse_args().out):
        print(p)
