"""The layer table of an integer ``Network`` (``qloom inspect``): per layer the op, shapes,
datatypes, multiply-accumulates and weight bits, plus totals."""

from __future__ import annotations

from .ir import Network

__all__ = ["summarize", "render_table"]

_COLUMNS = (("layer", "name"), ("op", "op"), ("input", "input_shape"),
            ("output", "output_shape"), ("in type", "input_type"),
            ("weight type", "weight_type"), ("out type", "output_type"),
            ("MACs", "macs"), ("weight bits", "weight_bits"))


def summarize(net: Network) -> dict:
    """A JSON-ready description: ``{"name", "input", "output", "prefix_ops", "tail_ops",
    "layers": [row...], "totals": {"layers", "macs", "weight_bits"}}``."""
    rows = []
    for layer in net.layers:
        ins = [net.tensors[t] for t in layer.inputs]
        out = net.tensors[layer.output]
        w_type = getattr(layer, "w_type", None)
        rows.append({
            "name": layer.name,
            "op": layer.op,
            "input_shape": [list(t.shape) for t in ins][0] if len(ins) == 1
            else [list(t.shape) for t in ins],
            "output_shape": list(out.shape),
            "input_type": ins[0].dtype.name,
            "weight_type": w_type.name if w_type is not None else None,
            "output_type": out.dtype.name,
            "macs": layer.macs([t.shape for t in ins], out.shape),
            "weight_bits": int(layer.weight_bits),
        })
    inp, outp = net.tensors[net.input], net.tensors[net.output]
    return {
        "name": net.name,
        "input": {"name": net.input_name, "shape": list(net.input_shape),
                  "type": inp.dtype.name, "scale": inp.scale.tolist()},
        "output": {"tensor": net.output, "shape": list(outp.shape), "type": outp.dtype.name},
        "prefix_ops": list(net.prefix_ops),
        "tail_ops": list(net.tail_ops),
        "tail": {"exact": net.tail_exact, "how": net.tail_note},
        "layers": rows,
        "totals": {"layers": len(rows), "macs": sum(r["macs"] for r in rows),
                   "weight_bits": sum(r["weight_bits"] for r in rows)},
    }


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        if value and isinstance(value[0], list):
            return " + ".join(_cell(v) for v in value)
        return "x".join(map(str, value))
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def render_table(summary: dict) -> str:
    """A plain-text table of ``summarize``'s result, with a header and a totals line."""
    header = [title for title, _ in _COLUMNS]
    body = [[_cell(row[key]) for _, key in _COLUMNS] for row in summary["layers"]]
    totals = summary["totals"]
    body.append(["total", f"{totals['layers']} layers", "", "", "", "", "",
                 _cell(totals["macs"]), _cell(totals["weight_bits"])])
    widths = [max(len(r[i]) for r in [header] + body) for i in range(len(header))]
    numeric = {len(header) - 2, len(header) - 1}

    def line(cells):
        return "  ".join(c.rjust(w) if i in numeric else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    rule = "  ".join("-" * w for w in widths)
    inp = summary["input"]
    head = (f"{summary['name']}: input {inp['name']} {_cell(inp['shape'])} -> {inp['type']} "
            f"(prefix: {', '.join(summary['prefix_ops']) or 'none'}; "
            f"tail: {', '.join(summary['tail_ops']) or 'none'})")
    lines = [head, line(header), rule] + [line(r) for r in body[:-1]] + [rule, line(body[-1])]
    if summary.get("tail", {}).get("how"):
        lines.append(f"tail: {summary['tail']['how']}")
    return "\n".join(lines)
