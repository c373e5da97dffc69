"""The one exception family qloom raises for bad input, unsupported models and failed tools."""


class QloomError(Exception):
    """A problem with the user's model, options or environment, explained in the message."""


class UnsupportedModelError(QloomError):
    """The model uses an op, datatype or shape that qloom cannot map (yet).

    ``node`` names the offending ONNX node (or tensor) when there is one; ``detail`` is the
    message without it.
    """

    def __init__(self, message: str, node: str | None = None):
        self.node = node
        self.detail = message
        super().__init__(f"node '{node}': {message}" if node else message)


class ResourceLimitError(QloomError):
    """A tensor or a design beyond the size qloom handles, refused before it is allocated."""


class InternalError(QloomError):
    """An unexpected failure inside qloom (a bug): reported as one line, not a traceback.

    ``cause`` is the original exception (also chained as ``__cause__``)."""

    def __init__(self, message: str, cause: BaseException | None = None):
        self.cause = cause
        super().__init__(message)


class ToolError(QloomError):
    """An external tool (simulator, Yosys, nextpnr) failed; the message carries its output."""


def raise_interrupt(error: BaseException) -> None:
    """Raise ``KeyboardInterrupt`` when ``error`` came from one (in its chain of causes
    and contexts), so that a Ctrl-C ends a command as interrupted, not as a bug: an
    interrupt during the import of an extension module (onnxruntime's, on a model's first
    load) surfaces as pybind11's ``ImportError: initialization failed``, the interrupt its
    cause."""
    seen, e = set(), error
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            raise KeyboardInterrupt from error
        seen.add(id(e))
        e = e.__cause__ or e.__context__
