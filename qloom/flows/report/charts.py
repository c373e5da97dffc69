"""The HTML report's charts: matplotlib figures rendered to inline SVG text.

Each ``*_chart`` function takes plain numbers from the report files and returns an
``<svg>`` element to paste into the page: no file, no script, no font or link fetched
from anywhere (text stays text, in the browser's sans-serif). matplotlib's object API is
used, never pyplot, so that no GUI backend or global figure state is involved; it is
imported with the first chart, so that commands that draw none (``qloom --help``, every
step module the CLI imports) do not pay its half second.

``pipeline_timeline`` is the one model here: where the simulation records only when
each frame's words enter and leave the accelerator, it places each engine's work on the
cycle axis from the engine's estimated cycles per frame (see its docstring).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass


__all__ = ["LayerBar", "layer_cycles_chart", "layer_resources_chart", "budget_chart",
           "fmax_chart", "timeline_chart", "pipeline_timeline", "RESOURCE_KINDS"]

RESOURCE_KINDS = ("lut", "ff", "bram", "dsp")
_LABEL = {"lut": "LUT", "ff": "FF", "bram": "BRAM", "dsp": "DSP"}
_PLAIN, _HOT = "#4c78a8", "#e45756"      # bars, and the bottleneck's bar
_ESTIMATE, _MEASURED = "#9ecae9", "#f58518"
_FRAME_COLOURS = ["#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2",
                  "#eeca3b", "#9d755d"]


@dataclass(frozen=True)
class LayerBar:
    """One engine of the design as the charts see it."""

    name: str
    cycles: int
    resources: dict          # lut, ff, bram, dsp
    bottleneck: bool


def _svg(fig, salt: str) -> str:
    """The figure as an inline ``<svg>`` element. The XML prologue, DOCTYPE and the RDF
    metadata block (which names matplotlib's web site and Dublin Core namespaces) are
    dropped: a page must not point anywhere. ``salt`` makes the element ids that
    matplotlib hashes unique per figure and the same on every run."""
    import matplotlib
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = re.sub(r"<\?xml[^>]*\?>\s*", "", text)
    text = re.sub(r"<!DOCTYPE[^>]*>\s*", "", text)
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    return text.strip()


# Margins in inches. They are set by hand from the labels' length: matplotlib's
# constrained layout measures every text twice and doubled the page's drawing time
# (0.85 s against 0.39 s for TFC-w1a1), which every compile pays.
_CHAR_IN = 0.075          # width of one tick-label character at the default 10 pt
_AXIS_IN = 0.45           # x tick labels and the axis label under a plot
_LEGEND_IN = 0.3          # one row of legend under that


def _figure(width: float, rows: int, *, labels: list[str], legend: bool = True,
            title: bool = False, right: float = 0.25):
    """A figure sized for ``rows`` horizontal bars labelled ``labels``: height from the
    rows, left margin from the longest label, room below for the axis (and a legend)."""
    from matplotlib.figure import Figure
    left = 0.25 + _CHAR_IN * max((len(label) for label in labels), default=4)
    bottom = _AXIS_IN + (_LEGEND_IN if legend else 0.0)
    top = 0.35 if title else 0.12
    height = top + bottom + 0.3 * max(rows, 1) + 0.2
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(left=min(left / width, 0.6), right=1 - right / width,
                        bottom=bottom / height, top=1 - top / height)
    return fig


def _legend_below(fig, columns: int):
    fig.legend(loc="lower center", bbox_to_anchor=(0.5, 0.0), ncols=columns,
               fontsize="small", frameon=False)


def layer_cycles_chart(layers: list[LayerBar], ideal_ii: int, measured_ii: float | None) -> str:
    """Cycles per frame of each engine, the bottleneck in its own colour, with the ideal
    initiation interval (and the simulated one, when there is one) as vertical lines."""
    names = [layer.name for layer in layers]
    fig = _figure(7.5, len(layers), labels=names)
    ax = fig.subplots()
    ax.barh(names, [layer.cycles for layer in layers],
            color=[_HOT if layer.bottleneck else _PLAIN for layer in layers])
    ax.axvline(ideal_ii, color="#333333", linestyle="--", linewidth=1,
               label=f"ideal II {ideal_ii:,}")
    if measured_ii is not None:
        ax.axvline(measured_ii, color=_MEASURED, linestyle=":", linewidth=2,
                   label=f"simulated II {measured_ii:,.1f}")
    ax.invert_yaxis()
    ax.set_xlabel("cycles per frame (estimate)")
    _legend_below(fig, 2)
    ax.grid(axis="x", alpha=0.3)
    return _svg(fig, "cycles")


def layer_resources_chart(layers: list[LayerBar]) -> str:
    """LUT, FF, BRAM and DSP of each engine side by side (estimates), bottleneck marked."""
    names = [layer.name for layer in layers]
    fig = _figure(9.5, len(layers), labels=names, legend=False, title=True)
    fig.subplots_adjust(wspace=0.25)
    axes = fig.subplots(1, len(RESOURCE_KINDS), sharey=True)
    colours = [_HOT if layer.bottleneck else _PLAIN for layer in layers]
    for ax, kind in zip(axes, RESOURCE_KINDS):
        values = [layer.resources.get(kind, 0) for layer in layers]
        ax.barh(names, values, color=colours)
        ax.set_xlim(0, max(1, max(values, default=0)) * 1.05)   # an all-zero panel from 0
        ax.set_title(_LABEL[kind], fontsize="medium")
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(axis="x", labelsize="small")
    axes[0].invert_yaxis()
    return _svg(fig, "resources")


def budget_chart(estimated: dict, budget: dict, measured: dict | None) -> str:
    """Estimated (and, after a build, measured) totals per resource kind as a share of the
    board's budget, with 100% marked."""
    kinds = [k for k in RESOURCE_KINDS if budget.get(k)]
    labels = [f"{_LABEL[k]} ({budget[k]:,})" for k in kinds]
    fig = _figure(7.5, len(kinds) * (2 if measured else 1), labels=labels)
    ax = fig.subplots()
    positions = list(range(len(kinds)))
    height = 0.38 if measured else 0.6
    est = [100.0 * estimated.get(k, 0) / budget[k] for k in kinds]
    offset = -height / 2 if measured else 0.0
    ax.barh([p + offset for p in positions], est, height=height, color=_ESTIMATE,
            label="estimated")
    if measured:
        got = [100.0 * measured.get(k, 0) / budget[k] for k in kinds]
        ax.barh([p + height / 2 for p in positions], got, height=height, color=_MEASURED,
                label="measured (Yosys / nextpnr)")
    ax.axvline(100, color="#333333", linewidth=1)
    ax.set_yticks(positions, labels)
    ax.invert_yaxis()
    ax.set_xlabel("% of the board's budget")
    _legend_below(fig, 2)
    ax.grid(axis="x", alpha=0.3)
    return _svg(fig, "budget")


def fmax_chart(fmax_by_clock: dict, target_mhz: float | None) -> str:
    """Fmax that nextpnr achieved per clock domain against the clock's constraint."""
    clocks = sorted(fmax_by_clock)
    fig = _figure(7.5, len(clocks) + 1, labels=clocks)
    ax = fig.subplots()
    achieved = [fmax_by_clock[c]["achieved"] for c in clocks]
    constraint = [fmax_by_clock[c]["constraint"] for c in clocks]
    ax.barh(clocks, achieved,
            color=[_PLAIN if a >= t else _HOT for a, t in zip(achieved, constraint)],
            label="achieved Fmax")
    ax.scatter(constraint, clocks, marker="|", s=400, color="#333333", zorder=3,
               label="constraint")
    if target_mhz is not None:
        ax.axvline(target_mhz, color=_MEASURED, linestyle=":", linewidth=2,
                   label=f"target {target_mhz:g} MHz")
    ax.invert_yaxis()
    ax.set_xlabel("MHz")
    _legend_below(fig, 3)
    ax.grid(axis="x", alpha=0.3)
    return _svg(fig, "fmax")


def pipeline_timeline(layers: list[dict], starts: list[int]) -> dict:
    """``{engine: [(start, end) per frame]}``: when each engine works on each frame, by the
    cost model.

    The simulation stamps only the accelerator's ports, so this places each engine's
    ``cycles_per_frame`` on the cycle axis: an engine starts a frame once every engine
    feeding it has finished that frame (or, reading the accelerator's input, at the
    frame's first input word, ``starts``) and it has finished the frame before. Real
    engines overlap (a matrix unit starts on the first words of its input) and add
    pipeline and FIFO delays that the cycle counts leave out; the measured ports beside
    the estimate show how far off it is.
    ``layers`` are the report's engine rows (``name``, ``inputs``, ``output``,
    ``cycles_per_frame``)."""
    producer = {layer["output"]: layer["name"] for layer in layers}
    by_name = {layer["name"]: layer for layer in layers}
    busy: dict[str, list] = {layer["name"]: [] for layer in layers}
    order = _topological(layers, producer)
    for frame, start in enumerate(starts):
        for name in order:
            layer = by_name[name]
            ready = [busy[producer[t]][frame][1] for t in layer["inputs"] if t in producer]
            if any(t not in producer for t in layer["inputs"]) or not ready:
                ready.append(start)
            if frame:
                ready.append(busy[name][frame - 1][1])
            begin = max(ready)
            busy[name].append((begin, begin + int(layer["cycles_per_frame"])))
    return busy


def _topological(layers: list[dict], producer: dict) -> list[str]:
    """Engine names, each after the engines that feed it (depth first; the report's order
    is kept where it already is one)."""
    done: list[str] = []
    seen: set[str] = set()
    feeds = {layer["name"]: [producer[t] for t in layer["inputs"] if t in producer]
             for layer in layers}

    def visit(name, path):
        if name in seen:
            return
        if name in path:
            raise ValueError(f"the engines form a cycle through {name!r}")
        for before in feeds[name]:
            visit(before, path | {name})
        seen.add(name)
        done.append(name)

    for layer in layers:
        visit(layer["name"], frozenset())
    return done


def timeline_chart(busy: dict, ports: dict, order: list[str]) -> str:
    """One row per engine (estimated work per frame) between the measured input and output
    rows; each frame in its own colour. ``ports`` is ``{"input": [(first, last)], "output":
    [...]}`` of measured word cycles per frame."""
    from matplotlib.patches import Patch
    rows = ["input (measured)", *order, "output (measured)"]
    fig = _figure(9.5, len(rows), labels=rows, legend=False, right=1.1)
    ax = fig.subplots()
    frames = max(len(ports["input"]), len(ports["output"]))
    for frame in range(frames):
        colour = _FRAME_COLOURS[frame % len(_FRAME_COLOURS)]
        spans = [("input (measured)", ports["input"][frame], 1.0)] if frame < len(ports["input"]) else []
        spans += [(name, busy[name][frame], 0.55) for name in order if frame < len(busy[name])]
        if frame < len(ports["output"]):
            spans.append(("output (measured)", ports["output"][frame], 1.0))
        for row, (first, last), alpha in spans:
            ax.broken_barh([(first, max(last - first, 1))], (rows.index(row) - 0.35, 0.7),
                           facecolors=colour, alpha=alpha, edgecolor="#333333",
                           linewidth=0.4)
    ax.set_yticks(range(len(rows)), rows)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel("cycle (from the first cycle after reset)")
    ax.legend(handles=[Patch(color=_FRAME_COLOURS[f % len(_FRAME_COLOURS)], label=f"frame {f}")
                       for f in range(frames)],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    ax.grid(axis="x", alpha=0.3)
    return _svg(fig, "timeline")
