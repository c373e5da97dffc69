"""The ASIC build's ``OUT/build/report.md``, from its ``report.json``."""

from __future__ import annotations

__all__ = ["render_asic_md"]


def render_asic_md(r: dict) -> str:
    g = r["gate_level_sim"]
    width, height = r["core_um"]
    views = ("the kit's cell layouts" if r["gds_cell_views"] == "layout" else
             "abstract cell views (the kit ships no cell GDS: cells appear as their LEF "
             "outlines, pins and obstructions; the routing is complete)")
    density = "graywolf's default" if r["density"] is None else f"{r['density']:g}"
    power = r["power_mw_by_kind"]
    lines = [
        f"# qloom ASIC build: {r['pdk']}", "",
        f"- kit: {r['pdk_title']}, {r['supply_v']:g} V, {r['corner']}",
        f"- cells: {r['cells']:,} ({r['flip_flops']:,} flip-flops), cell area "
        f"{r['cell_area_um2']:,.0f} um2; core {width:g} x {height:g} um = "
        f"{r['area_um2']:,.0f} um2 (placement density {density})",
        f"- post-route timing (OpenSTA, extracted wire parasitics): Fmax "
        f"**{r['fmax_mhz']:g} MHz**, worst slack {r['worst_slack_ns']:+.3f} ns at "
        f"{r['clock_mhz']:g} MHz",
        f"- power at {r['clock_mhz']:g} MHz: **{r['power_mw']:.4g} mW** (internal "
        f"{power['internal']:.4g}, switching {power['switching']:.4g}, leakage "
        f"{power['leakage']:.3g} mW); energy **{r['energy_nj_per_frame']:.4g} nJ per "
        f"frame** over the simulated run",
        f"- switching activity: {r['activity']['source']}, {r['activity']['cycles']:,} "
        f"cycles, {r['activity']['mean_toggles_per_net_per_cycle']:.4f} toggles per net "
        f"per cycle on average",
        f"- routing: {r['failed_routes']} failed nets, {r['min_area_patches']} "
        f"minimum-area patches; DRC (magic): {r['drc_errors']} errors; LVS (netgen): "
        f"{'match' if r['lvs_match'] else 'MISMATCH'}",
        f"- gate-level simulation of the routed netlist ({g['simulator']}, cell models): "
        f"{g['frames']} frames, {g['mismatches']} mismatching; latency "
        f"{g['latency_cycles']} cycles, II {g['ii_cycles'] if g['ii_cycles'] is None else round(g['ii_cycles'], 1)}",
        f"- GDS: `{r['gds']}`, with {views}",
    ]
    if r["dropped_inputs"]:
        lines.append(f"- input bits left off the chip (read by no logic): "
                     f"{', '.join(r['dropped_inputs'])}")
    lines += ["", "## Stages", "",
              ", ".join(f"{k} {v:.1f} s" for k, v in r["stage_seconds"].items()), "",
              "## Cells", "", "| cell | count |", "|---|---:|"]
    lines += [f"| {c} | {n:,} |" for c, n in r["cells_by_type"].items()]
    return "\n".join(lines) + "\n"
