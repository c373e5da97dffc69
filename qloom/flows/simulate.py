"""``qloom simulate``: run a compiled design's RTL on real or random inputs and check every
output frame bit for bit against the integer network (the golden model).

Inputs are either float model inputs ``X [N, *model input shape]``, quantized by the
network's own prefix (``net.quantize``), or ``random=N`` frames of integer values drawn
uniformly from the input tensor's datatype (seeded). Random frames live in the integer
domain only: they exercise the hardware on every code of the input type, including codes
that no float input would produce. Either way the expectation is
``net.execute_int(values)`` and ``OUT/sim/outputs.npy`` holds the hardware's outputs in the
model's float domain (``net.tail(net.dequantize(values))``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from ..errors import QloomError
from ..manifest import load_network
from ..nn.dtypes import DataType
from ..sim.packing import ints_to_words, pack_frames, padding, unpack_frames, words_to_ints
from ..sim.runner import Bench, Simulator, read_manifest, run_rtl
from qloom.flows.report.html import write_report_html

__all__ = ["simulate", "add_parser", "run"]

DEFAULT_RANDOM_FRAMES = 16


def _choice(enum_type, value, what: str):
    """``value`` as a member of ``enum_type`` (a member or its value), or a QloomError."""
    if isinstance(value, enum_type):
        return value
    try:
        return enum_type(value)
    except ValueError:
        raise QloomError(f"unknown {what} {value!r}; choose one of "
                         f"{', '.join(m.value for m in enum_type)}") from None


def _check_port(net, tensor: str, port: dict, side: str) -> DataType:
    """The port's datatype, after checking it agrees with the network's tensor."""
    dtype = DataType.from_json(port["dtype"])
    info = net.tensors[tensor]
    elements = int(np.prod(info.shape))
    if info.dtype != dtype or elements != port["elements_per_frame"] \
            or dtype.bits != port["element_bits"]:
        raise QloomError(f"the manifest's {side} ({dtype}, {port['elements_per_frame']} "
                         f"elements) does not match the network's tensor '{tensor}' "
                         f"({info.dtype}, {elements} elements): recompile the design")
    return dtype


def _input_values(net, inputs, random, seed) -> np.ndarray:
    """Integer input values ``[N, *integer input shape]`` from floats or random codes."""
    info = net.tensors[net.input]
    if (inputs is None) == (random is None):
        raise QloomError("give either float inputs or a number of random frames, not "
                         + ("both" if inputs is not None else "neither"))
    if random is not None:
        if not isinstance(random, int) or isinstance(random, bool) or random < 1:
            raise QloomError(f"the number of random frames must be a positive integer, "
                             f"not {random!r}")
        rng = np.random.default_rng(seed)
        shape = (random, *info.shape)
        if info.dtype.bipolar:
            return rng.choice(np.array([-1, 1], dtype=np.int64), size=shape)
        return rng.integers(info.dtype.min, info.dtype.max, size=shape, endpoint=True)
    x = np.asarray(inputs, dtype=np.float32)
    sample = tuple(net.input_shape[1:])
    if x.ndim != len(sample) + 1 or x.shape[1:] != sample or x.shape[0] < 1:
        raise QloomError(f"inputs must have shape [N, {', '.join(map(str, sample))}] (the "
                         f"model input '{net.input_name}' with a batch of N >= 1), "
                         f"not {list(x.shape)}")
    return np.asarray(net.quantize(x), dtype=np.int64).reshape(x.shape[0], *info.shape)


def _first_mismatch(expected: np.ndarray, got: np.ndarray, pad: np.ndarray):
    """Frames that differ (values, or non-zero padding lanes) and the first difference."""
    bad = np.any(expected != got, axis=1) | np.any(pad != 0, axis=1)
    if not bad.any():
        return 0, None
    frame = int(np.argmax(bad))
    full_expected = np.concatenate([expected[frame], np.zeros(pad.shape[1], np.int64)])
    full_got = np.concatenate([got[frame], pad[frame]])
    index = int(np.argmax(full_expected != full_got))
    return int(bad.sum()), {"frame": frame, "index": index,
                            "expected": int(full_expected[index]), "got": int(full_got[index])}


def simulate(out_dir, *, inputs: np.ndarray | None = None, random: int | None = None,
             simulator: Simulator | str = "icarus", backpressure: float = 0.0,
             waves: bool = False, seed: int = 0, progress: bool = True,
             network=None, bench: Bench | str = Bench.HARNESS) -> dict:
    """Simulate the design in ``out_dir`` on ``inputs`` (floats ``[N, *model input
    shape]``) or ``random`` integer frames, compare each frame with the integer network
    bit for bit and write ``OUT/sim/results.json`` and ``OUT/sim/outputs.npy``.

    ``network`` is the loaded ``Network`` when the caller has it (otherwise it is loaded
    from the manifest's model file and load options). ``seed`` draws the random frames and
    the stalls. ``bench`` is the HDL stream harness (default) or the per-cycle Python
    bench (``"python"``, slower; kept to cross-check the harness). Returns the results
    dict (see ``results.json``).
    """
    out_dir = Path(out_dir)
    manifest = read_manifest(out_dir, ports=True)
    sim = _choice(Simulator, simulator, "simulator")
    bench = _choice(Bench, bench, "bench")
    if not isinstance(backpressure, (int, float)) or not 0.0 <= backpressure < 1.0:
        raise QloomError(f"backpressure must be a probability in [0, 1), not {backpressure!r}")
    net = network if network is not None else load_network(out_dir, manifest)
    in_port, out_port = manifest["input"], manifest["output"]
    in_type = _check_port(net, net.input, in_port, "input")
    out_type = _check_port(net, net.output, out_port, "output")

    values = _input_values(net, inputs, random, seed)
    frames = values.shape[0]
    payloads = words_to_ints(pack_frames(values, in_type, in_port["lanes"]), in_type)
    start = time.perf_counter()
    rtl = run_rtl(out_dir, payloads, simulator=sim, backpressure=backpressure, seed=seed,
                  waves=waves, progress=progress, bench=bench)
    wall = time.perf_counter() - start

    elements = out_port["elements_per_frame"]
    codes, _ = ints_to_words(rtl.payloads_out, out_type, out_port["lanes"])
    got = unpack_frames(codes, out_type, elements)
    expected = net.execute_int(values).reshape(frames, elements)
    mismatches, first = _first_mismatch(expected, got, padding(codes, elements))

    sim_dir = out_dir / "sim"
    sim_dir.mkdir(parents=True, exist_ok=True)
    np.save(sim_dir / "outputs.npy", np.asarray(net.outputs(got)))
    results = {
        "frames": frames, "mismatches": mismatches, "first_mismatch": first,
        "latency_cycles": rtl.latency_cycles, "ii_cycles": rtl.ii_cycles,
        "ideal_ii_cycles": manifest.get("ideal_ii_cycles"), "simulator": sim.value,
        "backpressure": float(backpressure), "seed": seed,
        "inputs": "random" if random is not None else "given",
        "bench": bench.value, "cycles": rtl.cycles,
        "build_seconds": rtl.build_seconds, "run_seconds": rtl.run_seconds,
        "wall_seconds": round(wall, 3),
        "waves_file": None if rtl.waves_file is None else str(rtl.waves_file),
        # The first frames' first and last word in and out (cycles): the HTML report's timeline.
        "frame_cycles": {"in": rtl.in_cycles[:16, [0, -1]].tolist(),
                         "out": rtl.out_cycles[:16, [0, -1]].tolist()},
    }
    (sim_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    write_report_html(out_dir, required=False)
    return results


def summary(results: dict, out_dir: Path, clock_mhz: float | None = None) -> str:
    """One paragraph for the terminal."""
    r = results
    good = r["frames"] - r["mismatches"]
    speed = r["cycles"] / r["run_seconds"] if r["run_seconds"] else 0.0
    text = (f"Simulated {r['frames']} frames of {out_dir} on {r['simulator']} "
            f"(backpressure {r['backpressure']:g}) in {r['wall_seconds']:.1f} s "
            f"(build {r['build_seconds']:.1f} s, {r['cycles']:,} cycles in "
            f"{r['run_seconds']:.1f} s = {speed:,.0f} cycles/s): "
            f"{good} bit-exact, {r['mismatches']} mismatching.")
    if r["first_mismatch"]:
        m = r["first_mismatch"]
        text += (f" First mismatch: frame {m['frame']}, output element {m['index']}: "
                 f"expected {m['expected']}, got {m['got']}.")
    text += f" Latency {r['latency_cycles']} cycles"
    if r["ii_cycles"] is not None:
        text += f", II {r['ii_cycles']:g} cycles (ideal {r['ideal_ii_cycles']})"
        if clock_mhz:
            text += f" = {clock_mhz * 1e6 / r['ii_cycles']:,.0f} frames/s at {clock_mhz:g} MHz"
    text += f". Results in {out_dir / 'sim' / 'results.json'}"
    if r["waves_file"]:
        text += f", waveforms in {r['waves_file']}"
    return text + "."


def add_parser(subparsers):
    p = subparsers.add_parser(
        "simulate", help="check a compiled design's RTL bit for bit in cycle-accurate simulation",
        description="Stream frames through OUT/rtl under cocotb (Icarus or Verilator), compare "
                    "every output frame with the integer network, measure latency and II. "
                    "Writes OUT/sim/results.json and OUT/sim/outputs.npy; exits with 1 on "
                    "any mismatching frame.")
    p.add_argument("out", type=Path, metavar="OUT",
                   help="compiled design folder (from qloom compile)")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--inputs", type=Path, metavar="X.npy",
                        help="float model inputs [N, *input shape]")
    source.add_argument("--random", type=int, metavar="N",
                        help=f"N random integer frames over the input datatype (default: "
                             f"{DEFAULT_RANDOM_FRAMES} when --inputs is not given)")
    p.add_argument("--sim", choices=[s.value for s in Simulator], default="icarus",
                   help="simulator (default icarus; verilator is faster on long runs)")
    p.add_argument("--backpressure", type=float, default=0.0, metavar="P",
                   help="probability of input gaps and output stalls per cycle (default 0)")
    p.add_argument("--waves", action="store_true", help="record waveforms")
    p.add_argument("--bench", choices=[b.value for b in Bench], default="harness",
                   help="harness (default): the stream harness in HDL feeds, stalls and "
                        "records every cycle; python: the per-cycle cocotb bench (slow, "
                        "for cross-checking)")
    p.add_argument("--seed", type=int, default=0, help="seed for random frames and stalls")
    p.set_defaults(func=run)


def run(args) -> int:
    inputs = None
    if args.inputs is not None:
        if not args.inputs.is_file():
            raise QloomError(f"inputs file {args.inputs} not found")
        from qloom.flows.deploy.host import load_inputs
        inputs = load_inputs(args.inputs)
    random = args.random if args.random is not None or inputs is not None \
        else DEFAULT_RANDOM_FRAMES
    results = simulate(args.out, inputs=inputs, random=random, simulator=args.sim,
                       backpressure=args.backpressure, waves=args.waves, seed=args.seed,
                       progress=sys.stderr.isatty(), bench=args.bench)
    clock = read_manifest(args.out).get("clock_mhz")
    print(summary(results, args.out, clock))
    return 1 if results["mismatches"] else 0
