"""The ASIC build's part of ``OUT/report.html`` (drawn by ``qloom.flows.report.html``)."""

from __future__ import annotations

from html import escape

__all__ = ["REQUIRED", "summary_card", "timing_section"]

# The keys of an ASIC build/report.json the page needs.
REQUIRED = ("target", "pdk", "clock_mhz", "fmax_mhz", "power_mw", "energy_nj_per_frame",
            "area_um2", "cells", "drc_errors", "lvs_match", "gate_level_sim")


def summary_card(r: dict) -> tuple[str, list[str], str]:
    """(title, lines, state) of the build's summary card."""
    g = r["gate_level_sim"]
    good = r["drc_errors"] == 0 and r["lvs_match"] and g["mismatches"] == 0
    return ("ASIC build", [
        f"Fmax <b>{r['fmax_mhz']:g} MHz</b> post-route on {escape(r['pdk'])}",
        f"{r['cells']:,} cells, {r['area_um2'] / 1e6:.3f} mm2; {r['power_mw']:.3g} mW, "
        f"{r['energy_nj_per_frame']:.3g} nJ/frame at {r['clock_mhz']:g} MHz",
        f"DRC {r['drc_errors']}, LVS {'match' if r['lvs_match'] else 'MISMATCH'}, "
        f"gate-level {g['frames']} frames, {g['mismatches']} mismatching"],
        "good" if good else "bad")


def timing_section(r: dict) -> str:
    """The paragraph of the clock section for an ASIC build."""
    return (f"<p>OpenSTA reports <b>{r['fmax_mhz']:g} MHz</b> for the routed {escape(r['pdk'])} "
            f"netlist with qrouter's extracted wire parasitics (typical corner), a worst "
            f"setup slack of {r['worst_slack_ns']:+.3f} ns at {r['clock_mhz']:g} MHz. Power "
            f"at that clock, from the toggles of the gate-level simulation: "
            f"{r['power_mw']:.4g} mW, {r['energy_nj_per_frame']:.4g} nJ per frame. Details "
            f"in <code>build/report.md</code>.</p>")
