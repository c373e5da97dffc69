"""``qloom boards``: the supported boards and their budgets."""

from __future__ import annotations

import argparse

from .catalog import BOARDS

__all__ = ["add_parser", "run", "table"]


def table() -> str:
    """The boards as a fixed-width text table."""
    head = ("board", "device", "LUT4", "FF", "DSP", "BRAM", "osc MHz", "clock MHz", "flow",
            "programmer")
    rows = [head]
    for b in BOARDS.values():
        rows.append((b.name, f"{b.device} ({b.package})", str(b.budget.lut), str(b.budget.ff),
                     str(b.budget.dsp), str(b.budget.bram), f"{b.oscillator_mhz:g}",
                     f"{b.clock_mhz:g}", "open (YoWASP)" if b.family.open_flow else "vendor",
                     b.programmer.split()[0]))
    widths = [max(len(r[k]) for r in rows) for k in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("boards", help="list the supported boards and their budgets")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    print(table())
    return 0
