"""Seeded mutations of real QONNX models, for the fuzz test (tests/nn/test_fuzz.py).

``mutant(model_bytes, seed)`` returns ``(description, bytes)``: the model with one or two
hostile but plausible edits (what a user's broken export or a hand edit produces), chosen
and parameterized by ``random.Random(seed)`` alone, so a failing case is reproduced from
its seed. Mutations that need something the model lacks fall back to another kind.
"""

from __future__ import annotations

import random

import numpy as np
import onnx
from onnx import helper, numpy_helper

__all__ = ["mutant", "KINDS", "raw_mutant"]

_OPS = ["Sub", "Add", "Mul", "Relu", "Sin", "Trunc", "Quant", "BipolarQuant", "MatMul",
        "Conv", "MaxPool", "Identity", "Flatten", "Sigmoid", "MultiThreshold", "Concat",
        "Transpose", "BANANA"]
_OP_SWAPS = {"MatMul": ["Sub", "Add", "Mul", "Conv", "Gemm"], "Quant": ["Trunc", "BipolarQuant",
             "IntQuant", "MultiThreshold", "Identity"],
             "BipolarQuant": ["Quant", "Trunc", "Sign"], "Conv": ["MatMul", "ConvTranspose"],
             "Add": ["Sub", "Mul", "Div", "MatMul"], "Mul": ["Div", "Add", "Sub"],
             "BatchNormalization": ["InstanceNormalization", "Add", "Relu"],
             "Reshape": ["Flatten", "Transpose", "Identity"], "MaxPool": ["AveragePool",
             "GlobalMaxPool"], "MultiThreshold": ["Quant", "Relu"],
             "Relu": ["Sigmoid", "Tanh", "Abs", "Neg", "Floor", "Softmax"]}
_BAD_VALUES = ["yes", "BANANA", "", "1", b"\xff\xfe", 1.5, -1, 0, 2, 99, -99999, 2 ** 40,
               float("nan"), float("inf"), [1, 2, 3], [], [0.5, 2.5], [-1, -1, -1, -1]]


def _node_with(model, rng, pred):
    nodes = [n for n in model.graph.node if pred(n)]
    return rng.choice(nodes) if nodes else None


def _set_attr(node, name, value):
    for i, a in enumerate(node.attribute):
        if a.name == name:
            del node.attribute[i]
            break
    if isinstance(value, list) and not value:
        node.attribute.append(helper.make_attribute(name, value, attr_type=onnx.AttributeProto.INTS))
    else:
        node.attribute.append(helper.make_attribute(name, value))


def _init(model, name):
    for t in model.graph.initializer:
        if t.name == name:
            return t
    return None


def _replace_init(model, name, array):
    old = _init(model, name)
    new = numpy_helper.from_array(np.asarray(array), name)
    if old is not None:
        old.CopyFrom(new)
    return new


# ---- the mutations: each edits ``model`` in place and returns a description or None ----

def attr_value(model, rng):
    """An attribute given a value of the wrong type or out of range."""
    node = _node_with(model, rng, lambda n: len(n.attribute) > 0)
    if node is None:
        return None
    attr = rng.choice(list(node.attribute))
    value = rng.choice(_BAD_VALUES)
    _set_attr(node, attr.name, value)
    return f"{node.op_type} '{node.name}'.{attr.name} = {value!r}"


def quant_attr(model, rng):
    """A quantizer's signed / narrow / rounding_mode set to something qonnx reads oddly."""
    node = _node_with(model, rng, lambda n: n.op_type in ("Quant", "Trunc", "IntQuant"))
    if node is None:
        return None
    name = rng.choice(["signed", "narrow", "rounding_mode"])
    value = rng.choice(["yes", "no", "BANANA", "floor", "CEIL", "ROUND_TO_ZERO", 2, -1, 0.5,
                        [1, 0], "1"] if name != "rounding_mode" else
                       ["BANANA", "floor", "CEIL", "ROUND_TO_ZERO", "", 3, "HALF_EVEN"])
    _set_attr(node, name, value)
    return f"{node.op_type} '{node.name}'.{name} = {value!r}"


def add_attr(model, rng):
    """An unknown attribute on an op."""
    node = rng.choice(list(model.graph.node))
    _set_attr(node, rng.choice(["banana", "axis", "perm", "kernel_shape"]),
              rng.choice(_BAD_VALUES[:12]))
    return f"{node.op_type} '{node.name}' gets an extra attribute"


def opset(model, rng):
    version = rng.choice([99999, 0, 1, 6, 7, 25, -3])
    domain = rng.choice(["", "", "qonnx.custom_op.general", "finn.custom_op.general"])
    for o in model.opset_import:
        if o.domain == domain:
            o.version = version
            break
    else:
        model.opset_import.append(helper.make_opsetid(domain, version))
    return f"opset '{domain}' = {version}"


def inputs(model, rng):
    """Swap, drop, duplicate or misdirect the inputs of a node."""
    node = _node_with(model, rng, lambda n: len(n.input) > 0)
    how = rng.choice(["swap", "drop", "duplicate", "dangling", "graph_input", "self"])
    ins = list(node.input)
    if how == "swap" and len(ins) > 1:
        i, j = rng.sample(range(len(ins)), 2)
        ins[i], ins[j] = ins[j], ins[i]
    elif how == "drop":
        del ins[rng.randrange(len(ins))]
    elif how == "duplicate":
        ins.append(rng.choice(ins))
    elif how == "dangling":
        ins[rng.randrange(len(ins))] = "no_such_tensor"
    elif how == "graph_input":
        ins[rng.randrange(len(ins))] = model.graph.input[0].name
    else:
        ins[0] = node.output[0]
    del node.input[:]
    node.input.extend(ins)
    return f"{node.op_type} '{node.name}' inputs {how}"


def op_type(model, rng):
    """An op replaced by another (a related op, or any op, or an unknown one)."""
    node = _node_with(model, rng, lambda n: n.op_type in _OP_SWAPS) \
        if rng.random() < 0.7 else rng.choice(list(model.graph.node))
    new = rng.choice(_OP_SWAPS.get(node.op_type, _OPS))
    if new in ("Quant", "Trunc", "BipolarQuant", "IntQuant", "MultiThreshold"):
        node.domain = "qonnx.custom_op.general"
    elif node.domain and rng.random() < 0.8:
        node.domain = ""
    old = node.op_type
    node.op_type = new
    return f"{old} '{node.name}' -> {new}"


def input_shape(model, rng):
    """The graph input's shape: huge, zero, negative, extra or missing dimensions."""
    dims = model.graph.input[0].type.tensor_type.shape.dim
    how = rng.choice(["huge", "huge", "zero", "negative", "extra", "drop", "symbolic", "bigger"])
    shape = [d.dim_value for d in dims]
    if how == "huge":
        shape[rng.randrange(1, len(shape)) if len(shape) > 1 else 0] = \
            rng.choice([10 ** 9, 2 ** 31 - 1, 10 ** 6, 2 ** 40])
    elif how == "zero":
        shape[rng.randrange(len(shape))] = 0
    elif how == "negative":
        shape[rng.randrange(len(shape))] = -5
    elif how == "extra":
        shape.append(rng.choice([1, 3]))
    elif how == "drop" and len(shape) > 1:
        shape.pop(rng.randrange(len(shape)))
    elif how == "bigger":
        shape[-1] = shape[-1] * 2 + 1
    if how == "symbolic":
        dims[rng.randrange(len(dims))].dim_param = "banana"
    else:
        elem = model.graph.input[0].type.tensor_type.elem_type
        model.graph.input[0].type.CopyFrom(helper.make_tensor_type_proto(elem, shape))
    return f"input shape {how}"


def initializer(model, rng):
    """An initializer's dtype, shape or values changed."""
    if not model.graph.initializer:
        return None
    t = rng.choice(list(model.graph.initializer))
    a = numpy_helper.to_array(t)
    how = rng.choice(["float64", "int64", "float16", "int8", "bool", "flatten", "truncate",
                      "scalar", "nan", "inf", "negative", "zero", "half", "huge", "empty",
                      "transpose"])
    if how in ("float64", "int64", "float16", "int8", "bool"):
        b = a.astype(how)
    elif how == "flatten":
        b = a.reshape(-1)
    elif how == "truncate":
        b = a.reshape(-1)[:max(0, a.size - 1)]
    elif how == "scalar":
        b = np.asarray(a.reshape(-1)[0] if a.size else 1.0, dtype=a.dtype)
    elif how == "empty":
        b = np.zeros((0,), dtype=a.dtype)
    elif how == "transpose":
        b = a.T.copy()
    else:
        value = {"nan": np.nan, "inf": np.inf, "negative": -1.0, "zero": 0.0, "half": 2.5,
                 "huge": 1e30}[how]
        b = a.astype(np.float64).copy()
        if b.size:
            b.reshape(-1)[rng.randrange(b.size)] = value
        b = b.astype(a.dtype) if a.dtype.kind == "f" else b
    _replace_init(model, t.name, b)
    return f"initializer '{t.name}' {a.dtype}{list(a.shape)} -> {how}"


def nodes(model, rng):
    """A node dropped, duplicated or the graph reordered."""
    how = rng.choice(["drop", "duplicate", "reverse", "swap_adjacent"])
    ns = list(model.graph.node)
    if how == "drop":
        i = rng.randrange(len(ns))
        desc = f"drop {ns[i].op_type} '{ns[i].name}'"
        del model.graph.node[i]
        return desc
    if how == "duplicate":
        i = rng.randrange(len(ns))
        copy = onnx.NodeProto()
        copy.CopyFrom(ns[i])
        model.graph.node.insert(i + 1, copy)
        return f"duplicate {ns[i].op_type} '{ns[i].name}'"
    if how == "reverse":
        del model.graph.node[:]
        model.graph.node.extend(reversed(ns))
        return "nodes reversed"
    i = rng.randrange(max(1, len(ns) - 1))
    ns[i], ns[i + 1] = ns[i + 1], ns[i]
    del model.graph.node[:]
    model.graph.node.extend(ns)
    return f"swap nodes {i} and {i + 1}"


def outputs(model, rng):
    """Graph outputs: none, two, or pointing at another tensor."""
    how = rng.choice(["none", "two", "inner", "input"])
    out = model.graph.output
    if how == "none":
        del out[:]
    elif how == "two":
        copy = onnx.ValueInfoProto()
        copy.CopyFrom(out[0])
        out.append(copy)
    elif how == "inner":
        node = rng.choice(list(model.graph.node))
        out[0].name = node.output[0]
    else:
        out[0].name = model.graph.input[0].name
    return f"outputs {how}"


def bit_width(model, rng):
    """A quantizer's bit width set to a value qloom or qonnx must refuse or accept exactly."""
    node = _node_with(model, rng, lambda n: n.op_type in ("Quant", "Trunc") and
                      len(n.input) > 3 and _init(model, n.input[3]) is not None)
    if node is None:
        return None
    value = rng.choice([0, 1, 2, 3, 8, 16, 17, 32, 2.5, -2, np.nan])
    _replace_init(model, node.input[3], np.float32(value))
    return f"{node.op_type} '{node.name}' bit width {value}"


def scale(model, rng):
    """A quantizer's scale: negative, zero, tiny, huge, NaN, per channel of a wrong size."""
    node = _node_with(model, rng, lambda n: n.op_type in ("Quant", "Trunc", "BipolarQuant") and
                      len(n.input) > 1 and _init(model, n.input[1]) is not None)
    if node is None:
        return None
    value = rng.choice([-1.0, 0.0, 1e-30, 1e30, np.nan, 3.0, 0.3, "wrong_shape"])
    a = np.float32(0) if value == "wrong_shape" else np.float32(value)
    if value == "wrong_shape":
        a = np.ones((7,), np.float32)
    _replace_init(model, node.input[1], a)
    return f"{node.op_type} '{node.name}' scale {value}"


KINDS = [attr_value, quant_attr, add_attr, opset, inputs, op_type, input_shape, initializer,
         nodes, outputs, bit_width, scale]


def raw_mutant(data: bytes, rng) -> tuple[str, bytes]:
    """The file itself damaged: empty, truncated, garbage, another format."""
    how = rng.choice(["empty", "truncated", "garbage", "text", "zeros", "flipped"])
    if how == "empty":
        return "empty file", b""
    if how == "truncated":
        return "truncated file", data[:rng.randrange(1, len(data))]
    if how == "garbage":
        return "random bytes", bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
    if how == "text":
        return "a text file", b"this is not a model\n" * 5
    if how == "zeros":
        return "zero bytes", b"\0" * 1000
    b = bytearray(data)
    for _ in range(rng.randrange(1, 8)):
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    return "flipped bits", bytes(b)


def mutant(data: bytes, seed: int, *, light: bool = False) -> tuple[str, bytes]:
    """One mutant of the model ``data`` (serialized ONNX), from ``seed`` alone.

    ``light`` makes one edit only (for large models, whose cases must stay quick)."""
    rng = random.Random(seed)
    if rng.random() < 0.06:
        return raw_mutant(data, rng)
    model = onnx.load_from_string(data)
    edits = 1 if light or rng.random() < 0.7 else 2
    done = []
    while len(done) < edits:
        desc = rng.choice(KINDS)(model, rng)
        if desc:
            done.append(desc)
    return "; ".join(done), model.SerializeToString()
