"""The one exception family qloom raises for bad input, unsupported models and failed tools."""


class QloomError(Exception):
    """A problem with the user's model, options or environment, explained in the message."""


class UnsupportedModelError(QloomError):
    """The model uses an op, datatype or shape that qloom cannot map (yet).

    ``node`` names the offending ONNX node (or tensor) when there is one.
    """

    def __init__(self, message: str, node: str | None = None):
        self.node = node
        super().__init__(f"node '{node}': {message}" if node else message)


class ToolError(QloomError):
    """An external tool (simulator, Yosys, nextpnr) failed; the message carries its output."""
