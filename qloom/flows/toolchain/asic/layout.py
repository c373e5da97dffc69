"""Facts read from the layout and the netlist: core area (the routed DEF's die), cell
count and cell area (the liberty's areas), and whether the GDS holds real cell layouts."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from qloom.errors import ToolError

__all__ = ["die_area_um2", "cell_counts", "cell_area_um2", "gds_cell_views", "fill_cell"]


def die_area_um2(def_text: str) -> tuple[float, float, float]:
    """(width, height, area) of the DEF's DIEAREA in microns."""
    units = re.search(r"^UNITS DISTANCE MICRONS (\d+)", def_text, re.M)
    die = re.search(r"^DIEAREA \( (-?\d+) (-?\d+) \) \( (-?\d+) (-?\d+) \)", def_text, re.M)
    if not units or not die:
        raise ToolError("the routed DEF has no UNITS or DIEAREA line")
    scale = int(units.group(1))
    x0, y0, x1, y1 = (int(v) / scale for v in die.groups())
    return round(x1 - x0, 3), round(y1 - y0, 3), round((x1 - x0) * (y1 - y0), 1)


def cell_counts(netlist: str) -> Counter:
    """Cells by type in a qflow netlist (``NAND2X1 NAND2X1_1 ( ... );``)."""
    return Counter(re.findall(r"^([A-Z][A-Z0-9_]*) [A-Za-z0-9_]+ \(", netlist, re.M))


def fill_cell(pdk_setup: str) -> str | None:
    """The kit's spacer cell (``set fillcell=FILL`` in its qflow setup), which qflow adds
    to the netlist to fill the rows; it has no liberty entry (no logic, no timing)."""
    found = re.search(r"^set fillcell=(\w+)", pdk_setup, re.M)
    return found.group(1) if found else None


def _liberty_areas(liberty: str) -> dict:
    return {m.group(1): float(m.group(2)) for m in
            re.finditer(r'cell\s*\(\s*"?(\w+)"?\s*\)\s*\{[^{}]*?\barea\s*:\s*([\d.]+)', liberty)}


def cell_area_um2(counts: Counter, liberty: Path) -> float:
    areas = _liberty_areas(liberty.read_text())
    unknown = sorted(set(counts) - set(areas))
    if unknown:
        raise ToolError(f"cells {unknown} have no area in {liberty}")
    return round(sum(areas[c] * n for c, n in counts.items()), 1)


def gds_cell_views(gdsii_log: str, tech_folder: Path, pdk_setup: str) -> str:
    """"layout" when the kit's cell GDS was read into the output, else "abstract" (the
    OSU kits in Debian ship none: the GDS holds the cells' LEF abstracts, pins and
    obstructions, and the routing)."""
    names = re.findall(r"^set gdsfile=(\S+)", pdk_setup, re.M)
    present = names and all((tech_folder / n).is_file() for n in names[0].split())
    if present and "unavailable" not in gdsii_log:
        return "layout"
    return "abstract"
