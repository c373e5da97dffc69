"""Place an ECP5-85F design's block RAMs engine by engine before nextpnr runs.

The LFE5U-85F has its 208 ``DP16KD`` sites in four rows (Y22, Y46, Y70, Y82) of 52, in
groups of four every nine columns (the DSP rows' groups). When a design uses most of them,
nextpnr's placer scatters each memory's blocks over the die, and every path that fans out
to a memory's blocks (its address, a bank select, the input word to the PEs that sit by
their blocks) or gathers from them (a bank mux) becomes a long route: CNV-w1a1 with 190
blocks routed at 76-84 MHz against 104 planned, its critical path moving from one such
path to the next as each was fixed (bank select 11.7 ns of route, the input word to
Conv_3's PEs 11.4 ns, a bank group's mux 10.7 ns).

This pass, run on Yosys' JSON netlist, fixes the blocks of the accelerator's engines to
sites (nextpnr's ``BEL`` attribute) so that each engine's blocks sit side by side and the
engines follow each other in the order the stream passes them (the manifest's layers):
per engine the edge feeding it first, then its nodes' blocks in natural name order (``weights2`` before ``weights10``, a
wide memory's slices PE by PE), sites taken row by row, each row in the direction the
previous one ended (an engine crossing rows stays at one edge). Blocks outside the
engines (the host link's) are left to the placer, on the sites that remain. Like
``qloom.flows.toolchain.ecp5_dsp_place`` it runs when a design uses more blocks than one row holds,
on the 85F die only (the sites as nextpnr 0.11 names them, read from a placement of 208
blocks).
"""

from __future__ import annotations

from pathlib import Path

from qloom.flows.toolchain.ecp5_dsp_place import (DIES_85F, _GROUP_COLUMNS, _natural, fix_sites,
                                                  rewrite_netlist, snake_sites)

__all__ = ["EBR_SITES_85F", "bram_sites", "engine_rank", "place_brams",
           "place_brams_in_netlist"]

_ROWS_85F = (22, 46, 70, 82)
# Four DP16KD sites per group of nine columns: (column offset, EBR index).
_SLOTS = ((0, 0), (2, 1), (4, 2), (6, 3))
# Where the accelerator's engines sit in the board top's hierarchy.
_ENGINES = "core.accelerator.accelerator."


def bram_sites(rows=_ROWS_85F, groups=_GROUP_COLUMNS) -> list[str]:
    """The DP16KD sites in placement order: row by row, alternating direction."""
    return snake_sites(rows, groups, _SLOTS, "X{x}/Y{y}/EBR{index}")


EBR_SITES_85F = bram_sites()


def engine_rank(cell: str, engines: list[str]) -> int | None:
    """The position in ``engines`` (in stream order) of the engine a cell belongs to: its
    node (``Conv_2``, ``Conv_2_swg``, ``Conv_2_thr``...) or the edge feeding it
    (``<tensor>_to_Conv_2...``); None outside the engines."""
    if not cell.startswith(_ENGINES):
        return None
    node = cell[len(_ENGINES):].split(".")[0]
    if "_to_" in node:
        node = node.rsplit("_to_", 1)[1]
    for rank in sorted(range(len(engines)), key=lambda k: -len(engines[k])):
        name = engines[rank]
        if node == name or node.startswith(name + "_"):
            return rank
    return None


def place_brams_in_netlist(netlist: dict, engines: list[str],
                           sites: list[str] = EBR_SITES_85F, more_than: int = 52) -> int:
    """Give every ``DP16KD`` of an engine in ``engines`` (stream order) without a ``BEL``
    a site of ``sites``, engine by engine (the edge feeding it first, then its nodes) and
    in natural name order within one, when the design has more than ``more_than`` blocks;
    returns how many were placed. Raises ValueError when there are more blocks than
    sites."""
    def key(name):
        rank = engine_rank(name, engines)
        if rank is None:
            return None
        return rank, "_to_" not in name[len(_ENGINES):].split(".")[0], _natural(name)
    return fix_sites(netlist, "DP16KD", sites, more_than, key)


def place_brams(src: Path, dst: Path, device: str, engines: list[str]) -> int:
    """Read Yosys' JSON netlist ``src``, place its engines' block RAMs when ``device`` is
    on the 85F die, write ``dst``; returns the blocks placed."""
    return rewrite_netlist(src, dst, lambda netlist: place_brams_in_netlist(netlist, engines)
                           if device in DIES_85F else 0)
