"""A digest of the RTL qloom writes for the shared models, at default folding and with
``--fold auto`` for the ULX3S-85F: a refactor that should not change behaviour must leave
every digest equal. ``--record`` writes them to ``bench/results/rtl_digest.json``; without
it the script compares with that file and exits with status 1 when a design's Verilog
differs (naming the design and its files that changed).

Usage: python bench/rtl_digest.py [--record] [--only TEXT ...] [--results FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results" / "rtl_digest.json"
BOARD = "ulx3s-85f"
FOLDINGS = {"default": {}, "auto": {"board": BOARD, "fold": "auto"}}


def digests(out: Path) -> dict[str, str]:
    """sha256 of every file under ``out/rtl`` (the Verilog and any memory images), by its
    path there."""
    return {str(p.relative_to(out / "rtl")): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((out / "rtl").rglob("*")) if p.is_file()}


def designs(only: list[str] | None):
    from qloom.models import bundled
    for name, path in sorted(bundled().items()):
        for folding, options in FOLDINGS.items():
            design = f"{name} {folding}"
            if not only or any(text in design for text in only):
                yield design, path, options


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--record", action="store_true", help="write the digests measured")
    ap.add_argument("--only", nargs="+", metavar="TEXT",
                    help="designs whose name contains any of these texts")
    ap.add_argument("--results", type=Path, default=RESULTS)
    args = ap.parse_args(argv)

    import qloom
    recorded = json.loads(args.results.read_text()) if args.results.exists() else {}
    measured, changed = dict(recorded), []
    with tempfile.TemporaryDirectory(prefix="qloom-digest-") as tmp:
        for design, path, options in designs(args.only):
            out = Path(tmp) / design.replace(" ", "-")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                qloom.compile(path, out, progress=False, **options)
            now = digests(out)
            was = recorded.get(design)
            if was is None:
                status = "new"
            elif was == now:
                status = "same"
            else:
                status = "CHANGED: " + ", ".join(sorted(
                    f for f in set(was) | set(now) if was.get(f) != now.get(f)))
                changed.append(design)
            print(f"{design:34s} {len(now):3d} files  {status}", flush=True)
            measured[design] = now
    if args.record:
        args.results.write_text(json.dumps(measured, indent=1, sort_keys=True) + "\n")
        print(f"recorded in {args.results}")
        return 0
    if changed:
        print(f"{len(changed)} design(s) with different Verilog: {', '.join(changed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
