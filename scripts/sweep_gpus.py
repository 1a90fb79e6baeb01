"""The 1-GPU / 2-GPU figures from the sweep runs of scripts/device/h200_two_gpus.sh: 1 GPU against 2 GPUs (and Ray).

    python scripts/sweep_gpus.py ROOT [--out FILE.json]

ROOT holds one folder per run (``gpu1``, ``gpu2``, ``ray``), each with ``logs/sweep.jsonl`` (the sweep's own
event log). Per run: the sweep's wall time (its ``end`` event), jobs done and failed, jobs per minute, the
speed-up over ``gpu1``, and from the ``lock``/``unlock`` events of every ncu session the GPUs used and, per GPU,
the most ncu sessions that ever overlapped in time (the contract: 1) and how busy each GPU was.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path


def run_figures(log: Path) -> dict:
    events = [json.loads(ln) for ln in log.read_text().splitlines() if ln.strip()]
    start = next(e for e in events if e["event"] == "start")
    end = next((e for e in events if e["event"] == "end"), None)
    sessions: dict[str, list[list[float]]] = defaultdict(list)
    open_at: dict[str, list[float]] = defaultdict(list)
    for e in events:
        if e["event"] == "lock":
            open_at[e["gpu"]].append(e["t"])
        elif e["event"] == "unlock" and open_at[e["gpu"]]:
            sessions[e["gpu"]].append([open_at[e["gpu"]].pop(0), e["t"]])
    per_gpu = {}
    for gpu, iv in sorted(sessions.items()):
        points = sorted([(a, 1) for a, _ in iv] + [(b, -1) for _, b in iv], key=lambda p: (p[0], p[1]))
        depth = most = 0
        for _, d in points:  # an unlock at the same instant as the next lock closes first
            depth += d
            most = max(most, depth)
        per_gpu[gpu] = {"sessions": len(iv), "max_concurrent_sessions": most,
                        "busy_s": round(sum(b - a for a, b in iv), 3)}
    jobs = [e for e in events if e["event"] == "job"]
    done = sum(j["status"] == "done" for j in jobs)
    wall = end["wall_s"] if end else None
    return {"backend": start.get("backend"), "jobs": start.get("jobs"), "done": done,
            "failed": sum(j["status"] == "failed" for j in jobs), "wall_s": wall,
            "jobs_per_min": round(60 * done / wall, 2) if wall else None, "gpus_used": len(per_gpu),
            "per_gpu": per_gpu,
            "never_two_sessions_on_one_gpu": all(g["max_concurrent_sessions"] <= 1 for g in per_gpu.values())}


def compare(root: Path) -> dict:
    runs = {p.name: run_figures(p / "logs" / "sweep.jsonl")
            for p in sorted(Path(root).iterdir()) if (p / "logs" / "sweep.jsonl").is_file()}
    base = runs.get("gpu1", {}).get("wall_s")
    for r in runs.values():
        r["speedup_vs_gpu1"] = round(base / r["wall_s"], 3) if base and r["wall_s"] else None
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    if not a.root.is_dir():
        print(f"sweep_gpus: {a.root} is not a folder of sweep runs", file=sys.stderr)
        return 2
    res = compare(a.root)
    if not res:
        print(f"sweep_gpus: no <run>/logs/sweep.jsonl under {a.root}", file=sys.stderr)
        return 2
    for name, r in res.items():
        print(f"{name:5} {r['backend']:5} wall {r['wall_s']} s  done {r['done']}/{r['jobs']}  failed {r['failed']}  "
              f"{r['jobs_per_min']} jobs/min  speed-up {r['speedup_vs_gpu1']}  GPUs {r['gpus_used']}  "
              f"never two sessions on one GPU: {r['never_two_sessions_on_one_gpu']}")
        for g, f in r["per_gpu"].items():
            print(f"      {g}: {f['sessions']} sessions, busy {f['busy_s']} s, max concurrent {f['max_concurrent_sessions']}")
    if a.out:
        tmp = a.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(res, indent=1) + "\n")
        tmp.replace(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
