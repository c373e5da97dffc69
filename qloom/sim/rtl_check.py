"""Run one stream component as generated Verilog under Icarus, the way a compiled design
runs, to catch what Amaranth's simulator hides.

Amaranth's simulator settles every combinational process at time 0. Yosys writes a
combinational assignment made under ``If`` (or to part of a signal) as an ``always @*``
block, which a Verilog simulator runs only when one of its inputs changes; its time-zero
trigger (``reg \\$auto$...dump_module$1 = 0``) is a declaration initializer, which makes no
event in SystemVerilog mode (``iverilog -g2012``, what cocotb's runner uses). A block whose
inputs settle at time 0 then holds X, and an X that reaches a state register never leaves:
the design takes input and never answers. Blocks that read ``rst`` (every ``sync``
next-state block) are run by the reset pulse and are safe. The cure is to write such
combinational logic as one whole-signal assignment (``x.eq(Mux(...))``), which becomes a
Verilog ``assign``.

``comb_processes_without_reset(verilog_text)`` finds those blocks statically;
``run_component_icarus(component, inputs, n_outputs)`` checks for them, then converts the
component to Verilog, streams ``inputs`` into its ``i`` port with cocotb (bench:
``qloom.sim.tb_component``) and returns the ``n_outputs`` payloads that leave ``o``,
raising ``RtlCheckError`` when it stalls, produces an extra word or drives X on a
handshake or an output payload. Payloads are plain Python values, as in
``qloom.sim.pysim``.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

from amaranth.back import verilog
from amaranth.lib import data

from ..errors import QloomError, ToolError
from ..hw.dsp import simulation_models
from .pysim import to_python

__all__ = ["RtlCheckError", "comb_processes_without_reset", "run_component_icarus"]

_JOB_ENV = "QLOOM_RTL_CHECK_JOB"   # qloom.sim.tb_component.JOB_ENV (not imported: cocotb)
_TOP = "dut"
_DRAIN_CYCLES = 32
_LOG_TAIL_CHARS = 4000

_MODULE = re.compile(r"^module (\S+?)\s*\(.*?^endmodule", re.M | re.S)
_COMB_BLOCK = re.compile(r"^(\s*)always @\* begin\n(.*?)^\1end$", re.M | re.S)
_TARGET = re.compile(r"^\s*(\S+)\s*=", re.M)


class RtlCheckError(QloomError):
    """The component misbehaved as Verilog: an X-prone combinational process, a stall, an
    extra word, or X on a handshake or an output payload."""


def comb_processes_without_reset(verilog_text: str) -> list[tuple[str, list[str]]]:
    """The ``always @*`` blocks of Yosys-written Verilog that do not read ``rst``, as
    ``(module, signals assigned)``: under Icarus in SystemVerilog mode they may never run
    and hold X until an input changes (see the module docstring)."""
    found = []
    for module in _MODULE.finditer(verilog_text):
        for block in _COMB_BLOCK.finditer(module.group(0)):
            body = block.group(2)
            if not re.search(r"\brst\b", body):
                found.append((module.group(1), sorted(set(_TARGET.findall(body)))))
    return found


def _to_bits(shape, payload) -> int:
    if isinstance(shape, data.Layout):
        return shape.const(payload).as_bits()
    return int(payload) & ((1 << shape.width) - 1)


def _from_bits(shape, bits: int):
    if isinstance(shape, data.Layout):
        return to_python(shape.from_bits(bits))
    if shape.signed and bits >> (shape.width - 1):
        return bits - (1 << shape.width)
    return bits


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-_LOG_TAIL_CHARS:] if path.is_file() else ""


def run_component_icarus(component, inputs, n_outputs: int, *, stall: float = 0.0,
                         seed: int = 0, idle_timeout: int = 1000, strict: bool = True,
                         build_dir: Path | None = None, waves: bool = False,
                         netlist: str | None = None) -> list:
    """Simulate ``component`` (a ``wiring.Component`` with stream ports ``i`` and ``o``,
    clock ``clk`` and reset ``rst``) as Verilog under Icarus: feed ``inputs`` into ``i``,
    return the ``n_outputs`` payloads that leave ``o``.

    With ``stall`` > 0 the input ``valid`` and the output ``ready`` are dropped at random
    with that probability each cycle (drawn from ``seed``). ``idle_timeout`` is the number
    of cycles without a handshake after which the component counts as hung. ``strict``
    first rejects combinational processes that the reset pulse does not run
    (``comb_processes_without_reset``). Verilog, build, logs (and with ``waves`` an FST
    file) go to ``build_dir``, by default a temporary folder removed afterwards.
    ``netlist``: Verilog to simulate instead of the component's own (a synthesized
    netlist of it, module ``dut``, with its cell models); the component gives the ports.
    Raises ToolError when Icarus or cocotb is missing or fails, RtlCheckError when the
    component misbehaves."""
    if not isinstance(n_outputs, int) or isinstance(n_outputs, bool) or n_outputs < 0:
        raise TypeError(f"n_outputs must be a non-negative integer, not {n_outputs!r}")
    if not isinstance(stall, (int, float)) or not 0.0 <= stall < 1.0:
        raise ValueError(f"stall must be a probability in [0, 1), not {stall!r}")
    if not isinstance(idle_timeout, int) or isinstance(idle_timeout, bool) or idle_timeout < 1:
        raise TypeError(f"idle_timeout must be a positive integer, not {idle_timeout!r}")
    for tool in ("iverilog", "vvp"):
        if shutil.which(tool) is None:
            raise ToolError(f"Icarus Verilog ('{tool}') is not on PATH: install it with "
                            f"apt-get install iverilog")
    name = type(component).__name__
    words_in = [_to_bits(component.i.payload.shape(), payload) for payload in inputs]
    out_shape = component.o.payload.shape()
    if netlist is not None:
        text = netlist
    else:
        text = verilog.convert(component, name=_TOP, emit_src=False)
        text += "".join(simulation_models(text).values())
    if strict and netlist is None:
        found = comb_processes_without_reset(text)
        if found:
            listed = "; ".join(f"{module}: {', '.join(targets)}" for module, targets in found)
            raise RtlCheckError(f"{name} has combinational processes that only run when an "
                                f"input changes, X at time 0 under Icarus -g2012 ({listed}); "
                                f"write them as whole-signal assignments")
    job = {"inputs": [format(word, "x") for word in words_in], "n_outputs": n_outputs,
           "stall": float(stall), "seed": int(seed), "idle_timeout": idle_timeout,
           "drain_cycles": _DRAIN_CYCLES}
    if build_dir is None:
        with tempfile.TemporaryDirectory(prefix="qloom_rtl_check_") as folder:
            words = _simulate(text, job, Path(folder), waves, name)
    else:
        build_dir = Path(build_dir).resolve()
        build_dir.mkdir(parents=True, exist_ok=True)
        words = _simulate(text, job, build_dir, waves, name)
    return [_from_bits(out_shape, word) for word in words]


def _simulate(text: str, job: dict, build_dir: Path, waves: bool, name: str) -> list[int]:
    try:
        from cocotb_tools.runner import get_runner
    except ImportError:
        raise ToolError("cocotb is not installed: pip install cocotb==2.1.0") from None
    source = build_dir / f"{_TOP}.v"
    source.write_text(text)
    result_file, job_file = build_dir / "result.json", build_dir / "job.json"
    result_file.unlink(missing_ok=True)
    job_file.write_text(json.dumps({**job, "result": str(result_file)}))
    build_log, sim_log = build_dir / "build.log", build_dir / "sim.log"
    runner = get_runner("icarus")
    try:
        runner.build(sources=[source], hdl_toplevel=_TOP, build_dir=build_dir, waves=waves,
                     timescale=("1ns", "1ps"), always=True, log_file=build_log)
    except (RuntimeError, SystemExit) as exc:
        raise ToolError(f"Icarus failed to build {name} ({exc}):\n{_tail(build_log)}") \
            from None
    try:
        runner.test(test_module="qloom.sim.tb_component", hdl_toplevel=_TOP,
                    build_dir=build_dir, test_dir=build_dir, waves=waves,
                    extra_env={_JOB_ENV: str(job_file)},
                    results_xml=str(build_dir / "results.xml"), log_file=sim_log)
    except (RuntimeError, SystemExit):
        pass   # judged from the result file
    if not result_file.is_file():
        raise ToolError(f"the Icarus simulation of {name} ended without a result:\n"
                        f"{_tail(sim_log)}")
    result = json.loads(result_file.read_text())
    if result["error"]:
        raise RtlCheckError(f"{name} as Verilog (Icarus): {result['error']}")
    return [int(word, 16) for word in result["outputs"]]
