"""Buffers of reconvergent paths (U-Net skips, residual branches), sized from the schedule.

Where a tensor (the fork) feeds two branches that meet again at a join (a Concat or an
Add), the fork's duplicator hands each word to both branches at once. The join takes its
inputs in a fixed order, so while the long branch works towards the element the join
needs next, every fork word it swallows also enters the short branch, and the short
branch must hold them all until the join takes them: its FIFO must be at least that deep,
or the duplicator stalls the long branch and nothing moves again (a deadlock).

Each engine states its schedule (``Engine.input_needed``: per output element, the input
elements it must have taken first; the sliding window's rows, the upsampler's index map).
Composed along each branch and rounded to the folding's words, they give, for every
output element ``n`` of the join, the fork elements the long branch needs for it and the
short branch's elements the join has taken before it; the largest difference is what the
short branch must hold for the design never to deadlock (``skip_buffers(paced=False)``).

That depth keeps the design from deadlocking but not at full rate: with frames back to
back the fork goes on with the next frame while the join still waits for the long branch.
So the same schedules are also timed: each engine emits an element once its inputs are
there and at the pipeline's steady pace, a frame of outputs per ideal II (the
bottleneck's ``Engine.cycles``), the graph input too, plus the engine's latency
(``Engine.latency``: a matrix unit computes a vector before it gives any of it) and the
registers of the edge into it; the short branch holds the fork's elements (of this frame
and the next ones) made by the time the join takes each of its outputs. Every engine, the long branch's too, is held to that pace: across a frame's end
the long branch waits for the join to take the last rows of the frame before (its
upsampler and line buffers hold them), so timing it at its own, faster pace sized the
U-Net test's skip at 157 words, where it ran at II 2603 instead of 2304; without the
latencies, ResNet-8's first skip was 8 words short (II 2731 instead of 2304). The larger
of the two, less what the edge's skid buffers and width converter hold, is the FIFO.
Nothing is hand-written, and the depth holds at any image size.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

__all__ = ["SkipBuffer", "skip_buffers", "EDGE_SKID_WORDS"]

# Words each of an edge's two skid buffers holds (``qloom.hw.skid``): storage on the short
# branch beside its FIFO.
EDGE_SKID_WORDS = 2

# Cycles a word spends in the registers of the edge into an engine when nothing waits:
# its two skid buffers and the FIFO's read and output registers (``qloom.hw.top``).
EDGE_LATENCY = 4


@dataclass(frozen=True)
class SkipBuffer:
    """The FIFO of the edge ``(tensor, reader)`` into a join: ``elements`` beyond the
    edge's skid buffers, for the paths from ``fork``."""

    tensor: str
    reader: str
    fork: str
    elements: int


def _converter_words(src_lanes: int, dst_lanes: int) -> int:
    """Elements an edge's width converter holds (``qloom.hw.width``): a widening one
    gathers into a register of the wide word; a narrowing one holds nothing."""
    return dst_lanes if dst_lanes > src_lanes else 0


def _needed(engine):
    """``engine.input_needed()``, asked once per engine (it does not depend on the folding;
    the planner builds many plans of the same engines)."""
    if "_schedule_needed" not in engine.__dict__:
        engine.__dict__["_schedule_needed"] = engine.input_needed()
    return engine.__dict__["_schedule_needed"]


def _sizes(engines) -> dict:
    """Elements per frame of every tensor an engine writes or reads (a graph input: the
    most any reader needs of it)."""
    sizes = {}
    for e in engines:
        needs = _needed(e)
        if needs is None:
            continue
        sizes[e.output] = len(needs[0])
        for t, n in zip(e.inputs, needs):
            sizes[t] = max(sizes.get(t, 0), int(n.max(initial=0)))
    return sizes


def _rounded(engine, fold, sizes):
    """The engine's schedule in whole words: an input is taken a word of ``in_lanes`` at a
    time and an output element leaves with its word of ``out_lanes``. None if unknown."""
    needs = _needed(engine)
    if needs is None:
        return None
    li, lo = engine.in_lanes(fold), engine.out_lanes(fold)
    out = []
    for t, n in zip(engine.inputs, needs):
        n = np.minimum(-(-n // li) * li, sizes.get(t, int(n.max(initial=0))))
        if lo > 1 and len(n) % lo == 0:
            n = np.repeat(n.reshape(-1, lo)[:, -1], lo)
        out.append(n)
    return out


class _Graph:
    def __init__(self, engines, folds):
        self.engines, self.folds = list(engines), folds
        self.producer = {e.output: e for e in self.engines}
        self.readers = {}
        for e in self.engines:
            for t in e.inputs:
                self.readers.setdefault(t, []).append(e)
        self.sizes = _sizes(self.engines)
        self._own, self._times = {}, None
        self.ii = max((e.cycles(folds[e.name]) for e in self.engines), default=1)
        self.ancestors = {}
        for e in self.engines:          # topological order
            up = set(e.inputs)
            for t in e.inputs:
                up |= self.ancestors.get(t, set())
            self.ancestors[e.output] = up

    def times(self):
        """Per tensor, the cycle each of a frame's elements is made in the paced model: an
        element once the inputs it needs are there, and no sooner than the steady pace of
        a frame of outputs per ideal II allows, plus the engine's ``latency`` and that of
        the edge into it; the graph inputs at that pace too."""
        if self._times is not None:
            return self._times
        ii = self.ii
        times = {}
        for e in self.engines:
            own = self.own(e)
            n = len(own[0]) if own is not None else self.sizes.get(e.output, 0)
            if own is None or n == 0:
                times = None
                break
            ready = np.full(n, -np.inf)
            for t, need in zip(e.inputs, own):
                if t not in times:
                    size = max(self.sizes.get(t, 1), 1)
                    times[t] = np.arange(size) * (ii / size)
                at = np.where(need > 0, times[t][np.maximum(need, 1) - 1], -np.inf)
                ready = np.maximum(ready, at)
            step = ii / n
            k = np.arange(n) * step
            times[e.output] = (np.maximum.accumulate(ready - k) + k + step
                               + e.latency(self.folds[e.name]) + EDGE_LATENCY)
        self._times = times
        return times

    def own(self, engine):
        if engine.name not in self._own:
            self._own[engine.name] = _rounded(engine, self.folds[engine.name], self.sizes)
        return self._own[engine.name]

    def upstream(self, t):
        return self.ancestors.get(t, set()) | {t}

    def forks(self, a, b):
        """The nearest tensors feeding both ``a`` and ``b`` that are read more than once."""
        common = {t for t in self.upstream(a) & self.upstream(b)
                  if len(self.readers.get(t, ())) > 1}
        return [t for t in common if not any(t in self.ancestors.get(u, ()) for u in common)]

    def from_fork(self, fork):
        """Per tensor downstream of ``fork`` (with the fork itself): for each of its
        elements, the fork elements needed first; None where a schedule is unknown."""
        memo = {fork: np.arange(1, self.sizes.get(fork, 0) + 1, dtype=np.int64)}

        def need(t):
            if t in memo:
                return memo[t]
            e = self.producer.get(t)
            own = self.own(e) if e is not None else None
            if own is None or fork not in self.ancestors.get(t, ()):
                memo[t] = None
                return None
            result = None
            for i, n in zip(e.inputs, own):
                if i != fork and fork not in self.ancestors.get(i, ()):
                    continue
                up = need(i)
                if up is None:
                    memo[t] = None
                    return None
                got = np.where(n > 0, up[np.maximum(n, 1) - 1], 0)
                result = got if result is None else np.maximum(result, got)
            memo[t] = result
            return result

        return need


def _backlog(long_need, long_own, short_need, short_own) -> int:
    """The most short-branch elements waiting at the join: for each output the join makes,
    what the short branch can make from the fork elements the long branch needed for it,
    less what the join took of the short branch before it."""
    valid = long_own > 0
    waits = long_need[long_own[valid] - 1]
    made = np.searchsorted(short_need, waits, side="right")
    taken = np.concatenate([[0], short_own[:-1]])[valid]
    return int(max(0, (made - taken).max(initial=0)))


def _paced_backlog(graph, join, own, short, o) -> int:
    """The most short-branch elements waiting at the join in the paced model (see the
    module's text), counting the fork's next frames made meanwhile."""
    times = graph.times()
    if times is None:
        return 0
    made_at, taken_at = np.sort(times[short]), times[join.output]
    taken = np.concatenate([[0], own[o][:-1]])
    made = np.zeros(len(taken_at), dtype=np.int64)
    ahead = 0
    while True:
        count = np.searchsorted(made_at, taken_at - ahead * graph.ii, side="right")
        if not count.any():
            break
        made += count
        ahead += 1
    return int(max(0, (made - taken).max(initial=0)))


# Per last engine of a graph, the skip buffers by lanes (the planner asks for every edge
# of every plan it weighs; only the lanes change the answer).
_CACHE = weakref.WeakKeyDictionary()


def skip_buffers(engines, folds, *, paced: bool = True) -> list[SkipBuffer]:
    """The FIFOs the edges into joins need beyond their skid buffers, from the engines'
    schedules (``Engine.input_needed``) at these foldings: for full rate, or with
    ``paced=False`` only not to deadlock. Where an engine on a branch has no schedule, the
    short branch buffers the whole frame of its tensor."""
    engines = list(engines)
    if not any(len(e.inputs) > 1 for e in engines):
        return []
    key = (paced, tuple((e.name, e.in_lanes(folds[e.name]), e.out_lanes(folds[e.name]))
                        for e in engines))
    cache = _CACHE.setdefault(engines[-1], {})
    if key not in cache:
        cache[key] = _skip_buffers(engines, folds, paced)
    return list(cache[key])


def _skip_buffers(engines, folds, paced) -> list[SkipBuffer]:
    graph = _Graph(engines, folds)
    result = {}
    for j in graph.engines:
        if len(j.inputs) < 2:
            continue
        own = graph.own(j)
        for o, short in enumerate(j.inputs):
            src = graph.producer.get(short)
            src_lanes = src.out_lanes(folds[src.name]) if src else j.in_lanes(folds[j.name])
            dst_lanes = j.in_lanes(folds[j.name])
            skids = EDGE_SKID_WORDS * (src_lanes + dst_lanes) + _converter_words(src_lanes,
                                                                                  dst_lanes)
            for i, long in enumerate(j.inputs):
                if i == o:
                    continue
                for fork in graph.forks(long, short):
                    need = graph.from_fork(fork)
                    a, b = need(long), need(short)
                    if a is None or b is None or own is None:
                        held = graph.sizes.get(short, 0)
                    else:
                        held = max(_backlog(a, own[i], b, own[o]),
                                   _paced_backlog(graph, j, own, short, o) if paced else 0)
                    elements = max(0, held - skids)
                    key = (short, j.name)
                    if elements > (result[key].elements if key in result else 0):
                        result[key] = SkipBuffer(short, j.name, fork, elements)
    return list(result.values())
