"""Gate-level simulation: the routed netlist with the kit's cell models through qloom's
stream harness (``qloom.flows.simulate`` on Icarus), every frame compared with the
integer network bit for bit, and the toggle counts for power (``activity``).

The simulation is a design folder of its own (``gate_sim/`` in the build): a manifest
copied from OUT's with the RTL replaced by a ``qloom_top`` around the routed
``qloom_asic`` (``ports.AsicTop.sim_top``), the netlist and the cell models. The cell
models' ``specify`` delays are not used (Icarus without ``-gspecify``): the simulation
checks function; timing is OpenSTA's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from qloom.manifest import read_manifest, write_manifest
from qloom.flows.toolchain.asic.activity import Activity, counters, read_counts
from qloom.flows.toolchain.asic.pdk import Pdk
from qloom.flows.toolchain.asic.ports import ASIC_TOP, AsicTop, netlist_nets

__all__ = ["gate_level_sim"]

COUNTS = "toggles.txt"


def _design_folder(folder: Path, out: Path, top: AsicTop, netlist: Path, pdk: Pdk,
                   nets: list[str]) -> None:
    rtl = folder / "rtl"
    rtl.mkdir(parents=True)
    manifest = read_manifest(out, ports=True)
    wrapper = top.sim_top(manifest["top"], counters(nets, (folder / COUNTS).resolve()))
    (rtl / "qloom_top.v").write_text(wrapper)
    shutil.copyfile(netlist, rtl / f"{ASIC_TOP}.v")
    shutil.copyfile(pdk.verilog_path, rtl / "cells.v")
    write_manifest(folder, dict(manifest, rtl=["rtl/qloom_top.v", f"rtl/{ASIC_TOP}.v",
                                                "rtl/cells.v"], sim_rtl=[]))


def gate_level_sim(folder: Path, out: Path, top: AsicTop, netlist: Path, pdk: Pdk, *,
                   network, frames: int, seed: int = 0,
                   backpressure: float = 0.0) -> tuple[dict, Activity]:
    """Simulate ``frames`` random frames (seeded) through the routed ``netlist`` in
    ``folder``; returns simulate's results and the nets' activity."""
    from qloom.flows.simulate import simulate
    nets = sorted(netlist_nets(netlist.read_text()))
    _design_folder(folder, out, top, netlist, pdk, nets)
    results = simulate(folder, random=frames, network=network, seed=seed,
                       backpressure=backpressure, progress=False)
    activity = read_counts(folder / COUNTS, nets)
    (folder / "activity.json").write_text(json.dumps(
        {"cycles": activity.cycles, "mean_toggles_per_net_per_cycle": activity.mean}))
    return results, activity
