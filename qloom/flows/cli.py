"""The ``qloom`` command line: one subcommand per flow step.

Each step module provides ``add_parser(subparsers)`` and ``run(args) -> int``; this file
only collects them and is every command's error boundary: whatever a command raises ends
as one line on stderr and one of the ``EXIT_STATUSES``, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import sys
import textwrap

from .._version import __version__
from ..errors import InternalError, QloomError, raise_interrupt
from ..models import bundled, model_path

__all__ = ["main", "EXIT_STATUSES"]

# The exit statuses of every command, as `qloom --help` lists them.
EXIT_OK, EXIT_FAILED, EXIT_ERROR, EXIT_BUG, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_STATUSES = {
    EXIT_OK: "done",
    EXIT_FAILED: "the command ran and its check failed (simulate, run, board-sim: a "
                 "mismatching frame; sweep: a failed point)",
    EXIT_ERROR: "an error in the model, the options, the OUT folder or the environment "
                "(a missing or failing tool, a file that cannot be written); the line says "
                "which",
    EXIT_BUG: "an internal error: a bug in qloom (the line names the exception and where)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
}

# Subcommands provided by other modules: (module, description for a missing module).
_STEP_MODULES = ["qloom.flows.simulate", "qloom.flows.toolchain.build",
                 "qloom.flows.deploy.bundle", "qloom.flows.deploy.host", "qloom.flows.deploy.board_sim", "qloom.boards.cli",
                 "qloom.flows.report.command", "qloom.flows.sweep.run"]


MODEL_HELP = "QONNX model (.onnx), or the name of a bundled one (see `qloom models`)"


def _add_models(sub):
    p = sub.add_parser("models", help="list the QONNX models bundled with qloom",
                       description="The published models that ship with qloom, by name "
                                   "and path; a name can stand for MODEL in inspect and "
                                   "compile.")
    p.set_defaults(func=_run_models)


def _run_models(args) -> int:
    for name, path in bundled().items():
        print(f"{name:18} {path}")
    return 0


def _add_inspect(sub):
    p = sub.add_parser("inspect", help="show the integer network of a QONNX model",
                       description="Load a QONNX model and print, per layer: op, shapes, "
                                   "input/weight/output datatypes, MACs and weight bits.")
    p.add_argument("model", type=model_path, help=MODEL_HELP)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _add_load_options(p)
    p.set_defaults(func=_run_inspect)


def _add_load_options(p):
    p.add_argument("--input-type", metavar="DTYPE",
                   help="datatype of a float graph input that has no quantizer, e.g. INT16, "
                        "UINT8, UINT1 (default INT16)")
    p.add_argument("--input-scale", type=float, metavar="S",
                   help="scale of that input: float = integer * S (default 2**-10)")
    p.add_argument("--precision", metavar="TYPE",
                   help="load a float model at this fixed-point precision, like hls4ml's "
                        "ap_fixed: 'fixed<16,6>' (W bits, I integer bits with the sign), "
                        "'ufixed<W,I>', 'int<W>', 'uint<W>'; compile also takes 'auto' or "
                        "'auto:TOL': the narrowest fixed<W,I> whose argmax agrees with the "
                        "float model on TOL of the calibration frames (default 0.99)")
    p.add_argument("--precision-file", metavar="FILE",
                   help="TOML or JSON per-layer precisions (layer name -> weight, bias, "
                        "result, accumulator) and the model's default, rounding, overflow")
    p.add_argument("--rounding", choices=("truncate", "round", "round_half_up"),
                   help="rounding of a float model's quantizers (default round: to "
                        "nearest, ties to even; truncate is hls4ml's AP_TRN)")


def load_options(args) -> dict:
    from ..nn.dtypes import parse_dtype
    options = {}
    if getattr(args, "input_type", None):
        options["input_type"] = parse_dtype(args.input_type)
    if getattr(args, "input_scale", None) is not None:
        options["input_scale"] = args.input_scale
    return options


def precision_options(args) -> dict:
    """``--precision``/``--precision-file``/``--rounding`` as ``load`` options."""
    return {k: v for k, v in (("precision", getattr(args, "precision", None)),
                              ("precision_file", getattr(args, "precision_file", None)),
                              ("rounding", getattr(args, "rounding", None)))
            if v is not None}


def _run_inspect(args) -> int:
    from ..nn.load import load
    from ..nn.summary import render_table, summarize
    summary = summarize(load(args.model, **load_options(args), **precision_options(args)))
    print(json.dumps(summary, indent=2) if args.json else render_table(summary))
    return 0


def _add_compile(sub):
    p = sub.add_parser("compile", help="compile a QONNX model into a streaming accelerator",
                       description="Map every layer onto a hardware engine, fold it, and "
                                   "write OUT/rtl/*.v (top module qloom_top), "
                                   "OUT/manifest.json, OUT/report.json and OUT/report.md.")
    p.add_argument("model", type=model_path, help=MODEL_HELP)
    p.add_argument("-o", "--out", required=True, help="output folder (replaced when complete)")
    p.add_argument("--board", help="target board (see `qloom boards`): sets the resource "
                                   "model, DSP budget and default clock")
    p.add_argument("--clock", type=float, metavar="MHZ", help="target clock in MHz "
                   "(default: the board's, else 100)")
    p.add_argument("--target-fps", type=float, metavar="N",
                   help="fold each layer just enough to reach N frames per second; with "
                        "--fold auto: the smallest design that fits --board and reaches N "
                        "(an error quoting the reachable rate when none does)")
    p.add_argument("--fold", metavar="FILE|auto",
                   help="JSON file of per-layer foldings ({\"layer\": {\"pe\": 4, \"simd\": 8}}; "
                        "a matrix unit's entry may add \"weights\": \"block\" or \"logic\"), "
                        "or 'auto': the fastest folding that fits --board (with --target-fps "
                        "or --latency: that design, checked against the board)")
    p.add_argument("--dsp-budget", type=int, metavar="N",
                   help="multipliers on DSP blocks (default: the board's DSP count)")
    p.add_argument("--latency", action="store_true",
                   help="latency mode: every layer at one vector per cycle, dense layers "
                        "unrolled with their weights built into the logic; with --fold "
                        "auto: refused when it does not fit --board")
    p.add_argument("--no-pipeline", action="store_true",
                   help="fewer register stages: smaller, lower Fmax")
    p.add_argument("--calibration-inputs", metavar="X.npy",
                   help="with --precision: the inputs on which the precision's cost (max abs "
                        "error, argmax agreement against the float model) is measured "
                        "(default 300 frames from N(0,1))")
    _add_load_options(p)
    p.set_defaults(func=_run_compile)


def _auto_precision(args):
    """``--precision auto[:TOL]``: the narrowest uniform precision reaching TOL."""
    from ..nn.quantize import float_reference
    from qloom.flows.compile.precision_auto import auto_precision, parse_auto
    from qloom.flows.compile.precision_cost import calibration_inputs
    if args.precision_file or args.rounding:
        raise QloomError("--precision auto searches one uniform precision: it takes no "
                         "--precision-file or --rounding")
    dims = float_reference(args.model).graph.input[0].type.tensor_type.shape.dim
    shape = [1] + [d.dim_value for d in dims[1:]]
    x, what = calibration_inputs(args.calibration_inputs, shape)
    config, tries = auto_precision(args.model, parse_auto(args.precision), x, what,
                                   load_options=load_options(args))
    for t in tries:
        print(f"qloom compile: --precision auto: {t['precision']} agrees on "
              f"{100 * t['argmax_agreement']:.1f}%", file=sys.stderr)
    return config, tuple(tries)


def _run_compile(args) -> int:
    from ..nn.quantize import precision_config
    from qloom.flows.compile.steps import compile_model
    from qloom.flows.compile.precision_auto import parse_auto
    tries = ()
    if parse_auto(args.precision) is not None:
        precision, tries = _auto_precision(args)
    else:
        precision = precision_config(**precision_options(args))
    if args.calibration_inputs and precision is None:
        raise QloomError("--calibration-inputs measures a precision: give --precision or "
                         "--precision-file too")
    design = compile_model(
        args.model, args.out, board=args.board, clock_mhz=args.clock,
        target_fps=args.target_fps, fold=args.fold, dsp_budget=args.dsp_budget,
        pipeline=not args.no_pipeline, latency=args.latency,
        load_options=load_options(args), precision=precision, precision_tries=tries,
        calibration_inputs=args.calibration_inputs,
        progress=lambda msg: print(f"qloom compile: {msg}", file=sys.stderr))
    r = design.report
    print(f"wrote {design.out_dir}: {len(r['layers'])} engines, bottleneck "
          f"{r['bottleneck']} at {r['ideal_ii_cycles']:,} cycles/frame, "
          f"{r['fps_at_clock']:,.0f} frames/s at {r['clock_mhz']:g} MHz; estimated "
          + ", ".join(f"{k.upper()} {v:,}" for k, v in r["resources"].items()))
    cost = (r.get("precision") or {}).get("cost")
    if cost:
        print(f"precision {r['precision']['precision']}: argmax agrees with the float model "
              f"on {100 * cost['argmax_agreement']:.1f}% of {cost['frames']} frames, max abs "
              f"error {cost['max_abs_error']:.3g}")
    if r["board"] and not r["board"]["fits"]:
        print(f"warning: the estimate does not fit {r['board']['name']} (over in "
              f"{', '.join(r['board']['over'])}); try --fold auto", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    epilog = "exit status:\n" + "\n".join(
        textwrap.fill(text, 88, initial_indent=f"  {code:<5}", subsequent_indent=" " * 7)
        for code, text in EXIT_STATUSES.items())
    parser = argparse.ArgumentParser(
        prog="qloom", description="Quantized neural networks (QONNX) to verified streaming "
                                  "accelerators, with open FPGA tools.",
        epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"qloom {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    _add_models(sub)
    _add_inspect(sub)
    _add_compile(sub)
    for name in _STEP_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError as e:
            if e.name != name:
                raise
            continue
        before = set(sub.choices)
        module.add_parser(sub)
        for command in set(sub.choices) - before:
            if sub.choices[command].get_default("func") is None:
                sub.choices[command].set_defaults(func=module.run)
    return parser


def _one_line_warnings():
    """Warnings as one line each (``qloom: warning: ...``), not Python's two with source."""
    import warnings

    def show(message, category, filename, lineno, file=None, line=None):
        text = " ".join(str(message).split())
        print(f"qloom: warning: {text}", file=file or sys.stderr)
    warnings.showwarning = show


def _quiet_unused_hardware():
    """A command stopped half way leaves Amaranth components that were built but never
    elaborated; Amaranth warns about each when they are collected at exit, a page of
    noise after the one line that matters."""
    import warnings
    try:
        from amaranth.hdl import UnusedElaboratable
    except ImportError:
        return
    warnings.simplefilter("ignore", UnusedElaboratable)


class _LostInterrupts:
    """Catches a Ctrl-C that lands in a destructor (``__del__``, e.g. Amaranth's check
    for unused hardware while objects are collected): Python cannot raise it there, prints
    a traceback and goes on. While active, such an interrupt is recorded instead of
    printed, so that the command can still end as interrupted."""

    def __enter__(self):
        self.lost, self._hook = False, sys.unraisablehook
        sys.unraisablehook = self._record
        return self

    def _record(self, unraisable):
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            self.lost = True
        else:
            self._hook(unraisable)

    def __exit__(self, *exc):
        sys.unraisablehook = self._hook


def main(argv=None) -> int:
    command = "qloom"
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        command = f"qloom {args.command}"
        _one_line_warnings()
        with _LostInterrupts() as interrupts:
            code = args.func(args) or 0
        if interrupts.lost:           # the command finished; its outputs are complete
            raise KeyboardInterrupt
        return code
    except KeyboardInterrupt:
        _quiet_unused_hardware()
        print(f"{command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:      # e.g. `qloom inspect M | head`: the reader has gone
        sys.stdout = open(os.devnull, "w")
        return EXIT_OK
    except Exception as e:
        _quiet_unused_hardware()
        code, line = _error_line(e)
        print(f"{command}: {line}", file=sys.stderr)
        return code


def _error_line(e: Exception) -> tuple[int, str]:
    """The exit status and the one line for an exception that ended a command: a qloom
    error's own message; the operating system's refusal (a file that cannot be read or
    written, a full disk) as an error; anything else as a bug in qloom, naming the
    exception and the line that raised it."""
    if isinstance(e, InternalError):
        return EXIT_BUG, f"internal error: {_one_line(e)}"
    if isinstance(e, QloomError):     # its first line says it; a table or a tool's log may follow
        return EXIT_ERROR, f"error: {e}"
    try:
        raise_interrupt(e)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED, "interrupted"
    if isinstance(e, OSError) and e.strerror:
        where = f": {e.filename}" if e.filename else ""
        return EXIT_ERROR, f"error: {e.strerror}{where}"
    import traceback
    frames = traceback.extract_tb(e.__traceback__)
    where = f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno})" \
        if frames else ""
    return EXIT_BUG, (f"internal error: {type(e).__name__}: {_one_line(e)[:300]}{where}; "
                      f"this is a bug in qloom, please report it with the command and model")


def _one_line(e: Exception) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def entry() -> None:
    """The ``qloom`` program: ``main()``, then exit with its status. Once ``main`` has
    returned its work is done (OUT written whole or not at all), so a Ctrl-C from then on
    is ignored: one arriving while the interpreter shuts down would otherwise kill it by
    SIGINT (status -2) after a finished command."""
    try:
        code = main()
    except KeyboardInterrupt:      # in the instant after main's own handler
        print("qloom: interrupted", file=sys.stderr)
        code = 130
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code)


if __name__ == "__main__":
    entry()
