"""Post-route timing and power with OpenSTA on the routed netlist and its extracted wire
parasitics.

qflow's ``backanno`` stage converts qrouter's per-net RC trees into SPEF with ``rc2dly``,
whose SPEF (qflow 1.3.17) writes a net's internal nodes as ``N_K`` where SPEF wants
``*N:K`` (OpenSTA then drops those nodes, thousands of "pin not found" warnings) and
declares ``*C_UNIT 1 FF`` for values that are picofarads (the liberty's unit; a wire
segment of a few microns is 0.0002-0.001 in the file). ``fix_spef`` repairs both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from qloom.errors import ToolError
from qloom.flows.toolchain import synth
from qloom.flows.toolchain.asic.ports import ASIC_TOP

__all__ = ["fix_spef", "StaResult", "run_sta", "parse_power"]

_INTERNAL_NODE = re.compile(r"(?m)(?<![*\w:\[])(\d+)_(\d+)(?=\s)")


_NAME_MAP_LINE = re.compile(r"(?m)^(\*\d+) (\S+)$")
_BIT = re.compile(r"\[(\d+)\]")


def fix_spef(text: str, nets: set[str]) -> str:
    """The SPEF with its nodes, units and names fixed; ``nets``: the netlist's net names
    (the routed DEF, and so the SPEF, keeps ``name[3]`` where qflow's Verilog netlist
    has ``name_3_`` for a net that is no port)."""
    if "*C_UNIT 1 FF" not in text:
        raise ToolError("rc2dly's SPEF does not declare '*C_UNIT 1 FF' as qflow 1.3.17's "
                        "does: another qflow version? check the units before trusting "
                        "power and timing")

    def rename(m):
        name = m.group(2)
        if name not in nets:
            flat = _BIT.sub(r"_\1_", name)
            name = flat if flat in nets else name
        return f"{m.group(1)} {name}"

    text = _NAME_MAP_LINE.sub(rename, text.replace("*C_UNIT 1 FF", "*C_UNIT 1 PF"))
    return _INTERNAL_NODE.sub(r"*\1:\2", text)


@dataclass(frozen=True)
class StaResult:
    period_ns: float
    worst_slack_ns: float
    fmax_mhz: float
    power_w: dict           # internal, switching, leakage, total
    report: Path


def _script(liberty: Path, netlist: Path, spef: Path, period_ns: float,
            activity: Path | None) -> str:
    lines = [f"read_liberty {liberty}", f"read_verilog {netlist}", f"link_design {ASIC_TOP}",
             f"create_clock -name clk -period {period_ns:.6g} [get_ports clk]",
             "set_propagated_clock [all_clocks]",
             # The stream ports face registers clocked by the same clock (the harness's,
             # or the next block's): no margin assumed on either side.
             "set_input_delay 0 -clock clk [delete_from_list [all_inputs] [get_ports clk]]",
             "set_output_delay 0 -clock clk [all_outputs]",
             f"read_spef {spef}",
             'puts "qloom_worst_slack [sta::worst_slack -max]"',
             "report_checks -path_delay max -digits 4"]
    if activity is not None:
        lines += [f"source {activity}", "report_power -digits 6"]
    return "\n".join(lines + ["exit", ""])


def parse_power(text: str) -> dict:
    """``report_power``'s total row (watts) as internal, switching, leakage and total."""
    found = re.search(r"^Total\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", text, re.M)
    if not found:
        raise ToolError("OpenSTA's report_power printed no Total row")
    return dict(zip(("internal", "switching", "leakage", "total"),
                    map(float, found.groups())))


def run_sta(folder: Path, liberty: Path, netlist: Path, spef: Path, clock_mhz: float,
            logs: Path, activity: Path | None = None, name: str = "sta") -> StaResult:
    """OpenSTA at ``clock_mhz``: worst setup slack, Fmax and (with ``activity``, a Tcl
    file setting every net's switching activity) power. Its script and output are kept
    as ``logs/NAME.tcl`` and ``logs/NAME.log``."""
    period = 1e3 / clock_mhz
    script = logs / f"{name}.tcl"
    script.write_text(_script(liberty, netlist, spef, period, activity))
    log = logs / f"{name}.log"
    synth.run_tool(f"OpenSTA ({name})", ["sta", "-exit", str(script)], folder, log)
    text = log.read_text(errors="replace")
    found = re.search(r"^qloom_worst_slack (\S+)", text, re.M)
    errors = re.findall(r"^Error: .*", text, re.M)
    if errors or not found:
        raise ToolError(f"OpenSTA failed ({'; '.join(errors[:3]) or 'no slack printed'}); "
                        f"log: {log}")
    slack = float(found.group(1))
    if slack > 1e20:
        raise ToolError(f"OpenSTA found no constrained path (is the clock port 'clk'?); "
                        f"log: {log}")
    delay = period - slack
    power = parse_power(text) if activity is not None else {}
    return StaResult(period, slack, round(1e3 / delay, 2) if delay > 0 else float("inf"),
                     power, log)
