"""The cost model's vocabulary for the compiler: families, resource counts and the
memory/adder primitives. The model itself lives with the templates (``qloom.hw``), each
estimating itself through ``qloom.hw.estimate``; this module only re-exports what the
engines and the planner use, so that there is one definition of each."""

from __future__ import annotations

from qloom.hw.estimate import (adder_tree_luts, calibrated, comparator_luts, has_lutram,
                               memory_cost, ram_cost, use_block_ram)
from qloom.hw.target import Family, Resources

__all__ = ["Family", "Resources", "memory_cost", "ram_cost", "use_block_ram", "adder_tree_luts",
           "comparator_luts", "calibrated", "has_lutram"]
