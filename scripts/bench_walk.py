#!/usr/bin/env python3
"""Benchmark of the who-waits-on-whom walk alone: ``producer_pcs`` + ``waits_on`` per report.

Method: in one process, each report is loaded once (parse cache), then
``profiler.analyze.producers.waits_on(launch)`` (the walk for every PC with scoreboard samples, the
per-PC frame, the aggregation) runs once to warm the per-process caches (parsed SASS lines), then
``--runs`` times; the median and min CPU time (``time.process_time``: less sensitive than wall time
to other jobs on the machine's cores) are printed. To compare two commits, run this same script
under each checkout, alternating, in the same session:

    PYTHONPATH=/path/to/other/checkout python scripts/bench_walk.py      # the other commit's profiler
    python scripts/bench_walk.py                                          # this checkout's

Usage: python scripts/bench_walk.py [--runs N] [REPORT ...]  (default: every committed H200 report at
b1_h64_s1024_d128_fp16)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="*", type=Path,
                    default=sorted((ROOT / "reports" / "h200").glob("*/b1_h64_s1024_d128_fp16.ncu-rep")))
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args(argv)

    import profiler
    from profiler.analyze.producers import waits_on
    from profiler.report import load_report

    print(f"profiler from {Path(profiler.__file__).parent}; {args.runs} runs; load average "
          f"{os.getloadavg()[0]:.2f}")
    for path in args.reports:
        launch = load_report(path).launches[0]
        waits_on(launch)
        cpu = []
        for _ in range(args.runs):
            c = time.process_time()
            waits_on(launch)
            cpu.append(time.process_time() - c)
        print(f"{path.parent.name:28s} waits_on cpu median {1e3 * statistics.median(cpu):6.1f} ms "
              f"(min {1e3 * min(cpu):5.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
