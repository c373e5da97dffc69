"""OUT/report.html: written by compile, refreshed by simulate and build, rebuilt by
``qloom report``; self-contained (no URL but SVG's namespace names), with the engines,
the bottleneck, the budget, the build's measurements and the simulation's timeline."""

import json
import re
import shutil

import pytest

from qloom.errors import InternalError, QloomError
from qloom.flows.report import charts as report_charts
from qloom.flows.cli import main
from qloom.flows.compile.steps import compile_model
from qloom.flows.report.html import ReportFiles, render_html, write_report_html
from qloom.flows.report.charts import pipeline_timeline

from nets import binary_mlp, residual_mlp

needs_icarus = pytest.mark.skipif(shutil.which("iverilog") is None,
                                  reason="Icarus Verilog is not installed (apt-get install iverilog)")

# What a page may never hold: anything a browser would fetch or run.
_FETCHING = re.compile(r"<script|<link|<img|<iframe|<object|<embed|@import|url\((?!#)|\bsrc=",
                       re.I)


def _assert_self_contained(page: str):
    assert not _FETCHING.search(page), _FETCHING.search(page).group(0)
    assert all(h.startswith("#") for h in re.findall(r'href="([^"]*)"', page))
    namespaces = set(re.findall(r'xmlns(?::\w+)?="([^"]+)"', page))
    assert namespaces <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}
    urls = re.findall(r"[a-z][a-z0-9+.-]*://[^\s\"'<>)]+", page, re.I)
    assert set(urls) <= namespaces, sorted(set(urls) - namespaces)
    # every namespace name appears only as an xmlns value
    for url in namespaces:
        assert page.count(url) == len(re.findall(rf'xmlns(?::\w+)?="{re.escape(url)}"', page))


def _figures(page: str) -> list[str]:
    return re.findall(r'<figure id="([\w-]+)">\s*<svg', page)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    out = tmp_path_factory.mktemp("html") / "mlp"
    design = compile_model(binary_mlp(), out, board="icebreaker")
    return out, design


def test_compile_writes_a_self_contained_page(compiled):
    out, design = compiled
    page = (out / "report.html").read_text()
    _assert_self_contained(page)
    report = design.report
    assert _figures(page) == ["fig-cycles", "fig-resources", "fig-budget"]
    for layer in report["layers"]:
        # in the table, and as a tick label of the per-engine charts (SVG text stays text)
        assert f"<td>{layer['name']}</td>" in page or f"<td>{layer['name']}</td>" in page
        assert page.count(f">{layer['name']}</text>") >= 2, layer["name"]
    hot = re.findall(r'<tr class="hot"><td>([^<]+)</td>', page)
    assert hot == [report["bottleneck"]]
    assert f"{report['ideal_ii_cycles']:,}" in page
    assert "not simulated yet" in page and "not built yet" in page
    assert "fits icebreaker" in page
    assert f"<code>{out.name}</code>" in page and ".stage-" not in page, \
        "the page names OUT, not the staging folder it was written in"


def test_page_is_the_same_every_time(compiled):
    out, _ = compiled
    assert render_html(ReportFiles.read(out)) == render_html(ReportFiles.read(out))


@needs_icarus
def test_simulate_adds_latency_ii_and_a_timeline(tmp_path):
    out = tmp_path / "res"
    net = residual_mlp()
    design = compile_model(net, out)
    results = design.simulate(random=5, seed=2, progress=False)
    page = (out / "report.html").read_text()
    _assert_self_contained(page)
    assert _figures(page) == ["fig-cycles", "fig-resources", "fig-timeline"]
    assert "no budget to compare with" in page, "compiled without --board"
    stamps = results["frame_cycles"]
    assert len(stamps["in"]) == len(stamps["out"]) == 5
    assert stamps["out"][0][1] - stamps["in"][0][0] == results["latency_cycles"]
    assert f"the simulation measured {results['latency_cycles']:,}" in page
    assert f"{results['ii_cycles']:,.1f} cycles" in page
    timeline = page[page.index('<figure id="fig-timeline">'):]
    for layer in design.report["layers"]:
        assert f">{layer['name']}</text>" in timeline
    assert ">output (measured)</text>" in timeline and ">frame 4</text>" in timeline
    assert "<b>5</b> frames, <b>0</b> mismatching" in page


def test_timeline_follows_the_graph():
    """a -> b -> d and a -> c -> d: d waits for the slower branch; each engine waits for
    its own previous frame."""
    layers = [{"name": "a", "inputs": ["x"], "output": "ta", "cycles_per_frame": 10},
              {"name": "d", "inputs": ["tb", "tc"], "output": "td", "cycles_per_frame": 4},
              {"name": "b", "inputs": ["ta"], "output": "tb", "cycles_per_frame": 3},
              {"name": "c", "inputs": ["ta"], "output": "tc", "cycles_per_frame": 7}]
    busy = pipeline_timeline(layers, [0, 2])
    assert busy["a"] == [(0, 10), (10, 20)]
    assert busy["b"] == [(10, 13), (20, 23)]
    assert busy["c"] == [(10, 17), (20, 27)]
    assert busy["d"] == [(17, 21), (27, 31)]


def _build_report(out, *, timing_met=True):
    """A build/report.json as ``qloom build`` writes it (keys and shapes of a real
    iCEBreaker build of TFC-w1a1): the renderer's input, no build claimed."""
    report = {
        "board": "icebreaker", "device": "iCE40UP5K", "target_mhz": 42.75,
        "fmax_mhz": 47.44 if timing_met else 30.5, "timing_met": timing_met,
        "fmax_by_clock": {"clk": {"achieved": 47.44 if timing_met else 30.5,
                                  "constraint": 42.75}},
        "critical_path": [{"from": "posedge clk", "to": "posedge clk",
                           "start": "core.accelerator.dense0.acc_DFFLC",
                           "end": "core.accelerator.dense2.buffer[0]_DFFLC",
                           "delay_ns": 21.081, "logic_levels": 4}],
        "pll": {"achieved_mhz": 42.75}, "baud": 1000000,
        "utilization": {"lut": {"used": 4152, "available": 5280, "cell": "ICESTORM_LC"},
                        "ff": {"used": 2472, "available": 5280, "cell": "yosys"},
                        "dsp": {"used": 0, "available": 8, "cell": "ICESTORM_DSP"},
                        "bram": {"used": 22, "available": 30, "cell": "ICESTORM_RAM"}},
        "estimated": {"lut": 2290, "ff": 2458, "dsp": 0, "bram": 21},
        "estimated_logic_cells": 3929,
        "measured": {"lut": 2552, "ff": 2472, "dsp": 0, "bram": 22},
        "estimate_error": {"lut": -0.103, "ff": -0.006, "dsp": None, "bram": -0.045},
    }
    (out / "build").mkdir(exist_ok=True)
    (out / "build" / "report.json").write_text(json.dumps(report))


def test_build_adds_estimate_against_measured_and_the_critical_path(tmp_path, compiled):
    out = tmp_path / "built"
    shutil.copytree(compiled[0], out)
    _build_report(out, timing_met=False)
    page = (write_report_html(out)).read_text()
    _assert_self_contained(page)
    assert _figures(page) == ["fig-cycles", "fig-resources", "fig-budget", "fig-fmax"]
    assert "Estimated against measured" in page
    assert "<td>LUT</td><td class=\"n\">2,290</td><td class=\"n\">2,552</td>" in page
    assert "-10%" in page
    assert "core.accelerator.dense0.acc_DFFLC" in page and "21.08" in page
    assert "timing <b class=\"bad\">NOT met</b>" in page
    assert "measured (Yosys / nextpnr)" in page


def test_old_results_without_stamps_say_so(tmp_path, compiled):
    out = tmp_path / "old"
    shutil.copytree(compiled[0], out)
    (out / "sim").mkdir()
    (out / "sim" / "results.json").write_text(json.dumps(
        {"frames": 3, "mismatches": 1, "latency_cycles": 40, "ii_cycles": 12.0,
         "simulator": "icarus"}))
    page = write_report_html(out).read_text()
    assert "no per-frame cycle" in page and "fig-timeline" not in page
    assert '<tr class="bad"><td>mismatching frames</td>' in page


def test_qloom_report_rebuilds_both_reports(tmp_path, compiled, capsys):
    out = tmp_path / "again"
    shutil.copytree(compiled[0], out)
    md = (out / "report.md").read_text()
    assert main(["report", str(out)]) == 0
    html = (out / "report.html").read_text()
    assert f"<code>{out.name}</code>" in html
    (out / "report.md").unlink()
    (out / "report.html").unlink()
    assert main(["report", str(out)]) == 0
    assert (out / "report.md").read_text() == md
    assert (out / "report.html").read_text() == html
    assert f"wrote {out / 'report.html'}" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("what", ["empty", "files", "missing", "file"])
def test_qloom_report_refuses_a_folder_that_is_no_design(tmp_path, capsys, what):
    target = tmp_path / "notes"
    if what == "empty":
        target.mkdir()
    elif what == "files":
        target.mkdir()
        (target / "report.json").write_text("{}")
    elif what == "file":
        target.write_text("hello")
    assert main(["report", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qloom report: error: ") and str(target) in err
    assert "not a compiled design" in err or "not a folder" in err
    assert not (target / "report.html").exists() if target.is_dir() else True


def test_a_report_from_another_version_is_named(tmp_path, compiled):
    out = tmp_path / "foreign"
    shutil.copytree(compiled[0], out)
    report = json.loads((out / "report.json").read_text())
    del report["bottleneck"]
    (out / "report.json").write_text(json.dumps(report))
    with pytest.raises(QloomError, match=r"report\.json lacks 'bottleneck'"):
        write_report_html(out)
    shutil.copy(compiled[0] / "report.json", out / "report.json")
    (out / "sim").mkdir()
    (out / "sim" / "results.json").write_text("[1, 2]")
    with pytest.raises(QloomError, match=r"results\.json must hold a JSON object"):
        ReportFiles.read(out)


def test_a_link_in_place_of_the_page_is_refused(tmp_path, compiled):
    out = tmp_path / "linked"
    shutil.copytree(compiled[0], out)
    mine = tmp_path / "mine.html"
    mine.write_text("my notes")
    (out / "report.html").unlink()
    (out / "report.html").symlink_to(mine)
    with pytest.raises(QloomError, match="not a file qloom wrote"):
        write_report_html(out)
    assert mine.read_text() == "my notes"


def test_a_failing_chart_fails_compile_and_leaves_no_out(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("boom")
    monkeypatch.setattr(report_charts, "layer_cycles_chart", broken)
    out = tmp_path / "never"
    with pytest.raises(InternalError, match=r"failed to write .*report\.html: "
                                            r"ZeroDivisionError: boom"):
        compile_model(binary_mlp(), out)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == []


def test_simulate_and_build_skip_the_page_without_a_compile_report(tmp_path):
    """A folder with a hand-written manifest (no report.json) can still be simulated and
    built: there is no compile report to draw, so no page, and no error."""
    out = tmp_path / "hand"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"format": 1, "top": "t", "rtl": ["t.v"]}))
    assert write_report_html(out, required=False) is None
    assert not (out / "report.html").exists()
    with pytest.raises(QloomError, match="no report.json"):
        write_report_html(out)


# -- in a real browser ---------------------------------------------------------------------

_BROWSER = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)
needs_browser = pytest.mark.skipif(_BROWSER is None, reason="no Chromium to open the page in "
                                                            "(apt-get install chromium)")

# Appended to a copy of the page (the page itself has no script): after load, the size,
# shapes and texts of every figure's SVG as the browser laid them out.
_PROBE = """<script>
window.addEventListener("load", () => {
  const figures = [...document.querySelectorAll("figure")].map(f => {
    const svg = f.querySelector("svg"), box = svg.getBoundingClientRect();
    return {id: f.id, width: box.width, height: box.height,
            shapes: svg.querySelectorAll("path, rect, use").length,
            texts: [...svg.querySelectorAll("text")].map(t => t.textContent)};
  });
  const fetched = performance.getEntriesByType("resource").map(e => e.name);
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify({figures: figures, fetched: fetched});
  document.body.appendChild(pre);
});
</script>"""


def _open_in_browser(page_file, tmp_path) -> tuple[list, list, list]:
    """(figures as Chromium laid them out, what the page fetched, console lines) for the
    page in ``page_file``. Every host name resolves to nothing: nothing leaves the
    machine, and a fetch the page tried still shows in its resource timing."""
    import html as html_lib
    import subprocess
    probe = tmp_path / "probe.html"
    probe.write_text(page_file.read_text().replace("</body>", _PROBE + "</body>"))
    proc = subprocess.run([_BROWSER, "--headless", "--no-sandbox", "--disable-gpu",
                           "--enable-logging=stderr", "--v=0", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update",
                           "--host-resolver-rules=MAP * ~NOTFOUND",
                           f"--user-data-dir={tmp_path / 'profile'}",
                           "--dump-dom", probe.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert found, "the probe did not run: " + proc.stdout[-500:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    probe = json.loads(html_lib.unescape(found.group(1)))
    return probe["figures"], probe["fetched"], console


def _check_rendered(opened: tuple, expected_ids: list, names: list):
    figures, fetched, console = opened
    assert console == [], console
    assert fetched == [], fetched
    assert [f["id"] for f in figures] == expected_ids
    for f in figures:
        assert f["width"] > 300 and f["height"] > 100, f
        assert f["shapes"] > 10, f
    texts = {t for f in figures for t in f["texts"]}
    assert set(names) <= texts, set(names) - texts


@pytest.mark.slow      # make test-all installs Chromium (make setup-all)
@needs_browser
def test_page_renders_in_chromium(tmp_path, compiled):
    out, design = compiled
    _check_rendered(_open_in_browser(out / "report.html", tmp_path),
                    ["fig-cycles", "fig-resources", "fig-budget"],
                    [layer["name"] for layer in design.report["layers"]])


# (model, board, folding): the iCEBreaker where the model fits it (TFC-w2a2 and UNSW-NB15
# need more block RAM than its 30 EBR even fully folded).
BUNDLED = [("tfc_w1a1", "icebreaker", "auto"), ("jettagging_w6a6", "icebreaker", "auto"),
           ("tfc_w2a2", "ulx3s-85f", None), ("unsw_nb15_w2a2", "ulx3s-85f", None)]


@pytest.mark.slow
@needs_browser
@needs_icarus
@pytest.mark.parametrize("name, board, fold", BUNDLED)
def test_bundled_models_page_renders_in_chromium(tmp_path, name, board, fold):
    """Each bundled model compiled for a board and simulated: the page with every chart
    but the build's opens in Chromium with no console message and nothing fetched."""
    from pathlib import Path
    from qloom.flows.simulate import simulate
    model = Path(__file__).parents[3] / "examples" / "models" / f"{name}.onnx"
    out = tmp_path / name
    design = compile_model(model, out, board=board, fold=fold)
    simulate(out, random=6, progress=False)
    _check_rendered(_open_in_browser(out / "report.html", tmp_path),
                    ["fig-cycles", "fig-resources", "fig-budget", "fig-timeline"],
                    [layer["name"] for layer in design.report["layers"]]
                    + ["input (measured)", "output (measured)", "frame 5"])
