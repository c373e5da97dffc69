"""The human-readable compile report (``OUT/report.md``)."""

from __future__ import annotations

__all__ = ["render_report_md", "layer_table"]


def layer_table(layers: list, budget: dict | None = None) -> str:
    """A Markdown table of engines: folding, cycles per frame and estimated resources."""
    head = "| layer | engine | folding | cycles/frame | LUT | FF | DSP | BRAM | BRAM bits used |\n" \
           "|---|---|---|---:|---:|---:|---:|---:|---:|\n"
    lines = []
    total = {"lut": 0, "ff": 0, "dsp": 0, "bram": 0}
    for row in layers:
        fold = ", ".join(f"{k}={v}" for k, v in row["fold"].items())
        r = row["resources"]
        for k in total:
            total[k] += r[k]
        eff = row.get("bram_bit_efficiency")
        eff = f"{100 * eff:.0f}%" if eff else ""
        lines.append(f"| {row['name']} | {row['engine']} | {fold} | {row['cycles_per_frame']:,} "
                     f"| {r['lut']:,} | {r['ff']:,} | {r['dsp']} | {r['bram']} | {eff} |")
    lines.append(f"| **total** | | | | {total['lut']:,} | {total['ff']:,} | {total['dsp']} "
                 f"| {total['bram']} | |")
    if budget:
        lines.append(f"| *budget* | | | | {budget['lut']:,} | {budget['ff']:,} | "
                     f"{budget['dsp']} | {budget['bram']} | |")
    return head + "\n".join(lines) + "\n"


def render_report_md(report: dict) -> str:
    board = report.get("board")
    fps = report["fps_at_clock"]
    out = [f"# qloom compile report: {report['model']}", "",
           f"- clock: {report['clock_mhz']:g} MHz; folding: {report['folding']}; "
           f"resource model: {report['family']}",
           f"- bottleneck: `{report['bottleneck']}` at {report['ideal_ii_cycles']:,} cycles per frame",
           f"- throughput at {report['clock_mhz']:g} MHz: {fps:,.0f} frames/s "
           f"({1e6 / fps:,.2f} us per frame in steady state)"]
    if board:
        verdict = "fits" if board["fits"] else "does NOT fit (over in " + ", ".join(board["over"]) + ")"
        cells = board.get("logic_cells")
        link = board.get("host_link")
        out.append(f"- board `{board['name']}`: the estimate {verdict}"
                   + (f" with the host link's share ({link['lut']:,} LUT, {link['ff']:,} FF, "
                      f"{link['bram']} BRAM)" if link else "")
                   + (f"; {cells:,} iCE40 logic cells (LUT + 2/3 FF)"
                      if cells is not None else ""))
    io = report.get("io")
    if io:
        hw = io["hardware_output"]
        out.append(f"- input {io['input_shape']} -> output {io['output_shape']}; the hardware "
                   f"streams `{hw['tensor']}` {hw['shape']} (channels-last) and the host lays "
                   f"it out as the model's output")
    tail = report.get("tail")
    if tail:
        out.append(f"- float tail after the hardware's output: {tail['how']}")
    if report.get("bram_bit_efficiency"):
        out.append(f"- block RAM bit efficiency of the weight and threshold memories: "
                   f"{100 * report['bram_bit_efficiency']:.1f}% (stored bits over the "
                   f"capacity of their blocks)")
    if report.get("spram"):
        spram = {row["name"]: row["spram"] for row in report["layers"] if row.get("spram")}
        out.append(f"- weights in SPRAM (loaded from the SPI flash at start-up): "
                   f"{report['spram']} SPRAMs ("
                   + ", ".join(f"{name} {n}" for name, n in spram.items()) + ")")
    out += _precision_lines(report.get("precision"))
    out += ["", "## Engines (estimates)", "",
            layer_table(report["layers"], board["budget"] if board else None),
            "## Compile steps", "",
            ", ".join(f"{k} {v:.2f} s" for k, v in report["step_seconds"].items()), ""]
    return "\n".join(out)


def _precision_lines(precision: dict | None) -> list:
    """A float model compiled at a fixed-point precision: which, and what it costs."""
    if not precision:
        return []
    lines = [f"- precision: {precision['precision']} (input {precision['input']}; rounding "
             f"{precision['rounding']}, overflow {precision['overflow']}"
             + (f"; {len(precision['layers'])} layers overridden" if precision["layers"]
                else "") + f"): the quantized model is `{precision['quantized_model']}`"]
    cost = precision.get("cost")
    if cost:
        lines.append(f"- precision cost against the float model (onnxruntime) on "
                     f"{cost['frames']} frames of {cost['inputs']}: argmax agrees on "
                     f"{100 * cost['argmax_agreement']:.1f}% ({cost['argmax_disagreements']} "
                     f"differ), max abs error {cost['max_abs_error']:.3g}, mean "
                     f"{cost['mean_abs_error']:.3g}")
    return lines
