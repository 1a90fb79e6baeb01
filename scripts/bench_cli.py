#!/usr/bin/env python3
"""Wall time of the commands a user types most, against ``python -c pass`` measured in the same run.

Method: each command runs as its own process, exactly as a user runs it (the ``whowaits`` console script
beside this interpreter, else ``python -m profiler.fastcli``), output discarded. Every command is run once
as a warm-up (this fills the parse, summary and result caches), then ``--runs`` times (default 5); the
median, min and max wall times (``time.perf_counter`` around ``subprocess.run``) are printed. Baselines in
the same run: ``python -c pass`` (interpreter start-up) and ``whowaits --help`` (the CLI's own import).
``computed`` rows run the same commands with ``WHOWAITS_NO_RESULT_CACHE=1``: reports parsed from the parse
cache and every analysis run again (pandas imported), for reference. The 1-, 5- and 15-minute load averages
are printed before and after (the 2-core machine is shared: read the figures beside them). Last, one
``python -X importtime`` run of each replayed command lists the biggest imports (cumulative µs).

Target (issue 16): cached ``show REPORT --format json``, ``diff A B --format json`` and ``migration --format
json`` on the committed set, each <= 0.4 s wall (median of 5 after one warm-up). ``--check`` exits 1 when
one is over.

Usage: python scripts/bench_cli.py [--runs N] [--check] [--format table|json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT = "reports/h200/v07_tuned/b1_h64_s1024_d128_fp16.ncu-rep"
TARGET_S = 0.4
COMMANDS = {
    "show --format json": ["show", REPORT, "--format", "json"],
    "diff v06 v07 --format json": ["diff", "v06", "v07", "--format", "json"],
    "migration --format json": ["migration", "--format", "json"],
}


def _whowaits() -> list[str]:
    exe = Path(sys.executable).parent / "whowaits"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "profiler.fastcli"]


def _time(argv: list[str], env: dict) -> float:
    t = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"bench_cli: {' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode()[-300:]}")
    return wall


def _series(argv: list[str], env: dict, runs: int) -> dict:
    _time(argv, env)  # warm-up
    walls = [_time(argv, env) for _ in range(runs)]
    return {"median_s": statistics.median(walls), "min_s": min(walls), "max_s": max(walls), "runs": runs}


def _imports(argv: list[str], env: dict, top: int = 6) -> dict:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "profiler.fastcli", *argv], cwd=ROOT, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    rows = []
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cum, name = line.split("|")
            cum, name = cum.strip(), name[1:]  # leading spaces beyond the first: nesting depth
            if cum.isdigit():
                rows.append((int(cum), name))
    tops = sorted((r for r in rows if not r[1].startswith(" ")), reverse=True)
    heavy = sorted({n.strip().split(".")[0] for _, n in rows} & {"pandas", "pyarrow", "plotly", "ncu_report", "rich",
                                                                  "numpy", "typer", "pydantic"})
    return {"total_us": sum(c for c, n in rows if not n.startswith(" ")),
            "top": [{"module": n, "cumulative_us": c} for c, n in tops[:top]], "heavy_imported": heavy}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--check", action="store_true", help="exit 1 when a replayed command's median is over 0.4 s")
    ap.add_argument("--format", choices=("table", "json"), default="table")
    args = ap.parse_args()

    env = dict(os.environ)
    computed_env = dict(env, WHOWAITS_NO_RESULT_CACHE="1")
    wh = _whowaits()
    load_before = os.getloadavg()
    rows = {"python -c pass": _series([sys.executable, "-c", "pass"], env, args.runs),
            "whowaits --help": _series([*wh, "--help"], env, args.runs)}
    for name, argv in COMMANDS.items():
        rows[name] = _series([*wh, *argv], env, args.runs)
    for name, argv in COMMANDS.items():
        rows[f"computed: {name}"] = _series([*wh, *argv], computed_env, max(1, args.runs // 2))
    load_after = os.getloadavg()
    imports = {name: _imports(argv, env) for name, argv in COMMANDS.items()}
    over = [n for n in COMMANDS if rows[n]["median_s"] > TARGET_S]
    result = {"load_avg_before": load_before, "load_avg_after": load_after, "cpus": os.cpu_count(),
              "target_s": TARGET_S, "rows": rows, "imports": imports, "over_target": over}
    if args.format == "json":
        print(json.dumps(result, indent=2))
    else:
        print(f"load average before {'/'.join(f'{x:.2f}' for x in load_before)}, after "
              f"{'/'.join(f'{x:.2f}' for x in load_after)} ({os.cpu_count()} CPUs)")
        print(f"{'command':44} {'median':>8} {'min':>8} {'max':>8}  runs")
        for name, r in rows.items():
            mark = "" if name not in COMMANDS else ("  ok" if r["median_s"] <= TARGET_S else "  OVER 0.4 s")
            print(f"{name:44} {r['median_s']:8.3f} {r['min_s']:8.3f} {r['max_s']:8.3f}  {r['runs']}{mark}")
        for name, imp in imports.items():
            tops = ", ".join(f"{t['module']} {t['cumulative_us'] / 1e3:.0f} ms" for t in imp["top"])
            print(f"imports of {name}: {imp['total_us'] / 1e3:.0f} ms ({tops}); heavy: {imp['heavy_imported'] or 'none'}")
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
