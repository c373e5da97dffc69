"""``OUT/report.html``: the design on one page that opens offline.

What ``qloom compile``, ``qloom simulate`` and ``qloom build`` wrote into OUT (the
manifest, ``report.json``, ``sim/results.json``, ``build/report.json``) drawn and tabled:
per-engine cycles and resources with the bottleneck marked, the estimate against the
board's budget and against what Yosys and nextpnr measured, Fmax and the critical path,
and the simulated latency, II and a timeline of the first frames. Each step that writes
one of those files calls ``write_report_html`` afterwards; ``qloom report OUT`` does it
again on demand.

The page is one file: styles inline, charts as inline SVG (``report_charts``), no script,
no link to anything outside it, so that it can be mailed or archived with the design.
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from qloom._version import __version__
from qloom.errors import InternalError, QloomError
from qloom.manifest import read_manifest
from qloom.flows.report import charts as charts
from qloom.flows.toolchain.asic import html as asic_html

__all__ = ["ReportFiles", "render_html", "write_report_html", "HTML_NAME"]

HTML_NAME = "report.html"
TIMELINE_FRAMES = 6


def _read_json(path: Path, required: tuple = ()) -> dict | None:
    """The JSON object in ``path`` (None when the file does not exist), with ``required``
    keys checked: a file from another qloom version is named, not a KeyError later."""
    if not path.exists():
        return None
    try:
        value = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise QloomError(f"cannot read {path} for the HTML report: {e}") from None
    if not isinstance(value, dict):
        raise QloomError(f"{path} must hold a JSON object, not {type(value).__name__}")
    missing = [k for k in required if k not in value]
    if missing:
        raise QloomError(f"{path} lacks {', '.join(map(repr, missing))}: it was written by "
                         f"another qloom version; run the step that writes it again")
    return value


@dataclass(frozen=True)
class ReportFiles:
    """The files of one design folder the page is made from (None: that step has not run)."""

    out_dir: Path
    manifest: dict
    compiled: dict                  # report.json
    simulated: dict | None          # sim/results.json
    built: dict | None              # build/report.json

    @classmethod
    def read(cls, out_dir) -> "ReportFiles":
        out = Path(out_dir)
        manifest = read_manifest(out)       # a clear error for a folder that is no design
        compiled = _read_json(out / "report.json",
                              ("model", "layers", "bottleneck", "ideal_ii_cycles",
                               "clock_mhz", "fps_at_clock", "resources"))
        if compiled is None:
            raise QloomError(f"{out} has a manifest but no report.json: it is not a complete "
                             f"compiled design; compile it again with `qloom compile MODEL "
                             f"-o {out}`")
        for layer in compiled["layers"]:
            if not {"name", "cycles_per_frame", "resources", "inputs", "output"} <= set(layer):
                raise QloomError(f"{out / 'report.json'}: a layer row lacks the keys this "
                                 f"qloom writes; compile the design again")
        simulated = _read_json(out / "sim" / "results.json",
                               ("frames", "mismatches", "latency_cycles", "ii_cycles"))
        built = _read_json(out / "build" / "report.json")
        if built is not None:
            _read_json(out / "build" / "report.json", asic_html.REQUIRED
                       if built.get("target") == "asic" else ("board", "target_mhz"))
        return cls(out, manifest, compiled, simulated, built)


# -- small HTML helpers ------------------------------------------------------------------

def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _num(value, digits: int = 0) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and digits:
        return f"{value:,.{digits}f}"
    return f"{value:,.0f}" if isinstance(value, float) else f"{value:,}"


def _table(head: list[str], rows: list[list], classes: list[str] | None = None,
           numeric_from: int = 1, css: str = "") -> str:
    """A table of escaped cells; columns from ``numeric_from`` on are right-aligned."""
    def cell(tag, i, value):
        align = ' class="n"' if i >= numeric_from else ""
        return f"<{tag}{align}>{_e(value)}</{tag}>"
    def klass(name):
        return f' class="{name}"' if name else ""
    out = [f"<table{klass(css)}>",
           "<thead><tr>" + "".join(cell("th", i, h) for i, h in enumerate(head)) + "</tr></thead>",
           "<tbody>"]
    for r, row in enumerate(rows):
        out.append(f"<tr{klass(classes[r] if classes else '')}>"
                   + "".join(cell("td", i, v) for i, v in enumerate(row)) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _figure(fig_id: str, svg: str, caption: str) -> str:
    return (f'<figure id="{fig_id}">\n{svg}\n<figcaption>{caption}</figcaption>\n'
            f'</figure>')


def _card(title: str, lines: list[str], state: str = "") -> str:
    body = "".join(f"<p>{line}</p>" for line in lines)
    return f'<div class="card {state}"><h3>{_e(title)}</h3>{body}</div>'


# -- sections ----------------------------------------------------------------------------

def _bars(compiled: dict) -> list[charts.LayerBar]:
    return [charts.LayerBar(layer["name"], int(layer["cycles_per_frame"]), layer["resources"],
                            layer["name"] == compiled["bottleneck"])
            for layer in compiled["layers"]]


def _summary(f: ReportFiles) -> str:
    c, sim, built = f.compiled, f.simulated, f.built
    cards = [_card("Throughput (estimate)", [
        f"<b>{_num(c['fps_at_clock'])}</b> frames/s at {c['clock_mhz']:g} MHz",
        f"bottleneck <code>{_e(c['bottleneck'])}</code>: {_num(c['ideal_ii_cycles'])} "
        f"cycles per frame"])]
    res = c["resources"]
    lines = [", ".join(f"{k.upper()} {_num(res.get(k, 0))}" for k in charts.RESOURCE_KINDS)]
    state = ""
    board = c.get("board")
    if board:
        fits = board.get("fits")
        state = "" if fits else "bad"
        lines.append(f"{'fits' if fits else 'does NOT fit'} {_e(board['name'])}"
                     + ("" if fits else f" (over in {_e(', '.join(board.get('over', [])))})"))
    cards.append(_card("Resources (estimate)", lines, state))
    if sim:
        bad = sim["mismatches"] != 0
        ii = sim["ii_cycles"]
        cards.append(_card("Simulation", [
            f"<b>{_num(sim['frames'])}</b> frames, <b>{_num(sim['mismatches'])}</b> "
            f"mismatching ({_e(sim.get('simulator', '?'))})",
            f"latency {_num(sim['latency_cycles'])} cycles, II "
            f"{'–' if ii is None else f'{ii:,.1f}'} (ideal {_num(c['ideal_ii_cycles'])})"],
            "bad" if bad else "good"))
    else:
        cards.append(_card("Simulation", [f"not simulated yet: <code>qloom simulate "
                                          f"{_e(f.out_dir.name)}</code>"], "none"))
    if built and built.get("target") == "asic":
        cards.append(_card(*asic_html.summary_card(built)))
    elif built and built.get("fmax_mhz") is not None:
        met = built.get("timing_met")
        cards.append(_card("Build", [
            f"Fmax <b>{built['fmax_mhz']:g} MHz</b>, target {built['target_mhz']:g} MHz: "
            f"timing {'met' if met else 'NOT met'}",
            f"{_e(built['board'])} ({_e(built.get('device', ''))})"], "good" if met else "bad"))
    elif built:
        cards.append(_card("Build", [f"project for {_e(built['board'])} written for the "
                                     f"vendor tools; nothing measured"], "none"))
    else:
        cards.append(_card("Build", [f"not built yet: <code>qloom build "
                                     f"{_e(f.out_dir.name)}</code>"], "none"))
    return f'<section id="summary" class="cards">{"".join(cards)}</section>'


def _engines(f: ReportFiles) -> str:
    c = f.compiled
    bars = _bars(c)
    rows, classes = [], []
    total = {k: 0 for k in charts.RESOURCE_KINDS}
    for layer in c["layers"]:
        r = layer["resources"]
        for k in total:
            total[k] += r.get(k, 0)
        fold = ", ".join(f"{k}={v}" for k, v in layer.get("fold", {}).items())
        rows.append([layer["name"], layer.get("engine", ""), " + ".join(layer.get("layers", [])),
                     fold, _num(layer["cycles_per_frame"])]
                    + [_num(r.get(k, 0)) for k in charts.RESOURCE_KINDS])
        classes.append("hot" if layer["name"] == c["bottleneck"] else "")
    rows.append(["total", "", "", "", ""] + [_num(total[k]) for k in charts.RESOURCE_KINDS])
    classes.append("total")
    table = _table(["engine", "template", "ONNX layers", "folding", "cycles/frame", "LUT",
                    "FF", "BRAM", "DSP"], rows, classes, numeric_from=4)
    sim_ii = f.simulated["ii_cycles"] if f.simulated else None
    cycles = _figure("fig-cycles", charts.layer_cycles_chart(bars, c["ideal_ii_cycles"], sim_ii),
                     f"Cycles per frame of each engine (the cost model's, which the templates "
                     f"own). The slowest, <code>{_e(c['bottleneck'])}</code> (red), sets the "
                     f"initiation interval." + (" The dotted line is the II the simulation "
                                                "measured." if sim_ii is not None else ""))
    resources = _figure("fig-resources", charts.layer_resources_chart(bars),
                        "Estimated resources of each engine, the bottleneck in red. FIFOs and "
                        "width converters between engines and the board's host link are not "
                        "in these rows.")
    return (f'<section id="engines"><h2>Engines</h2>\n{table}\n{cycles}\n{resources}'
            f'</section>')


def _budget(f: ReportFiles) -> str:
    c, built = f.compiled, f.built
    board = c.get("board")
    measured_build = built if built and built.get("measured") else None
    if measured_build:
        util = measured_build.get("utilization", {})
        estimated = measured_build["estimated"]
        measured = measured_build["measured"]
        budget = {k: util[k]["available"] for k in charts.RESOURCE_KINDS if k in util}
        error = measured_build.get("estimate_error") or {}
        rows = [[k.upper(), _num(estimated.get(k)), _num(measured.get(k)), _num(budget.get(k)),
                 "–" if error.get(k) is None else f"{100 * error[k]:+.0f}%"]
                for k in charts.RESOURCE_KINDS]
        if measured_build.get("estimated_logic_cells") is not None and "lut" in util:
            cells = util["lut"]
            rows.append(["logic cells", _num(measured_build["estimated_logic_cells"]),
                         _num(cells.get("used")), _num(cells.get("available")), ""])
        table = _table(["resource", "estimated (with host link)", "measured", "available",
                        "estimate error"], rows)
        chart = charts.budget_chart(estimated, budget, measured)
        caption = (f"Estimated against measured on {_e(measured_build['board'])}, as a share "
                   f"of the device. The estimate counts the accelerator and the host link; "
                   f"measured LUTs and FFs are Yosys' counts (on the ECP5 nextpnr then moves "
                   f"block RAM read registers into the blocks, so it places fewer FFs), BRAM "
                   f"and DSP as nextpnr placed them. Per-engine figures are estimates only: "
                   f"synthesis flattens the design.")
        title = "Estimated against measured"
    elif board:
        budget = board["budget"]
        rows = [[k.upper(), _num(c["resources"].get(k, 0)), _num(budget.get(k)),
                 f"{100 * c['resources'].get(k, 0) / budget[k]:.0f}%" if budget.get(k) else "–"]
                for k in charts.RESOURCE_KINDS]
        if board.get("logic_cells") is not None:
            rows.append(["logic cells", _num(board["logic_cells"]), "", ""])
        table = _table(["resource", "estimated", "budget", "share"], rows)
        chart = charts.budget_chart(c["resources"], budget, None)
        caption = (f"The accelerator's estimate against {_e(board['name'])}'s budget (the host "
                   f"link that <code>qloom build</code> adds is not included). Build the "
                   f"design to compare with what Yosys and nextpnr measure.")
        title = "Estimate against the board"
    else:
        return ('<section id="budget"><h2>Resources against a board</h2><p>Compiled without '
                '<code>--board</code>: there is no budget to compare with.</p></section>')
    return (f'<section id="budget"><h2>{title}</h2>\n{table}\n'
            f'{_figure("fig-budget", chart, caption)}</section>')


def _timing(f: ReportFiles) -> str:
    built = f.built
    head = '<section id="timing"><h2>Clock and critical path</h2>'
    if not built:
        return head + (f"<p>Not built: <code>qloom build {_e(f.out_dir.name)}</code> places "
                       f"and routes the design and measures its Fmax.</p></section>")
    if built.get("target") == "asic":
        return head + asic_html.timing_section(built) + "</section>"
    if built.get("fmax_mhz") is None:
        return head + ("<p>The build is a project for the vendor tools (not run here); no "
                       "timing was measured.</p></section>")
    met = built.get("timing_met")
    lines = [f"<p>nextpnr reports <b>{built['fmax_mhz']:g} MHz</b> for the accelerator's "
             f"clock against a target of {built['target_mhz']:g} MHz: timing "
             f"<b class=\"{'good' if met else 'bad'}\">{'met' if met else 'NOT met'}</b>"
             f" (slack {1e3 / built['target_mhz'] - 1e3 / built['fmax_mhz']:+.2f} ns)."]
    pll = built.get("pll")
    if pll:
        lines.append(f" The PLL makes {pll.get('achieved_mhz', '?')} MHz from the board's "
                     f"oscillator; the host link runs at {_num(built.get('baud'))} baud.")
    clock = built["target_mhz"]
    lines.append(f" At {clock:g} MHz the ideal II of {_num(f.compiled['ideal_ii_cycles'])} "
                 f"cycles is {_num(clock * 1e6 / f.compiled['ideal_ii_cycles'])} frames/s.")
    lines.append("</p>")
    chart = _figure("fig-fmax", charts.fmax_chart(built.get("fmax_by_clock", {}),
                                                   built["target_mhz"]),
                    "Achieved Fmax per clock domain (bars, red when under its constraint) "
                    "against the constraint (black tick) and the target clock (dotted).")
    paths = built.get("critical_path") or []
    rows = [[p.get("from"), p.get("to"), p.get("start"), p.get("end"),
             f"{p.get('delay_ns', 0):.2f}", _num(p.get("logic_levels"))] for p in paths]
    table = (_table(["from clock", "to clock", "start cell", "end cell", "delay (ns)",
                     "logic levels"], rows, numeric_from=4, css="paths") if rows else
             "<p>nextpnr reported no synchronous critical path.</p>")
    return (head + "".join(lines) + "\n" + chart + "\n<h3>Critical paths</h3>\n" + table
            + "</section>")


def _simulation(f: ReportFiles) -> str:
    sim, c = f.simulated, f.compiled
    head = '<section id="simulation"><h2>Simulation</h2>'
    if not sim:
        return head + (f"<p>Not simulated: <code>qloom simulate {_e(f.out_dir.name)}</code> "
                       f"checks the RTL bit for bit and measures latency and II.</p></section>")
    clock = c["clock_mhz"]
    ii = sim["ii_cycles"]
    rows = [["frames", _num(sim["frames"])], ["mismatching frames", _num(sim["mismatches"])],
            ["simulator / bench", f"{sim.get('simulator', '?')} / {sim.get('bench', '?')}"],
            ["backpressure", f"{sim.get('backpressure', 0):g}"],
            ["latency (frame 0)", f"{_num(sim['latency_cycles'])} cycles = "
                                  f"{sim['latency_cycles'] / clock:,.2f} µs at {clock:g} MHz"],
            ["II (measured)", "– (fewer than 3 frames)" if ii is None else
             f"{ii:,.1f} cycles = {clock * 1e6 / ii:,.0f} frames/s at {clock:g} MHz"],
            ["II (ideal)", f"{_num(c['ideal_ii_cycles'])} cycles"]]
    table = _table(["", "value"], rows, ["", "bad" if sim["mismatches"] else ""] + [""] * 5)
    return head + "\n" + table + "\n" + _timeline(f) + "</section>"


def _timeline(f: ReportFiles) -> str:
    stamps = f.simulated.get("frame_cycles")
    if not stamps or not stamps.get("in"):
        return ("<p>No timeline: this <code>sim/results.json</code> has no per-frame cycle "
                "stamps (an older qloom wrote it); simulate again to draw one.</p>")
    frames = min(len(stamps["in"]), len(stamps["out"]), TIMELINE_FRAMES)
    ports = {"input": [tuple(s) for s in stamps["in"][:frames]],
             "output": [tuple(s) for s in stamps["out"][:frames]]}
    layers = f.compiled["layers"]
    busy = charts.pipeline_timeline(layers, [s[0] for s in ports["input"]])
    order = [layer["name"] for layer in layers]
    last = max(busy, key=lambda name: busy[name][0][1])
    estimated = busy[last][0][1] - ports["input"][0][0]
    measured = ports["output"][0][1] - ports["input"][0][0]
    caption = (f"The first {frames} frames. The input and output rows are measured: the "
               f"cycles at which each frame's first and last word were accepted by the "
               f"design and taken from it. The simulation records nothing inside the "
               f"accelerator, so the engine rows are <b>estimated</b> from each engine's "
               f"cycles per frame: an engine starts a frame when the engines feeding it "
               f"have finished it and it has finished the frame before. Real engines "
               f"overlap, and add pipeline and FIFO delays the cycle counts leave out: "
               f"this model puts frame 0's last result {_num(estimated)} cycles after its "
               f"first input word, the simulation measured {_num(measured)}.")
    return _figure("fig-timeline", charts.timeline_chart(busy, ports, order), caption)


_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto;
       max-width: 72em; padding: 0 1em; color: #222; line-height: 1.4; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
.meta { color: #555; }
.cards { display: flex; flex-wrap: wrap; gap: 1em; }
.card { flex: 1 1 14em; border: 1px solid #ccc; border-left: 6px solid #4c78a8;
        border-radius: 4px; padding: 0.4em 0.9em; }
.card h3 { margin: 0.3em 0; font-size: 1em; } .card p { margin: 0.3em 0; }
.card.good { border-left-color: #54a24b; } .card.bad { border-left-color: #e45756; }
.card.none { border-left-color: #bbb; color: #555; }
b.good { color: #2e7d32; } b.bad { color: #c62828; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.92em; }
th, td { border-bottom: 1px solid #e3e3e3; padding: 0.25em 0.7em; text-align: left; }
th.n, td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.hot td { background: #fde8e7; font-weight: 600; } tr.total td { font-weight: 600; }
tr.bad td { background: #fde8e7; }
table.paths td { overflow-wrap: anywhere; font-family: ui-monospace, monospace;
                 font-size: 0.9em; }
figure { margin: 1.2em 0; } figure svg { max-width: 100%; height: auto; }
figcaption { color: #444; font-size: 0.92em; max-width: 60em; }
code { background: #f3f3f3; padding: 0 0.2em; border-radius: 3px; }
footer { margin-top: 3em; color: #777; font-size: 0.85em; }
"""


def render_html(f: ReportFiles, shown_as: Path | None = None) -> str:
    """The page for the design folder ``f`` was read from; ``shown_as`` is the folder name
    to print (the compile step writes the page in a staging folder)."""
    if shown_as is not None:
        f = dataclasses.replace(f, out_dir=Path(shown_as))
    c = f.compiled
    folder = f.out_dir.name
    board = c.get("board")
    made_from = ["manifest.json", "report.json"]
    made_from += ["sim/results.json"] if f.simulated else []
    made_from += ["build/report.json"] if f.built else []
    meta = (f"design <code>{_e(folder)}</code> · "
            f"{'board ' + _e(board['name']) if board else 'no board'} · clock "
            f"{c['clock_mhz']:g} MHz · folding {_e(c.get('folding', '?'))} · resource model "
            f"{_e(c.get('family', '?'))} · made from {_e(', '.join(made_from))}")
    body = [f"<h1>qloom report: {_e(c['model'])}</h1>", f'<p class="meta">{meta}</p>',
            _summary(f), _engines(f), _budget(f), _timing(f), _simulation(f),
            f"<footer>Written by qloom {_e(__version__)}. One self-contained file: no "
            f"scripts, nothing loaded from elsewhere. <code>qloom report {_e(folder)}</code> "
            f"writes it again.</footer>"]
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>qloom report: {_e(c['model'])}</title>\n<style>{_STYLE}</style>\n"
            "</head>\n<body>\n" + "\n".join(body) + "\n</body>\n</html>\n")


def write_report_html(out_dir, *, shown_as=None, required: bool = True) -> Path | None:
    """Write ``OUT/report.html`` from the files in ``out_dir`` and return its path.

    ``required=False`` (what simulate and build pass) returns None without a page when
    OUT has no ``report.json`` (a folder with a hand-written manifest can be simulated and
    built, but there is no compile report to draw), and warns instead of failing when
    OUT's result files cannot be drawn (written by another qloom version, or by hand):
    the step's own results, already installed, stand.

    The page is written next to its final name and renamed over it, so that a reader
    never sees half a page. Otherwise a QloomError (an unreadable or foreign results
    file) passes through; anything else is a bug and is reported as one, never
    swallowed."""
    out = Path(out_dir)
    target = out / HTML_NAME
    if not required and not (out / "report.json").exists():
        return None
    if target.is_symlink() or (target.exists() and not target.is_file()):
        raise QloomError(f"{target} is not a file qloom wrote (a link or a folder); move it "
                         f"away and run `qloom report {out}`")
    try:
        files = ReportFiles.read(out)
    except QloomError as e:
        if required:
            raise
        # A refresh after simulate or build: their results stand; only the page is old.
        warnings.warn(f"{target} was not redrawn: {e}", stacklevel=2)
        return None
    tmp = out / f".{HTML_NAME}.{os.getpid()}.tmp"
    try:
        page = render_html(files, shown_as=Path(shown_as) if shown_as else None)
        tmp.write_text(page, encoding="utf-8")
        os.replace(tmp, target)
    except QloomError:
        raise
    except OSError as e:
        raise QloomError(f"cannot write {target}: {e.strerror or e}") from None
    except Exception as e:      # a bug in the page or its charts: one line, cause chained
        raise InternalError(f"qloom failed to write {target}: {type(e).__name__}: {e} (this "
                            f"is a bug in qloom, please report it; `qloom report {out}` "
                            f"tries again)", e) from e
    finally:
        tmp.unlink(missing_ok=True)
    return target
