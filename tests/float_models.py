"""Small float ONNX models of the kinds hls4ml users convert (Keras and PyTorch shapes),
built with onnx.helper, for the precision tests (``qloom.nn.quantize``)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class FloatBuilder:
    """``h = b.dense(b.input([1, 16]), 32)``: a float graph, layer by layer."""

    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.inputs, self.count = [], [], [], 0

    def name(self, base):
        self.count += 1
        return f"{base}_{self.count}"

    def const(self, value, base="c"):
        n = self.name(base)
        value = np.asarray(value)
        value = value if value.dtype in (np.int64, np.bool_) else value.astype(np.float32)
        self.inits.append(numpy_helper.from_array(value, n))
        return n

    def input(self, shape, name="x"):
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
        self.shape = list(shape)
        return name

    def node(self, op, inputs, name=None, **attrs):
        name = name or self.name(op.lower())
        out = f"{name}_out"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def weights(self, *shape, fan_in):
        return self.rng.normal(0, 1 / np.sqrt(fan_in), shape).astype(np.float32)

    def gemm(self, x, k, n, name=None):
        """A Keras/PyTorch Dense: Gemm with transB (PyTorch's layout)."""
        w = self.const(self.weights(n, k, fan_in=k), "w")
        b = self.const(self.rng.normal(0, 0.1, n), "b")
        return self.node("Gemm", [x, w, b], name=name, transB=1)

    def matmul_add(self, x, k, n, name=None):
        """tf2onnx's Dense: MatMul then Add."""
        w = self.const(self.weights(k, n, fan_in=k), "w")
        y = self.node("MatMul", [x, w], name=name)
        return self.node("Add", [y, self.const(self.rng.normal(0, 0.1, n), "b")])

    def conv(self, x, cin, cout, k, name=None, pads=None, bias=True):
        w = self.const(self.weights(cout, cin, *k, fan_in=cin * int(np.prod(k))), "w")
        inputs = [x, w] + ([self.const(self.rng.normal(0, 0.1, cout), "b")] if bias else [])
        return self.node("Conv", inputs, name=name, kernel_shape=list(k),
                         pads=pads or [0] * (2 * len(k)))

    def batchnorm(self, x, c, name=None):
        r = self.rng
        return self.node("BatchNormalization",
                         [x, self.const(r.uniform(0.5, 1.5, c)), self.const(r.normal(0, .1, c)),
                          self.const(r.normal(0, .2, c)), self.const(r.uniform(0.5, 2, c))],
                         name=name, epsilon=1e-3)

    def model(self, output, out_shape, opset=13):
        out = helper.make_tensor_value_info(output, TensorProto.FLOAT, out_shape)
        graph = helper.make_graph(self.nodes, "float_test", self.inputs, [out], self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def mlp(dims=(16, 64, 32, 32, 5), *, softmax=True, seed=0, batch=1):
    b = FloatBuilder(seed)
    h = b.input([batch, dims[0]])
    for i in range(len(dims) - 1):
        h = b.gemm(h, dims[i], dims[i + 1], name=f"dense_{i}")
        if i < len(dims) - 2:
            h = b.node("Relu", [h], name=f"relu_{i}")
    if softmax:
        h = b.node("Softmax", [h], name="softmax", axis=-1)
    return b.model(h, [batch, dims[-1]])


def mlp_batchnorm(seed=1):
    """Dense -> BatchNorm -> ReLU (Keras), and a BatchNorm of the input before a Dense."""
    b = FloatBuilder(seed)
    h = b.input([1, 12])
    h = b.batchnorm(h, 12, name="bn_in")
    h = b.matmul_add(h, 12, 24, name="dense_1")
    h = b.batchnorm(h, 24, name="bn_1")
    h = b.node("Relu", [h], name="relu_1")
    h = b.gemm(h, 24, 6, name="dense_2")
    return b.model(h, [1, 6])


def keras_conv2d(seed=2):
    """Keras NHWC: Transpose to NCHW, Conv, ReLU, MaxPool, AveragePool, Transpose back,
    Flatten, Dense."""
    b = FloatBuilder(seed)
    h = b.input([1, 8, 8, 3])
    h = b.node("Transpose", [h], perm=[0, 3, 1, 2])
    h = b.conv(h, 3, 8, (3, 3), name="conv_1", pads=[1, 1, 1, 1])
    h = b.node("Relu", [h], name="relu_1")
    h = b.node("MaxPool", [h], name="pool_1", kernel_shape=[2, 2], strides=[2, 2])
    h = b.conv(h, 8, 8, (3, 3), name="conv_2")
    h = b.batchnorm(h, 8, name="bn_2")
    h = b.node("Relu", [h], name="relu_2")
    h = b.node("Transpose", [h], perm=[0, 2, 3, 1])
    h = b.node("Flatten", [h], name="flatten")
    h = b.gemm(h, 2 * 2 * 8, 4, name="dense")
    return b.model(h, [1, 4])


def pool_and_shapes(seed=3):
    """AveragePool, Identity, Reshape, Squeeze/Unsqueeze between quantized layers."""
    b = FloatBuilder(seed)
    h = b.input([1, 4, 6, 6])
    h = b.conv(h, 4, 6, (3, 3), name="conv_1", pads=[1, 1, 1, 1])
    h = b.node("Relu", [h], name="relu_1")
    h = b.node("AveragePool", [h], name="avg_1", kernel_shape=[2, 2], strides=[2, 2])
    h = b.node("Identity", [h], name="identity")
    h = b.node("Reshape", [h, b.const(np.array([1, 54], np.int64))], name="reshape")
    h = b.matmul_add(h, 54, 5, name="dense")
    return b.model(h, [1, 5])


def global_pool_squeeze(seed=6):
    """PyTorch's head: Conv, ReLU, GlobalAveragePool, Squeeze, Unsqueeze, Squeeze, Dense."""
    b = FloatBuilder(seed)
    h = b.input([1, 3, 6, 6])
    h = b.conv(h, 3, 8, (3, 3), name="conv_1")
    h = b.node("Relu", [h], name="relu_1")
    h = b.node("GlobalAveragePool", [h], name="gap")
    h = b.node("Squeeze", [h, b.const(np.array([3], np.int64))], name="squeeze_1")
    h = b.node("Unsqueeze", [h, b.const(np.array([3], np.int64))], name="unsqueeze")
    h = b.node("Squeeze", [h, b.const(np.array([2, 3], np.int64))], name="squeeze_2")
    h = b.gemm(h, 8, 4, name="dense")
    return b.model(h, [1, 4])


def old_opset_mlp(seed=4):
    """An opset-6 export (old tf2onnx/Keras): Gemm, Relu, Softmax."""
    m = mlp((10, 16, 4), seed=seed)
    m.opset_import[0].version = 6
    for n in m.graph.node:      # opset 6's Softmax has no axis -1
        if n.op_type == "Softmax":
            del n.attribute[:]
    return m


def fixed_batch_mlp(batch=789_444, seed=5):
    """A PyTorch export traced with a fixed batch."""
    return mlp((16, 12, 3), softmax=False, seed=seed, batch=batch)


def activations_mlp(seed=7):
    """Dense layers into Sigmoid, Tanh, Elu, Selu and LeakyRelu (hls4ml's table
    activations), a Softmax output."""
    b = FloatBuilder(seed)
    h = b.input([1, 10])
    for i, (op, attrs) in enumerate([("Sigmoid", {}), ("Tanh", {}), ("Elu", {"alpha": 1.0}),
                                     ("Selu", {}), ("LeakyRelu", {"alpha": 0.1})]):
        h = b.gemm(h, 10, 10, name=f"dense_{i}")
        h = b.node(op, [h], name=f"{op.lower()}_{i}", **attrs)
    h = b.gemm(h, 10, 5, name="dense_out")
    h = b.node("Softmax", [h], name="softmax", axis=-1)
    return b.model(h, [1, 5])


def keras_conv1d(seed=8):
    """Keras Conv1D: NWC input, Transpose to NCW, Conv (3-D weights), ReLU, AveragePool,
    Transpose back, Flatten, Dense."""
    b = FloatBuilder(seed)
    h = b.input([1, 16, 3])
    h = b.node("Transpose", [h], perm=[0, 2, 1])
    h = b.conv(h, 3, 6, (3,), name="conv1d_1", pads=[1, 1])
    h = b.node("Relu", [h], name="relu_1")
    h = b.node("AveragePool", [h], name="pool_1", kernel_shape=[2], strides=[2])
    h = b.conv(h, 6, 4, (3,), name="conv1d_2")
    h = b.node("Relu", [h], name="relu_2")
    h = b.node("Transpose", [h], perm=[0, 2, 1])
    h = b.node("Flatten", [h], name="flatten")
    h = b.gemm(h, 6 * 4, 4, name="dense")
    return b.model(h, [1, 4])


def torch_cnn(path, batch=4, seed=9):
    """A PyTorch CNN (Conv2d, BatchNorm2d, ReLU, MaxPool2d, Flatten, Linear) exported with
    torch.onnx.export, traced with a fixed batch; None without torch."""
    try:
        import torch
    except ImportError:
        return None
    torch.manual_seed(seed)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(8 * 2 * 2, 10), torch.nn.ReLU(), torch.nn.Linear(10, 5))
    with torch.no_grad():      # a trained-looking BatchNorm
        bn = net[1]
        bn.running_mean.uniform_(-0.2, 0.2)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.uniform_(0.5, 1.5)
    net.eval()
    torch.onnx.export(net, torch.randn(batch, 3, 8, 8), str(path), opset_version=13,
                      dynamo=False, input_names=["x"], output_names=["y"])
    return onnx.load(str(path))


def matmul_add_mlp(seed=10):
    """tf2onnx's Keras Dense layers: MatMul + Add, ReLU, MatMul + Add."""
    b = FloatBuilder(seed)
    h = b.input([1, 16])
    h = b.matmul_add(h, 16, 24, name="dense_1")
    h = b.node("Relu", [h], name="relu_1")
    h = b.matmul_add(h, 24, 5, name="dense_2")
    return b.model(h, [1, 5])


def conv_flatten(seed=11):
    """PyTorch's NCHW Conv2d, ReLU, Flatten, Linear (no Transpose)."""
    b = FloatBuilder(seed)
    h = b.input([1, 2, 6, 6])
    h = b.conv(h, 2, 4, (3, 3), name="conv_1")
    h = b.node("Relu", [h], name="relu_1")
    h = b.node("Flatten", [h], name="flatten")
    h = b.gemm(h, 4 * 4 * 4, 5, name="dense")
    return b.model(h, [1, 5])


def keras_conv1d_maxpool(seed=12, opset=13):
    """Keras Conv1D, MaxPooling1D, Flatten, Dense, Softmax: NWC input, the Transpose pair
    around the convolutions, a 1-D MaxPool between them."""
    b = FloatBuilder(seed)
    h = b.input([1, 16, 3])
    h = b.node("Transpose", [h], perm=[0, 2, 1])
    h = b.conv(h, 3, 6, (3,), name="conv1d_1", pads=[1, 1])
    h = b.node("Relu", [h], name="relu_1")
    h = b.node("MaxPool", [h], name="max_pooling1d", kernel_shape=[2], strides=[2])
    h = b.conv(h, 6, 4, (3,), name="conv1d_2")
    h = b.node("Relu", [h], name="relu_2")
    h = b.node("Transpose", [h], perm=[0, 2, 1])
    h = b.node("Flatten", [h], name="flatten")
    h = b.gemm(h, 6 * 4, 4, name="dense")
    h = b.node("Softmax", [h], name="softmax", axis=-1)
    return b.model(h, [1, 4], opset)


def keras_maxpool_same(size=5, seed=14):
    """Keras Conv2D then MaxPooling2D(padding="same") as tf2onnx writes it: auto_pad
    SAME_UPPER, which pads the bottom and right of an odd-sized image."""
    b = FloatBuilder(seed)
    h = b.input([1, size, size, 3])
    h = b.node("Transpose", [h], perm=[0, 3, 1, 2])
    h = b.conv(h, 3, 4, (3, 3), name="conv2d", pads=[1, 1, 1, 1])
    h = b.node("Relu", [h], name="relu")
    h = b.node("MaxPool", [h], name="max_pooling2d", kernel_shape=[2, 2], strides=[2, 2],
               auto_pad="SAME_UPPER")
    h = b.node("Transpose", [h], perm=[0, 2, 3, 1])
    h = b.node("Flatten", [h], name="flatten")
    out = -(-size // 2)
    h = b.gemm(h, out * out * 4, 3, name="dense")
    return b.model(h, [1, 3])


def keras_global_average(keepdims=0, opset=13, seed=15):
    """Keras Conv2D then GlobalAveragePooling2D as tf2onnx writes it: a ReduceMean over
    the NHWC image axes after the closing Transpose (``axes`` an input from opset 18)."""
    b = FloatBuilder(seed)
    h = b.input([1, 6, 6, 3])
    h = b.node("Transpose", [h], perm=[0, 3, 1, 2])
    h = b.conv(h, 3, 8, (3, 3), name="conv2d")
    h = b.node("Relu", [h], name="relu")
    h = b.node("Transpose", [h], perm=[0, 2, 3, 1])
    if opset >= 18:
        h = b.node("ReduceMean", [h, b.const(np.array([1, 2], np.int64))],
                   name="global_average_pooling2d", keepdims=keepdims)
    else:
        h = b.node("ReduceMean", [h], name="global_average_pooling2d", axes=[1, 2],
                   keepdims=keepdims)
    if keepdims:
        h = b.node("Flatten", [h], name="flatten")
    h = b.gemm(h, 8, 4, name="dense")
    h = b.node("Softmax", [h], name="softmax", axis=-1)
    return b.model(h, [1, 4], opset)


def keras_dropout_mlp(opset=13, training=None, seed=23):
    """Keras Dense, BatchNormalization, ELU, Dropout(0.3), Dense, Softmax at ``opset``:
    before opset 12 the Dropout has a ``ratio`` attribute, from 12 a ratio input (and
    ``training``, when given, a constant training_mode input)."""
    b = FloatBuilder(seed)
    h = b.input([1, 10])
    h = b.matmul_add(h, 10, 16, name="dense_1")
    h = b.batchnorm(h, 16, name="batch_normalization")
    h = b.node("Elu", [h], name="elu")
    if opset < 12:
        h = b.node("Dropout", [h], name="dropout", ratio=0.3)
    else:
        inputs = [h, b.const(np.array(0.3, np.float32))]
        if training is not None:
            inputs.append(b.const(np.array(training, np.bool_)))
        h = b.node("Dropout", inputs, name="dropout")
    h = b.matmul_add(h, 16, 4, name="dense_2")
    h = b.node("Softmax", [h], name="softmax", axis=1 if opset < 13 else -1)
    return b.model(h, [1, 4], opset)


TABLE_ACTIVATIONS = {"LeakyRelu": {"alpha": 0.3}, "Sigmoid": {}, "Tanh": {},
                     "Elu": {"alpha": 1.0}, "Selu": {}}


def activation_mlp(op, seed=13):
    """Dense, one activation ``op`` (computed by a table), Dense: the activation between
    two layers, where hls4ml puts it."""
    b = FloatBuilder(seed)
    h = b.input([1, 8])
    h = b.gemm(h, 8, 12, name="dense_1")
    h = b.node(op, [h], name=op.lower(), **TABLE_ACTIVATIONS[op])
    h = b.gemm(h, 12, 4, name="dense_2")
    return b.model(h, [1, 4])


def softmax_mlp():
    """Gemm, ReLU, Gemm, ReLU, Gemm, Softmax: the classifier head whose Softmax runs on
    the host."""
    return mlp((16, 12, 8, 5))


# The op classes of issue 52 ("What to build", point 3), each with the model that tests it
# at fixed<16,6> (tests/flows/test_float_models.py: quantized.onnx exact, argmax against
# the float model, RTL). ``op_classes`` checks that each model holds its class; Conv1D and
# Conv2D are Keras' channels-last layers, inside their Transpose pairs.
OP_CLASSES = {
    "MatMul+Add": "matmul_add_mlp",
    "Gemm": "softmax_mlp",
    "Conv1D": "keras_conv1d",
    "Conv2D": "keras_conv2d",
    "BatchNormalization": "mlp_batchnorm",
    "Flatten": "conv_flatten",
    "Reshape": "pool_and_shapes",
    "Identity": "pool_and_shapes",
    "Squeeze/Unsqueeze": "global_pool_squeeze",
    "MaxPool1D": "keras_conv1d_maxpool",
    "MaxPool2D": "keras_conv2d",
    "AveragePool1D": "keras_conv1d",
    "AveragePool2D": "pool_and_shapes",
    "Relu": "matmul_add_mlp",
    "LeakyRelu": "activation_mlp:LeakyRelu",
    "Sigmoid": "activation_mlp:Sigmoid",
    "Tanh": "activation_mlp:Tanh",
    "Elu": "activation_mlp:Elu",
    "Selu": "activation_mlp:Selu",
    "Softmax": "softmax_mlp",
}


def op_class_model(name: str):
    """The model ``OP_CLASSES`` names: ``"keras_conv1d"`` or ``"activation_mlp:Tanh"``."""
    func, _, arg = name.partition(":")
    return globals()[func](*([arg] if arg else []))


def op_classes(model) -> set[str]:
    """The ``OP_CLASSES`` keys a float model holds, read from its graph."""
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    consumers = {}
    for n in model.graph.node:
        for t in n.input:
            consumers.setdefault(t, []).append(n)
    ops = {n.op_type for n in model.graph.node}
    perms = {tuple(helper.get_attribute_value(a)) for n in model.graph.node
             if n.op_type == "Transpose" for a in n.attribute if a.name == "perm"}
    found = {op for op in ("Gemm", "BatchNormalization", "Flatten", "Reshape", "Identity",
                           "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Elu", "Selu", "Softmax")
             if op in ops}
    if {"Squeeze", "Unsqueeze"} <= ops:
        found.add("Squeeze/Unsqueeze")
    for n in model.graph.node:
        if n.op_type == "MatMul" and any(
                c.op_type == "Add" and any(t in inits for t in c.input)
                for c in consumers.get(n.output[0], [])):
            found.add("MatMul+Add")
        if n.op_type == "Conv" and n.input[1] in inits:
            rank = inits[n.input[1]].ndim
            if rank == 3 and (0, 2, 1) in perms:
                found.add("Conv1D")
            if rank == 4 and {(0, 3, 1, 2), (0, 2, 3, 1)} <= perms:
                found.add("Conv2D")
        if n.op_type in ("MaxPool", "AveragePool"):
            kernel = next(helper.get_attribute_value(a) for a in n.attribute
                          if a.name == "kernel_shape")
            found.add(f"{n.op_type}{len(kernel)}D")
    return found


def torch_cnn_pools(path, opset=13, seed=3):
    """A PyTorch CNN exported at ``opset``: Conv2d, BatchNorm2d, LeakyReLU, a padded
    MaxPool2d(3, 2, padding=1), Conv2d, Tanh, AvgPool2d, Flatten, Linear, ReLU, Linear,
    Softmax, traced with a batch of 2; None without torch."""
    try:
        import torch
    except ImportError:
        return None
    n = torch.nn
    torch.manual_seed(seed)
    net = n.Sequential(
        n.Conv2d(3, 8, 3, padding=1), n.BatchNorm2d(8), n.LeakyReLU(0.1),
        n.MaxPool2d(3, 2, padding=1), n.Conv2d(8, 8, 3, padding=1), n.Tanh(), n.AvgPool2d(2),
        n.Flatten(), n.Linear(8 * 2 * 2, 10), n.ReLU(), n.Linear(10, 5), n.Softmax(dim=1))
    with torch.no_grad():      # a trained-looking BatchNorm
        bn = net[1]
        bn.running_mean.uniform_(-0.2, 0.2)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.uniform_(0.5, 1.5)
    return _export(net, (2, 3, 8, 8), path, opset)


def torch_cnn1d(path, opset=13, seed=4):
    """A PyTorch 1-D CNN exported at ``opset``: Conv1d, BatchNorm1d, ReLU, MaxPool1d,
    Conv1d, ELU, AvgPool1d, Flatten, Linear, SELU, Linear, Sigmoid; None without torch."""
    try:
        import torch
    except ImportError:
        return None
    n = torch.nn
    torch.manual_seed(seed)
    net = n.Sequential(
        n.Conv1d(2, 6, 3, padding=1), n.BatchNorm1d(6), n.ReLU(), n.MaxPool1d(2),
        n.Conv1d(6, 6, 3), n.ELU(), n.AvgPool1d(2), n.Flatten(), n.Linear(6 * 3, 5), n.SELU(),
        n.Linear(5, 4), n.Sigmoid())
    return _export(net, (1, 2, 16), path, opset)


def _export(net, shape, path, opset):
    import torch
    net.eval()
    torch.onnx.export(net, torch.randn(*shape), str(path), opset_version=opset, dynamo=False,
                      input_names=["x"], output_names=["y"])
    return onnx.load(str(path))


def torch_mean_head(path, opset=13, seed=5):
    """PyTorch's pooling head written by hand: Conv2d, ReLU, ``x.mean((2, 3),
    keepdim=True)`` (a ReduceMean), squeezes and an unsqueeze, Linear, Softmax; None
    without torch."""
    try:
        import torch
    except ImportError:
        return None

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.fc = torch.nn.Conv2d(2, 6, 3), torch.nn.Linear(6, 4)

        def forward(self, x):
            h = torch.relu(self.conv(x)).mean(dim=(2, 3), keepdim=True)
            h = h.squeeze(3).squeeze(2).unsqueeze(1).squeeze(1)
            return torch.softmax(self.fc(h), dim=-1)
    torch.manual_seed(seed)
    return _export(Head(), (1, 2, 6, 6), path, opset)
