"""From training to a board: a quantized MLP trained with brevitas on scikit-learn's
digits, exported to QONNX, compiled for the iCEBreaker, the whole test set simulated
through the generated RTL, the bitstream built, and a few frames sent through the
virtual board.

    .venv/bin/python examples/train_to_board/train.py [OUT]      # default out/train_to_board

Needs the ``train`` extra (torch, brevitas, onnxoptimizer, scikit-learn); see README.md
beside this file. Everything runs offline on the CPU. The steps, each timed:

1. train a 64-64-64-10 MLP, 2-bit weights (ternary) and 2-bit activations, on 8x8 digits;
2. export it with brevitas' ``export_qonnx`` and clean it with qonnx (``OUT/model.onnx``);
3. ``qloom compile OUT/model.onnx -o OUT/design --board icebreaker --target-fps 100000
   --clock 36``;
4. ``qloom simulate OUT/design --inputs OUT/test_inputs.npy --sim verilator``: every test
   digit through the RTL, bit for bit against qloom's integer network; the RTL's
   accuracy printed beside PyTorch's and the exported model's (qonnx ``execute_onnx``);
5. ``qloom build OUT/design``: Yosys and nextpnr, the bitstream and its Fmax;
6. ``qloom board-sim``: the built board simulated behind a pseudo-terminal, with
   ``qloom run`` sending a few test digits over its UART (skipped, saying why, when this
   qloom has no ``board-sim`` command).

Exit status 0 when the RTL's predictions equal the exported model's on every test digit
and nothing failed. ``OUT/summary.json`` keeps the numbers; ``OUT/design/report.html``
shows the design.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np

SEED = 0
HIDDEN = 64
WEIGHT_BITS = 2
ACT_BITS = 2
IN_BITS = 5          # pixels k/16, k = 0..16, on an unsigned 5-bit grid of step 1/16
BOARD = "icebreaker"
# Folding and clock. --fold auto (the fastest folding whose estimate fits) chose pe=1,
# simd=32 here, estimated at 2,889 logic cells, which nextpnr placed at 5,390 of 5,280
# (the estimate runs low for this design): a frame-rate target keeps the design at about
# half the device. 36 MHz: measured Fmax 43 MHz at this folding, and a clock that closes
# on the first try spares the build's second run.
TARGET_FPS = 100_000
CLOCK_MHZ = 36
MARKER = ".train_to_board"        # says the folder is this script's to write into


def banner(text: str):
    print(f"\n=== {text} ===", flush=True)


class Timer:
    """Wall time of each step, for the summary."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    def __call__(self, name: str):
        timer = self

        class _Step:
            def __enter__(self):
                self.start = time.perf_counter()

            def __exit__(self, *exc):
                timer.seconds[name] = round(time.perf_counter() - self.start, 1)
                if exc[0] is None:
                    print(f"[{name}: {timer.seconds[name]:.1f} s]", flush=True)
        return _Step()


# -- data and model ----------------------------------------------------------------------

def digits():
    """scikit-learn's 8x8 digits (shipped with the package: no download) as float32
    ``[N, 64]`` in [0, 1] (pixel / 16) and labels; 20% held out for test, stratified."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    x = (data.data / 16.0).astype(np.float32)
    x_train, x_test, y_train, y_test = train_test_split(
        x, data.target.astype(np.int64), test_size=0.2, random_state=SEED,
        stratify=data.target)
    return x_train, y_train, x_test, y_test


def make_model():
    """64 inputs on a 5-bit unsigned grid, two hidden layers of 64 with BatchNorm and
    2-bit unsigned activations, 10 outputs; ternary (2-bit narrow) weights, no biases
    (BatchNorm's shift becomes the hardware's thresholds)."""
    import torch.nn as nn
    from brevitas.nn import QuantIdentity, QuantLinear, QuantReLU
    from brevitas.quant import Uint8ActPerTensorFixedPoint

    def linear(n_in, n_out):
        return QuantLinear(n_in, n_out, bias=False, weight_bit_width=WEIGHT_BITS)

    return nn.Sequential(
        QuantIdentity(act_quant=Uint8ActPerTensorFixedPoint, bit_width=IN_BITS,
                      return_quant_tensor=True),
        linear(64, HIDDEN), nn.BatchNorm1d(HIDDEN),
        QuantReLU(bit_width=ACT_BITS, return_quant_tensor=True),
        linear(HIDDEN, HIDDEN), nn.BatchNorm1d(HIDDEN),
        QuantReLU(bit_width=ACT_BITS, return_quant_tensor=True),
        linear(HIDDEN, 10))


def train(model, x, y, epochs: int):
    """Adam with cross-entropy, a learning rate that decays to zero; seeded, one thread
    (the same weights on every machine with the same versions)."""
    import torch
    gen = torch.Generator().manual_seed(SEED)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(len(xt), generator=gen)
        total = 0.0
        for start in range(0, len(xt), 64):
            idx = order[start:start + 64]
            if len(idx) < 2:                       # BatchNorm needs two samples
                continue
            opt.zero_grad()
            loss = loss_fn(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        sched.step()
        if epoch % 10 == 9 or epoch == epochs - 1:
            print(f"  epoch {epoch + 1}/{epochs}: loss {total / len(xt):.3f}", flush=True)
    model.eval()


def torch_predictions(model, x) -> np.ndarray:
    import torch
    with torch.no_grad():
        return model(torch.from_numpy(x)).argmax(1).numpy()


def export(model, example: np.ndarray, path: Path):
    """brevitas' QONNX export (TorchScript exporter: ``dynamo=False``) and qonnx's cleanup,
    the file a user hands to qloom."""
    import torch
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.util.cleanup import cleanup_model

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")      # brevitas' notes on optional kernels, qonnx's
        from brevitas.export import export_qonnx
        raw = Path(tmp) / "raw.onnx"
        export_qonnx(model, input_t=torch.from_numpy(example), export_path=str(raw),
                     dynamo=False)
        cleanup_model(ModelWrapper(str(raw))).save(str(path))


def qonnx_predictions(path: Path, x: np.ndarray) -> np.ndarray:
    """The exported model's predictions as qonnx executes it, one frame at a time (the
    export has batch 1)."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx

    model = ModelWrapper(str(path))
    iname, oname = model.graph.input[0].name, model.graph.output[0].name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.array([int(np.argmax(execute_onnx(model, {iname: frame[None]})[oname]))
                         for frame in x])


# -- qloom steps (through its command line, as a user would type them) -------------------

def qloom(*args: str) -> subprocess.CompletedProcess:
    """Run ``qloom ARGS`` with this Python (its output shown as it comes); raises
    SystemExit with qloom's status when it fails."""
    cmd = [sys.executable, "-m", "qloom.flows.cli", *args]
    print("$ qloom " + " ".join(args), flush=True)
    proc = subprocess.run(cmd)
    if proc.returncode != 0:
        raise SystemExit(f"qloom {args[0]} failed (exit status {proc.returncode})")
    return proc


def has_command(name: str) -> bool:
    """Whether ``qloom --help`` lists the subcommand ``name`` (argparse indents each
    command at the start of its line)."""
    proc = subprocess.run([sys.executable, "-m", "qloom.flows.cli", "--help"],
                          capture_output=True, text=True)
    return proc.returncode == 0 and re.search(rf"^\s+{re.escape(name)}(\s|$)", proc.stdout,
                                              re.M) is not None


def virtual_board(design: Path, inputs: Path, frames: int) -> dict:
    """Start ``qloom board-sim`` on the built design, send ``frames`` test digits through
    it with ``qloom run`` (which checks every answer against qloom's reference), stop the
    board. Skipped, with the reason, when this qloom has no ``board-sim`` command."""
    if not has_command("board-sim"):
        reason = "this qloom has no `board-sim` command (`qloom --help` does not list it)"
        print(f"skipped: {reason}")
        return {"skipped": reason}
    few = design.parent / "board_inputs.npy"
    np.save(few, np.load(inputs)[:frames])
    cmd = [sys.executable, "-m", "qloom.flows.cli", "board-sim", str(design),
           "--frames", str(frames), "--timeout", "900"]
    print("$ qloom " + " ".join(cmd[3:]), flush=True)
    board = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, bufsize=1)
    try:
        port = None
        for line in board.stdout:                 # the Verilator build, then the port
            print(line, end="", flush=True)
            if "serial port " in line:
                port = line.split("serial port ", 1)[1].split()[0]
                break
        if port is None:
            raise SystemExit(f"qloom board-sim ended without a serial port (exit status "
                             f"{board.wait()})")
        drain = threading.Thread(target=lambda: [print(l, end="", flush=True)
                                                 for l in board.stdout], daemon=True)
        drain.start()
        # The simulated board runs at about 1% of real time: a frame may take longer than
        # qloom run's default 2 s on a busy machine.
        print(f"$ qloom run {design} --port {port} --inputs {few} --timeout 60", flush=True)
        run = subprocess.run([sys.executable, "-m", "qloom.flows.cli", "run", str(design),
                              "--port", port, "--inputs", str(few), "--timeout", "60"])
        board.wait(timeout=120)                   # --frames: it stops after the answers
        drain.join(timeout=5)
    finally:
        if board.poll() is None:
            board.terminate()
            board.wait()
    return {"frames": frames, "all_equal_reference": run.returncode == 0,
            "run_exit_status": run.returncode, "board_sim_exit_status": board.returncode}


# -- the script --------------------------------------------------------------------------

def prepare_out(out: Path) -> Path:
    """OUT is this script's: refused when it holds files this script did not write."""
    if out.exists() and not out.is_dir():
        raise SystemExit(f"{out} is a file; give a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise SystemExit(f"{out} holds files this example did not write; give a new or empty "
                         f"folder")
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("written by examples/train_to_board/train.py\n")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?", type=Path, default=Path("out/train_to_board"),
                   help="folder for the model, the design and the summary "
                        "(default out/train_to_board)")
    p.add_argument("--epochs", type=int, default=60, help="training epochs (default 60)")
    p.add_argument("--sim", choices=["verilator", "icarus"], default="verilator",
                   help="RTL simulator for the test set (default verilator)")
    p.add_argument("--skip-build", action="store_true",
                   help="stop after the simulation (no bitstream, no virtual board)")
    p.add_argument("--board-frames", type=int, default=10,
                   help="test digits sent through the virtual board (default 10)")
    args = p.parse_args(argv)

    out = prepare_out(args.out)
    import torch
    torch.manual_seed(SEED)
    torch.set_num_threads(1)               # the same float sums on every machine
    timer, summary = Timer(), {"board": BOARD}

    banner(f"1. train a {64}-{HIDDEN}-{HIDDEN}-10 MLP, {WEIGHT_BITS}-bit weights, "
           f"{ACT_BITS}-bit activations, on scikit-learn's digits")
    x_train, y_train, x_test, y_test = digits()
    print(f"  {len(x_train)} training and {len(x_test)} test digits (8x8)")
    with timer("train"):
        model = make_model()
        train(model, x_train, y_train, args.epochs)
    torch_pred = torch_predictions(model, x_test)
    summary["torch_accuracy"] = float((torch_pred == y_test).mean())
    print(f"  PyTorch test accuracy {summary['torch_accuracy']:.4f}")

    banner("2. export QONNX (brevitas export_qonnx, qonnx cleanup)")
    model_path = out / "model.onnx"
    inputs_path = out / "test_inputs.npy"
    with timer("export"):
        export(model, x_test[:1], model_path)
        np.save(inputs_path, x_test)
        np.save(out / "test_labels.npy", y_test)
        onnx_pred = qonnx_predictions(model_path, x_test)
    summary["qonnx_accuracy"] = float((onnx_pred == y_test).mean())
    print(f"  {model_path}: QONNX (execute_onnx) test accuracy "
          f"{summary['qonnx_accuracy']:.4f}; PyTorch and QONNX agree on "
          f"{int((onnx_pred == torch_pred).sum())}/{len(x_test)} digits")

    banner(f"3. compile for the {BOARD}: {TARGET_FPS:,} frames/s at {CLOCK_MHZ} MHz")
    design = out / "design"
    with timer("compile"):
        qloom("compile", str(model_path), "-o", str(design), "--board", BOARD,
              "--target-fps", str(TARGET_FPS), "--clock", str(CLOCK_MHZ))

    banner(f"4. simulate all {len(x_test)} test digits through the RTL ({args.sim})")
    with timer("simulate"):
        qloom("simulate", str(design), "--inputs", str(inputs_path), "--sim", args.sim)
    sim = json.loads((design / "sim" / "results.json").read_text())
    rtl_pred = np.load(design / "sim" / "outputs.npy").reshape(len(x_test), -1).argmax(1)
    summary.update(rtl_accuracy=float((rtl_pred == y_test).mean()),
                   rtl_equals_qonnx=int((rtl_pred == onnx_pred).sum()),
                   test_digits=len(x_test), rtl_mismatches=sim["mismatches"],
                   latency_cycles=sim["latency_cycles"], ii_cycles=sim["ii_cycles"],
                   simulator=sim["simulator"])
    print(f"\n  test accuracy on {len(x_test)} digits:  PyTorch {summary['torch_accuracy']:.4f}"
          f"   QONNX {summary['qonnx_accuracy']:.4f}   RTL ({sim['simulator']}) "
          f"{summary['rtl_accuracy']:.4f}")
    print(f"  the RTL predicts the exported model's class on {summary['rtl_equals_qonnx']}/"
          f"{len(x_test)} digits; latency {sim['latency_cycles']} cycles, II "
          f"{sim['ii_cycles']} cycles")

    if not args.skip_build:
        banner(f"5. build the bitstream for the {BOARD} (Yosys + nextpnr)")
        with timer("build"):
            qloom("build", str(design))
        built = json.loads((design / "build" / "report.json").read_text())
        summary.update(fmax_mhz=built["fmax_mhz"], clock_mhz=built["target_mhz"],
                       timing_met=built["timing_met"], bitstream=built["bitstream"],
                       utilization={k: built["utilization"][k]["used"]
                                    for k in ("lut", "ff", "bram", "dsp")})

        banner(f"6. {args.board_frames} test digits through the virtual board")
        with timer("board"):
            summary["virtual_board"] = virtual_board(design, inputs_path, args.board_frames)

    summary["seconds"] = timer.seconds
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    banner("done")
    print(f"  {out / 'summary.json'}; the design's page: {design / 'report.html'}")
    print(f"  step times: " + ", ".join(f"{k} {v:.0f} s" for k, v in timer.seconds.items()))
    ok = summary["rtl_equals_qonnx"] == len(x_test) and summary["rtl_mismatches"] == 0
    if not ok:
        print(f"FAILED: the RTL differs from the exported model on "
              f"{len(x_test) - summary['rtl_equals_qonnx']} digits", file=sys.stderr)
    board = summary.get("virtual_board") or {}
    if board.get("all_equal_reference") is False:
        print("FAILED: the virtual board's answers differ from the reference (see qloom "
              "run's output above)", file=sys.stderr)
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
