"""Plots of a sweep's table (matplotlib, PNG) and one self-contained HTML page with the
plots embedded and the table, for a browser with no other file at hand.

- ``fps_vs_lut.png``: frames per second against LUTs, one series per model and board;
  filled markers are measured (built), hollow ones are the compiler's estimates.
- ``fmax_vs_folding.png``: Fmax against folding per model and board (built points only).
"""

from __future__ import annotations

import base64
import html
import io
import os
import time
from pathlib import Path

__all__ = ["write_plots", "PLOTS"]

PLOTS = ("fps_vs_lut.png", "fmax_vs_folding.png")


def _series(rows):
    """(model, board) -> rows, in table order."""
    out = {}
    for r in rows:
        if r["status"] == "ok":
            out.setdefault((r["model"], r["board"]), []).append(r)
    return out


def _fps_vs_lut(plt, rows):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    drawn = False
    for n, ((model, board), rs) in enumerate(_series(rows).items()):
        color = f"C{n % 10}"
        pts = [(r["lut"] if r["lut"] is not None else r["est_lut"], r["fps"] or r["est_fps"],
                r["lut"] is not None, r["folding"]) for r in rs]
        pts = [p for p in pts if p[0] and p[1]]
        if not pts:
            continue
        drawn = True
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, lw=1, alpha=0.5)
        for lut, fps, measured, label in pts:
            ax.scatter([lut], [fps], color=color if measured else "none", edgecolors=color,
                       s=40, zorder=3)
            ax.annotate(label, (lut, fps), fontsize=7, xytext=(4, 3), textcoords="offset points")
        ax.scatter([], [], color=color, label=f"{model} / {board}")
    if drawn:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.margins(0.15)            # room for the labels of the outermost points
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no finished points yet", ha="center", transform=ax.transAxes)
    ax.set_xlabel("LUTs (filled: measured by Yosys; hollow: estimated)")
    ax.set_ylabel("frames/s (simulated II at the built clock)")
    ax.set_title("Throughput against logic")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def _fmax_vs_folding(plt, rows):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    foldings = list(dict.fromkeys(r["folding"] for r in rows))
    drawn = False
    for n, ((model, board), rs) in enumerate(_series(rows).items()):
        pts = [(foldings.index(r["folding"]), r["fmax_mhz"]) for r in rs
               if r["fmax_mhz"] is not None]
        if not pts:
            continue
        drawn = True
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=f"C{n % 10}",
                label=f"{model} / {board}")
    ax.set_xticks(range(len(foldings)), foldings, rotation=20, fontsize=8)
    if drawn:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no built points (build = false, or none finished)", ha="center",
                transform=ax.transAxes)
    ax.set_xlabel("folding")
    ax.set_ylabel("Fmax (MHz, nextpnr)")
    ax.set_title("Fmax against folding")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def _replace(path: Path, data: bytes):
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.6g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return html.escape(str(value))


_TABLE_COLUMNS = ["model", "board", "folding", "status", "est_lut", "lut", "ff", "dsp", "bram",
                  "clock_mhz", "fmax_mhz", "built_mhz", "ii_cycles", "fps", "latency_us",
                  "compile_s", "simulate_s", "build_s", "host", "node_id", "attempts", "error"]


def _page(rows, images: dict, spec: str) -> str:
    counts = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    head = "".join(f"<th>{html.escape(c)}</th>" for c in _TABLE_COLUMNS)
    body = []
    for r in rows:
        cells = []
        for c in _TABLE_COLUMNS:
            v = r[c]
            if c == "node_id" and v:
                v = v[:8]
            if c == "error" and v:
                v = v if len(v) < 200 else v[:200] + "..."
            cls = f' class="{html.escape(r["status"])}"' if c == "status" else ""
            cells.append(f"<td{cls}>{_cell(v)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    figures = "".join(
        f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,'
        f'{base64.b64encode(data).decode()}"><figcaption>{html.escape(name)}</figcaption>'
        f"</figure>" for name, data in images.items())
    summary = ", ".join(f"{n} {html.escape(s)}" for s, n in sorted(counts.items()))
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>qloom sweep</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; }}
table {{ border-collapse: collapse; font-size: 12px; }}
td, th {{ border: 1px solid #ccc; padding: 2px 6px; text-align: right; }}
th {{ background: #eee; }}
td.ok {{ color: #060; }} td.failed {{ color: #a00; }} td.pending {{ color: #888; }}
figure {{ display: inline-block; margin: 0 1em 1em 0; }}
img {{ max-width: 640px; }}
</style></head><body>
<h1>qloom sweep</h1>
<p>SPEC {html.escape(spec)}: {len(rows)} points ({summary}); written
{html.escape(time.strftime('%Y-%m-%d %H:%M:%S'))}. Each point's design, simulation, build
and log are in <code>points/&lt;id&gt;/</code>; the full table is <code>results.csv</code>.</p>
{figures}
<table><tr>{head}</tr>
{chr(10).join(body)}
</table></body></html>
"""


def write_plots(results_dir: Path, rows: list[dict], spec: str) -> Path:
    """Write ``plots/*.png`` and ``report.html``; returns the page's path."""
    import matplotlib
    matplotlib.use("Agg")           # files only, never a window
    import matplotlib.pyplot as plt

    folder = results_dir / "plots"
    folder.mkdir(exist_ok=True)
    images = {}
    for name, draw in zip(PLOTS, (_fps_vs_lut, _fmax_vs_folding)):
        fig = draw(plt, rows)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100)
        plt.close(fig)
        images[name] = buf.getvalue()
        _replace(folder / name, images[name])
    page = results_dir / "report.html"
    _replace(page, _page(rows, images, spec).encode())
    return page
