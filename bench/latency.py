"""Latency-mode bench: the unrolled constant-weight engine against the matrix-vector unit
with LUT multipliers at the same II (one vector per cycle, ``pe = MH``, ``simd = MW``,
no DSP blocks) on the layers of the bundled models, synthesized alone with Yosys; and the
LUT4s per binary synapse of unrolled binary layers, alone and (``+thr`` rows) with the
thresholds that follow them in the network, which is how they are built there (the
popcount's constant then goes into the thresholds and the output is one bit per neuron).
Each row also gives the template's own estimate, so that the cost model can be checked
against synthesis. LUT4 counts include the synthesis harness (an XOR tree over the
outputs, about one LUT4 per three output bits) and the engine's output FIFO.

    python bench/latency.py [--family ecp5|ice40] [--only NAME] [--no-mvu] [--json FILE]

Synthesis of the largest layers takes minutes each (TFC's first layer: 50,176 synapses).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import warnings
from pathlib import Path

from qloom.errors import ToolError
from qloom.flows.toolchain.synth import synthesize
from qloom.hw.estimate import Family, calibrated

MODELS = Path(__file__).resolve().parents[1] / "examples" / "models"
TARGETS = {"ice40": ("iCE40UP5K", "SG48"), "ecp5": ("LFE5U-85F", "BG381")}




def layers():
    """(case name, Dense layer, the layer right after it) of the bundled models."""
    import qloom
    out = []
    for model in ("jettagging_w6a6", "tfc_w1a1"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            net = qloom.load(MODELS / f"{model}.onnx")
        for k, layer in enumerate(net.layers):
            if layer.op == "Dense":
                after = net.layers[k + 1] if k + 1 < len(net.layers) else None
                out.append((f"{model}/{layer.name}", layer, after))
    return out


def unrolled(dense, family, after=None):
    """The unrolled engine of ``dense``, with ``after`` (a MultiThreshold) fused, as qloom
    builds it for ``family`` (the engine's rules for levels per stage and clusters)."""
    from qloom.flows.compile.engines.base import BuildOptions
    from qloom.flows.compile.engines.unrolled import chain_schedule, cluster_size
    from qloom.hw.threshold import ThresholdSpec
    from qloom.hw.unrolled import UnrolledChain, UnrolledLayer
    post = ThresholdSpec.from_layer(after) if after is not None else None
    layers = [UnrolledLayer(dense.weights, dense.w_type, dense.in_type, post)]
    options = BuildOptions(family=Family(family))
    per, far, copies = chain_schedule(layers, options)
    return UnrolledChain(layers=layers, levels_per_stage=per, far_levels=far,
                         copy_readers=copies, cluster=cluster_size(layers, options))


def _binary(dense) -> bool:
    return dense.w_type.bits == 1 and dense.in_type.bits == 1


def mvu(dense):
    from qloom.hw.mvu import MVU, MVUConfig
    return MVU(MVUConfig(weights=dense.weights, w_type=dense.w_type, in_type=dense.in_type,
                         pe=dense.mh, simd=dense.mw, dsp_budget=0))


def measure(component, family, build_dir) -> dict:
    device, package = TARGETS[family]
    r = synthesize(component, family=family, device=device, package=package,
                   build_dir=build_dir, pnr=False, dsp=False, progress=False)
    return {"lut4": r.lut, "ff": r.ff, "dsp": r.dsp,
            "ram_cells": sum(n for t, n in r.cells_by_type.items() if "DPR" in t or "RAM" in t)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", choices=sorted(TARGETS), default="ecp5")
    p.add_argument("--only", help="substring of the case names to run")
    p.add_argument("--no-mvu", action="store_true", help="only the unrolled engines")
    p.add_argument("--json", type=Path, help="also write the rows to this file")
    args = p.parse_args(argv)
    rows = []
    print(f"{'layer':32} {'synapses':>8} {'unrolled LUT4':>13} {'(est)':>7} {'FF':>6} "
          f"{'LUT4/syn':>8} {'MVU LUT4':>9} {'FF':>6} {'MVU/unrolled':>12}")
    with tempfile.TemporaryDirectory(prefix="qloom-latency-") as tmp:
        cases = []
        for name, dense, after in layers():
            cases.append((name, dense, None))
            if _binary(dense) and after is not None and after.op == "MultiThreshold":
                cases.append((f"{name}+thr", dense, after))
        for name, dense, after in cases:
            if args.only and args.only not in name:
                continue
            synapses = int((dense.weights != 0).sum())
            unit = unrolled(dense, args.family, after)
            # The estimate the compiler reports: the chain's features, calibrated.
            r = calibrated(unit.design.features(lut_ram=args.family != "ice40"),
                           Family(args.family))
            est = {"lut": r.lut, "ff": r.ff}
            try:
                row = {"layer": name, "synapses": synapses, "weights": dense.weights.size,
                       "unrolled": measure(unit, args.family, Path(tmp) / f"{len(rows)}u"),
                       "unrolled_estimate": est}
                if not args.no_mvu and after is None:
                    row["mvu"] = measure(mvu(dense), args.family, Path(tmp) / f"{len(rows)}m")
            except ToolError as e:
                print(f"{name:32} failed: {str(e).splitlines()[0]}")
                continue
            rows.append(row)
            u = row["unrolled"]
            per = u["lut4"] / dense.weights.size
            line = (f"{name:32} {dense.weights.size:>8} {u['lut4']:>13} {est['lut']:>7} "
                    f"{u['ff']:>6} {per:>8.3f}")
            if "mvu" in row:
                m = row["mvu"]
                line += f" {m['lut4']:>9} {m['ff']:>6} {m['lut4'] / max(1, u['lut4']):>12.2f}"
            print(line, flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
