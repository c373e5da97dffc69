"""The standard-cell kits qflow ships (the OSU libraries) as typed descriptions.

A kit's files live in qflow's tech folder (``/usr/share/qflow/tech/<name>``, from the
Debian packages ``qflow-tech-osu018`` etc.): liberty (timing, power), LEF (cell
abstracts), SPICE (LVS), cell Verilog models (gate-level simulation) and magic's tech.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from qloom.errors import QloomError, ToolError

__all__ = ["Pdk", "PDKS", "get_pdk", "TECH_ROOT", "check_tools"]

TECH_ROOT = Path("/usr/share/qflow/tech")
# The programs the flow runs (the Makefile's asic-tools target installs them).
TOOLS = ("qflow", "yosys", "graywolf", "qrouter", "sta", "magic", "netgen-lvs", "iverilog")
INSTALL = "apt-get install qflow graywolf qrouter opensta magic netgen-lvs iverilog"


@dataclass(frozen=True)
class Pdk:
    """One OSU kit: its qflow name, feature size, supply and file names in its folder."""

    name: str
    node_um: float
    supply_v: float
    liberty: str
    verilog: str
    title: str

    @property
    def folder(self) -> Path:
        return TECH_ROOT / self.name

    def file(self, name: str) -> Path:
        path = self.folder / name
        if not path.is_file():
            raise ToolError(f"the {self.name} kit lacks {path}: install it with apt-get "
                            f"install qflow-tech-{self.name}")
        return path

    @property
    def liberty_path(self) -> Path:
        return self.file(self.liberty)

    @property
    def lef_path(self) -> Path:
        return self.file(f"{self.name}_stdcells.lef")

    @property
    def verilog_path(self) -> Path:
        return self.file(self.verilog)


PDKS = {p.name: p for p in (
    Pdk("osu018", 0.18, 1.8, "osu018_stdcells.lib", "osu018_stdcells.v",
        "OSU 0.18 um standard cells (magic tech SCN6M_SUBM.10)"),
    Pdk("osu035", 0.35, 3.3, "osu035_stdcells.lib", "osu035_stdcells.v",
        "OSU 0.35 um standard cells (magic tech SCN4M_SUBM.20)"),
    Pdk("osu050", 0.5, 5.0, "osu05_stdcells.lib", "osu05_stdcells.v",
        "OSU 0.5 um standard cells (magic tech SCN3ME_SUBM.30)"),
)}


def get_pdk(name: str) -> Pdk:
    if name not in PDKS:
        raise QloomError(f"unknown PDK {name!r}; qloom's ASIC flow supports "
                         f"{', '.join(PDKS)} (the OSU kits shipped with qflow)")
    pdk = PDKS[name]
    if not pdk.folder.is_dir():
        raise ToolError(f"the {name} kit is not installed ({pdk.folder} is missing): "
                        f"{INSTALL}")
    return pdk


def check_tools() -> None:
    """Raise a ToolError naming every program of the flow that is not on PATH."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        raise ToolError(f"the ASIC flow needs {', '.join(missing)} on PATH: {INSTALL} "
                        f"(or `make asic-tools`)")
