"""``qloom sweep SPEC -o RESULTS``: every design point of a SPEC (models x boards x foldings
x clocks) compiled, simulated and built as Ray tasks; one table, plots and a page.

By default the sweep starts a Ray of its own on this machine (``address="local"``, no
dashboard, gone when the sweep ends); ``--address`` joins an existing cluster, whose nodes
must see RESULTS at the same path. Points whose key (model bytes, options, qloom version)
already has a record are skipped without starting Ray at all. Each point's record is
written by its task the moment it is finished, and the tables after each one, so that a
killed sweep or node loses no finished point; a failed or killed point is retried once
(Ray's ``max_retries``/``retry_exceptions``), then recorded as failed with its log.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

from qloom.errors import QloomError
from qloom.flows.sweep.results import Results, Status
from qloom.flows.sweep.spec import read_spec
from qloom.flows.sweep.task import PointCrashed, execute_point, read_attempts

__all__ = ["sweep", "add_parser", "run"]


def _plan(spec, results: Results, *, force: bool, retry_failed: bool):
    """(records of points kept from earlier runs, points to run)."""
    kept, todo = {}, []
    for p in spec.points:
        record = None if force else results.record(p)
        if record is not None and (record["status"] == Status.OK or
                                   (record["status"] == Status.FAILED and not retry_failed)):
            kept[p.id] = record
        else:
            todo.append(p)
    return kept, todo


def _start_ray(address: str | None, jobs: int | None):
    """Ray, connected; None when the caller (Python code) had connected it already, which
    the sweep then uses as it is and leaves connected."""
    import ray
    if ray.is_initialized():
        return None
    quiet = {"logging_level": logging.WARNING, "log_to_driver": False}
    if address:
        try:
            ray.init(address=address, **quiet)
        except (ConnectionError, ValueError, RuntimeError) as e:
            raise QloomError(f"cannot connect to the Ray cluster at {address!r}: {e}") from None
    else:
        # Ray warns on every start that its (default) token authentication is on; for a
        # Ray that lives only as long as this sweep, that is noise.
        logging.getLogger("ray._private.authentication.authentication_token_setup") \
            .setLevel(logging.ERROR)
        ray.init(address="local", num_cpus=jobs, include_dashboard=False, **quiet)
    return ray


def _check_fits(ray, spec):
    """A task no node can hold would wait for ever: refuse it with the numbers."""
    have = ray.cluster_resources()
    need = {"CPU": spec.cpus, "memory": spec.memory_gb * 2**30}
    for name, amount in need.items():
        if have.get(name, 0) < amount:
            shown = (f"{amount / 2**30:g} GiB", f"{have.get(name, 0) / 2**30:.1f} GiB") \
                if name == "memory" else (f"{amount:g}", f"{have.get(name, 0):g}")
            raise QloomError(f"each point asks for {name} {shown[0]} (SPEC key "
                             f"{'memory_gb' if name == 'memory' else 'cpus'}) but the Ray "
                             f"cluster has {shown[1]} in all")


def _failure_text(error) -> str:
    """One message for a task that failed for good: the point's own error, or what Ray
    says happened to the worker or node (its first line)."""
    import ray
    cause = getattr(error, "cause", None) if isinstance(error, ray.exceptions.RayTaskError) \
        else None
    if isinstance(cause, (PointCrashed, QloomError)):
        return str(cause)
    text = str(cause if cause is not None else error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"


class _Progress:
    """One line that rewrites itself on a terminal; elsewhere a line per finished point."""

    def __init__(self, total: int, stream=sys.stderr):
        self.total, self.stream = total, stream
        self.tty = stream.isatty()
        self.start = time.monotonic()

    def update(self, finished: int, failed: int, running: int, waiting: int):
        if not self.tty:
            return
        t = int(time.monotonic() - self.start)
        self.stream.write(f"\r[sweep] {finished}/{self.total} finished ({failed} failed), "
                          f"{running} running, {waiting} waiting, {t // 60}:{t % 60:02d} ")
        self.stream.flush()

    def finished(self, text: str):
        if self.tty:
            self.stream.write("\r\033[K")
        print(f"[sweep] {text}", file=self.stream, flush=True)


def _point_line(record: dict, finished: int, total: int) -> str:
    node = (record.get("attempts") or [{}])[-1]
    where = f"host {node.get('host')}, node {str(node.get('node_id'))[:8]}, pid {node.get('pid')}"
    tries = len(record.get("attempts") or [])
    text = f"{finished}/{total} {record['status']}: {record['id']} ({where}"
    text += f", attempt {tries})" if tries > 1 else ")"
    if record.get("error"):
        text += f": {record['error'].splitlines()[0]}"
    return text


def _run_points(ray, spec, results: Results, todo, records: dict, run: str, progress):
    remote = ray.remote(execute_point)
    refs = {}
    for p in todo:
        task = remote.options(name=f"qloom-sweep:{p.id}", num_cpus=spec.cpus,
                              memory=int(spec.memory_gb * 2**30), max_retries=1,
                              retry_exceptions=[PointCrashed])
        refs[task.remote(p.request(), str(results.path), run)] = p
    pending, finished, failed = list(refs), 0, 0
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1, timeout=1.0)
            for ref in done:
                point = refs[ref]
                try:
                    record = ray.get(ref)
                except ray.exceptions.RayError as e:
                    record = results.record_failure(point, run, _failure_text(e))
                records[point.id] = record
                finished += 1
                failed += record["status"] != Status.OK
                _write_all(results, spec, records)
                progress.finished(_point_line(record, finished, len(todo)))
            running = sum(1 for ref in pending
                          if read_attempts(results.folder(refs[ref]), run))
            progress.update(finished, failed, running, len(pending) - running)
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise


def _write_all(results: Results, spec, records: dict) -> list[dict]:
    """The tables, and the plots and page when the table changed (or they are missing):
    a re-run with nothing to do need not load matplotlib."""
    from qloom.flows.sweep.plots import PLOTS
    before = results.read_rows()
    rows = results.write_tables(spec.points, records)
    pictures = [results.path / "report.html", *(results.path / "plots" / p for p in PLOTS)]
    if rows != before or not all(p.is_file() for p in pictures):
        from qloom.flows.sweep.plots import write_plots
        write_plots(results.path, rows, str(spec.path))
    return rows


def sweep(spec_path, out, *, address: str | None = None, jobs: int | None = None,
          build: bool | None = None, force: bool = False, retry_failed: bool = False,
          dry_run: bool = False, progress=None) -> list[dict]:
    """Run the points of ``spec_path`` that have no record for their key; returns the
    table's rows (one per point of the SPEC). See the module's docstring."""
    spec = read_spec(spec_path, build=build)
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise QloomError(f"--jobs must be a positive integer, not {jobs!r}")
    results = Results.open(out, spec)
    say = progress or (lambda text: print(f"[sweep] {text}", file=sys.stderr, flush=True))
    try:
        records, todo = _plan(spec, results, force=force, retry_failed=retry_failed)
        say(f"{len(spec.points)} points: {len(records)} with results for their inputs "
            f"(skipped), {len(todo)} to run")
        if dry_run:
            for p in spec.points:
                say(f"  {'run ' if p in todo else 'skip'} {p.id}")
            return []
        rows = _write_all(results, spec, records)
        if todo:
            import ray
            owned = _start_ray(address, jobs or len(os.sched_getaffinity(0))) is not None
            try:
                _check_fits(ray, spec)
                nodes = [n for n in ray.nodes() if n.get("Alive")]
                say(f"Ray: {len(nodes)} node(s), {ray.cluster_resources().get('CPU', 0):g} "
                    f"CPUs; each point takes {spec.cpus:g} CPU and {spec.memory_gb:g} GiB")
                _run_points(ray, spec, results, todo, records,
                            run=f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}",
                            progress=_Progress(len(todo)))
            finally:
                if owned:
                    ray.shutdown()
            rows = _write_all(results, spec, records)
        return rows
    finally:
        results.close()


def _print_table(rows: list[dict]):
    head = (f"{'model':16} {'board':11} {'folding':14} {'status':7} {'LUT':>7} {'DSP':>4} "
            f"{'Fmax':>7} {'II':>7} {'frames/s':>11} {'build s':>8}")
    print(head)
    for r in rows:
        def num(v, fmt):
            return format(v, fmt) if v is not None else "-"
        lut = r["lut"] if r["lut"] is not None else r["est_lut"]
        dsp = r["dsp"] if r["dsp"] is not None else r["est_dsp"]
        print(f"{r['model'][:16]:16} {r['board'][:11]:11} {r['folding'][:14]:14} "
              f"{r['status']:7} {num(lut, ','):>7} {num(dsp, 'd'):>4} "
              f"{num(r['fmax_mhz'], '.1f'):>7} {num(r['ii_cycles'], 'g'):>7} "
              f"{num(r['fps'], ',.0f'):>11} {num(r['build_s'], '.0f'):>8}")


def add_parser(subparsers):
    p = subparsers.add_parser(
        "sweep", help="compile, simulate and build many design points on Ray",
        description="Run every point of SPEC (a TOML file: models x boards x foldings x "
                    "clocks) through compile, simulate and build as Ray tasks, and write "
                    "RESULTS/results.csv, results.json, plots/*.png, report.html and each "
                    "point's design in RESULTS/points/<id>/. Points whose inputs are "
                    "unchanged since an earlier run are skipped. Exits with 1 when a point "
                    "failed.")
    p.add_argument("spec", type=Path, metavar="SPEC", help="sweep spec (TOML)")
    p.add_argument("-o", "--out", required=True, metavar="RESULTS",
                   help="results folder (new, empty, or an earlier sweep's)")
    p.add_argument("--address", metavar="HOST:PORT",
                   help="run on this Ray cluster (or 'auto': the one `ray start` made here); "
                        "default: a Ray of the sweep's own on this machine")
    p.add_argument("--jobs", type=int, metavar="N",
                   help="CPUs of the sweep's own Ray (default: this machine's); each point "
                        "takes the SPEC's cpus (default 1)")
    p.add_argument("--no-build", action="store_true",
                   help="compile and simulate only (overrides the SPEC's build)")
    p.add_argument("--force", action="store_true", help="run every point again")
    p.add_argument("--retry-failed", action="store_true",
                   help="run points again that failed with their current inputs")
    p.add_argument("--dry-run", action="store_true",
                   help="list the points and which would run; start nothing")
    p.set_defaults(func=run)


def run(args) -> int:
    # SIGTERM and SIGHUP unwind like Ctrl-C while the sweep reads and plans. Once Ray runs,
    # its own SIGTERM handler ends the driver at once (with a stack dump in the log); the
    # sweep's Ray and workers end with it, and each point's tools with its worker
    # (measured: no process of the sweep left 15 s after `kill -TERM`).
    from qloom.flows.toolchain.build import _signals_unwind
    with _signals_unwind():
        return _run(args)


def _run(args) -> int:
    rows = sweep(args.spec, args.out, address=args.address, jobs=args.jobs,
                 build=False if args.no_build else None, force=args.force,
                 retry_failed=args.retry_failed, dry_run=args.dry_run)
    if args.dry_run:
        return 0
    _print_table(rows)
    print(f"wrote {Path(args.out) / 'results.csv'}, results.json, plots/ and report.html")
    return 1 if any(r["status"] == Status.FAILED for r in rows) else 0
