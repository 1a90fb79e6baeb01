#!/usr/bin/env python3
"""The floor of a cold ``whowaits show`` through PyPI's ncu_report: open the report, load the launch
and disassemble every instruction slot with ``IAction.sass_by_pc`` -- the reader's own work that any
cold ingest must do before a single analysis runs (no whowaits code is timed).

Method: one process; one untimed pass first (ncu_report's one-time start-up: unit tables and the
disassembler, ~0.3 s); then ``--runs`` timed passes of load_report + action_by_idx(0) + sass_by_pc on
every PC that ``inst_executed`` names; median (and min) wall and CPU.

Measured 2026-12-01 20:17 UTC on the 2-core machine (load average 1.3, nothing else running),
``python scripts/ingest_floor.py`` (the defaults below):
  ext-sdpa-flash-fullset: 3,367 slots, median wall 540 ms (min 506), CPU 456 ms
  ext-sdpa-cudnn-fullset: 1,258 slots, median wall 194 ms (min 161), CPU 154 ms
  v14_cross_tile_qk:      3,435 slots, median wall 459 ms (min 421), CPU 379 ms
So the cold target once set (ingest + all analyses <= 300 ms per report) sits below what ncu_report
alone costs for a kernel of ~2,000 or more slots; NVIDIA's nvdisasm (PyPI) is no way round it (0.32 s
per call even for cuDNN's 47 KB module, 1.26 s for the flash library's). What whowaits can skip is a
disassembly already done: profiler/sasscache.py (the "known build" column of scripts/bench_show.py).

Usage: python scripts/ingest_floor.py [--runs N] [REPORT ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = [ROOT / f"reports/h200/{v}/b1_h64_s1024_d128_fp16.ncu-rep"
           for v in ("ext-sdpa-flash-fullset", "ext-sdpa-cudnn-fullset", "v14_cross_tile_qk")]


def one_pass(ncu_report, path: Path) -> tuple[float, float, int]:
    t, c = time.perf_counter(), time.process_time()
    action = ncu_report.load_report(str(path)).range_by_idx(0).action_by_idx(0)
    pcs = action.metric_by_name("inst_executed").correlation_ids()
    slots = [pcs.as_uint64(i) for i in range(pcs.num_instances())]
    for pc in slots:
        action.sass_by_pc(pc)
    return time.perf_counter() - t, time.process_time() - c, len(slots)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="*", type=Path, default=DEFAULT)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--json", action="store_true", help="one JSON line per report: wall and CPU seconds of each run")
    args = ap.parse_args(argv)
    import ncu_report

    for path in args.reports:
        one_pass(ncu_report, path)  # start-up of the reader and its disassembler, not timed
        runs = [one_pass(ncu_report, path) for _ in range(args.runs)]
        wall, cpu = [r[0] for r in runs], [r[1] for r in runs]
        if args.json:
            import json

            print(json.dumps({"report": str(path), "slots": runs[0][2], "wall": wall, "cpu": cpu}))
            continue
        print(f"{path.parent.name}: {runs[0][2]:,} slots, median wall {statistics.median(wall) * 1e3:.0f} ms "
              f"(min {min(wall) * 1e3:.0f}), CPU {statistics.median(cpu) * 1e3:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
