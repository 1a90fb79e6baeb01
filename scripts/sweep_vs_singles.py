"""Wall time of a sweep against single `whowaits profile` runs of the same jobs (scripts/device/h200_sweep.sh's output).

    python scripts/sweep_vs_singles.py LOGS [--out FILE.json]

LOGS is the folder scripts/device/h200_sweep.sh sent back (``sweep-logs.tgz`` unpacked): ``logs/sweep.jsonl`` (the
sweep's own event log), ``logs/results.json``, ``timings.jsonl`` (one line per step of the script and per
single run, with start/end from the same clock). Per shape it compares

- ``singles_s``: the sum of the single runs' walls (each the whole ``whowaits profile VERSION --shape SHAPE``
  command: Python start, plan, build lookup, one ncu session over one runner process, the report and sidecar);
- ``sweep_gpu_s``: the sweep's batches of that shape, lock to unlock, summed (the job processes: one ncu session
  over one runner process per batch of up to ``batch`` versions, then the split into per-version reports);
- ``sweep_share_s``: the whole ``whowaits sweep`` command's wall shared out over the shapes in proportion to
  ``sweep_gpu_s`` (so it also carries the sweep's start, planning and records);

and the totals. Singles measured for only some shapes are compared on those shapes only.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path


def _shape(job_id: str) -> str:
    return job_id.split(":")[-1]


def compare(logs: Path) -> dict:
    logs = Path(logs)
    events = [json.loads(ln) for ln in (logs / "logs" / "sweep.jsonl").read_text().splitlines() if ln.strip()]
    steps = [json.loads(ln) for ln in (logs / "timings.jsonl").read_text().splitlines() if ln.strip()]
    results = json.loads((logs / "logs" / "results.json").read_text())
    sweep_step = next(s for s in steps if s["step"] == "sweep")
    gpu_s: dict[str, float] = defaultdict(float)
    batches: dict[str, int] = defaultdict(int)
    open_at: dict[str, tuple[float, str]] = {}
    for e in events:
        if e["event"] == "lock":
            open_at[e["gpu"]] = (e["t"], _shape(e["jobs"][0]))
        elif e["event"] == "unlock" and e["gpu"] in open_at:
            t0, shape = open_at.pop(e["gpu"])
            gpu_s[shape] += e["t"] - t0
            batches[shape] += 1
    singles: dict[str, list[dict]] = defaultdict(list)
    for s in steps:
        if s["step"] == "single":
            singles[s["shape"]].append(s)
    total_gpu = sum(gpu_s.values()) or 1.0
    shapes = {}
    for shape in sorted(gpu_s, key=lambda k: [int(x[1:]) for x in k.split("_")[:4]]):
        row = {"sweep_batches": batches[shape], "sweep_gpu_s": round(gpu_s[shape], 2),
               "sweep_share_s": round(sweep_step["wall_s"] * gpu_s[shape] / total_gpu, 2),
               "sweep_jobs": sum(1 for j in results["jobs"] if _shape(j["job"]) == shape and j["status"] == "done")}
        runs = singles.get(shape, [])
        if runs:
            ok = [r for r in runs if r["rc"] == 0]
            row.update(singles_n=len(runs), singles_ok=len(ok), singles_s=round(sum(r["wall_s"] for r in runs), 2),
                       single_median_s=round(sorted(r["wall_s"] for r in runs)[len(runs) // 2], 2),
                       speedup_gpu=round(sum(r["wall_s"] for r in runs) / gpu_s[shape], 2),
                       speedup_share=round(sum(r["wall_s"] for r in runs) / row["sweep_share_s"], 2))
        shapes[shape] = row
    compared = [k for k, r in shapes.items() if "singles_s" in r]
    out = {
        "sweep_command_wall_s": sweep_step["wall_s"], "sweep_wall_s": results["wall_s"], "sweep_rc": sweep_step["rc"],
        "jobs": len(results["jobs"]), "done": results["done"], "failed": results["failed"],
        "gpus": results["gpus"], "started": results["started"],
        "other_steps": {s["step"]: s["wall_s"] for s in steps if s["step"] not in ("sweep", "single")},
        "shapes": shapes, "compared_shapes": compared,
    }
    if compared:
        singles_s = sum(shapes[k]["singles_s"] for k in compared)
        out["compared"] = {"singles_s": round(singles_s, 2),
                           "sweep_gpu_s": round(sum(shapes[k]["sweep_gpu_s"] for k in compared), 2),
                           "sweep_share_s": round(sum(shapes[k]["sweep_share_s"] for k in compared), 2)}
        out["compared"]["speedup_gpu"] = round(singles_s / out["compared"]["sweep_gpu_s"], 2)
        out["compared"]["speedup_share"] = round(singles_s / out["compared"]["sweep_share_s"], 2)
        if len(compared) == len(shapes):
            out["compared"]["speedup_command"] = round(singles_s / sweep_step["wall_s"], 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    res = compare(args.logs)
    text = json.dumps(res, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
