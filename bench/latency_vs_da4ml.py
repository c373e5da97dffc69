"""Latency mode against da4ml 0.6 (issue 53): the same integer layers of qloom's IR built
by qloom's unrolled engine and by da4ml (distributed arithmetic, plain Verilog), at the
same pipeline latency in cycles, through the same Yosys ``synth_ecp5`` and (``--pnr``)
nextpnr-ecp5 for the ULX3S-85F (LFE5U-85F, CABGA381) at 100 MHz, out of context.

Both designs sit in qloom's ``Harness`` (inputs from a shift register on one pin, outputs
XOR-reduced onto another, registered); LUT4 and FF counts are of the design alone (its
module kept as a hierarchy level), Fmax is nextpnr's for the whole harness. da4ml's
Verilog is instantiated by a small Amaranth component with a plain vector in and out.

Layers: every Dense of ``jettagging_w6a6`` with the Requant after it (the last Dense
alone), as one network and (``--layers``) each alone. Where the two differ:

* Requant is ``clip(round_half_even((acc + bias) / 2**shift), lo, hi)`` in qloom; da4ml's
  quantizer rounds half up (``RND``, no half-even mode) and saturates (``SAT``), so on a
  tie at an odd quotient da4ml's code is one higher. The bench reports how many frames
  and values differ between da4ml's own emulation of its design and qloom's integer
  layers (``Layer.execute``, what ``Network.execute`` runs between its input and output
  quantization).

TFC-w1a1 (784-64-64-64-10, bipolar weights and activations; issue 53's third point) is
in the bench too: da4ml takes the input codes (0/1), each layer as ``(2W) b - sum(W)``,
and each one-threshold activation as a saturated one-bit quantization (exact on
integers), its outputs the codes; its solver runs with ``TFC_SOLVER``.

da4ml's pipeline: ``to_pipeline`` with the latency cutoff whose stage count makes its
latency (one register bank at the input and one after every stage) equal qloom's
``UnrolledChain.latency``, or the closest below it.

    python bench/latency_vs_da4ml.py [--pnr] [--layers] [--no-tfc] [--workdir DIR]

Needs the ``bench`` extra (``pip install qloom[bench]``: da4ml). Whole-network place and
route takes 10-30 minutes per design on a loaded machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

MODELS = Path(__file__).resolve().parents[1] / "examples" / "models"
# da4ml's solver options for TFC-w1a1: with its default search over decompositions it had
# not finished the 784x64 layer after 13 minutes; without it, 160 s.
TFC_SOLVER = {"search_all_decompose_dc": False}
DEVICE, PACKAGE, CLOCK_MHZ = "LFE5U-85F", "CABGA381", 100.0


def load(model):
    import qloom
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return qloom.load(MODELS / f"{model}.onnx")


def stages_of(net):
    """(Dense, post) pairs of the network, post its Requant/MultiThreshold or None."""
    out, layers = [], net.layers
    for k, layer in enumerate(layers):
        if layer.op == "Dense":
            nxt = layers[k + 1] if k + 1 < len(layers) else None
            post = nxt if nxt is not None and nxt.op in ("Requant", "MultiThreshold") else None
            out.append((layer, post))
    return out


def qloom_chain(stages):
    """qloom's unrolled engine of ``stages`` as the compiler builds it for ECP5."""
    from qloom.flows.compile.engines.base import BuildOptions
    from qloom.flows.compile.engines.unrolled import UnrolledEngine
    from qloom.hw.estimate import Family
    engine = UnrolledEngine(stages, 1)
    return engine.nodes(engine.fold, BuildOptions(family=Family.ECP5))[0].component


def _input_array(dtype, n, solver_options=None):
    """da4ml's input variables: the codes of ``dtype`` (0 and 1 for a bipolar type)."""
    from da4ml.trace import FixedVariableArray
    lo, hi = (0, 1) if dtype.bipolar else (dtype.min, dtype.max)
    return FixedVariableArray.from_lhs(np.full(n, float(lo)), np.full(n, float(hi)),
                                       np.ones(n), solver_options=solver_options)


def _one_bit_threshold(x, post):
    """``post`` (one threshold per channel, a bipolar output) on da4ml's values ``x``: the
    output code ``bias + sign * (x >= T)`` as a saturated one-bit quantization of
    ``x - T + 1`` (sign +1, bias 0) or ``T - x`` (sign -1, bias 1), exact on integers."""
    t = post.thresholds[:, 0].astype(np.float64)
    up = (post.sign == 1) & (post.bias == 0)
    down = (post.sign == -1) & (post.bias == 1)
    if not np.all(up | down):
        raise SystemExit(f"{post.name}: only bias + sign * (x >= T) with a bipolar "
                         f"output is expressed for da4ml here")
    v = np.where(up, 1.0, -1.0) * x + np.where(up, 1.0 - t, t)
    return v.quantize(k=0, i=1, f=0, overflow_mode="SAT", round_mode="TRN")


def da4ml_trace(stages, solver_options=None):
    """da4ml's combinational logic of ``stages`` (see the module documentation): integer
    layers with a Requant after them, or bipolar layers with one threshold per channel
    after them (the last one may have neither)."""
    from da4ml.trace import comb_trace
    first = stages[0][0]
    inp = _input_array(first.in_type, first.mw, solver_options)
    x = inp
    for dense, post in stages:
        w = dense.weights.T.astype(np.float64)
        if dense.in_type.bipolar:          # value 2b - 1 of code b
            x = x @ (2 * w) - w.sum(axis=0)
        else:
            x = x @ w
        if post is None:
            continue
        if post.op == "MultiThreshold" and post.num_thresholds == 1 \
                and post.out_type.bipolar:
            x = _one_bit_threshold(x, post)
            continue
        if post.op != "Requant" or dense.in_type.bipolar:
            raise SystemExit(f"{dense.name}: only integer Dense layers with a Requant, or "
                             f"bipolar ones with one threshold, are compared here")
        x = (x + post.bias.astype(np.float64)) * 2.0 ** -post.shift
        signed = int(post.lo < 0)
        bits = int(np.ceil(np.log2(max(abs(post.lo), post.hi + 1))))
        if post.lo != (-(1 << bits) if signed else 0) or post.hi != (1 << bits) - 1:
            raise SystemExit(f"{post.name}: clamp [{post.lo}, {post.hi}] is not a "
                             f"full fixed-point range; not expressible here")
        x = x.quantize(k=signed, i=bits, f=0, overflow_mode="SAT", round_mode="RND")
    return inp, comb_trace(inp, x)


def reference(stages, xs):
    h = xs
    for dense, post in stages:
        h = dense.execute(h)
        if post is not None:
            h = post.execute(h)
    return h


def da4ml_pipeline(comb, cycles):
    """The pipeline of ``comb`` whose latency in cycles (stages + 1) is ``cycles`` or the
    closest below; the cutoff is found by bisection on da4ml's delay units."""
    from da4ml.trace import to_pipeline
    lo, hi = 1e-3, float(comb.latency[1]) + 1
    best = to_pipeline(comb, hi, verbose=False)
    for _ in range(40):
        mid = (lo + hi) / 2
        pipe = to_pipeline(comb, mid, verbose=False)
        if len(pipe.solutions) + 1 > cycles:
            lo = mid
        else:
            hi, best = mid, pipe
    return best, hi


def verilog_dut(module: str, in_bits: int, out_bits: int):
    """An Amaranth component around da4ml's top ``module`` (clk, model_inp, model_out)."""
    from amaranth.hdl import ClockSignal, Instance, Module
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    class Dut(wiring.Component):
        def __init__(self):
            super().__init__({"inp": In(in_bits), "out": Out(out_bits)})

        def elaborate(self, platform):
            m = Module()
            m.submodules.da4ml = Instance(module, i_clk=ClockSignal(),
                                          i_model_inp=self.inp, o_model_out=self.out)
            return m
    return Dut()


def measure(dut, build: Path, verilog=(), pnr=False) -> dict:
    """Yosys synth_ecp5 (and nextpnr-ecp5 with ``pnr``) of ``dut`` in qloom's Harness,
    with ``verilog`` files read beside it: the flow of ``qloom.flows.toolchain.synth.synthesize``."""
    from amaranth.back import rtlil
    from qloom.flows.toolchain.synth import (AFTER_READ, Harness, read_nextpnr_report, read_stat,
                                             run_nextpnr, run_yosys, synth_command)
    build.mkdir(parents=True, exist_ok=True)
    inputs = {"top.il": rtlil.convert(Harness(dut), name="top")}
    reads = ["read_rtlil top.il"]
    for p in verilog:
        inputs[Path(p).name] = Path(p).read_text()
        reads.append(f"read_verilog {Path(p).name}")
    inputs["top.ys"] = "\n".join([
        # Verilog modules are resolved (parameters derived) before qloom's AFTER_READ
        # runs proc and opt_clean, which otherwise drop the outputs of da4ml's stages.
        *reads, *(["hierarchy -top top"] if verilog else []), AFTER_READ, "setattr -mod -set keep_hierarchy 1 top.dut",
        synth_command("ecp5", "top", dsp=False),
        "tee -q -o top.stat.json stat -json", "write_json top.json", ""])
    # A --workdir build of the very same inputs is not synthesized again.
    same = (build / "top.stat.json").exists() and all(
        (build / n).exists() and (build / n).read_text() == text for n, text in inputs.items())
    if not same:
        (build / "top.stat.json").unlink(missing_ok=True)
        for n, text in inputs.items():
            (build / n).write_text(text)
        run_yosys(build / "top.ys", build, build / "top.yosys.log", quiet=True)
    stat = read_stat(build / "top.stat.json", "ecp5", "top.dut")
    row = {"lut": stat["lut"], "ff": stat["ff"], "fmax": None}
    if pnr:
        run_nextpnr("ecp5", netlist=build / "top.json", cwd=build, device=DEVICE,
                    package=PACKAGE, constraints=None, clock_mhz=CLOCK_MHZ,
                    report=build / "top.report.json", log=build / "top.nextpnr.log",
                    quiet=True)
        row["fmax"] = read_nextpnr_report(build / "top.report.json")["fmax_mhz"]
    return row


def da4ml_design(stages, cycles, build: Path, solver_options=None):
    """(component, Verilog files, latency in cycles, cutoff) of da4ml's design."""
    from da4ml.codegen import VerilogModel
    inp, comb = da4ml_trace(stages, solver_options)
    pipe, cutoff = da4ml_pipeline(comb, cycles)
    VerilogModel(pipe, "da4ml_top", build / "verilog").write()
    src = build / "verilog" / "src"
    files = sorted(src.glob("da4ml_top*.v")) + sorted((src / "static").glob("*.v"))
    # The wrapper is replaced by verilog_dut; the lookup-table module only serves table
    # ops (memory files), which these layers have none of.
    skip = {"da4ml_top_wrapper.v"} | (set() if any((src / "memfiles").glob("*"))
                                      else {"lookup_table.v"})
    files = [f for f in files if f.name not in skip]
    import re
    top = (src / "da4ml_top.v").read_text()
    width = {name: int(w) + 1 for w, name in
             re.findall(r"(?:input|output reg|output)\s*\[(\d+):0\]\s*(model_\w+)", top)}
    dut = verilog_dut("da4ml_top", width["model_inp"], width["model_out"])
    return comb, dut, files, len(pipe.solutions) + 1, cutoff


def agreement(stages, comb, frames=1000, seed=0):
    first = stages[0][0]
    rng = np.random.default_rng(seed)
    if first.in_type.bipolar:
        codes = rng.integers(0, 2, (frames, first.mw))
        xs = 2 * codes - 1
    else:
        xs = codes = rng.integers(first.in_type.min, first.in_type.max + 1,
                                  (frames, first.mw))
    ref = reference(stages, xs)
    last = stages[-1][1]
    if last is not None and last.out_type.bipolar:
        ref = (ref + 1) // 2                # da4ml's outputs are the codes
    got = np.array([comb(row) for row in codes.astype(np.float64)]).astype(np.int64)
    diff = np.abs(got - ref)
    return {"frames": frames, "frames_equal": int((diff.max(axis=1) == 0).sum()),
            "values_differ": int((diff != 0).sum()), "values": diff.size,
            "max_diff": int(diff.max())}


def fmt(x, spec):
    return format(x, spec) if x is not None else "-"


def compare(name, stages, build: Path, pnr: bool, solver_options=None) -> dict:
    """Both designs of ``stages``: one printed line each, and the figures."""
    unit = qloom_chain(stages)
    cycles = unit.latency
    comb, dut, files, d_cycles, cutoff = da4ml_design(stages, cycles, build / "da4ml",
                                                      solver_options)
    agree = agreement(stages, comb)
    q = measure(unit, build / "qloom", pnr=pnr)
    d = measure(dut, build / "da4ml" / "synth", files, pnr=pnr)
    for who, row, cyc in (("qloom", q, cycles), ("da4ml", d, d_cycles)):
        ns = cyc * 1000 / row["fmax"] if row["fmax"] else None
        print(f"{name:28} {who:6} {row['lut']:>7} {row['ff']:>7} {fmt(row['fmax'], '>8.2f')} "
              f"{cyc:>7} {fmt(ns, '>8.1f')}", flush=True)
    print(f"{'':28} da4ml latency cutoff {cutoff:.3f} (delay units; {d_cycles - 1} stages);"
          f" emulation vs qloom's layers: {agree['frames_equal']}/{agree['frames']} frames"
          f" equal, {agree['values_differ']}/{agree['values']} values differ, by at most"
          f" {agree['max_diff']}", flush=True)
    return {"qloom": q, "da4ml": d}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pnr", action="store_true", help="also place and route (Fmax)")
    p.add_argument("--layers", action="store_true", help="also each jet tagger layer alone")
    p.add_argument("--workdir", type=Path, help="keep the builds here")
    p.add_argument("--no-tfc", action="store_true", help="leave out TFC-w1a1 (its da4ml "
                   "solution and two ~50k-LUT4 syntheses take about 15 minutes)")
    args = p.parse_args(argv)
    print(f"ECP5 {DEVICE} {PACKAGE}, {CLOCK_MHZ:.0f} MHz target, Yosys synth_ecp5 -nodsp"
          f"{', nextpnr-ecp5' if args.pnr else ' only (no Fmax)'}; LUT4 and FF of the design"
          f" alone, Fmax of the harness; latency = cycles from input register to output")
    print("requantization: qloom rounds half to even, da4ml half up (ties at an odd"
          " quotient give da4ml one code more)")
    print(f"{'case':28} {'design':6} {'LUT4':>7} {'FF':>7} {'Fmax':>8} {'cycles':>7} "
          f"{'ns':>8}")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="qloom-da4ml-"))
    if not args.no_tfc:
        compare("tfc_w1a1 (network)", stages_of(load("tfc_w1a1")), work / "tfc", args.pnr,
                TFC_SOLVER)
    stages = stages_of(load("jettagging_w6a6"))
    whole = compare("jettagging_w6a6 (network)", stages, work / "jet", args.pnr)
    if args.layers:
        for k, stage in enumerate(stages):
            compare(f"jettagging_w6a6/{stage[0].name}", [stage], work / f"jet{k}", False)
    q, d = whole["qloom"], whole["da4ml"]
    fmax = fmt(q["fmax"] / d["fmax"], ".3f") if q["fmax"] and d["fmax"] else "-"
    print(f"qloom/da4ml LUT {q['lut'] / d['lut']:.3f} FF {q['ff'] / d['ff']:.3f} Fmax {fmax}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
