"""Outputs of any rank (a segmentation map [1, 2, 8, 8], or [1, 8, 8, 2] channels-last):
``Network.execute`` gives the model's own output shape and layout, exact against qonnx."""

import numpy as np
import pytest

from qloom.nn.check import compare_with_qonnx
from qloom.nn.load import load

from foreign_models import segmentation_inputs, segmentation_net


@pytest.mark.parametrize("nhwc", [False, True])
@pytest.mark.parametrize("quantized", [False, True])
def test_image_output_is_exact_in_the_models_layout(nhwc, quantized):
    model = segmentation_net(nhwc, quantized)
    net = load(model)
    shape = (1, 8, 8, 2) if nhwc else (1, 2, 8, 8)
    assert net.output_shape == shape and net.shape_of(net.output) == (8, 8, 2)
    x = segmentation_inputs(30)
    assert net.execute(x).shape == (30, *shape[1:])
    report = compare_with_qonnx(model, net, x)
    assert report.ok and not report.mismatches and report.identical_outputs == 30, \
        report.summary()


def test_outputs_from_hardware_values_of_any_rank():
    net = load(segmentation_net(nhwc_output=True))
    x = segmentation_inputs(4)
    y_int = net.execute_int(net.quantize(x))
    flat = y_int.reshape(4, -1)         # as a stream of elements comes off the hardware
    np.testing.assert_array_equal(net.outputs(flat), net.execute(x))
