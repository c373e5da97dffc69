"""Graph passes and the lowering from a cleaned QONNX graph to the integer IR.

Transformations follow qonnx's contract ``apply(model) -> (model, changed)``:
``GemmToMatMul``. The lowering itself (``lower_to_network``) walks the graph once.
"""

from .gemm_to_matmul import GemmToMatMul

__all__ = ["GemmToMatMul"]
