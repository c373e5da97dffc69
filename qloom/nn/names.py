"""Node and tensor names as the user's file spells them.

qonnx's cleanup renames every node (``GiveUniqueNodeNames``: the file's 'BipolarQuant_11'
becomes 'BipolarQuant_0') and every tensor (``GiveReadableTensorNames``), so qloom's passes
see names the user cannot find. Before cleanup, ``tag`` writes each node's original name,
inputs and outputs into its ``doc_string`` (kept by qonnx's passes, ignored by runtimes);
``SourceNames.collect`` reads them back from the cleaned graph (and clears them), giving
one map from cleaned node and tensor names to the file's, used on the error path.
"""

from __future__ import annotations

import json
import re

from ..errors import QloomError, UnsupportedModelError

__all__ = ["tag", "SourceNames"]

_TAG = "qloom-source:"


def tag(proto) -> None:
    """Record every node's name, inputs and outputs in its doc_string (in place)."""
    for node in proto.graph.node:
        node.doc_string = _TAG + json.dumps(
            [node.name, node.op_type, list(node.input), list(node.output)])


def _unnamed(op: str, outputs: list) -> str:
    return f"unnamed {op} writing '{outputs[0]}'" if outputs else f"unnamed {op}"


class SourceNames:
    """Cleaned node/tensor name -> the name in the user's file."""

    def __init__(self, nodes: dict | None = None, tensors: dict | None = None):
        self.nodes = dict(nodes or {})
        self.tensors = dict(tensors or {})

    @classmethod
    def collect(cls, graph) -> "SourceNames":
        """Read (and clear) the tags of a cleaned graph."""
        names = cls()
        for node in graph.node:
            if not node.doc_string.startswith(_TAG):
                continue
            name, op, inputs, outputs = json.loads(node.doc_string[len(_TAG):])
            node.doc_string = ""
            names.nodes[node.name] = name or _unnamed(op, outputs)
            if len(inputs) == len(node.input):
                names.tensors.update((new, old) for new, old in zip(node.input, inputs)
                                     if new and old and new != old)
            if len(outputs) == len(node.output):
                names.tensors.update((new, old) for new, old in zip(node.output, outputs)
                                     if new != old)
        return names

    def name(self, cleaned: str) -> str:
        """The user's name of a node or tensor (unchanged when it has none)."""
        return self.nodes.get(cleaned, self.tensors.get(cleaned, cleaned))

    def text(self, message: str) -> str:
        """A message with every quoted cleaned name replaced by the user's."""
        return re.sub(r"'([^'\n]+)'", lambda m: f"'{self.name(m[1])}'", message)

    def error(self, err: QloomError) -> QloomError:
        """The same error naming the user's nodes and tensors."""
        if isinstance(err, UnsupportedModelError):
            new = type(err).__new__(type(err))
            UnsupportedModelError.__init__(new, self.text(err.detail),
                                           self.name(err.node) if err.node else None)
        else:
            new = type(err).__new__(type(err))
            new.__dict__.update(err.__dict__)
            new.args = (self.text(str(err)),)
        new.__cause__ = err.__cause__
        return new
