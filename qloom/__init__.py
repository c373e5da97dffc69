"""qloom: quantized neural networks (QONNX) to verified streaming accelerators."""

from ._version import __version__
from .errors import QloomError

__all__ = ["QloomError", "load", "compile", "__version__"]


def load(model, **options):
    """Load a QONNX model (path or ``onnx.ModelProto``) into an integer ``Network``."""
    from .nn.load import load as _load
    return _load(model, **options)


def compile(model, out_dir=None, **options):
    """Compile a QONNX model (or a loaded ``Network``) into a streaming accelerator design."""
    from qloom.flows.compile.steps import compile_model
    return compile_model(model, out_dir, **options)
