"""``qloom build OUT --target asic --pdk P``: OUT's accelerator core through the open
standard-cell flow into ``OUT/build`` (complete or not at all; a failed run's files go to
``OUT/build-failed``):

- ``qflow/``: qflow's project (``source/qloom_asic.v``, its logs in ``log/``, the routed
  DEF, magic's layout, the GDS ``qloom_asic.gds``);
- ``logs/``: each stage's output, the OpenSTA scripts and reports;
- ``gate_sim/``: the gate-level simulation of the routed netlist (``gate_sim.py``);
- ``report.json`` and ``report.md``.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path

from qloom.errors import QloomError, ToolError
from qloom.hw.target import clock_mhz as target_clock
from qloom.manifest import read_manifest
from qloom.flows import outdir
from qloom.flows.toolchain.unwind import signals_unwind
from qloom.flows.toolchain.asic import layout
from qloom.flows.toolchain.asic.area_fix import patch_min_area
from qloom.flows.toolchain.asic.gate_sim import gate_level_sim
from qloom.flows.toolchain.asic.pdk import check_tools, get_pdk
from qloom.flows.toolchain.asic.ports import (ASIC_TOP, AsicTop, netlist_nets, read_ports,
                                              unused_inputs)
from qloom.flows.toolchain.asic.report_md import render_asic_md
from qloom.flows.toolchain.asic.sta import fix_spef, run_sta
from qloom.flows.toolchain.asic.stages import (STAGES, run_stage, write_placement_options,
                                               write_project)

__all__ = ["build_asic_flow", "AsicBuild", "DEFAULT_FRAMES"]

DEFAULT_FRAMES = 20


@dataclass(frozen=True)
class AsicBuild:
    build_dir: Path
    report: dict


def _area(out: Path, name: str) -> outdir.Area:
    """``OUT/NAME``, checked and cleaned of a killed run's staging folders (as the board
    build does)."""
    return outdir.Area.at(out / name, f"OUT/{name}", outdir.is_subfolder,
                          hint="move it away and build again").prepare()


def _check_options(clock_mhz, density, frames):
    if clock_mhz is not None and not (isinstance(clock_mhz, (int, float))
                                      and math.isfinite(clock_mhz) and clock_mhz > 0):
        raise QloomError(f"the clock must be a positive number of MHz, not {clock_mhz!r}")
    if density is not None and not (isinstance(density, (int, float)) and 0.1 <= density <= 1):
        raise QloomError(f"the density must be a cell density between 0.1 and 1 (the "
                         f"share of the core the cells cover), not {density!r}")
    if not isinstance(frames, int) or isinstance(frames, bool) or frames < 1:
        raise QloomError(f"the number of gate-level frames must be a positive integer, "
                         f"not {frames!r}")


def _check_design(manifest: dict, out: Path):
    if manifest.get("flash"):
        raise QloomError(f"{out} keeps its weights in the iCE40's SPRAM (loaded from a flash): "
                         f"an ASIC has no such memory; compile without --board for the ASIC")
    if manifest.get("sim_rtl"):
        raise QloomError(f"{out}'s RTL instantiates FPGA primitives (simulation models "
                         f"{', '.join(manifest['sim_rtl'])}): compile without --board for "
                         f"the ASIC flow")


def _synthesize(project: Path, rtl: str, top: AsicTop, pdk, density, logs: Path):
    """qflow's synthesis; once more without any input bit the first pass left unused
    (an unconnected pin would fail DRC)."""
    for attempt in (1, 2):
        write_project(project, rtl + "\n" + top.wrapper("qloom_top"), density)
        seconds = run_stage(STAGES[0], project, pdk.name, logs).seconds
        netlist = (project / f"{ASIC_TOP}.rtlnopwr.v").read_text()
        unused = unused_inputs(netlist, top)
        if not unused:
            return top, seconds
        if attempt == 2:
            raise ToolError(f"synthesis left input bits {sorted(unused)} unused after they "
                            f"were dropped once; log: {logs / 'synthesize.out'}")
        print(f"[qloom] inputs {sorted(unused)} drive nothing: synthesizing without them",
              flush=True)
        top = AsicTop(top.ports, top.dropped | unused)
        shutil.rmtree(project)


def _layout(out: Path, project: Path, logs: Path, manifest: dict, pdk, density):
    """Synthesis to GDS: the chip's top, seconds per stage and the stages' facts."""
    rtl = "\n".join((out / name).read_text() for name in manifest["rtl"])
    last = ("i__payload", manifest["input"]["last_bit"])
    top = AsicTop(tuple(read_ports(rtl, manifest.get("top", "qloom_top"))), frozenset([last]))
    top, synth_seconds = _synthesize(project, rtl, top, pdk, density, logs)
    cells = sum(layout.cell_counts((project / f"{ASIC_TOP}.rtlnopwr.v").read_text()).values())
    fast = write_placement_options(project, pdk.file(f"{pdk.name}.par"), cells)
    seconds, facts = {"synthesize": round(synth_seconds, 2)}, {"placement_speedup": fast}
    for stage in STAGES[1:]:
        print(f"[qloom] {stage.name} ({pdk.name})", flush=True)
        result = run_stage(stage, project, pdk.name, logs)
        seconds[stage.name] = round(result.seconds, 2)
        facts.update(result.facts)
        if stage.name == "migrate":
            facts["min_area_patches"] = patch_min_area(project, pdk.lef_path, logs)
    return top, seconds, facts


def _run(out: Path, tmp: Path, manifest: dict, pdk, clock: float, density, frames, seed,
         network) -> dict:
    project, logs = tmp / "qflow", tmp / "logs"
    logs.mkdir()
    top, seconds, facts = _layout(out, project, logs, manifest, pdk, density)
    netlist = project / f"{ASIC_TOP}.rtlnopwr.v"
    spef = project / f"{ASIC_TOP}.fixed.spef"
    spef.write_text(fix_spef((project / f"{ASIC_TOP}.spef").read_text(),
                             netlist_nets(netlist.read_text())))
    timing = run_sta(project, pdk.liberty_path, netlist, spef, clock, logs, name="sta_timing")
    if timing.fmax_mhz < clock:
        raise ToolError(f"ASIC flow stage 'sta': timing missed at {clock:g} MHz (post-route "
                        f"Fmax {timing.fmax_mhz:g} MHz, worst slack "
                        f"{timing.worst_slack_ns:+.3f} ns); try --clock-mhz "
                        f"{math.floor(timing.fmax_mhz * 0.95)} or lower, or a lower "
                        f"--density; report: {timing.report}")
    print(f"[qloom] post-route Fmax {timing.fmax_mhz:g} MHz; gate-level simulation of "
          f"{frames} frames", flush=True)
    sim, activity = gate_level_sim(tmp / "gate_sim", out, top, netlist, pdk, network=network,
                                   frames=frames, seed=seed)
    if sim["mismatches"]:
        m = sim["first_mismatch"]
        raise ToolError(f"gate-level simulation: {sim['mismatches']} of {frames} frames of "
                        f"the routed netlist differ from the integer network (first: frame "
                        f"{m['frame']}, element {m['index']}: expected {m['expected']}, got "
                        f"{m['got']}); results: {tmp / 'gate_sim' / 'sim' / 'results.json'}")
    tcl = logs / "activity.tcl"
    tcl.write_text(activity.tcl({pin for p in top.ports if p.direction == "input"
                                 for _, pin in top.pins(p)}))
    power = run_sta(project, pdk.liberty_path, netlist, spef, clock, logs, activity=tcl,
                    name="sta_power")
    return _report(out, project, netlist, pdk, clock, density, frames, seed, top, seconds,
                   facts, timing, power, sim, activity)


def _report(out, project, netlist, pdk, clock, density, frames, seed, top, seconds, facts,
            timing, power, sim, activity) -> dict:
    counts = layout.cell_counts(netlist.read_text())
    setup = (pdk.folder / f"{pdk.name}.sh").read_text()
    fill = counts.pop(layout.fill_cell(setup), 0)
    width, height, core = layout.die_area_um2((project / f"{ASIC_TOP}.def").read_text())
    power_mw = power.power_w["total"] * 1e3
    seconds_per_frame = activity.cycles / frames / (clock * 1e6)
    return {
        "target": "asic", "pdk": pdk.name, "pdk_title": pdk.title, "node_um": pdk.node_um,
        "supply_v": pdk.supply_v, "corner": "typical (the kit's one liberty)",
        "clock_mhz": clock, "density": density,
        "cells": sum(counts.values()), "cells_by_type": dict(counts.most_common()),
        "fill_cells": fill,
        "flip_flops": sum(n for c, n in counts.items() if c.startswith("DFF")),
        "area_um2": core, "core_um": [width, height],
        "cell_area_um2": layout.cell_area_um2(counts, pdk.liberty_path),
        "fmax_mhz": timing.fmax_mhz, "worst_slack_ns": round(timing.worst_slack_ns, 4),
        "timing_met": True,
        "power_mw": round(power_mw, 4),
        "power_mw_by_kind": {k: round(v * 1e3, 4) for k, v in power.power_w.items()},
        "energy_nj_per_frame": round(power_mw * 1e-3 * seconds_per_frame * 1e9, 4),
        "activity": {"source": f"gate-level simulation of {frames} random frames (seed "
                               f"{seed})", "cycles": activity.cycles,
                     "mean_toggles_per_net_per_cycle": round(activity.mean, 5)},
        "drc_errors": facts["drc_errors"], "failed_routes": facts["failed_routes"],
        "placement_speedup": facts["placement_speedup"],
        "min_area_patches": facts["min_area_patches"],
        "lvs_match": facts["lvs_match"],
        "gds": str(out / "build" / "qflow" / f"{ASIC_TOP}.gds"),
        "gds_cell_views": layout.gds_cell_views(
            (project / "log" / "gdsii.log").read_text(errors="replace"), pdk.folder, setup),
        "dropped_inputs": [f"{name}[{bit}]" for name, bit in sorted(top.dropped)],
        "gate_level_sim": {"frames": sim["frames"], "mismatches": sim["mismatches"],
                           "simulator": sim["simulator"], "cycles": sim["cycles"],
                           "latency_cycles": sim["latency_cycles"],
                           "ii_cycles": sim["ii_cycles"]},
        "stage_seconds": seconds,
    }


def build_asic_flow(out_dir, *, pdk: str = "osu018", clock_mhz: float | None = None,
                    density: float | None = None, frames: int = DEFAULT_FRAMES,
                    seed: int = 0, network=None):
    """Run the flow for OUT's design (``network``: the loaded Network when OUT keeps no
    model file). ``clock_mhz``: the clock timing is checked at and power computed for
    (default: the compiled clock); ``density``: the placement's cell density (default:
    graywolf's own)."""
    from qloom.flows.report.html import write_report_html
    _check_options(clock_mhz, density, frames)
    check_tools()
    kit = get_pdk(pdk)
    out = Path(out_dir)
    manifest = read_manifest(out, ports=True)
    _check_design(manifest, out)
    if network is None and not manifest.get("model_file"):
        raise QloomError(f"{out} keeps no model file: pass the Network (network=...) for "
                         f"the gate-level check")
    if network is None:
        from qloom.manifest import load_network
        network = load_network(out, manifest)
    clock = target_clock(clock_mhz, recorded=manifest.get("clock_mhz"))
    area, failed = _area(out, "build"), _area(out, "build-failed")
    print(f"[qloom] ASIC flow: {kit.title}, clock {clock:g} MHz", flush=True)
    with signals_unwind():
        tmp = area.staging()
        try:
            report = _run(out, tmp, manifest, kit, clock, density, frames, seed, network)
            (tmp / "report.json").write_text(json.dumps(report, indent=1))
            (tmp / "report.md").write_text(render_asic_md(report))
        except ToolError as e:
            failed.install(tmp)
            raise ToolError(str(e).replace(str(tmp), str(failed.path))) from None
        except BaseException:
            area.discard(tmp)
            raise
        area.install(tmp)
    write_report_html(out, required=False)
    print(f"[qloom] {report['cells']:,} cells, core {report['area_um2']:,.0f} um2, Fmax "
          f"{report['fmax_mhz']:g} MHz, {report['power_mw']:.3f} mW at {clock:g} MHz = "
          f"{report['energy_nj_per_frame']:.4g} nJ/frame; DRC {report['drc_errors']}, LVS "
          f"{'match' if report['lvs_match'] else 'MISMATCH'}, gate-level "
          f"{report['gate_level_sim']['frames']} frames exact; GDS {report['gds']}")
    return AsicBuild(out / "build", report)
