"""A small brevitas network with truncated average pooling, exported to QONNX: input
quantizer, QuantConv2d, QuantReLU, ``TruncAvgPool2d`` 2x2 and a ``TruncAvgPool2d`` over the
whole 3x3 map (AveragePool then Trunc, as brevitas 0.13 exports them). Shared by the
frontend and compiler tests."""

import warnings

import pytest


def brevitas_pool_model(tmp_path, *, global_kernel=3):
    """Export the network; skips the test when brevitas (the train extra) is missing."""
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
