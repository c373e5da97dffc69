"""Minimum-area patches on the routed layout, between qflow's ``migrate`` and ``drc``.

qrouter leaves, now and then, a lone via landing whose metal is under the layer's
minimum area (magic: "Metal1 area < 20"), at a via stack or a pin near the die's edge
(seen on the threshold unit: 1 error in 1,268 cells with graywolf's shorter global
routing). This step runs magic's DRC on the layout, lengthens each such piece of metal
along the layer's routing direction (symmetrically) to the minimum area, and saves the
layout. It changes no connectivity by itself; qflow's ``drc`` (run after it) checks the
result, and ``lvs`` re-extracts the layout and compares it with the netlist again.
"""

from __future__ import annotations

import re
from pathlib import Path

from qloom.errors import ToolError
from qloom.flows.toolchain import synth
from qloom.flows.toolchain.asic.ports import ASIC_TOP

__all__ = ["patch_min_area"]

# Odd metal layers run horizontally, even ones vertically, in all three OSU kits' qrouter
# and graywolf setups (metal1 horizontal, metal2 vertical, ...).
_SCRIPT = r"""
lef read {lef}
load {top}
drc on
select top cell
expand
drc check
drc catchup
set patched 0
foreach {{rule boxes}} [drc listall why] {{
  if {{![regexp {{^Metal(\d+) area < ([0-9.]+)}} $rule -> level need]}} {{ continue }}
  foreach b $boxes {{
    lassign $b x1 y1 x2 y2
    set w [expr {{$x2 - $x1}}]
    set h [expr {{$y2 - $y1}}]
    if {{$level % 2}} {{
      set grow [expr {{int(ceil(double($need) / $h)) - $w}}]
      set x1 [expr {{$x1 - $grow / 2}}]
      set x2 [expr {{$x2 + $grow - $grow / 2}}]
    }} else {{
      set grow [expr {{int(ceil(double($need) / $w)) - $h}}]
      set y1 [expr {{$y1 - $grow / 2}}]
      set y2 [expr {{$y2 + $grow - $grow / 2}}]
    }}
    box values $x1 $y1 $x2 $y2
    paint metal$level
    puts stdout "qloom_patch metal$level $b -> $x1 $y1 $x2 $y2"
    incr patched
  }}
}}
puts stdout "qloom_patched $patched"
if {{$patched > 0}} {{ save {top} }}
quit -noprompt
"""


def patch_min_area(project: Path, lef: Path, logs: Path) -> int:
    """Patch the minimum-area errors of ``project``'s layout; returns how many."""
    script = logs / "area_fix.tcl"
    script.write_text(_SCRIPT.format(lef=lef, top=ASIC_TOP))
    log = logs / "area_fix.log"
    synth.run_tool("magic (minimum-area patches)",
                   ["magic", "-dnull", "-noconsole", "-rcfile", str(project / ".magicrc"),
                    str(script)], project, log)
    found = re.findall(r"^qloom_patched (\d+)", log.read_text(errors="replace"), re.M)
    if not found:
        raise ToolError(f"ASIC flow stage 'area_fix': magic did not finish the patch "
                        f"script; try a lower --density. log: {log}")
    return int(found[-1])
