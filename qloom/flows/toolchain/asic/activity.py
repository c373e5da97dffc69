"""Switching activity from the gate-level simulation, for OpenSTA's power analysis.

OpenSTA 2.0.17 reads no VCD or SAIF, so the gate-level simulation counts toggles itself:
``counters`` is Verilog placed in the simulation's top (around the routed netlist,
instance ``gates``) with one counter per net of the netlist, counting changes while the
design is out of reset, and a counter of clock cycles over the same time; at the end of
the simulation it writes them to a file. ``tcl`` turns the counts into OpenSTA commands
that set each net's activity (toggles per clock cycle, OpenSTA's unit) on its driver pin,
and on the input ports; OpenSTA propagates nothing over user-set pins.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from qloom.errors import ToolError

__all__ = ["counters", "Activity", "read_counts"]


def _ref(net: str) -> str:
    """A hierarchical reference to ``net`` inside ``gates`` (``i__payload[3]`` keeps its
    bit select)."""
    return f"gates.{net}"


def counters(nets: list[str], out_file: Path) -> str:
    """Verilog counting toggles of ``nets`` while ``rst`` is 0, written to ``out_file``
    (first line: cycles, then one count per net in order) when the simulation ends."""
    lines = [f"  integer qloom_toggles [0:{len(nets) - 1}];", "  integer qloom_cycles;",
             "  integer qloom_k, qloom_fd;",
             "  initial begin qloom_cycles = 0;",
             f"    for (qloom_k = 0; qloom_k < {len(nets)}; qloom_k = qloom_k + 1) "
             "qloom_toggles[qloom_k] = 0;", "  end",
             "  always @(posedge clk) if (rst === 1'b0) qloom_cycles = qloom_cycles + 1;"]
    lines += [f"  always @({_ref(net)}) if (rst === 1'b0) qloom_toggles[{k}] = "
              f"qloom_toggles[{k}] + 1;" for k, net in enumerate(nets)]
    lines += ["  final begin", f'    qloom_fd = $fopen("{out_file}", "w");',
              '    $fdisplay(qloom_fd, "%0d", qloom_cycles);',
              f"    for (qloom_k = 0; qloom_k < {len(nets)}; qloom_k = qloom_k + 1)",
              '      $fdisplay(qloom_fd, "%0d", qloom_toggles[qloom_k]);',
              "    $fclose(qloom_fd);", "  end"]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Activity:
    """Toggles per net over ``cycles`` clock cycles out of reset."""

    cycles: int
    toggles: dict

    def rate(self, net: str) -> float:
        return self.toggles[net] / self.cycles

    @property
    def mean(self) -> float:
        return sum(self.toggles.values()) / len(self.toggles) / self.cycles

    def tcl(self, inputs: set[str]) -> str:
        """OpenSTA commands setting every net's activity (``inputs``: the nets that are
        input ports)."""
        lines = ["proc qloom_net_activity {name activity} {",
                 "  foreach pin [get_pins -of_objects [get_nets $name]] {",
                 '    if {[get_property $pin direction] == "output"} {',
                 "      sta::set_power_pin_activity $pin $activity 0.5", "    }", "  }", "}"]
        for net in sorted(self.toggles):
            rate = f"{self.rate(net):.6g}"
            if net in inputs:
                lines.append(f"set_power_activity -input_ports [get_ports {{{net}}}] "
                             f"-activity {rate} -duty 0.5")
            else:
                lines.append(f"qloom_net_activity {{{net}}} {rate}")
        return "\n".join(lines) + "\n"


def read_counts(path: Path, nets: list[str]) -> Activity:
    if not path.is_file():
        raise ToolError(f"the gate-level simulation wrote no toggle counts ({path})")
    values = [int(v) for v in path.read_text().split()]
    if len(values) != len(nets) + 1 or values[0] <= 0:
        raise ToolError(f"{path}: expected a cycle count and {len(nets)} toggle counts, "
                        f"found {len(values)} numbers (cycles {values[:1]})")
    return Activity(values[0], dict(zip(nets, values[1:])))
