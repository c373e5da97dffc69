"""Folding: how parallel each engine is.

Three ways, in order of precedence: a fold file (per layer, checked), a target frame rate
at a clock (each engine gets the cheapest folding that meets the cycle budget), or the
balanced default (the bottleneck engine gets about ``DEFAULT_LANES`` synapses per cycle and
every other engine is folded to keep pace with it). ``fit_to_budget`` finds the fastest
balanced folding whose estimate fits a board, leaving block RAM room where it can
(``spare_block_ram``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from qloom.errors import QloomError
from qloom.flows.compile.cost import Resources
from qloom.flows.compile.engines.base import BuildOptions, Engine, Fold
from qloom.flows.compile.engines.mapping import realize
from qloom.flows.compile.graph import EngineGraph

__all__ = ["Plan", "DEFAULT_LANES", "plan_for_cycles", "plan_default", "plan_from_file",
           "fit_to_budget", "spare_block_ram", "read_fold_file", "ROOMY_SHARE"]

DEFAULT_LANES = 64

# Fold auto keeps the block RAM a plan takes within this share of the device when it can,
# by moving weight memories to logic (``Fold.weights``) while the LUTs stay within the
# same share: with nearly every block taken, the placer scatters each memory's blocks over
# the die and every path into or out of a wide memory becomes a long route (CNV-w1a1 with
# 190 of the ECP5-85F's 208 blocks routed at 76-84 MHz against 104 planned).
ROOMY_SHARE = 0.8


@dataclass(frozen=True)
class Plan:
    """The planner's decision and what it makes: ``choice``, a folding per engine that
    mapping offered (``mapped``); ``graph``, the engines that implement them at those folds
    (``qloom.flows.compile.engines.mapping.realize``: unrolled chains in place of dense
    layers at one vector per cycle), their folds, edges and FIFOs, built once and read by
    RTL emission, simulation, the manifest and the report; and per realized engine the DSP
    blocks it may use and its estimates."""

    choice: dict           # mapped engine name -> Fold
    mapped: tuple          # the engines mapping offered
    graph: EngineGraph
    dsps: dict             # engine name -> multipliers on DSP blocks
    cycles: dict           # engine name -> ideal cycles per frame
    resources: dict        # engine name -> Resources
    how: str               # "default", "target-fps", "fold-file", "auto", "latency"

    @property
    def engines(self) -> tuple:
        """The engines as built (``graph.engines``)."""
        return self.graph.engines

    @property
    def folds(self):
        """The built engines' folds (``graph.folds``)."""
        return self.graph.folds

    @property
    def fold_file(self) -> dict:
        """The folding as a fold file (``--fold``) reproduces it: the mapped engines'
        entries, which also name the layers an unrolled chain took in."""
        return {e.name: e.fold_json(self.choice[e.name]) for e in self.mapped}

    @property
    def ideal_ii_cycles(self) -> int:
        return max(self.cycles.values())

    @property
    def bottleneck(self) -> str:
        return max(self.cycles, key=self.cycles.get)

    @property
    def total(self) -> Resources:
        total = Resources()
        for r in self.resources.values():
            total += r
        return total


def _allocate_dsps(engines, folds, options: BuildOptions) -> dict:
    """Give DSP blocks to multiply-accumulate engines within the budget, widest products
    first (a DSP saves the most LUTs there)."""
    left = math.inf if options.dsp_budget is None else options.dsp_budget
    dsps = {}
    for e in sorted(engines, key=lambda e: -e.multiplier_bits()):
        want = e.multipliers(folds[e.name])
        dsps[e.name] = int(min(want, left))
        left -= dsps[e.name]
    return dsps


def _finish(mapped, choice, options, how) -> Plan:
    """The plan of ``choice``: its engines realized, their graph built, DSP blocks given
    and everything estimated."""
    engines, folds = realize(mapped, choice)
    dsps = _allocate_dsps(engines, folds, options)
    graph = EngineGraph.build(engines, folds)
    fifos = graph.resources(options)
    return Plan(choice=dict(choice), mapped=tuple(mapped), graph=graph, dsps=dsps,
                cycles={e.name: e.cycles(folds[e.name]) for e in engines},
                resources={e.name: e.resources(folds[e.name], options, dsps[e.name])
                           + fifos[e.name] for e in engines},
                how=how)


def _cheapest(engine: Engine, target_cycles: float, options: BuildOptions) -> Fold:
    """The cheapest folding meeting ``target_cycles``; the fastest one if none does."""
    folds = engine.folds()
    meeting = [f for f in folds if engine.cycles(f) <= target_cycles]
    weight = options.family.target.weight     # LUT-equivalents
    if not meeting:
        return min(folds, key=lambda f: (engine.cycles(f), weight(engine.resources(f, options))))
    return min(meeting, key=lambda f: (weight(engine.resources(f, options)),
                                       engine.cycles(f), abs(f.pe - f.simd)))


def plan_for_cycles(engines, target_cycles: float, options: BuildOptions,
                    how: str = "target-fps") -> Plan:
    folds = {e.name: _cheapest(e, target_cycles, options) for e in engines}
    return _finish(engines, folds, options, how)


def plan_default(engines, options: BuildOptions) -> Plan:
    slowest = max(e.cycles(e.folds()[0]) for e in engines)
    target = max(1, math.ceil(slowest / DEFAULT_LANES))
    return plan_for_cycles(engines, target, options, how="default")


def read_fold_file(path) -> dict:
    try:
        spec = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise QloomError(f"fold file {path} does not exist") from None
    except (OSError, json.JSONDecodeError) as e:
        raise QloomError(f"fold file {path} is not valid JSON: {e}") from None
    if not isinstance(spec, dict):
        raise QloomError(f"fold file {path} must hold an object mapping layer names to "
                         f"foldings, like {{\"MatMul_0\": {{\"pe\": 4, \"simd\": 8}}}}")
    return spec


def plan_from_file(engines, spec: dict, options: BuildOptions, fallback: Plan) -> Plan:
    """Foldings from a fold file; engines it does not name keep ``fallback``'s."""
    by_name = {e.name: e for e in engines}
    aliases = {layer: e for e in engines for layer in e.layers}
    unknown = sorted(k for k in spec if k not in by_name and k not in aliases)
    if unknown:
        raise QloomError(f"fold file names unknown layer(s) {unknown}; the layers are "
                         f"{sorted(by_name)}")
    folds = dict(fallback.choice)
    for key, value in spec.items():
        engine = by_name.get(key) or aliases[key]
        folds[engine.name] = engine.parse_fold(value)
    return _finish(engines, folds, options, "fold-file")


def fit_to_budget(engines, fits: Callable[[Resources], bool], budget: Resources,
                  options: BuildOptions, accept: Callable[[Plan], bool] | None = None,
                  overhead: Callable[[Plan], Resources] | None = None) -> Plan:
    """The fastest balanced plan (its weight memories moved out of block RAM as
    ``spare_block_ram`` does) whose estimated resources, with ``overhead`` (what a plan
    needs beside its engines: the board's host link), ``fits`` accepts, and ``accept`` too
    when given (a check on the whole plan, e.g. the SPRAMs its weights take); ``budget``
    is only quoted when none does."""
    def extra(plan):
        return overhead(plan) if overhead is not None else Resources()

    candidates = sorted({e.cycles(f) for e in engines for f in e.folds()})
    best = None
    lo, hi = 0, len(candidates) - 1
    # The most folded plan first: when even its engines alone do not fit, nothing does (and
    # the search would only build every plan in between to say so). Its share beside the
    # engines does not count here: the host link of a plan with narrower ports can be
    # larger than a faster plan's, so a faster plan may fit where the slowest does not.
    slowest = spare_block_ram(engines, plan_for_cycles(engines, math.inf, options, how="auto"),
                              budget, fits, options, extra)
    if not fits(slowest.total):
        lo = hi + 1
    # Resources grow as the cycle target shrinks; bisect over the sorted targets.
    while lo <= hi:
        mid = (lo + hi) // 2
        plan = plan_for_cycles(engines, candidates[mid], options, how="auto")
        plan = spare_block_ram(engines, plan, budget, fits, options, extra)
        if fits(plan.total + extra(plan)) and (accept is None or accept(plan)):
            best, hi = plan, mid - 1
        else:
            lo = mid + 1
    if best is None:
        slowest = plan_for_cycles(engines, math.inf, options, how="auto")
        share = extra(slowest)
        short = shortfall(slowest, budget, lambda need: fits(need + share), accept)
        raise QloomError(f"the model does not fit even fully folded: {short}")
    return best


def spare_block_ram(engines, plan: Plan, budget: Resources, fits: Callable,
                    options: BuildOptions,
                    overhead: Callable[[Plan], Resources] = lambda plan: Resources()) -> Plan:
    """``plan`` with weight memories moved from block RAM to logic until its block RAM
    (with ``overhead``) is within ``ROOMY_SHARE`` of ``budget``'s: each time the move
    costing the fewest LUTs per block it frees, made only when the plan's LUTs stay within
    the same share and the plan still ``fits``. ``plan`` itself when no move is needed or
    none can be made."""
    by_name = {e.name: e for e in engines}
    bram_limit, lut_limit = ROOMY_SHARE * budget.bram, ROOMY_SHARE * budget.lut
    while (plan.total + overhead(plan)).bram > bram_limit:
        folds = plan.choice
        moves = []
        for name, fold in folds.items():
            engine = by_name[name]
            if "logic" not in engine.weight_places or fold.weights == "logic":
                continue
            moved = replace(fold, weights="logic")
            dsps = plan.dsps.get(name, 0)
            now = engine.resources(fold, options, dsps)
            then = engine.resources(moved, options, dsps)
            if then.bram < now.bram:
                moves.append(((then.lut - now.lut) / (now.bram - then.bram), name, moved))
        for _, name, moved in sorted(moves):
            candidate = _finish(engines, {**folds, name: moved}, options, plan.how)
            need = candidate.total + overhead(candidate)
            if need.lut <= lut_limit and fits(need):
                plan = candidate
                break
        else:
            return plan
    return plan


def shortfall(plan: Plan, budget: Resources, fits: Callable | None = None,
              accept: Callable | None = None) -> str:
    """What does not fit and by how much, and the engines that need most of it. ``fits``
    (the board's test, which adds the host link's share and counts iCE40 logic cells) is
    probed to name the binding resource when no raw count is over the budget."""
    need, have = plan.total.as_dict(), budget.as_dict()
    over = [k for k in need if need[k] > have.get(k, 0)]
    if not over and fits is not None and fits(plan.total) and accept is not None \
            and not accept(plan):
        return (f"estimated {_amounts(need)} fits the board, but the plan fails its further "
                f"check (the SPRAMs its weights take: see the report's memories)")
    if not over:
        binding = [k for k in need if fits is not None and
                   fits(Resources(**{**need, k: 0}))]
        if binding == ["lut", "ff"] or not binding:
            if fits is not None and fits(Resources(**{**need, "lut": 0, "ff": 0})):
                binding = ["logic cells (LUT + FF)"]
        what = " or ".join(k.upper() if k in need else k for k in binding) or "the total"
        share = "the host link, usable iCE40 logic cells" if "logic cells" in what \
            else "the host link"
        return (f"estimated {_amounts(need)} is within the budget {_amounts(have)}, but "
                f"{what} is not once the board's share ({share}) is added; try a larger "
                f"board")
    parts = []
    for k in over:
        extra = need[k] - have[k]
        pct = f", {100 * need[k] / have[k]:.0f}% of it" if have[k] else ""
        parts.append(f"{k.upper()} {need[k]:,} against {have[k]:,} (over by {extra:,}{pct})")
    key = over[0]
    top = sorted(plan.resources.items(), key=lambda kv: -kv[1].as_dict()[key])[:3]
    largest = ", ".join(f"{name} {r.as_dict()[key]:,}" for name, r in top
                        if r.as_dict()[key] > 0)
    return (f"{'; '.join(parts)}; the most {key.upper()} goes to {largest} (every engine is "
            f"already at its smallest folding){_skips(plan)}")


def _skips(plan: Plan) -> str:
    """The skip buffers of reconvergent paths in ``plan``, largest first, for messages."""
    rows = sorted(plan.graph.skip_rows(), key=lambda r: -r["bits"])
    if not rows:
        return ""
    listed = ", ".join(f"{r['tensor']} into {r['reader']} {r['bits']:,} bits ({r['words']:,} "
                       f"words of {r['lanes']} x {r['bits'] // (r['words'] * r['lanes'])} "
                       f"bits)" for r in rows[:3])
    return f"; the skip buffers of reconvergent paths need {listed}"


def _amounts(d: dict) -> str:
    return ", ".join(f"{k.upper()} {v:,}" for k, v in d.items())
