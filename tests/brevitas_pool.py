"""A small brevitas network with truncated average pooling, exported to QONNX: input
quantizer, QuantConv2d, QuantReLU, ``TruncAvgPool2d`` 2x2 and a ``TruncAvgPool2d`` over the
whole 3x3 map (AveragePool then Trunc, as brevitas 0.13 exports them). Shared by the
frontend and compiler tests.

The export is committed as ``tests/nets/trunc_avgpool.onnx`` (brevitas is only in the
``train`` extra, which ``make test`` does not install, and CI must skip nothing);
``python tests/brevitas_pool.py`` makes it again."""

import shutil
import sys
import warnings
from pathlib import Path

import pytest

COMMITTED = Path(__file__).resolve().parent / "nets" / "trunc_avgpool.onnx"


def brevitas_pool_model(tmp_path, *, global_kernel=3):
    """The committed export (for the default network), else a fresh export; skips the
    test when that needs brevitas and it is missing."""
    if global_kernel == 3 and COMMITTED.is_file():
        return Path(shutil.copy(COMMITTED, Path(tmp_path) / COMMITTED.name))
    return export(tmp_path, global_kernel=global_kernel)


def export(tmp_path, *, global_kernel=3):
    """Export the network with brevitas (the train extra)."""
    torch = pytest.importorskip("torch")
    qnn = pytest.importorskip("brevitas.nn")
    pytest.importorskip("onnxoptimizer")
    from brevitas.export import export_qonnx

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q = qnn.QuantIdentity(bit_width=4, return_quant_tensor=True)
            self.conv = qnn.QuantConv2d(2, 4, 3, weight_bit_width=4, return_quant_tensor=True)
            self.relu = qnn.QuantReLU(bit_width=4, return_quant_tensor=True)
            self.pool = qnn.TruncAvgPool2d(kernel_size=2, stride=2)
            self.gpool = qnn.TruncAvgPool2d(kernel_size=global_kernel,
                                            return_quant_tensor=False)

        def forward(self, x):
            return self.gpool(self.pool(self.relu(self.conv(self.q(x)))))

    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(1, 2, 8, 8)
    path = tmp_path / "trunc_avgpool.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export_qonnx(net, x, str(path), dynamo=False)
    return path


if __name__ == "__main__":
    made = export(Path(sys.argv[1]) if len(sys.argv) > 1 else COMMITTED.parent)
    if made != COMMITTED:
        shutil.copy(made, COMMITTED)
    print(f"wrote {COMMITTED}")
