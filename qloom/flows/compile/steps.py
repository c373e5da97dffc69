"""``qloom compile``: a QONNX model to a streaming accelerator (Verilog, manifest, report).

The flow is an ordered list of small steps ``step(state, cfg) -> state``; each step's wall
time goes into the report. Output folders are written completely or not at all: everything
goes to a temporary sibling folder that replaces ``OUT`` only when it is complete.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from qloom._version import __version__
from qloom.errors import InternalError, QloomError, raise_interrupt
from qloom.manifest import FORMAT as MANIFEST_FORMAT, read_manifest, write_manifest
from qloom.hw.dsp import simulation_models
from qloom.hw.protocol import WireFormat
from qloom.hw.target import Family, Resources, clock_mhz as target_clock
from qloom.flows.compile import fold_auto
from qloom.flows import outdir
from qloom.flows.compile.engines.base import BuildOptions
from qloom.flows.compile.engines.mapping import map_network
from qloom.flows.compile.plan import (Plan, plan_default, plan_for_cycles, plan_from_file,
                                      read_fold_file)
from qloom.flows.report.html import write_report_html
from qloom.flows.report.markdown import render_report_md

__all__ = ["CompileConfig", "Design", "compile_model", "run_steps", "STEPS"]


@dataclass(frozen=True)
class CompileConfig:
    clock_mhz: float | None = None       # None: the board's default (hw.target.clock_mhz)
    target_fps: float | None = None
    fold: str | Path | dict | None = None   # a fold file, a dict like it, or "auto"
    board: str | None = None
    load_options: dict = field(default_factory=dict)
    pipeline: bool = True
    dsp_budget: int | None = None        # None: the board's DSP count, else unlimited
    latency: bool = False                # every layer at its fastest: dense layers unrolled
    precision: object = None             # a PrecisionConfig: the model is float (nn.quantize)
    calibration_inputs: object = None    # .npy path or array for the precision's cost
    precision_tries: tuple = ()          # --precision auto: each width tried, its agreement
    # Tests only: words added to every skip FIFO the schedule sizes (negative: shallower
    # than reconvergent paths need, to show that they then stall).
    test_skip_fifo_words: int = 0


@dataclass
class CompileState:
    model: object
    network: object = None
    engines: list = None
    input: str = None
    output: str = None
    board: object = None
    options: BuildOptions = None
    plan: Plan = None
    top: object = None
    verilog: str = None
    quantized: object = None             # the QONNX model of a float model at a precision
    precision_cost: object = None
    timings: dict = field(default_factory=dict)


def step_load(state, cfg):
    from qloom.nn.ir import Network
    if isinstance(state.model, Network):
        state.network = state.model      # an integer network built in Python: no ONNX file
    else:
        from qloom.nn.load import load
        source = state.model
        if cfg.precision is not None:
            from qloom.nn.quantize import quantize_float
            state.quantized = source = quantize_float(state.model, cfg.precision)
        state.network = load(source, **cfg.load_options)
    return state


def step_precision(state, cfg):
    """A float model at a precision: its cost against the float model (``precision_cost``)."""
    if state.quantized is None:
        return state
    from qloom.nn.quantize import float_reference
    from qloom.flows.compile.precision_cost import calibration_inputs, measure
    x, what = calibration_inputs(cfg.calibration_inputs, state.network.input_shape)
    state.precision_cost = measure(float_reference(state.model), state.network, x, what)
    return state


def step_map(state, cfg):
    state.engines, state.input, state.output = map_network(state.network)
    return state


def step_target(state, cfg):
    family, dsp_budget = Family.ICE40, cfg.dsp_budget
    if cfg.board is not None:
        from qloom.boards import get_board
        state.board = get_board(cfg.board)
        family = state.board.family.estimated_as
        if dsp_budget is None:
            dsp_budget = state.board.budget.dsp
    sprams = state.board.sprams if state.board is not None else 0
    state.options = BuildOptions(family=family, dsp_budget=dsp_budget, pipeline=cfg.pipeline,
                                 sprams=sprams)
    return state


def _clock_mhz(state, cfg) -> float:
    return target_clock(cfg.clock_mhz,
                        board=state.board.clock_mhz if state.board is not None else None)


def step_fold(state, cfg):
    if cfg.latency and cfg.target_fps is not None:
        raise QloomError("--latency and --target-fps both choose the folding; give one")
    if cfg.fold == "auto":
        state.plan = _fold_auto(state, cfg)
    else:
        state.plan = _fold_given(state, cfg)
    # The engines as planned: dense layers at one vector per cycle became unrolled ones.
    state.engines = list(state.plan.engines)
    _check_sprams(state)
    return state


def _fold_auto(state, cfg):
    """``--fold auto``, alone or with ``--target-fps`` or ``--latency`` (``fold_auto``)."""
    if state.board is None:
        raise QloomError("--fold auto needs a board (--board B) to fit into")
    options = state.options
    # Leave room for the board top's host link, which `qloom build` adds.
    board = fold_auto.BoardFit(
        name=state.board.name, budget=state.board.budget, fits=state.board.fits,
        overhead=lambda plan: _link_estimate(state, plan),
        accept=lambda plan: sum(_sprams(plan, options).values()) <= options.sprams)
    if cfg.latency:
        return fold_auto.latency_fitting(state.engines, _clock_mhz(state, cfg), board, options)
    if cfg.target_fps is not None:
        return fold_auto.smallest_meeting(state.engines, cfg.target_fps,
                                          _clock_mhz(state, cfg), board, options)
    return fold_auto.fastest_fitting(state.engines, board, options)


def _fold_given(state, cfg):
    """The folding of ``--latency``, ``--target-fps``, the default, and a fold file
    (whose entries override theirs)."""
    engines, options = state.engines, state.options
    if cfg.latency:
        base = plan_for_cycles(engines, 0, options, how="latency")
    elif cfg.target_fps is not None:
        if cfg.target_fps <= 0:
            raise QloomError(f"--target-fps must be positive, not {cfg.target_fps}")
        budget = _clock_mhz(state, cfg) * 1e6 / cfg.target_fps
        base = plan_for_cycles(engines, budget, options)
    else:
        base = plan_default(engines, options)
    if isinstance(cfg.fold, dict):
        return plan_from_file(engines, cfg.fold, options, base)
    if cfg.fold is not None:
        return plan_from_file(engines, read_fold_file(cfg.fold), options, base)
    return base


def _engine_features(e, plan, options) -> list:
    """The estimate features of one planned engine (none for engines costed without
    template features)."""
    try:
        return [f for _, f in e.features(plan.folds[e.name], options, plan.dsps[e.name])]
    except NotImplementedError:
        return []


def _sprams(plan, options) -> dict:
    """SPRAMs each engine's weights take in ``plan``."""
    return {e.name: sum(f.spram for f in _engine_features(e, plan, options))
            for e in plan.engines}


def _check_sprams(state):
    """Weights placed in SPRAM (per engine, ``qloom.hw.mvu.weights_in_spram``) must not
    need more SPRAMs than the device has."""
    used = _sprams(state.plan, state.options)
    total = sum(used.values())
    if total > state.options.sprams:
        listed = ", ".join(f"{name} {n}" for name, n in used.items() if n)
        raise QloomError(f"the weights placed in SPRAM need {total} SPRAMs ({listed}) but the "
                         f"device has {state.options.sprams}; choose a slower folding "
                         f"(--target-fps, or a fold file with fewer pe*simd lanes in these "
                         f"layers: each SPRAM gives 16 weight bits per cycle)")


def _port_lanes(state, plan) -> tuple[int, int]:
    """Lanes of the accelerator's input and output streams under ``plan``."""
    return plan.graph.port_lanes(state.input, state.output)


def _link_estimate(state, plan) -> Resources:
    """The board top's share beside the accelerator (``qloom.hw.link.estimate``) for the
    streams ``plan`` gives the accelerator."""
    from qloom.hw import link
    net = state.network
    formats = [WireFormat(lanes=lanes, element_bits=net.tensors[t].dtype.bits,
                          signed=net.tensors[t].dtype.signed,
                          elements=int(np.prod(net.shape_of(t))))
               for t, lanes in zip((net.input, net.output), _port_lanes(state, plan))]
    return link.estimate(*formats, state.options.family,
                         registered_feed=plan.graph.registered_input)


def step_build(state, cfg):
    from qloom.hw.top import AcceleratorTop
    plan, net = state.plan, state.network
    nodes = []
    for e in state.engines:
        # Edges into any of an engine's nodes are keyed by the engine, as the plan keys them.
        nodes += [replace(n, engine=e.name)
                  for n in e.nodes(plan.folds[e.name], state.options, plan.dsps[e.name])]
    in_lanes, out_lanes = _port_lanes(state, plan)
    in_elems = int(np.prod(net.shape_of(net.input)))
    out_elems = int(np.prod(net.shape_of(net.output)))
    graph = plan.graph
    state.top = AcceleratorTop(nodes=nodes, input=state.input, output=state.output,
                               in_lanes=in_lanes, out_lanes=out_lanes,
                               in_words=math.ceil(in_elems / in_lanes),
                               out_words=math.ceil(out_elems / out_lanes),
                               edge_elements=_edge_buffers(graph, cfg),
                               slices=graph.slices, wires=graph.wires,
                               family=state.options.family)
    return state


def _edge_buffers(graph, cfg) -> dict:
    """Elements to buffer on the edges between engines that need more than a skid buffer
    (``EngineGraph.edge_elements``: a vector a matrix unit takes at once, a skip path's
    share of a reconvergent path); sized as the cost model counted them."""
    buffers = graph.edge_elements
    if cfg.test_skip_fifo_words:
        lanes = {key: lanes for key, (_, lanes) in graph.fifos.items()}
        for skip in graph.skips:
            key = (skip.tensor, skip.reader)
            buffers[key] = max(0, buffers[key] + cfg.test_skip_fifo_words * lanes[key])
    return buffers


def step_emit(state, cfg):
    from amaranth.back import verilog
    state.verilog = verilog.convert(state.top, name="qloom_top", emit_src=False)
    return state


STEPS = [("load", step_load), ("precision", step_precision), ("map", step_map), ("target", step_target),
         ("fold", step_fold), ("build", step_build), ("emit", step_emit)]


def _port(net, tensor, lanes):
    info = net.tensors[tensor]
    elems = int(np.prod(info.shape))
    dtype = info.dtype
    bits = dtype.bits
    encoding = ("bipolar: code 0 = -1, code 1 = +1" if dtype.bipolar else
                "two's complement" if dtype.signed else "unsigned")
    return {"lanes": lanes, "element_bits": bits, "signed": dtype.signed,
            "payload_bits": lanes * bits + 1, "last_bit": lanes * bits,
            "words_per_frame": math.ceil(elems / lanes), "elements_per_frame": elems,
            "shape": list(info.shape), "dtype": dtype.to_json(), "encoding": encoding,
            "order": "channels-last; element k of word w is frame element w*lanes+k; "
                     "lane 0 in the least significant bits; last = top bit"}


def _floats(a):
    return None if a is None else np.asarray(a, dtype=np.float64).ravel().tolist()


def _layer_rows(state):
    from qloom.hw.estimate import bit_efficiency
    plan = state.plan
    rows = []
    for e in state.engines:
        fold = plan.folds[e.name]
        # How full the blocks holding the engine's weights and thresholds are (engines
        # costed without template features name no memories).
        features = _engine_features(e, plan, state.options)
        memories = bit_efficiency(features, state.options.family)
        rows.append({"name": e.name, "layers": list(e.layers), "engine": e.engine_name,
                     "inputs": list(e.inputs), "output": e.output,
                     "fold": e.fold_json(fold), "dsp_multipliers": plan.dsps[e.name],
                     "cycles_per_frame": plan.cycles[e.name],
                     "resources": plan.resources[e.name].as_dict(),
                     "bram_memories": memories,
                     "bram_bit_efficiency": memories and memories["efficiency"],
                     "spram": sum(f.spram for f in features)})
    return rows


def _bram_bit_efficiency(layers: list, family) -> float | None:
    """Bit efficiency of every engine's weight and threshold memories in block RAM."""
    from qloom.hw.estimate import block_bits
    parts = [row["bram_memories"] for row in layers if row["bram_memories"]]
    blocks = sum(p["blocks"] for p in parts)
    return round(sum(p["bits"] for p in parts) / (blocks * block_bits(family)), 4) \
        if blocks else None


def _documents(state, cfg, model_file):
    net, plan, top = state.network, state.plan, state.top
    clock = _clock_mhz(state, cfg)
    layers = _layer_rows(state)
    manifest = {
        "format": MANIFEST_FORMAT, "qloom_version": __version__, "top": "qloom_top",
        "rtl": ["rtl/qloom_top.v"],
        "sim_rtl": [f"rtl/sim/{name}" for name in simulation_models(state.verilog)],
        "model": net.name, "model_file": model_file,
        "load_options": _json_options(cfg.load_options), "clock_mhz": clock,
        "input": {"port": "i", "tensor": state.input,
                  **_port(net, net.input, top.in_layout["data"].shape.length),
                  "registered": plan.graph.registered_input},
        "output": {"port": "o", "tensor": state.output,
                   **_port(net, net.output, top.out_layout["data"].shape.length)},
        "host": {"input_name": net.input_name, "input_shape": list(net.input_shape),
                 "output_shape": list(net.output_shape),
                 "input_scale": _floats(net.input_scale),
                 "input_zero_point": _floats(net.input_zero_point),
                 "prefix_ops": list(net.prefix_ops),
                 "output_scale": _floats(net.tensors[net.output].scale),
                 "tail_ops": list(net.tail_ops), "tail_exact": net.tail_exact,
                 "tail": net.tail_note},
        "layers": layers, "ideal_ii_cycles": plan.ideal_ii_cycles,
        "board": cfg.board,
    }
    total = plan.total
    link = None if state.board is None else _link_estimate(state, plan)
    report = {
        "model": net.name, "qloom_version": __version__, "clock_mhz": clock,
        "folding": plan.how, "fold_file": plan.fold_file, "family": state.options.family.value,
        "tail": {"ops": list(net.tail_ops), "exact": net.tail_exact, "how": net.tail_note},
        "io": {"input_shape": list(net.input_shape), "output_shape": list(net.output_shape),
               "hardware_output": {"tensor": net.output,
                                   "shape": list(net.tensors[net.output].shape)}},
        "dsp_budget": state.options.dsp_budget,
        "layers": layers, "bottleneck": plan.bottleneck,
        "ideal_ii_cycles": plan.ideal_ii_cycles,
        "skip_buffers": plan.graph.skip_rows(),
        "fps_at_clock": clock * 1e6 / plan.ideal_ii_cycles,
        "resources": total.as_dict(),
        "bram_bit_efficiency": _bram_bit_efficiency(layers, state.options.family),
        "spram": sum(row["spram"] for row in layers),
        "board": None if state.board is None else {
            "name": cfg.board, "budget": state.board.budget.as_dict(),
            "host_link": link.as_dict(), "fits": state.board.fits(total + link),
            "over": state.board.over(total + link),
            "logic_cells": state.board.logic_cells(total + link)},
        "precision": _precision_report(state, cfg),
        "step_seconds": {k: round(v, 3) for k, v in state.timings.items()},
    }
    return manifest, report


def _precision_report(state, cfg) -> dict | None:
    """The precision a float model was compiled at, and what it costs."""
    if cfg.precision is None:
        return None
    return {**cfg.precision.describe(), "quantized_model": "quantized.onnx",
            **({"auto_tries": list(cfg.precision_tries)} if cfg.precision_tries else {}),
            "cost": state.precision_cost.as_dict() if state.precision_cost else None}


def _json_options(options: dict) -> dict:
    out = {}
    for k, v in options.items():
        out[k] = v.name if hasattr(v, "name") and hasattr(v, "bits") else v
    return out


@dataclass
class Design:
    """A compiled design folder: its manifest and report, and how to simulate it."""

    out_dir: Path
    manifest: dict
    report: dict
    network: object = None

    def simulate(self, x=None, *, random=None, **options) -> dict:
        from qloom.flows.simulate import simulate
        options.setdefault("network", self.network)
        return simulate(self.out_dir, inputs=x, random=random, **options)

    @classmethod
    def open(cls, out_dir) -> "Design":
        out_dir = Path(out_dir)
        manifest = read_manifest(out_dir)
        try:
            report = json.loads((out_dir / "report.json").read_text())
        except FileNotFoundError as e:
            raise QloomError(f"{out_dir} is not a compiled design ({e.filename} is missing); "
                             f"make one with `qloom compile MODEL -o {out_dir}`") from None
        return cls(out_dir, manifest, report)


def run_steps(model, cfg: CompileConfig, *, until: str | None = None, progress=None):
    """Run the compile steps in order (up to and including ``until``); returns the state."""
    state = CompileState(model=model)
    for name, step in STEPS:
        if progress:
            progress(f"{name} ...")
        t0 = time.perf_counter()
        try:
            state = step(state, cfg)
        except QloomError:
            raise
        except Exception as e:      # a bug in qloom: one line for the user, chained cause
            raise_interrupt(e)
            raise InternalError(f"qloom failed in the compile step '{name}': "
                                f"{type(e).__name__}: {e} (this is a bug in qloom, please "
                                f"report it with the model)", e) from e
        state.timings[name] = time.perf_counter() - t0
        if name == until:
            break
    return state


def compile_model(model, out_dir=None, *, progress=None, **options) -> Design:
    """Compile ``model`` (a path or onnx.ModelProto) into ``out_dir`` (a temporary folder
    when None). ``options`` are ``CompileConfig`` fields."""
    unknown = sorted(set(options) - set(CompileConfig.__dataclass_fields__))
    if unknown:
        raise QloomError(f"unknown compile option(s) {unknown}; known: "
                         f"{sorted(CompileConfig.__dataclass_fields__)}")
    cfg = CompileConfig(**options)
    out_dir = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="qloom-"))
    area = _out_area(out_dir, model)         # refuse a bad OUT before any work
    state = run_steps(model, cfg, progress=progress)
    manifest, report = _write(state, cfg, area)
    return Design(out_dir, manifest, report, state.network)


def _out_area(out_dir: Path, model) -> outdir.Area:
    """OUT, checked: never the model's own folder (nor one above it), whose files a
    replaced OUT would take with it."""
    keep = ((Path(model).parent, "the model's folder"),) if isinstance(model, (str, Path)) \
        else ()
    return outdir.Area.at(out_dir, "OUT", outdir.is_design,
                          hint="choose a new folder, an empty one or an earlier qloom "
                               "design").prepare(keep_clear_of=keep)


def _write(state, cfg, area: outdir.Area):
    """Write the design into a staging folder next to OUT and swap it in when complete
    (see ``outdir``): a failure or a kill leaves the old design or the new one."""
    staging = area.staging()
    try:
        (staging / "rtl").mkdir()
        (staging / "rtl" / "qloom_top.v").write_text(state.verilog)
        # Simulation models of vendor primitives (never given to synthesis).
        models = simulation_models(state.verilog)
        if models:
            (staging / "rtl" / "sim").mkdir()
        for name, text in models.items():
            (staging / "rtl" / "sim" / name).write_text(text)
        model_file = _save_model(state.model, staging)
        if state.quantized is not None:
            # what the hardware computes: reloaded by simulate/run without the precision
            import onnx
            onnx.save(state.quantized, str(staging / "quantized.onnx"))
            model_file = "quantized.onnx"
        manifest, report = _documents(state, cfg, model_file)
        image = state.top.flash_image()
        if image:
            # Weights in SPRAM: the image the board's flash must hold (qloom.hw.spram).
            from qloom.hw.spram import FLASH_OFFSET, image_bytes
            (staging / "flash").mkdir()
            (staging / "flash" / "weights.bin").write_bytes(image_bytes(image))
            manifest["flash"] = {"image": "flash/weights.bin", "offset": FLASH_OFFSET,
                                 "words": len(image)}
        write_manifest(staging, manifest)
        (staging / "report.json").write_text(json.dumps(report, indent=2) + "\n")
        (staging / "report.md").write_text(render_report_md(report))
        write_report_html(staging, shown_as=area.path)
        area.install(staging)
    except OSError as e:
        area.discard(staging)
        raise QloomError(f"cannot write OUT {area.path}: {e.strerror or e} "
                         f"({e.filename or staging})") from None
    except BaseException:
        area.discard(staging)
        raise
    return manifest, report


def _save_model(model, folder: Path) -> str | None:
    """Keep the source model inside the design folder, self-contained: a model whose
    weights live in external data files is saved with them inside (the design must
    simulate and run without the user's folder). None for an in-Python network."""
    import onnx

    from qloom.nn.ir import Network
    if isinstance(model, Network):
        return None
    if isinstance(model, (str, Path)):
        proto = _read_external(Path(model))
        if proto is None:
            shutil.copyfile(model, folder / "model.onnx")
            return "model.onnx"
        model = proto
    if not isinstance(model, onnx.ModelProto):
        raise QloomError(f"a model is a path, an onnx.ModelProto or a qloom Network, "
                         f"not {type(model).__name__}")
    try:
        onnx.save(model, str(folder / "model.onnx"))
    except ValueError:          # over protobuf's 2 GB: the weights go to one data file
        onnx.save(model, str(folder / "model.onnx"), save_as_external_data=True,
                  all_tensors_to_one_file=True, location="model.onnx.data")
    return "model.onnx"


def _read_external(path: Path):
    """The model at ``path`` with its external data loaded, or None when it has none (the
    file is then copied byte for byte). The loader has already refused a missing data
    file or one outside the model's folder; this names them again if they changed."""
    import onnx
    from onnx.external_data_helper import uses_external_data

    head = onnx.load(str(path), load_external_data=False)
    if not any(uses_external_data(t) for t in _tensors(head)):
        return None
    try:
        return onnx.load(str(path))
    except Exception as e:      # onnx raises ValidationError, OSError, ... for bad data files
        raise QloomError(f"cannot copy the external data of {path} into OUT: {e}") from None


def _tensors(model):
    """Every tensor of the model: initializers and node attributes, subgraphs included."""
    graphs = [model.graph]
    while graphs:
        graph = graphs.pop()
        yield from graph.initializer
        for node in graph.node:
            for attr in node.attribute:
                if attr.HasField("t"):
                    yield attr.t
                yield from attr.tensors
                if attr.HasField("g"):
                    graphs.append(attr.g)
                graphs.extend(attr.graphs)
