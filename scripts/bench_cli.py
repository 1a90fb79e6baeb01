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

Target: cached ``show REPORT --format json``, ``diff A B --format json`` and ``migration --format
json`` on the committed set, each <= 0.4 s wall (median of 5 after one warm-up). ``--check`` exits 1 when
one is over.

``--against DIR`` (another checkout, e.g. the main branch's) times every row for that tree's ``profiler``
too (``PYTHONPATH=DIR``, same interpreter, same reports), alternating run by run with this tree's so both
columns see the same load: the way to read an import-time change on a shared, loaded machine.

Usage: python scripts/bench_cli.py [--runs N] [--check] [--format table|json] [--against DIR]

Measured 2026-12-01 on the 2 cores shared by six sessions, ``--runs 5 --against /work/main`` (main at 51def00);
median wall s, this tree / main, the same run (the computed rows 2 runs each):

    run (load before -> after)            08:45 (6.8 -> 5.8)    08:55 (7.6 -> 6.7; + lean typer coercion)
    whowaits --help                       0.331 / 1.129         0.646 / 1.787
    replayed show / diff / migration      0.05-0.10 (both)      0.07-0.11 (both)
    computed: show --format json          1.25 / 1.24           1.18 / 1.49
    computed: diff v06 v07 --format json  1.02 / 1.27           1.18 / 1.40
    computed: migration --format json     1.57 / 1.82           1.57 / 2.07

--help: main imported profiler.report (hence pandas, numpy) in the crash supervisor before forking; now an
import hook hands it the pipe when something imports it. Computed rows: typer (>= 0.2x) no longer builds a
pydantic TypeAdapter per parameter (profiler/cli/_app.py). What they still import (-X importtime, 08:55):
~0.7 s, nearly all pandas + numpy + pyarrow under profiler.analyze / profiler.compare (the analyses and the
Diff/Migration frames are pandas), then the CLI's command modules with typer (~0.08 s).
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


def _series(argv: list[str], env: dict, runs: int, other_env: dict | None = None) -> dict:
    """Median/min/max of ``runs`` timings after a warm-up; with ``other_env``, the same for it, alternating."""
    envs = [env] + ([other_env] if other_env is not None else [])
    for e in envs:
        _time(argv, e)  # warm-up
    walls: list[list[float]] = [[] for _ in envs]
    for _ in range(runs):
        for i, e in enumerate(envs):
            walls[i].append(_time(argv, e))
    stats = [{"median_s": statistics.median(w), "min_s": min(w), "max_s": max(w), "runs": runs} for w in walls]
    if other_env is not None:
        stats[0]["against"] = stats[1]
    return stats[0]


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
    ap.add_argument("--against", type=Path, default=None,
                    help="another checkout: time its profiler too (PYTHONPATH), alternating with this tree's")
    args = ap.parse_args()

    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    computed_env = dict(env, WHOWAITS_NO_RESULT_CACHE="1")
    other = (lambda e: dict(e, PYTHONPATH=str(args.against.resolve()))) if args.against else (lambda e: None)
    wh = _whowaits()
    load_before = os.getloadavg()
    rows = {"python -c pass": _series([sys.executable, "-c", "pass"], env, args.runs),
            "whowaits --help": _series([*wh, "--help"], env, args.runs, other(env))}
    for name, argv in COMMANDS.items():
        rows[name] = _series([*wh, *argv], env, args.runs, other(env))
    for name, argv in COMMANDS.items():
        rows[f"computed: {name}"] = _series([*wh, *argv], computed_env, max(1, args.runs // 2), other(computed_env))
    load_after = os.getloadavg()
    imports = {name: _imports(argv, env) for name, argv in COMMANDS.items()}
    imports |= {f"computed: {name}": _imports(argv, computed_env) for name, argv in COMMANDS.items()}
    imports["--help"] = _imports(["--help"], env)
    over = [n for n in COMMANDS if rows[n]["median_s"] > TARGET_S]
    result = {"load_avg_before": load_before, "load_avg_after": load_after, "cpus": os.cpu_count(),
              "target_s": TARGET_S, "rows": rows, "imports": imports, "over_target": over}
    if args.format == "json":
        print(json.dumps(result, indent=2))
    else:
        print(f"load average before {'/'.join(f'{x:.2f}' for x in load_before)}, after "
              f"{'/'.join(f'{x:.2f}' for x in load_after)} ({os.cpu_count()} CPUs)")
        vs = f"  {'against: median':>16} {'min':>8}" if args.against else ""
        print(f"{'command':44} {'median':>8} {'min':>8} {'max':>8}  runs{vs}")
        for name, r in rows.items():
            mark = "" if name not in COMMANDS else ("  ok" if r["median_s"] <= TARGET_S else "  OVER 0.4 s")
            o = r.get("against")
            col = f"  {o['median_s']:16.3f} {o['min_s']:8.3f}" if o else ""
            print(f"{name:44} {r['median_s']:8.3f} {r['min_s']:8.3f} {r['max_s']:8.3f}  {r['runs']}{col}{mark}")
        if args.against:
            print(f"against: {args.against} (PYTHONPATH), alternating run by run with this tree")
        for name, imp in imports.items():
            tops = ", ".join(f"{t['module']} {t['cumulative_us'] / 1e3:.0f} ms" for t in imp["top"])
            print(f"imports of {name}: {imp['total_us'] / 1e3:.0f} ms ({tops}); heavy: {imp['heavy_imported'] or 'none'}")
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
