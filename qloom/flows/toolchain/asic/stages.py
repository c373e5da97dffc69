"""The qflow stages, each run as ``qflow -T PDK STAGE qloom_asic`` in the project folder
(qflow's own scripts drive Yosys, graywolf, qrouter, magic and netgen), with its log
checked: a stage that fails or reports a problem raises a ToolError naming the stage,
its log and what to try.

The project folder holds ``source/qloom_asic.v`` and ``project_vars.sh`` (the options
qflow's scripts read); qflow writes its files there and its logs to ``log/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from qloom.errors import ToolError
from qloom.flows.toolchain import synth
from qloom.flows.toolchain.asic.ports import ASIC_TOP

__all__ = ["Stage", "STAGES", "run_stage", "write_project", "write_placement_options",
           "placement_speedup", "StageResult"]


@dataclass(frozen=True)
class StageResult:
    seconds: float
    facts: dict


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.is_file() else ""


def _route_facts(log: str) -> dict:
    if "Final: No failed routes!" in log:
        return {"failed_routes": 0}
    found = re.findall(r"Final: Failed net routes: (\d+)", log)
    return {"failed_routes": int(found[-1]) if found else None}


def _drc_facts(log: str) -> dict:
    found = re.findall(r"^drc = (\d+)", log, re.M)
    return {"drc_errors": int(found[-1]) if found else None}


def _lvs_facts(log: str) -> dict:
    errors = re.findall(r"^Total errors = (\d+)", log, re.M)
    return {"lvs_match": "Circuits match uniquely" in log or "Netlists match uniquely" in log,
            "lvs_errors": int(errors[-1]) if errors else None}


def _count(n: int | None) -> str:
    return "an unknown number of" if n is None else str(n)


def _no_facts(log: str) -> dict:
    return {}


@dataclass(frozen=True)
class Stage:
    """A qflow stage: its name for qflow, its log in ``log/``, what to read from that log,
    what must hold, and what to try when it fails."""

    name: str
    log: str
    facts: Callable[[str], dict]
    hint: str
    problem: Callable[[dict], str | None] = lambda facts: None


STAGES = (
    Stage("synthesize", "synth.log", _no_facts,
          "the RTL must read in the system Yosys (0.23); see the log for the first error"),
    Stage("place", "place.log", _no_facts, "try a lower --density"),
    Stage("route", "route.log", _route_facts,
          "try a lower --density (more room for wires between the rows)",
          lambda f: None if f["failed_routes"] == 0 else
          f"{_count(f['failed_routes'])} nets failed to route"),
    Stage("backanno", "post_sta.log", _no_facts,
          "rc2dly converts qrouter's wire RC into delays (SPEF); see the log"),
    Stage("migrate", "migrate.log", _no_facts, "magic reads the routed DEF; see the log"),
    Stage("drc", "drc.log", _drc_facts,
          "try a lower --density; magic's `drc listall why` on the layout lists the rules",
          lambda f: None if f["drc_errors"] == 0 else
          f"magic found {_count(f['drc_errors'])} DRC errors"),
    Stage("lvs", "lvs.log", _lvs_facts,
          "netgen compares the layout with the synthesized netlist; comp.out lists the "
          "differences",
          lambda f: None if f["lvs_match"] and not f["lvs_errors"] else
          f"LVS: the layout does not match the netlist ({f['lvs_errors']} errors)"),
    Stage("gdsii", "gdsii.log", _no_facts, "magic writes the GDS; see the log"),
)


def write_project(folder: Path, source: str, density: float | None) -> None:
    """The project folder qflow works in: the chip's Verilog and the options."""
    (folder / "source").mkdir(parents=True)
    (folder / "source" / f"{ASIC_TOP}.v").write_text(source)
    lines = ["# qloom: options for qflow's scripts"]
    if density is not None:
        # graywolf's placement is spread out by decongest to this cell density.
        lines.append(f"set initial_density = {density:g}")
    (folder / "project_vars.sh").write_text("\n".join(lines) + "\n")


# graywolf (TimberWolfSC) tries about 25 * (cells / 500) ** (1/3) moves per cell in each
# of its ~160 annealing steps; ``TWSC*fast : N`` divides that by N. TFC-w1a1's 21,576
# cells took 5 CPU minutes per 14 steps at the default (about an hour in all), under 5
# minutes in all at N = 10. One N per ~300 cells up to 10 keeps small designs near the
# default and large ones within minutes.
CELLS_PER_FAST_STEP = 300
MAX_FAST = 10
# Then graywolf's global routing (25 tries per net in each of 8 rounds; TFC-w1a1: about
# 4 minutes a round) takes longer than the annealing: over this many cells it runs the 4
# rounds it runs when told not to move cells meanwhile (``gr_placement_improve off``).
QUICK_GLOBAL_ROUTE_CELLS = 5000


def placement_speedup(cells: int) -> int:
    return max(1, min(MAX_FAST, cells // CELLS_PER_FAST_STEP))


def write_placement_options(folder: Path, tech_par: Path, cells: int) -> int:
    """graywolf's parameters (qflow copied the kit's ``.par`` at synthesis) with the
    speed-up for ``cells`` cells; returns the factor."""
    fast = placement_speedup(cells)
    extra = f"\nTWSC*fast : {fast}\n"
    if cells > QUICK_GLOBAL_ROUTE_CELLS:
        extra += "TWSC*gr_placement_improve : off\n"
    (folder / f"{ASIC_TOP}.par").write_text(tech_par.read_text() + extra)
    return fast


def run_stage(stage: Stage, folder: Path, pdk: str, logs: Path) -> StageResult:
    """Run one stage; its qflow output goes to ``logs/STAGE.out`` and qflow's own log is
    read from ``folder/log``. Raises ToolError on failure or a problem in the log."""
    out = logs / f"{stage.name}.out"
    log = folder / "log" / stage.log
    try:
        seconds = synth.run_tool(f"qflow {stage.name}", ["qflow", "-T", pdk, stage.name,
                                                         ASIC_TOP], folder, out, watch=log)
    except ToolError as e:
        raise ToolError(f"ASIC flow stage '{stage.name}' failed: {stage.hint}.\n"
                        f"qflow's log: {log}\n{e}") from None
    text = _text(log)
    facts = stage.facts(text)
    problem = stage.problem(facts)
    if problem is None and "Synthesis flow stopped" in text:
        problem = "qflow stopped on an error condition"
    if problem:
        tail = "\n".join(text.splitlines()[-15:])
        raise ToolError(f"ASIC flow stage '{stage.name}': {problem}; {stage.hint}.\n"
                        f"log: {log}\n{tail}")
    return StageResult(seconds, facts)
