"""Reading Yosys' JSON netlists, for the passes that rewrite them before nextpnr
(:mod:`qloom.flows.toolchain.ecp5_outreg`, :mod:`qloom.flows.toolchain.ecp5_carry`)."""

from __future__ import annotations

from collections import defaultdict

__all__ = ["int_parameter", "readers"]


def int_parameter(value) -> int:
    """A Yosys JSON parameter as an integer (written as a binary string)."""
    text = str(value).strip()
    return int(text, 2) if text and set(text) <= {"0", "1"} else int(text)


def readers(module: dict) -> dict:
    """Every reader of every net bit: ``(cell name, port)``, or ``(None, port)`` for a
    module output."""
    found = defaultdict(list)
    for name, cell in module.get("cells", {}).items():
        directions = cell.get("port_directions", {})
        for port, bits in cell["connections"].items():
            if directions.get(port) != "output":
                for bit in bits:
                    if isinstance(bit, int):
                        found[bit].append((name, port))
    for port, info in module.get("ports", {}).items():
        if info["direction"] != "input":
            for bit in info["bits"]:
                if isinstance(bit, int):
                    found[bit].append((None, port))
    return found
