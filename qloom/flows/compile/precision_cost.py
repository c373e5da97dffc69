"""What a fixed-point precision costs: the quantized network against the float model.

The float model runs in onnxruntime (as the user's framework would run it), the
quantized one is ``Network.execute`` (equal to qonnx on ``quantized.onnx``); both on the
same inputs: ``--calibration-inputs X.npy`` (frames ``[N, ...]`` of the model's input
shape without its batch dimension, or with a batch of 1) or ``FRAMES`` frames drawn from
N(0, 1) with a fixed seed. Reported: max and mean absolute error of the outputs, and the
fraction of frames whose argmax (over the frame's whole output) agrees.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qloom.errors import QloomError

__all__ = ["PrecisionCost", "measure", "calibration_inputs", "FRAMES"]

FRAMES = 300


@dataclass(frozen=True)
class PrecisionCost:
    frames: int
    inputs: str                 # "N(0,1), seed 0" or the .npy file's name
    max_abs_error: float
    mean_abs_error: float
    argmax_agreement: float     # fraction of frames
    argmax_disagreements: int

    def as_dict(self) -> dict:
        return {"frames": self.frames, "inputs": self.inputs,
                "max_abs_error": self.max_abs_error, "mean_abs_error": self.mean_abs_error,
                "argmax_agreement": self.argmax_agreement,
                "argmax_disagreements": self.argmax_disagreements}


def calibration_inputs(source, input_shape, *, frames: int = FRAMES, seed: int = 0):
    """``(x [N, *input_shape[1:]], description)`` from a .npy path, an array or N(0, 1)."""
    frame = tuple(input_shape[1:])
    if source is None:
        rng = np.random.default_rng(seed)
        return rng.standard_normal((frames, *frame)).astype(np.float32), \
            f"N(0,1), seed {seed}"
    what = "calibration inputs"
    if isinstance(source, (str, Path)):
        path = Path(source)
        if path.suffix != ".npy" or not path.is_file():
            raise QloomError(f"--calibration-inputs must be an existing .npy file, not {path}")
        try:
            x = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as e:
            raise QloomError(f"cannot read calibration inputs {path}: {e}") from None
        what = path.name
    else:
        x = np.asarray(source)
    if x.shape == frame:
        x = x[None]
    if x.ndim == len(frame) + 2 and x.shape[1] == 1:
        x = x[:, 0]
    if x.shape[1:] != frame or x.shape[0] == 0:
        raise QloomError(f"calibration inputs must have shape [N, {', '.join(map(str, frame))}]"
                         f" (the model's input without its batch), not {list(x.shape)}")
    if not np.issubdtype(x.dtype, np.number) or not np.all(np.isfinite(x)):
        raise QloomError("calibration inputs must be finite numbers")
    return x.astype(np.float32), what


def _float_outputs(float_model, x) -> np.ndarray:
    """The float model in onnxruntime, frame by frame (its batch dimension is 1)."""
    import onnxruntime as ort
    sess = ort.InferenceSession(float_model.SerializeToString(),
                                providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return np.concatenate([sess.run(None, {name: x[i:i + 1]})[0] for i in range(len(x))])


def measure(float_model, net, x, inputs: str) -> PrecisionCost:
    """Compare ``net`` with ``float_model`` (an onnx.ModelProto of batch 1) on ``x``."""
    want = _float_outputs(float_model, x).astype(np.float64)
    got = np.asarray(net.execute(x), np.float64).reshape(want.shape)
    err = np.abs(got - want)
    agree = np.argmax(got.reshape(len(x), -1), axis=-1) == \
        np.argmax(want.reshape(len(x), -1), axis=-1)
    return PrecisionCost(frames=len(x), inputs=inputs, max_abs_error=float(err.max()),
                         mean_abs_error=float(err.mean()),
                         argmax_agreement=float(agree.mean()),
                         argmax_disagreements=int((~agree).sum()))
