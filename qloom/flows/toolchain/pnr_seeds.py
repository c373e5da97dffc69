"""Place and route over several placement seeds (``qloom build --seeds K``), keeping the
fastest.

nextpnr's result moves with its placement seed: one netlist of the jet tagger at II 1 on
the ECP5-85F routed at 86.3 MHz with the default seed and at 116.37 with seed 2, another
at 82.3 to 91.9 over four seeds. A design that misses its clock may so meet it with
another seed, as vendor flows' seed sweeps find. Yosys runs once; nextpnr runs once per
seed, as many at a time as the machine has cores (each run takes one), and no new seed
starts once one has met the clock (the others running are stopped).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from qloom.errors import ToolError
from qloom.flows.toolchain import synth

__all__ = ["seed_list", "place_and_route", "clock_fmax", "placement_tries",
           "PLACEMENT_FAILURES"]

# Highest placement seed nextpnr takes.
SEED_LIMIT = (1 << 31) - 1

# What nextpnr prints when its placer cannot legalize a placement of a design that fits by
# cell count: another seed or the other placer may find one. ("no BELs remaining" is a
# design over the device's count: nothing to retry.)
PLACEMENT_FAILURES = ("Unable to find legal placement", "failed to place chain",
                      "Placing design failed")
# The fallback seed of a run is this far from its own, away from the seeds of a sweep.
FALLBACK_SEED_OFFSET = 1 << 16


def seed_list(seed: int | None, seeds: int | None) -> list:
    """The seeds to try: ``seeds`` of them from ``seed`` (default 1), or ``[seed]`` alone
    (None: nextpnr's default) without ``seeds``."""
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)
                             or not 0 <= seed <= SEED_LIMIT):
        raise ValueError(f"The placement seed must be an integer from 0 to 2**31 - 1, "
                         f"not {seed!r}")
    if seeds is None:
        return [seed]
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise ValueError(f"The number of placement seeds must be a positive integer, "
                         f"not {seeds!r}")
    first = 1 if seed is None else seed
    if first + seeds - 1 > SEED_LIMIT:
        raise ValueError(f"{seeds} seeds from {first} go past nextpnr's highest, 2**31 - 1")
    return list(range(first, first + seeds))


def placement_tries(seed: int | None) -> list:
    """The (placer, seed) tries of one run, in order, until one places the design:
    nextpnr's default (HeAP) with ``seed``, HeAP with a seed far from it, then simulated
    annealing (SA) with ``seed``. Most runs end at the first."""
    other = ((seed or 1) + FALLBACK_SEED_OFFSET - 1) % SEED_LIMIT + 1
    return [(None, seed), ("heap", other), ("sa", seed)]


def _describe(placer: str | None, seed: int | None) -> str:
    return f"{placer or 'heap'} placer, seed {'default' if seed is None else seed}"


def clock_fmax(pnr: dict) -> float | None:
    """The accelerator clock's Fmax in a nextpnr report (``synth.read_nextpnr_report``):
    the slowest of the clocks named for the sync domain, else of all clocks."""
    sync = [v for k, v in pnr["fmax_by_clock"].items() if "sync" in k or "clk" in k]
    return min(v["achieved"] for v in sync) if sync else pnr["fmax_mhz"]


def _place_with_fallbacks(family: str, seed, netlist: Path, cwd: Path, report: Path,
                          log: Path, output: Path, stop, options: dict) -> dict:
    """nextpnr on the prepared ``netlist`` with ``seed`` into these files, with the
    fallbacks of ``placement_tries`` when it cannot legalize a placement: the run's row
    (``{"seed", "placer", "fmax_mhz"}``); a ToolError naming every try when none places."""
    failed = []
    for placer, try_seed in placement_tries(seed):
        how = _describe(placer, try_seed)
        try:
            synth.run_nextpnr(
                family, netlist=netlist, cwd=cwd, report=report, log=log, output=output,
                seed=try_seed, placer=placer, prepared=True, stop=stop,
                step=(f"nextpnr-{family} ({how})" if failed or stop is not None else None),
                **options)
        except ToolError as e:
            if not any(text in str(e) for text in PLACEMENT_FAILURES):
                raise
            failed.append(how)
            print(f"[qloom] nextpnr could not legalize a placement ({how})", flush=True)
            continue
        return {"seed": try_seed, "placer": placer or "heap",
                "fmax_mhz": clock_fmax(synth.read_nextpnr_report(report))}
    raise ToolError(
        f"nextpnr-{family} could not place the design on {options['device']}: tried "
        f"{'; '.join(failed)}; every placer stopped at legalization (logic tiles whose "
        f"cells cannot share their clock, enable, reset or carry chain). Recompile with "
        f"a smaller folding (qloom compile ... --fold auto, or a lower --target-fps); "
        f"last log: {log}")


def place_and_route(family: str, seeds: list, target_mhz: float, *, netlist: Path, cwd: Path,
                    report: Path, log: Path, output: Path, engines: list[str] | None,
                    jobs: int | None = None, **options) -> tuple[dict, list]:
    """nextpnr on Yosys' ``netlist`` with each of ``seeds`` (``seed_list``) until one
    meets ``target_mhz``; the fastest run's ``report``, ``log`` and routed ``output`` are
    left under those names. A run whose placement nextpnr cannot legalize is tried again
    (``placement_tries``). Returns the kept run and, per seed run to its end in the order
    they ended, ``{"seed", "placer", "fmax_mhz"}`` (the seed and placer that placed it:
    another than asked for after a fallback). ``options``:
    ``synth.run_nextpnr``'s others; ``jobs``: runs at a time (default: the machine's
    cores)."""
    prepared = synth.prepare_netlist(family, netlist, options["device"], engines)

    def run(seed, rep, lg, out, stop=None):
        """nextpnr with ``seed`` into these files (``stop``: of a sweep): the run's row."""
        return _place_with_fallbacks(family, seed, prepared, cwd, rep, lg, out, stop, options)

    if len(seeds) == 1:
        kept = run(seeds[0], report, log, output)
        return kept, [kept]
    jobs = max(1, min(len(seeds), jobs or os.cpu_count() or 1))
    print(f"[qloom] placing and routing with seeds {seeds[0]} to {seeds[-1]}, {jobs} at a "
          f"time, until one meets {target_mhz:g} MHz", flush=True)
    stop = threading.Event()

    def files(seed):
        """This seed's report, log and routed output."""
        return [p.with_name(p.name.replace(".", f".seed{seed}.", 1))
                for p in (report, log, output)]

    results, pending, running, asked = [], list(seeds), {}, {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        try:
            while pending or running:
                while pending and len(running) < jobs and not stop.is_set():
                    seed = pending.pop(0)
                    running[pool.submit(run, seed, *files(seed), stop)] = seed
                if not running:
                    break
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    seed = running.pop(future)
                    try:
                        row = future.result()
                    except synth.Stopped:
                        print(f"[qloom] seed {seed}: stopped", flush=True)
                        continue
                    results.append(row)
                    asked[id(row)] = seed
                    fmax = row["fmax_mhz"]
                    print(f"[qloom] seed {seed}: Fmax {fmax} MHz", flush=True)
                    if fmax is not None and fmax >= target_mhz:
                        stop.set()
        except BaseException:
            stop.set()          # the running tools end within synth.STOP_POLL_SECONDS
            raise
    best = max(results, key=lambda r: -1.0 if r["fmax_mhz"] is None else r["fmax_mhz"])
    for seed in seeds:
        rep, lg, out = files(seed)
        if seed == asked[id(best)]:
            rep.replace(report)
            lg.replace(log)
            lg.with_suffix(".stdout").replace(log.with_suffix(".stdout"))
            out.replace(output)
        else:
            out.unlink(missing_ok=True)      # the routed design: tens of MB on the 85F
    print(f"[qloom] kept seed {best['seed']} (Fmax {best['fmax_mhz']} MHz)", flush=True)
    return best, results
