"""Upgrade a model of an old ONNX opset with onnx's version converter.

Exporters of float models still write opsets 6 to 10 (Keras via old tf2onnx, old
PyTorch); qonnx and onnxruntime handle today's ops best and qloom validates from
``MIN_OPSET``. A model of a standard opset below ``TARGET`` is converted to ``TARGET`` by
``onnx.version_converter`` (the semantics of every op are kept, or the converter refuses);
a refusal is a qloom error naming the opsets. Works on the ``ModelProto`` before qonnx
reads it (``apply(proto) -> (proto, changed)``, the Transformation contract on a proto).
"""

from __future__ import annotations

import onnx

from ...errors import UnsupportedModelError

__all__ = ["UpgradeOpset", "TARGET"]

TARGET = 13


def standard_opset(proto: onnx.ModelProto) -> int | None:
    return next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)


class UpgradeOpset:
    """Convert a model of a standard opset below ``TARGET`` to ``TARGET``."""

    def apply(self, proto: onnx.ModelProto) -> tuple[onnx.ModelProto, bool]:
        version = standard_opset(proto)
        if version is None or version >= TARGET:
            return proto, False
        others = [o for o in proto.opset_import if o.domain not in ("", "ai.onnx")]
        if others:     # the converter knows the standard domain only
            raise UnsupportedModelError(
                f"the model imports ONNX opset {version} and the domain '{others[0].domain}'"
                f"; qloom upgrades old opsets of plain ONNX models only")
        try:
            from onnx import version_converter
            new = version_converter.convert_version(proto, TARGET)
        except Exception as e:     # the converter raises RuntimeError/ValueError/...
            first = (str(e).strip().splitlines() or [""])[0][:200]
            raise UnsupportedModelError(
                f"the model imports ONNX opset {version}; onnx's version converter could not "
                f"upgrade it to opset {TARGET} ({type(e).__name__}: {first})") from e
        return new, True
