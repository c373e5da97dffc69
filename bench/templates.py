"""Synthesis bench of the hardware templates: for a few sizes of each template, on iCE40UP5K
and ECP5-85F, LUT4s, flip-flops, DSPs and block RAMs (Yosys ``stat -json`` of the template
alone) and Fmax (nextpnr ``--report``), the template wrapped in an I/O harness
(``qloom.flows.toolchain.synth.Harness``). For binary MVUs also LUT4s per binary synapse per cycle
(PE*SIMD synapses are evaluated each cycle). Each template is configured as the compiler
builds it for that family (register stages, DSP primitive, threshold mode), so the Fmax is
the one a compiled design would see; the target clocks are the boards' defaults.

    python bench/templates.py [--family ice40|ecp5] [--only NAME] [--json FILE] [--no-pnr]

``cases()`` is also what tests/hw/test_synth.py synthesizes.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from qloom.errors import ToolError
from qloom.flows.toolchain.synth import synthesize
from qloom.nn.dtypes import BINARY, BIPOLAR, int_type, uint_type

TARGETS = {"ice40": ("iCE40UP5K", "SG48", 50.0), "ecp5": ("LFE5U-85F", "BG381", 150.0)}


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[str], object]   # builds a fresh component for a family (ice40/ecp5)
    synapses: int | None = None     # binary synapses per cycle (PE * SIMD) of binary MVUs
    dsp_budget: int | None = None


def _rng(seed):
    return np.random.default_rng(seed)


def _options(family: str):
    """The compiler's build options for ``family`` (pipelined, as every board build)."""
    from qloom.flows.compile.engines.base import BuildOptions
    from qloom.hw.estimate import Family
    return BuildOptions(family=Family(family))


def _mvu(family, mh, mw, pe, simd, w_type, in_type, dsp_budget=None, threshold=False):
    from qloom.flows.compile.engines.dense import dsp_primitive
    from qloom.hw.mvu import MVU, MVUConfig, MVURegisters
    from qloom.hw.mvu_datapath import select_datapath
    from qloom.hw.threshold import ThresholdSpec
    rng = _rng(mh * 1000 + mw)
    if w_type.bipolar:
        weights = rng.choice([-1, 1], size=(mh, mw))
    else:
        weights = rng.integers(w_type.min, w_type.max + 1, size=(mh, mw))
    spec = None
    if threshold:
        spec = ThresholdSpec(thresholds=np.sort(rng.integers(-mw, mw, size=(mh, 1)), axis=1),
                             bias=np.zeros(mh, dtype=np.int64),
                             sign=np.ones(mh, dtype=np.int64), out_type=BIPOLAR)
    options = _options(family)
    registers = MVURegisters.for_target(pipeline=options.pipeline, family=options.family,
                                        datapath=select_datapath(w_type, in_type))
    return MVU(MVUConfig(weights=weights, w_type=w_type, in_type=in_type, pe=pe, simd=simd,
                         threshold=spec, dsp_budget=dsp_budget, registers=registers,
                         dsp_primitive=dsp_primitive(options, w_type, in_type)))


def _thresholding(family, channels, levels, pe, in_bits):
    from qloom.hw.estimate import Family
    from qloom.hw.threshold import ThresholdSpec, Thresholding, compare_register, mode_for
    rng = _rng(channels * levels)
    lo, hi = -(1 << (in_bits - 1)), (1 << (in_bits - 1)) - 1
    spec = ThresholdSpec(thresholds=np.sort(rng.integers(lo, hi, size=(channels, levels)), axis=1),
                         bias=np.zeros(channels, dtype=np.int64),
                         sign=np.ones(channels, dtype=np.int64),
                         out_type=uint_type(max(1, levels.bit_length())))
    return Thresholding(spec=spec, in_type=int_type(in_bits), pe=pe, mode=mode_for(levels),
                        compare_register=compare_register(levels, Family(family)))


def _requant(family, channels, lanes, in_bits, out_bits):
    """The requantizer with its offset table where the template's rule puts it (the
    jet tagger's first one at 64 channels, 1 lane: block RAM on the iCE40)."""
    from qloom.hw.estimate import Family
    from qloom.hw.requant import Requantizer
    from qloom.nn.ir import Rounding
    in_type = int_type(in_bits)
    bias = _rng(channels).integers(-(1 << (in_bits - 2)), 1 << (in_bits - 2), size=channels)
    return Requantizer(bias=bias, shift=in_bits - out_bits - 2, rounding=Rounding.HALF_EVEN,
                       lo=0, hi=(1 << out_bits) - 1, in_type=in_type,
                       out_type=uint_type(out_bits), lanes=lanes, block_table=Family(family))


def _systolic(family, rows, cols, k, n, dsp_budget=None):
    from qloom.flows.compile.engines.dense import dsp_primitive
    from qloom.hw.systolic import SystolicArray
    weights = _rng(rows * cols).integers(-128, 128, size=(n, k))
    return SystolicArray(weights=weights, w_type=int_type(8), in_type=int_type(8),
                         rows=rows, cols=cols, dsp_budget=dsp_budget,
                         dsp_primitive=dsp_primitive(_options(family), int_type(8),
                                                     int_type(8)))


def _swg(family, size, channels, simd):
    from qloom.hw.swg import SlidingWindow, WindowConfig
    return SlidingWindow(WindowConfig(in_h=size, in_w=size, channels=channels, kernel=(3, 3),
                                      dtype=uint_type(4), simd=simd))


def _pool(family, size, channels, lanes):
    from qloom.hw.pool import MaxPool
    return MaxPool(in_h=size, in_w=size, channels=channels, kernel=(2, 2), stride=(2, 2),
                   dtype=uint_type(4), lanes=lanes)


def _add(family, lanes, bits):
    from qloom.hw.add import ElementwiseAdd
    return ElementwiseAdd(a_type=int_type(bits), b_type=int_type(bits), lanes=lanes)


def _fifo(family, width, depth):
    from amaranth.hdl import unsigned
    from qloom.hw.fifo import StreamFIFO
    return StreamFIFO(shape=unsigned(width), depth=depth)


def _width(family, bits, in_lanes, out_lanes):
    from amaranth.hdl import unsigned
    from qloom.hw.width import WidthConverter
    return WidthConverter(elem_shape=unsigned(bits), in_lanes=in_lanes, out_lanes=out_lanes)


def cases(size: str = "all") -> list[Case]:
    """Template instances by size ("small": one corner each, "all": the bench sweep)."""
    small = [
        Case("mvu_xnor 16x32 pe4 simd8", lambda f: _mvu(f, 16, 32, 4, 8, BIPOLAR, BIPOLAR), 32),
        Case("mvu_binw 8x16 pe2 simd4 a4", lambda f: _mvu(f, 8, 16, 2, 4, BINARY, int_type(4))),
        Case("mvu_mac 4x8 pe2 simd2 w8a8 dsp2",
             lambda f: _mvu(f, 4, 8, 2, 2, int_type(8), int_type(8), dsp_budget=2), dsp_budget=2),
        Case("threshold 16ch 3lv pe4", lambda f: _thresholding(f, 16, 3, 4, 8)),
        Case("requant 64ch lanes1 int24->uint6", lambda f: _requant(f, 64, 1, 24, 6)),
        Case("systolic 2x2 w8a8", lambda f: _systolic(f, 2, 2, 8, 4)),
        Case("swg 6x6x4 k3 simd2", lambda f: _swg(f, 6, 4, 2)),
        Case("maxpool 8x8x4 k2 lanes2", lambda f: _pool(f, 8, 4, 2)),
        Case("add 4 lanes int8", lambda f: _add(f, 4, 8)),
        Case("fifo 16b x 32", lambda f: _fifo(f, 16, 32)),
        Case("width 4b 8->2", lambda f: _width(f, 4, 8, 2)),
    ]
    if size == "small":
        return small
    return small + [
        Case("mvu_xnor 64x784 pe16 simd49 (TFC layer 0)",
             lambda f: _mvu(f, 64, 784, 16, 49, BIPOLAR, BIPOLAR, threshold=True), 16 * 49),
        Case("mvu_xnor 64x64 pe16 simd32", lambda f: _mvu(f, 64, 64, 16, 32, BIPOLAR, BIPOLAR), 512),
        Case("mvu_xnor 64x64 pe8 simd8", lambda f: _mvu(f, 64, 64, 8, 8, BIPOLAR, BIPOLAR), 64),
        Case("mvu_binw 64x64 pe8 simd8 a2", lambda f: _mvu(f, 64, 64, 8, 8, BINARY, int_type(2))),
        Case("mvu_mac 32x16 pe4 simd4 w6a6 dsp8",
             lambda f: _mvu(f, 32, 16, 4, 4, int_type(6), int_type(6), dsp_budget=8), dsp_budget=8),
        Case("mvu_mac 32x16 pe4 simd4 w6a6 dsp0",
             lambda f: _mvu(f, 32, 16, 4, 4, int_type(6), int_type(6), dsp_budget=0), dsp_budget=0),
        Case("threshold 64ch 15lv pe8", lambda f: _thresholding(f, 64, 15, 8, 12)),
        Case("systolic 4x4 w8a8 dsp8", lambda f: _systolic(f, 4, 4, 16, 8, dsp_budget=8),
             dsp_budget=8),
        Case("swg 14x14x8 k3 simd4", lambda f: _swg(f, 14, 8, 4)),
        Case("maxpool 16x16x16 k2 lanes4", lambda f: _pool(f, 16, 16, 4)),
    ]


def measure(case: Case, family: str, build_dir: Path, pnr: bool = True) -> dict:
    device, package, clock = TARGETS[family]
    r = synthesize(case.make(family), family=family, device=device, package=package,
                   build_dir=build_dir, clock_mhz=clock, pnr=pnr, progress=False)
    row = {"template": case.name, "family": family, "lut4": r.lut, "ff": r.ff, "dsp": r.dsp,
           "bram": r.bram, "fmax_mhz": r.fmax_mhz,
           "critical_path": r.critical_path[0] if r.critical_path else None}
    if case.synapses:
        row["lut4_per_synapse"] = round(r.lut / case.synapses, 3)
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", choices=sorted(TARGETS), action="append")
    p.add_argument("--only", help="substring of the template names to run")
    p.add_argument("--size", choices=["small", "all"], default="all")
    p.add_argument("--no-pnr", action="store_true", help="Yosys only (no Fmax)")
    p.add_argument("--json", type=Path, help="also write the rows to this file")
    args = p.parse_args(argv)
    rows = []
    head = f"{'template':44} {'family':6} {'LUT4':>6} {'FF':>6} {'DSP':>4} {'BRAM':>4} " \
           f"{'Fmax':>7} {'LUT4/syn':>8}"
    print(head)
    with tempfile.TemporaryDirectory(prefix="qloom-bench-") as tmp:
        for case in cases(args.size):
            if args.only and args.only not in case.name:
                continue
            for family in args.family or sorted(TARGETS):
                try:
                    row = measure(case, family, Path(tmp) / f"{len(rows)}", not args.no_pnr)
                except ToolError as e:
                    lines = str(e).splitlines()
                    reason = next((x for x in lines if "ERROR" in x), lines[0])
                    print(f"{case.name:44} {family:6} failed: {reason.strip()}")
                    continue
                rows.append(row)
                fmax = f"{row['fmax_mhz']:.1f}" if row["fmax_mhz"] else "-"
                print(f"{row['template']:44} {family:6} {row['lut4']:>6} {row['ff']:>6} "
                      f"{row['dsp']:>4} {row['bram']:>4} {fmax:>7} "
                      f"{row.get('lut4_per_synapse', ''):>8}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
