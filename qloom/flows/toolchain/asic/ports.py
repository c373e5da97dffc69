"""The chip's top module around the accelerator, and the netlist facts the flow needs.

``qloom_asic`` wraps ``qloom_top`` with the same stream ports, less the input bits the
accelerator never reads (the input's ``last`` flag, which ``qloom.hw.top`` accepts and
ignores, and any bit synthesis finds unused): a pin with no wire is a lone stub of metal
under the minimum area, which magic's DRC flags (seen on the threshold unit's ``last``
pin). Dropped inputs are tied to 0 inside the wrapper, which changes nothing since no
logic reads them. For gate-level simulation ``sim_top`` writes a ``qloom_top`` with the
original ports around the routed ``qloom_asic``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from qloom.errors import QloomError, ToolError

__all__ = ["Port", "Pin", "read_ports", "AsicTop", "unused_inputs", "netlist_nets",
           "ASIC_TOP"]

ASIC_TOP = "qloom_asic"


@dataclass(frozen=True)
class Port:
    """A port of ``qloom_top``: ``width`` None for a scalar."""

    name: str
    direction: str          # "input" or "output"
    width: int | None

    @property
    def bits(self) -> range:
        return range(self.width or 1)

    def ref(self, bit: int) -> str:
        return self.name if self.width is None else f"{self.name}[{bit}]"


def read_ports(verilog: str, top: str) -> list[Port]:
    """The ports of module ``top`` in Amaranth's Verilog (``input [20:0] i__payload;``)."""
    found = re.search(rf"^module {re.escape(top)}\s*\((.*?)\);(.*?)^endmodule", verilog,
                      re.S | re.M)
    if not found:
        raise QloomError(f"the RTL has no module {top}: recompile the design")
    names = [n.strip() for n in found.group(1).split(",")]
    decl = {m.group(3): (m.group(1), int(m.group(2)) + 1 if m.group(2) else None)
            for m in re.finditer(r"^\s*(input|output)\s+(?:\[(\d+):0\]\s+)?(\w+)\s*;",
                                 found.group(2), re.M)}
    missing = [n for n in names if n not in decl]
    if missing:
        raise QloomError(f"cannot read the direction of port(s) {missing} of {top}")
    return [Port(n, *decl[n]) for n in names]


@dataclass(frozen=True)
class AsicTop:
    """``qloom_top``'s ports and the input bits left off the chip (``dropped``: pairs of
    port name and bit)."""

    ports: tuple
    dropped: frozenset

    def kept(self, port: Port) -> list[int]:
        return [b for b in port.bits if (port.name, b) not in self.dropped]

    def pins(self, port: Port) -> list[tuple[int, str]]:
        """(bit, name of its pin on the chip) for the kept bits: the same bus when the
        kept bits are 0..k-1, else one scalar ``NAME_BIT`` pin per bit."""
        kept = self.kept(port)
        if port.width is None:
            return [(0, port.name)] if kept else []
        if kept == list(range(len(kept))):
            return [(b, f"{port.name}[{b}]") for b in kept]
        return [(b, f"{port.name}_{b}") for b in kept]

    def _declarations(self) -> tuple[list[str], list[str]]:
        names, lines = [], []
        for port in self.ports:
            pins = self.pins(port)
            if not pins:
                continue
            if "[" in pins[0][1]:
                names.append(port.name)
                lines.append(f"  {port.direction} [{len(pins) - 1}:0] {port.name};")
            else:
                names += [pin for _, pin in pins]
                lines += [f"  {port.direction} {pin};" for _, pin in pins]
        return names, lines

    def wrapper(self, core: str) -> str:
        """Verilog of ``qloom_asic``: ``core`` (``qloom_top``) with the kept pins."""
        names, lines = self._declarations()
        body, conns = [], []
        for port in self.ports:
            wire = f"core__{port.name}"
            width = f"[{port.width - 1}:0] " if port.width else ""
            body.append(f"  wire {width}{wire};")
            pins = dict(self.pins(port))
            if port.direction == "input":
                bits = [pins.get(b, "1'b0") for b in reversed(port.bits)]
                body.append(f"  assign {wire} = {{{', '.join(bits)}}};")
            else:
                for b, pin in pins.items():
                    body.append(f"  assign {pin} = {wire}{'' if port.width is None else f'[{b}]'};")
            conns.append(f".{port.name}({wire})")
        return (f"module {ASIC_TOP}({', '.join(names)});\n" + "\n".join(lines) + "\n"
                + "\n".join(body) + f"\n  {core} core({', '.join(conns)});\nendmodule\n")

    def sim_top(self, top: str, extra: str = "") -> str:
        """Verilog of a ``top`` with ``qloom_top``'s ports around the routed
        ``qloom_asic`` (instance ``gates``); ``extra`` goes inside the module."""
        decl = [f"  {p.direction} {f'[{p.width - 1}:0] ' if p.width else ''}{p.name};"
                for p in self.ports]
        conns = []
        for port in self.ports:
            pins = self.pins(port)
            if pins and "[" in pins[0][1]:
                conns.append(f".{port.name}({port.name}[{len(pins) - 1}:0])")
            else:
                conns += [f".{pin}({port.ref(b)})" for b, pin in pins]
        return (f"module {top}({', '.join(p.name for p in self.ports)});\n" + "\n".join(decl)
                + f"\n  {ASIC_TOP} gates({', '.join(conns)});\n"
                + extra + "endmodule\n")


_CONNECTION = re.compile(r"\.\w+\(\s*([^()\s]+)\s*\)")


def netlist_nets(netlist: str) -> set[str]:
    """Every net a cell pin connects to in a qflow netlist (``_254_``, ``i__payload[3]``)."""
    return set(_CONNECTION.findall(netlist)) - {"vdd", "gnd"}


def unused_inputs(netlist: str, top: AsicTop) -> set[tuple[str, int]]:
    """Input bits of the chip no cell reads in the synthesized ``netlist``; an output no
    cell drives is an error (it would float)."""
    used = netlist_nets(netlist)
    assigned = set(re.findall(r"^assign\s+(\S+)\s*=", netlist, re.M))
    unused, floating = set(), []
    for port in top.ports:
        for bit, pin in top.pins(port):
            if pin in used or pin in assigned:
                continue
            if port.direction == "input":
                unused.add((port.name, bit))
            else:
                floating.append(pin)
    if floating:
        raise ToolError(f"synthesis left the output pin(s) {', '.join(floating)} undriven")
    return unused
