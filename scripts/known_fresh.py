#!/usr/bin/env python3
"""A known build's ``whowaits show`` path in a fresh process: ingest + all analyses of a report whose
build the cache folder knows (its SASS text, and the analyses' per-build parts where they are cached)
but whose frames it does not hold, timed from after the imports, as a first command in a new
``whowaits`` process pays it (no in-process memo, no disassembly worker started yet).

Method: ``--runs`` times, each in a new process (``sys.executable`` running this file with ``--one``):
copy the cache folder's entries but the frames into a fresh temporary folder, import whowaits, then
time ``load_report`` + ``summarize_launch`` of every launch (wall and CPU). Interpreter start-up and
imports are not timed (the floor script excludes them too). Prints one JSON line per report with
``--json``: {"report", "wall": [...], "cpu": [...]}.

Usage: python scripts/known_fresh.py --cache DIR [--runs N] [--json] [--repo CHECKOUT] REPORT [REPORT ...]
(the cache folder must hold the build's entries: e.g. the one a cold ``whowaits show`` of the same
report or of another report of the same build filled).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one(path: Path, cache: Path, repo: Path = ROOT) -> tuple[float, float]:
    """The timed part of one fresh process (``--one``), with the whowaits of ``repo``."""
    sys.path.insert(0, str(repo))
    from profiler.analyze import summarize_launch  # noqa: PLC0415
    from profiler.report import load_report  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="whowaits-known-") as tmp:
        for entry in cache.iterdir():
            if entry.is_file() and not entry.name.endswith(".frames"):
                shutil.copy2(entry, tmp)
        os.environ["WHOWAITS_CACHE_DIR"] = tmp
        t, c = time.perf_counter(), time.process_time()
        for launch in load_report(path).launches:
            summarize_launch(launch)
        return time.perf_counter() - t, time.process_time() - c


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="+", type=Path)
    ap.add_argument("--cache", type=Path, required=True, help="a cache folder that knows the builds")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--repo", type=Path, default=ROOT, help="the checkout whose whowaits runs (default: this one)")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.reports[0], args.cache, args.repo)))
        return 0
    for path in args.reports:
        runs = []
        for _ in range(args.runs):
            out = subprocess.run([sys.executable, __file__, "--one", "--cache", str(args.cache), "--repo", str(args.repo),
                                  str(path)],
                                 capture_output=True, text=True, check=True).stdout
            runs.append(json.loads(out.splitlines()[-1]))
        wall, cpu = [r[0] for r in runs], [r[1] for r in runs]
        if args.json:
            print(json.dumps({"report": str(path), "wall": wall, "cpu": cpu}))
        else:
            print(f"{path.parent.name}/{path.name}: median wall {statistics.median(wall) * 1e3:.0f} ms "
                  f"(min {min(wall) * 1e3:.0f}), CPU {statistics.median(cpu) * 1e3:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
