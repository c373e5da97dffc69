"""Place an ECP5-85F design's DSP blocks in lane order before nextpnr runs.

The LFE5U-85F has its 156 ``MULT18X18D`` sites in three rows (Y10, Y34, Y58) of 52, spread
over the whole width. When a design uses most of them, nextpnr's analytical placer puts the
blocks where their logic wants them, then legalisation moves many to whatever site is free,
often across the chip; the registers after a block stay beside the adder tree they feed.
The jet tagger at default folding (133 blocks) measured 110.1 MHz at 150: its critical path
was one route of 8.35 ns from a block at column 105 to its register at column 29, and a
second register on that route did not help (placement put it beside the first).

This pass, run on Yosys' JSON netlist, fixes every ``MULT18X18D`` to a site (nextpnr's
``BEL`` attribute) so that the blocks of one engine's lanes sit side by side: cells sorted
by name in natural order (``...MatMul_2.dsp10.block`` after ``dsp9``; a matrix unit numbers
its lanes PE by PE, so a PE's lanes and thus its adder tree's inputs are neighbours), sites
taken row by row, each row in the direction the previous one ended (a group crossing rows
stays at one edge). The placer then builds the logic around the fixed blocks.

It runs when a design uses more blocks than one row holds (below that the placer keeps
them together itself), on the 85F die only (LFE5U-85F and its UM variants): its site list
is written out here (the rows as a routed jet tagger's configuration uses them, the
columns as prjtrellis lists them); the smaller ECP5 devices are left to the placer.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

__all__ = ["DSP_SITES_85F", "DIES_85F", "place_dsps", "place_dsps_in_netlist", "dsp_sites"]

# The devices on the 85F die (the same sites).
DIES_85F = ("LFE5U-85F", "LFE5UM-85F", "LFE5UM5G-85F")

_ROWS_85F = (10, 34, 58)
# Four MULT18 sites per group of nine columns; the groups right of the centre start two
# columns later.
_GROUP_COLUMNS = (4, 13, 22, 31, 40, 49, 58, 69, 78, 87, 96, 105, 114)
_SLOTS = ((0, 0), (1, 1), (4, 4), (5, 5))      # (column offset, MULT18 index)


def dsp_sites(rows=_ROWS_85F, groups=_GROUP_COLUMNS) -> list[str]:
    """The MULT18X18D sites in placement order: row by row, alternating direction."""
    sites = []
    for k, y in enumerate(rows):
        row = [f"X{x + dx}/Y{y}/MULT18_{index}" for x in groups for dx, index in _SLOTS]
        sites += row if k % 2 == 0 else row[::-1]
    return sites


DSP_SITES_85F = dsp_sites()


def _natural(name: str) -> list:
    """``dsp10`` after ``dsp9``: digit runs compare as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def place_dsps_in_netlist(netlist: dict, sites: list[str] = DSP_SITES_85F,
                          more_than: int = 52) -> int:
    """Give every ``MULT18X18D`` without a ``BEL`` a site of ``sites`` in natural name
    order, when the design has more than ``more_than`` of them; returns how many were
    placed. Raises ValueError when there are more blocks than sites."""
    cells = [(module, name) for module in netlist.get("modules", {}).values()
             for name, cell in module.get("cells", {}).items()
             if cell.get("type") == "MULT18X18D"]
    if len(cells) <= more_than:
        return 0
    if len(cells) > len(sites):
        raise ValueError(f"{len(cells)} MULT18X18D blocks, but the device has {len(sites)}")
    taken = {module["cells"][name].get("attributes", {}).get("BEL") for module, name in cells}
    free = iter(site for site in sites if site not in taken)
    placed = 0
    for module, name in sorted(cells, key=lambda c: _natural(c[1])):
        attributes = module["cells"][name].setdefault("attributes", {})
        if "BEL" not in attributes:
            attributes["BEL"] = next(free)
            placed += 1
    return placed


def place_dsps(src: Path, dst: Path, device: str) -> int:
    """Read Yosys' JSON netlist ``src``, place its DSP blocks when ``device`` is on the
    85F die, write ``dst``; returns the blocks placed."""
    netlist = json.loads(Path(src).read_text())
    placed = place_dsps_in_netlist(netlist) if device in DIES_85F else 0
    Path(dst).write_text(json.dumps(netlist))
    return placed
