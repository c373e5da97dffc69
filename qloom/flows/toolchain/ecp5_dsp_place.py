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
from typing import Callable

__all__ = ["DSP_SITES_85F", "DIES_85F", "place_dsps", "place_dsps_in_netlist", "dsp_sites",
           "snake_sites", "fix_sites", "rewrite_netlist"]

# The devices on the 85F die (the same sites).
DIES_85F = ("LFE5U-85F", "LFE5UM-85F", "LFE5UM5G-85F")

_ROWS_85F = (10, 34, 58)
# Four MULT18 sites per group of nine columns; the groups right of the centre start two
# columns later.
_GROUP_COLUMNS = (4, 13, 22, 31, 40, 49, 58, 69, 78, 87, 96, 105, 114)
_SLOTS = ((0, 0), (1, 1), (4, 4), (5, 5))      # (column offset, MULT18 index)


def snake_sites(rows, groups, slots, site: str) -> list[str]:
    """Sites named ``site.format(x=..., y=..., index=...)`` in placement order: per row of
    ``rows`` every group column of ``groups`` plus each ``(column offset, index)`` of
    ``slots``, row by row, each row in the direction the previous one ended."""
    sites = []
    for k, y in enumerate(rows):
        row = [site.format(x=x + dx, y=y, index=index) for x in groups for dx, index in slots]
        sites += row if k % 2 == 0 else row[::-1]
    return sites


def dsp_sites(rows=_ROWS_85F, groups=_GROUP_COLUMNS) -> list[str]:
    """The MULT18X18D sites in placement order: row by row, alternating direction."""
    return snake_sites(rows, groups, _SLOTS, "X{x}/Y{y}/MULT18_{index}")


DSP_SITES_85F = dsp_sites()


def _natural(name: str) -> list:
    """``dsp10`` after ``dsp9``: digit runs compare as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def fix_sites(netlist: dict, cell_type: str, sites: list[str], more_than: int,
              key: Callable[[str], object]) -> int:
    """Give every cell of ``cell_type`` without a ``BEL`` for which ``key`` (of its name)
    is not None a free site of ``sites``, in ``key`` order, when the design has more than
    ``more_than`` such cells; returns how many were placed. Raises ValueError when there
    are more cells than sites."""
    cells = [(module, name) for module in netlist.get("modules", {}).values()
             for name, cell in module.get("cells", {}).items()
             if cell.get("type") == cell_type]
    if len(cells) <= more_than:
        return 0
    if len(cells) > len(sites):
        raise ValueError(f"{len(cells)} {cell_type} blocks, but the device has {len(sites)}")
    taken = {module["cells"][name].get("attributes", {}).get("BEL") for module, name in cells}
    free = iter(site for site in sites if site not in taken)
    order = [(rank, module, name) for module, name in cells
             if "BEL" not in module["cells"][name].get("attributes", {})
             and (rank := key(name)) is not None]
    for _, module, name in sorted(order, key=lambda c: c[0]):
        module["cells"][name].setdefault("attributes", {})["BEL"] = next(free)
    return len(order)


def rewrite_netlist(src: Path, dst: Path, place: Callable[[dict], int]) -> int:
    """Read Yosys' JSON netlist ``src``, ``place`` its cells, write ``dst``; returns what
    ``place`` returned."""
    netlist = json.loads(Path(src).read_text())
    placed = place(netlist)
    Path(dst).write_text(json.dumps(netlist))
    return placed


def place_dsps_in_netlist(netlist: dict, sites: list[str] = DSP_SITES_85F,
                          more_than: int = 52) -> int:
    """Give every ``MULT18X18D`` without a ``BEL`` a site of ``sites`` in natural name
    order, when the design has more than ``more_than`` of them; returns how many were
    placed. Raises ValueError when there are more blocks than sites."""
    return fix_sites(netlist, "MULT18X18D", sites, more_than, _natural)


def place_dsps(src: Path, dst: Path, device: str) -> int:
    """Read Yosys' JSON netlist ``src``, place its DSP blocks when ``device`` is on the
    85F die, write ``dst``; returns the blocks placed."""
    return rewrite_netlist(src, dst, lambda netlist: place_dsps_in_netlist(netlist)
                           if device in DIES_85F else 0)
