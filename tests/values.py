"""Random integer data and reference products shared by the hardware tests."""

import numpy as np

from qloom.nn.ir import Dense


def random_values(dtype, shape, rng):
    """Values drawn uniformly from ``dtype`` (bipolar as -1/+1)."""
    if dtype.bipolar:
        return rng.choice([-1, 1], size=shape)
    return rng.integers(dtype.min, dtype.max + 1, size=shape)


def ref_gemm(weights, w_type, in_type, x):
    """``x @ weights.T`` as the IR's Dense layer computes it."""
    return Dense("ref", ("x",), "y", weights=np.asarray(weights), w_type=w_type,
                 in_type=in_type).execute(x)
