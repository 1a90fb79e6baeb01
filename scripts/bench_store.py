"""Scale benchmark of the profile store: 10,000 synthetic launch summaries → index build time, query time, memory.

Method:

- Seeds: the launch summaries of every committed report under ``reports/h200/`` (the real analysis output,
  through the summary cache).
- Synthetic set: N summaries (default 10,000) at distinct (gpu, subject, shape) partitions: 4 GPU folders ×
  50 subjects × 50 shapes for N = 10,000. Each is a deep copy of a seed (round robin) with every stall-sample
  count, who-waits cell, duration, FLOP and byte count multiplied by an independent log-normal factor (σ = 0.2,
  fixed seed), shares recomputed from the perturbed samples, and a sidecar with a build hash and ladder order.
- Index build: exactly what ``whowaits index`` does after summarising: one ``launches`` row per summary
  (:func:`profiler.store.schema.launch_row`), one parquet part per partition (atomic writes), the DuckDB table
  filled in one transaction, the index state written (:func:`profiler.store.build.write`). Timed from the
  summaries to the committed store. The summarising itself (ncu_report + analyses, ~0.3–1 s a report, cached
  by content) is not part of it: synthetic summaries have no report file.
- Incremental update: 1% of the partitions changed and written again.
- Rebuild of the DuckDB table from the 10,000 parquet parts (what a query does when the DuckDB file is gone).
- Query: the top waiter per version at one shape on one GPU (:data:`profiler.store.TOP_WAITER_SQL`), median of
  25 runs on an open read-only connection; also cold (open the database + the first query) and the CLI end to
  end (``whowaits query``, Python start-up included).
- CPU: user + system seconds of this process and its worker processes during the write (``index_write_cpu_s``):
  on a shared machine the wall time depends on the load average, which is recorded before and after.
- Memory: peak resident set size of this process (``ru_maxrss``) before and after the build, and the store's
  size on disk.

Usage: ``python scripts/bench_store.py [--n 10000] [--out reports/store-bench.json] [--keep DIR]``. Prints the
figures and writes them with the command, the load average, the CPU count and the versions used.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import random
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GPUS = ("h200", "h100", "b200", "a100")


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def seeds() -> list[tuple[str, dict, dict]]:
    from profiler.compare.cache import summaries_many
    from profiler.provenance import read_sidecar

    paths = sorted((ROOT / "reports" / "h200").glob("*/*.ncu-rep"))
    got = summaries_many([(p, None) for p in paths])
    return [(p.parent.name, s, read_sidecar(p) or {}) for p, launches in zip(paths, got) for s in launches]


def shapes(n: int) -> list[str]:
    out = []
    for b in (1, 2, 4, 8, 16):
        for h in (16, 32, 64, 128, 8):
            for s in (512, 1024, 2048, 4096, 8192):
                for d in (64, 128):
                    for dt in ("fp16", "bf16"):
                        out.append(f"b{b}_h{h}_s{s}_d{d}_{dt}")
    return out[:n]


def perturb(summary: dict, rng: random.Random) -> dict:
    s = copy.deepcopy(summary)
    f = lambda: rng.lognormvariate(0.0, 0.2)  # noqa: E731
    samples = {r: (int(round(v * f())) if v else v) for r, v in (s.get("stall_samples") or {}).items()}
    total = sum(v or 0 for v in samples.values()) or 1
    s["stall_samples"] = samples
    s["stall_share"] = {r: (v or 0) / total for r, v in samples.items()}
    for w in s.get("who_waits") or []:
        w["samples"] = int(round(w["samples"] * f()))
        w["share"] = w["samples"] / total
    for w in s.get("opcode_waits") or []:
        w["samples"] = int(round(w["samples"] * f()))
        w["share"] = w["samples"] / total
    if s.get("duration_ns"):
        s["duration_ns"] *= f()
    roof = s.get("roofline") or {}
    if roof.get("flops"):
        roof["flops"] *= f()
    for lv, v in list((roof.get("bytes") or {}).items()):
        if v:
            roof["bytes"][lv] = v * f()
            if roof.get("flops"):
                roof["intensity"][lv] = roof["flops"] / roof["bytes"][lv]
    if s.get("duration_ns") and roof.get("flops"):
        roof["achieved_tflops"] = roof["flops"] / (s["duration_ns"] * 1e-9) / 1e12
    if s.get("short_scoreboard"):
        s["short_scoreboard"]["share"] = s["stall_share"].get("short_scoreboard")
    return s


def synthetic(n: int, rng: random.Random):
    """[(gpu, subject, shape, summary, sidecar)] at n distinct partitions."""
    base = seeds()
    per_gpu = max(1, -(-n // len(GPUS)))
    n_shapes = 50
    n_subjects = max(1, -(-per_gpu // n_shapes))
    shp = shapes(n_shapes)
    out = []
    i = 0
    for g in GPUS:
        for si in range(n_subjects):
            subj_seed = base[si % len(base)]
            subject = f"{subj_seed[0]}-r{si:03d}"
            for shape in shp:
                if len(out) >= n:
                    return out, len(base)
                side = dict(subj_seed[2])
                side.update(version=subject, shape=shape, build_hash=f"{rng.getrandbits(96):024x}", ladder_order=si,
                            title=subject, gpu={"h200": "NVIDIA H200", "h100": "NVIDIA H100 80GB HBM3",
                                                "b200": "NVIDIA B200", "a100": "NVIDIA A100-SXM4-80GB"}[g])
                out.append((g, subject, shape, perturb(subj_seed[1], rng), side))
                i += 1
    return out, len(base)


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "store-bench.json")
    ap.add_argument("--keep", type=Path, default=None, help="build the store here and keep it")
    args = ap.parse_args()

    from profiler.store import TOP_WAITER_SQL, Store, build, schema

    load_before = os.getloadavg()
    rng = random.Random(14)
    t = time.perf_counter()
    items, n_seeds = synthetic(args.n, rng)
    gen_s = time.perf_counter() - t
    rss_before = rss_mb()
    store = args.keep or Path(tempfile.mkdtemp(prefix="whowaits-store-bench-"))
    if store.exists():
        shutil.rmtree(store)
    store.mkdir(parents=True)
    try:
        t0 = time.perf_counter()
        changed = {}
        state = {}
        for g, subj, shape, summ, side in items:
            key = (g, subj, shape)
            changed[key] = [schema.launch_row(summ, side, gpu=g, subject=subj, shape=shape,
                                              report=f"/synthetic/{g}/{subj}/{shape}.ncu-rep", report_sha256=None)]
            state["/".join(key)] = {"path": f"/synthetic/{g}/{subj}/{shape}.ncu-rep", "launches": 1}
        t_rows = time.perf_counter() - t0
        steps: dict = {}
        cpu0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        total = build.write(store, changed, [], state, timings=steps)
        t_build = time.perf_counter() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_build = sum(b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime for a, b in zip(cpu0, cpu1))
        rss_after = rss_mb()
        assert total == len(items), (total, len(items))

        k = max(1, len(items) // 100)
        t0 = time.perf_counter()
        some = dict(list(changed.items())[:k])
        for rows in some.values():
            rows[0]["duration_ns"] = (rows[0]["duration_ns"] or 0) * 1.01
        build.write(store, some, [], state)
        t_incr = time.perf_counter() - t0

        (store / build.DB_NAME).unlink()
        t0 = time.perf_counter()
        build.rebuild_db(store)
        t_rebuild = time.perf_counter() - t0

        gpu, shape = "h200", items[0][2]
        t0 = time.perf_counter()
        s = Store(store)
        first = s.query(TOP_WAITER_SQL, [gpu, shape])
        t_cold = time.perf_counter() - t0
        times = []
        for _ in range(25):
            t0 = time.perf_counter()
            df = s.query(TOP_WAITER_SQL, [gpu, shape])
            times.append(time.perf_counter() - t0)
        s.close()
        sql = TOP_WAITER_SQL.replace("gpu = ?", f"gpu = '{gpu}'").replace("shape = ?", f"shape = '{shape}'")
        cli = [sys.executable, "-c", "import sys; from profiler.cli import main; sys.argv[0] = 'whowaits'; main()",
               "query", sql, "--store", str(store), "--format", "csv"]
        t0 = time.perf_counter()
        cp = subprocess.run(cli, capture_output=True, text=True, cwd=ROOT)
        t_cli = time.perf_counter() - t0
        assert cp.returncode == 0, cp.stderr
        size = du(store)
        parts = sum(1 for _ in (store / build.PARTS).rglob("*.parquet"))
    finally:
        if args.keep is None:
            shutil.rmtree(store, ignore_errors=True)

    import duckdb
    import pyarrow

    from profiler.provenance import git_state

    res = {
        "what": "profile store scale benchmark (scripts/bench_store.py docstring has the method)",
        "command": "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(__file__, ROOT), *sys.argv[1:]]),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "git_commit": git_state(ROOT)[0],
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "duckdb": duckdb.__version__,
                    "pyarrow": pyarrow.__version__, "load_average_before": [round(x, 2) for x in load_before],
                    "load_average_after": [round(x, 2) for x in os.getloadavg()]},
        "summaries": len(items), "seed_launches": n_seeds, "partitions": len(changed), "parquet_parts": parts,
        "generate_s": round(gen_s, 2),
        "index_build_s": round(t_build, 2), "index_rows_s": round(t_rows, 2),
        "index_steps_s": steps, "index_write_cpu_s": round(cpu_build, 2),
        "index_target_s": 60, "index_ok": t_build <= 60,
        "incremental_update_s": round(t_incr, 3), "incremental_partitions": k,
        "rebuild_duckdb_from_parquet_s": round(t_rebuild, 2),
        "query": "top waiter per version at one shape: " + TOP_WAITER_SQL,
        "query_rows": len(df), "query_median_ms": round(1e3 * statistics.median(times), 2),
        "query_max_ms": round(1e3 * max(times), 2), "query_cold_ms": round(1e3 * t_cold, 1),
        "query_target_ms": 100, "query_ok": statistics.median(times) <= 0.1,
        "query_cli_s": round(t_cli, 2),
        "rss_mb_before_build": round(rss_before, 1), "rss_mb_peak": round(rss_after, 1),
        "store_mb": round(size / 1e6, 2),
    }
    assert len(first) == len(df) > 0
    print(json.dumps(res, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(f".{args.out.name}.tmp")
    tmp.write_text(json.dumps(res, indent=2) + "\n")
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
