"""``--fold auto`` combined with the options that also choose a folding.

- ``--fold auto`` alone: the fastest balanced folding that fits the board
  (``plan.fit_to_budget``).
- ``--fold auto --target-fps N``: the smallest design that fits the board and meets N
  frames/s: every engine at the cheapest folding meeting the cycle budget (as
  ``--target-fps`` alone), its weight memories moved out of block RAM where the board
  needs it (``plan.spare_block_ram``), then checked against the board. When no folding
  reaches N, or the smallest that does is too big, the error says so and quotes the rate
  the fastest fitting folding reaches.
- ``--fold auto --latency``: the latency design (every layer at one vector per cycle),
  checked against the board; refused, with what is over, when it does not fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from qloom.errors import QloomError
from qloom.flows.compile.cost import Resources
from qloom.flows.compile.plan import Plan, fit_to_budget, plan_for_cycles, spare_block_ram

__all__ = ["BoardFit", "fastest_fitting", "smallest_meeting", "latency_fitting"]


@dataclass(frozen=True)
class BoardFit:
    """What a plan must fit: the board (its budget and test), what the board top adds
    beside a plan's engines (``overhead``), and a check on the whole plan (``accept``)."""

    name: str
    budget: Resources
    fits: Callable[[Resources], bool]
    overhead: Callable[[Plan], Resources]
    accept: Callable[[Plan], bool]

    def holds(self, plan: Plan) -> bool:
        return self.fits(plan.total + self.overhead(plan)) and self.accept(plan)

    def over(self, plan: Plan) -> str:
        """The estimate against the budget, naming what is over (or the further check)."""
        need = (plan.total + self.overhead(plan)).as_dict()
        have = self.budget.as_dict()
        over = [k for k in need if need[k] > have.get(k, 0)]
        amounts = ", ".join(f"{k.upper()} {need[k]:,}/{have.get(k, 0):,}" for k in need)
        if over:
            return f"{amounts} (over in {', '.join(k.upper() for k in over)})"
        if not self.fits(plan.total + self.overhead(plan)):
            return f"{amounts} (beyond the usable share of the device)"
        return f"{amounts} (its weights need more SPRAMs than the device has)"


def fastest_fitting(engines, board: BoardFit, options) -> Plan:
    return fit_to_budget(engines, board.fits, board.budget, options, accept=board.accept,
                         overhead=board.overhead)


def _reachable(engines, board: BoardFit, options, clock_mhz: float) -> str:
    """What the board allows instead: the rate of the fastest folding that fits."""
    try:
        best = fastest_fitting(engines, board, options)
    except QloomError as e:
        return f"no folding fits {board.name}: {e}"
    fps = clock_mhz * 1e6 / best.ideal_ii_cycles
    return (f"the fastest folding that fits {board.name} reaches {fps:,.0f} frames/s "
            f"({best.ideal_ii_cycles:,} cycles per frame at {clock_mhz:g} MHz; "
            f"`--fold auto` alone builds it)")


def smallest_meeting(engines, target_fps: float, clock_mhz: float, board: BoardFit,
                     options) -> Plan:
    """The smallest plan that meets ``target_fps`` at ``clock_mhz`` and fits the board."""
    if target_fps <= 0:
        raise QloomError(f"--target-fps must be positive, not {target_fps}")
    budget = clock_mhz * 1e6 / target_fps
    plan = plan_for_cycles(engines, budget, options, how="auto-target-fps")
    what = "--fold auto with --target-fps"
    if plan.ideal_ii_cycles > budget:
        fps = clock_mhz * 1e6 / plan.ideal_ii_cycles
        raise QloomError(
            f"{what}: no folding reaches {target_fps:,.0f} frames/s at {clock_mhz:g} MHz "
            f"({budget:,.1f} cycles per frame); at its fastest, {plan.bottleneck} takes "
            f"{plan.ideal_ii_cycles:,} cycles ({fps:,.0f} frames/s); "
            f"{_reachable(engines, board, options, clock_mhz)}")
    plan = spare_block_ram(engines, plan, board.budget, board.fits, options, board.overhead)
    if board.holds(plan):
        return plan
    raise QloomError(
        f"{what}: the smallest design meeting {target_fps:,.0f} frames/s at {clock_mhz:g} "
        f"MHz does not fit {board.name}: estimated {board.over(plan)}; "
        f"{_reachable(engines, board, options, clock_mhz)}")


def latency_fitting(engines, clock_mhz: float, board: BoardFit, options) -> Plan:
    """The latency plan when it fits the board."""
    plan = plan_for_cycles(engines, 0, options, how="auto-latency")
    plan = spare_block_ram(engines, plan, board.budget, board.fits, options, board.overhead)
    if board.holds(plan):
        return plan
    raise QloomError(
        f"--fold auto --latency: the latency design (every layer at one vector per cycle, "
        f"dense layers unrolled) does not fit {board.name}: estimated {board.over(plan)}; "
        f"{_reachable(engines, board, options, clock_mhz)}")
