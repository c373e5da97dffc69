"""Refuse, up front and with a message, what qonnx and qloom could read differently or what
would blow up later: unknown opsets, attributes of the wrong type or out of range, wrong
input counts, and tensors beyond the size qloom handles.

qonnx reads a custom op's attribute by the member its type declares (``attr.i`` for
``signed``), whatever the attribute holds: ``signed="yes"`` is a string whose ``i`` is 0, so
qonnx quantizes unsigned where a truthiness test would say signed. Every attribute is
therefore checked against its declared type (the ONNX schema for standard ops, qonnx's
definition for the quantizers) before anything reads it.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import AttributeProto

from ...errors import ResourceLimitError, UnsupportedModelError
from . import channels_last

__all__ = ["validate_model", "check_tensor_sizes", "MAX_ELEMENTS", "MIN_OPSET",
           "ROUNDING_MODES"]

MAX_ELEMENTS = 1 << 24          # per tensor: 16,777,216 elements (64 MB as float32)
MIN_OPSET = 7                   # onnxruntime implements the standard ops from opset 7
CUSTOM_VERSIONS = (1, 2)        # the versions qonnx defines for its custom-op domains
ROUNDING_MODES = ("ROUND", "HALF_EVEN", "CEIL", "FLOOR", "UP", "DOWN", "HALF_UP", "HALF_DOWN")
_STANDARD = ("", "ai.onnx")
_BOOL = (0, 1)

# qonnx's quantizers: input counts and attributes (type, allowed values or None).
_QUANTIZERS = {
    "Quant": ((4,), {"signed": (AttributeProto.INT, _BOOL), "narrow": (AttributeProto.INT, _BOOL),
                     "rounding_mode": (AttributeProto.STRING, ROUNDING_MODES)}),
    "BipolarQuant": ((2,), {}),
    "Trunc": ((5, 6), {"signed": (AttributeProto.INT, _BOOL), "narrow": (AttributeProto.INT, _BOOL),
                       "rounding_mode": (AttributeProto.STRING, ROUNDING_MODES)}),
    "MultiThreshold": ((2,), {"out_dtype": (AttributeProto.STRING, None),
                              "out_scale": (AttributeProto.FLOAT, None),
                              "out_bias": (AttributeProto.FLOAT, None),
                              "data_layout": (AttributeProto.STRING, None)}),
}
_QUANTIZERS["IntQuant"] = _QUANTIZERS["Quant"]


def _type_name(t: int) -> str:
    return AttributeProto.AttributeType.Name(t)


def _shown(attr) -> str:
    value = onnx.helper.get_attribute_value(attr)
    text = repr(value.decode(errors="replace") if isinstance(value, bytes) else value)
    return text if len(text) <= 40 else text[:37] + "..."


def _opsets(proto) -> dict:
    versions = {}
    for o in proto.opset_import:
        domain = "" if o.domain == "ai.onnx" else o.domain
        versions[domain] = o.version
    top = onnx.defs.onnx_opset_version()
    standard = versions.get("")
    if standard is None or not MIN_OPSET <= standard <= top:
        raise UnsupportedModelError(
            f"the model imports ONNX opset {standard if standard is not None else '(none)'}; "
            f"qloom supports opsets {MIN_OPSET} to {top}")
    for domain, version in versions.items():
        if domain == channels_last.DOMAIN:
            # qonnx gives its channels-last ops the standard opset they wrap
            if not MIN_OPSET <= version <= top:
                raise UnsupportedModelError(
                    f"the model imports opset {version} of the domain '{domain}'; its ops "
                    f"wrap the standard ones, of opsets {MIN_OPSET} to {top}")
        elif domain and ("qonnx" in domain or "finn" in domain) \
                and version not in CUSTOM_VERSIONS:
            raise UnsupportedModelError(
                f"the model imports opset {version} of the custom-op domain '{domain}'; qonnx "
                f"defines versions {', '.join(map(str, CUSTOM_VERSIONS))}")
    return versions


def _check_standard(node, version):
    try:
        schema = onnx.defs.get_schema(node.op_type, version, "")
    except onnx.defs.SchemaError:
        raise UnsupportedModelError(
            f"op {node.op_type} does not exist in ONNX opset {version}", node.name) from None
    if schema.deprecated:
        raise UnsupportedModelError(
            f"op {node.op_type} is deprecated in ONNX opset {version}", node.name)
    for attr in node.attribute:
        known = schema.attributes.get(attr.name)
        if known is None:
            raise UnsupportedModelError(
                f"{node.op_type} has no attribute '{attr.name}' (it has "
                f"{', '.join(sorted(schema.attributes)) or 'none'})", node.name)
        if attr.type != known.type:
            raise UnsupportedModelError(
                f"attribute {attr.name} of {node.op_type} must be {_type_name(known.type)}, "
                f"not {_type_name(attr.type)} {_shown(attr)}", node.name)
    given = {a.name for a in node.attribute}
    for name, a in schema.attributes.items():
        if a.required and name not in given:
            raise UnsupportedModelError(
                f"{node.op_type} needs the attribute '{name}'", node.name)
    _check_counts(node, schema.min_input, schema.max_input, schema.min_output,
                  schema.max_output)


def _check_counts(node, min_in, max_in, min_out, max_out):
    n_in = len(node.input)
    while n_in and not node.input[n_in - 1]:     # trailing optional inputs left empty
        n_in -= 1
    if not min_in <= n_in <= max_in:
        want = f"{min_in}" if min_in == max_in else f"{min_in} to {max_in}"
        raise UnsupportedModelError(
            f"{node.op_type} takes {want} inputs, not {n_in}", node.name)
    if not min_out <= len(node.output) <= max_out or not all(node.output):
        raise UnsupportedModelError(
            f"{node.op_type} has {len(node.output)} outputs (named "
            f"{[o for o in node.output]}); it produces {min_out} to {max_out}", node.name)


def _check_quantizer(node):
    counts, attrs = _QUANTIZERS[node.op_type]
    if len(node.input) not in counts or not all(node.input):
        raise UnsupportedModelError(
            f"{node.op_type} takes {' or '.join(map(str, counts))} inputs, not "
            f"{len(node.input)} ({', '.join(repr(i) for i in node.input) or 'none'})",
            node.name)
    if len(node.output) != 1:
        raise UnsupportedModelError(
            f"{node.op_type} has one output, not {len(node.output)}", node.name)
    for attr in node.attribute:
        if attr.name not in attrs:
            raise UnsupportedModelError(
                f"{node.op_type} has no attribute '{attr.name}' (qonnx defines "
                f"{', '.join(sorted(attrs)) or 'none'})", node.name)
        kind, allowed = attrs[attr.name]
        if attr.type != kind:
            raise UnsupportedModelError(
                f"attribute {attr.name} of {node.op_type} must be {_type_name(kind)}"
                f"{' ' + '/'.join(map(str, allowed)) if allowed else ''}, not "
                f"{_type_name(attr.type)} {_shown(attr)} (qonnx would read it as "
                f"{_qonnx_reads(attr, kind)!r})", node.name)
        value = onnx.helper.get_attribute_value(attr)
        if isinstance(value, bytes):
            value = value.decode(errors="replace").upper()
        if allowed is not None and value not in allowed:
            raise UnsupportedModelError(
                f"attribute {attr.name} of {node.op_type} is {_shown(attr)}; allowed: "
                f"{', '.join(map(str, allowed))}", node.name)


def _qonnx_reads(attr, kind):
    member = {AttributeProto.INT: "i", AttributeProto.FLOAT: "f",
              AttributeProto.STRING: "s"}[kind]
    value = getattr(attr, member)
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def validate_model(proto) -> None:
    """Opsets, every node's attributes and input counts, and the graph input's size."""
    versions = _opsets(proto)
    for node in proto.graph.node:
        domain = "" if node.domain == "ai.onnx" else node.domain
        if domain == "":
            _check_standard(node, versions[""])
        elif domain == channels_last.DOMAIN:
            if node.op_type not in channels_last.domain_ops():
                raise UnsupportedModelError(
                    f"op {node.op_type} does not exist in qonnx's domain '{domain}' (it "
                    f"defines {', '.join(channels_last.domain_ops())})", node.name)
            if domain not in versions:
                raise UnsupportedModelError(
                    f"the model uses the domain '{domain}' without importing it", node.name)
            _check_standard(node, versions[domain])
            channels_last.check_required_attributes(node, versions[domain])
        elif node.op_type in _QUANTIZERS:
            _check_quantizer(node)
    initializers = {i.name for i in proto.graph.initializer}
    _check_order(proto.graph, initializers)
    for inp in proto.graph.input:
        if inp.name in initializers:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else 1
                for d in inp.type.tensor_type.shape.dim]
        _check_size(inp.name, dims, "graph input")


def _check_order(graph, initializers):
    """Every node reads tensors produced before it (ONNX requires topological order; qonnx
    executes in file order, so another order would compute something else)."""
    produced = {}
    for n in graph.node:
        for o in n.output:
            if o in produced:
                raise UnsupportedModelError(
                    f"tensor '{o}' is computed by two nodes ('{produced[o].name}' and "
                    f"'{n.name}')", n.name)
            produced[o] = n
    known = set(initializers) | {i.name for i in graph.input} | {""}
    for node in graph.node:
        for t in node.input:
            if t in known:
                continue
            if t in produced:
                raise UnsupportedModelError(
                    f"{node.op_type} reads '{t}' before '{produced[t].name}' computes it: the "
                    f"nodes are not in topological order", node.name)
            raise UnsupportedModelError(
                f"{node.op_type} reads '{t}', which no node, initializer or graph input "
                f"provides", node.name)
        known.update(node.output)
    for out in graph.output:
        if out.name not in known:
            raise UnsupportedModelError(f"the graph output '{out.name}' is never computed")


def _check_size(name, shape, what):
    elements = int(np.prod([max(int(d), 1) for d in shape], dtype=object))
    if elements > MAX_ELEMENTS:
        raise ResourceLimitError(
            f"{what} '{name}' has shape {list(shape)} ({elements:,} elements); qloom handles "
            f"tensors of at most {MAX_ELEMENTS:,} elements")


def check_tensor_sizes(wrapper) -> None:
    """Every tensor of a shape-inferred model within ``MAX_ELEMENTS``, before any is made."""
    graph = wrapper.graph
    for info in list(graph.input) + list(graph.value_info) + list(graph.output):
        dims = [d.dim_value for d in info.type.tensor_type.shape.dim if d.HasField("dim_value")]
        _check_size(info.name, dims, "tensor")
