"""Measure what collecting a report costs on the GPU: wall time and ncu replay passes.

    python scripts/collection_cost.py [--version vNN] [--shape KEY] [--out reports/h200/collection-cost.json]
                                      [--all-out reports]

Method (one process start per measurement, all in the same run on the same card):
  baseline  the same runner command (`python -m kernels.runner VERSION`) under ncu collecting LaunchStats only:
            process start-up, module load, warm-up launches and one replay pass;
  whowaits  the same command under `--section-folder sections --set whowaits`;
  full      the same command under `--set full` (ncu's own sections).
The wall time of each is the ncu process's; overhead = wall - baseline wall; passes as ncu prints them
('==PROF== Profiling "...": 0%....100% - N passes'). The three run interleaved --repeat times (whowaits, full,
baseline, whowaits, full, baseline, ...) and each mode's smallest wall time is used: start-up time varies by a
second or more from run to run (cold file caches on the first), and the minimum is the least disturbed run.
With --all-out it then times `whowaits profile VERSION` (into a temporary folder) against
`whowaits profile --all --ext` (into --all-out, normally the repo's reports/: the committed data set) and
records both. Default version: the newest version of the ladder (the ladder's last rung is its fastest).
Writes the JSON atomically; needs ncu and a GPU.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from profiler import collect, provenance  # noqa: E402
from profiler.errors import WhowaitsError  # noqa: E402


def measure(session: collect.Session, ncu: str, tmp: Path, label: str) -> dict:
    argv = session.ncu_argv(ncu, tmp / label)
    t0 = time.perf_counter()
    cp = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    log = cp.stdout + cp.stderr
    outcome = collect.parse_ncu_output(log, cp.returncode)
    if outcome.error:
        raise WhowaitsError(f"{label}: {outcome.error}")
    if len(outcome.profiled) != 1:
        raise WhowaitsError(f"{label}: expected one profiled launch, ncu printed {len(outcome.profiled)}")
    print(f"{label:9s} wall {wall:6.2f} s  passes {outcome.profiled[0][1]:3d}", flush=True)
    return {"wall_s": round(wall, 3), "passes": outcome.profiled[0][1], "command": argv}


def cli_wall(args: list[str]) -> float:
    t0 = time.perf_counter()
    cp = subprocess.run([sys.executable, "-c", "import sys; from profiler.cli import main; sys.argv[0]='whowaits'; main()",
                         *args], cwd=REPO)
    wall = time.perf_counter() - t0
    print(f"whowaits {' '.join(args)}: {wall:.2f} s (exit {cp.returncode})", flush=True)
    return round(wall, 3)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", help="ladder version (default: the newest)")
    ap.add_argument("--shape", default=collect.DEFAULT_SHAPE)
    ap.add_argument("--out", type=Path, default=REPO / "reports" / "h200" / "collection-cost.json")
    ap.add_argument("--all-out", type=Path, help="also time `whowaits profile --all --ext` writing here")
    ap.add_argument("--ext-suffix", default="", help="passed to `whowaits profile --all --ext`")
    ap.add_argument("--repeat", type=int, default=2, help="interleaved runs of each mode (min wall time is used)")
    args = ap.parse_args()
    from kernels import registry

    vid = registry.get(args.version).id if args.version else registry.versions()[-1].id
    ncu = collect.find_ncu()
    gpu, driver = collect.gpu_info()
    base = collect.plan_version(vid, args.shape)
    collect._build_versions([vid], base.shape)
    sessions = {
        "baseline": collect.Session(base.targets, base.program, base.shape, sections=("LaunchStats",)),
        "whowaits": collect.Session(base.targets, base.program, base.shape, "whowaits"),
        "full": collect.Session(base.targets, base.program, base.shape, "full"),
    }
    with tempfile.TemporaryDirectory(prefix="whowaits-cost-") as td:
        tmp = Path(td)
        runs: dict[str, list[dict]] = {"whowaits": [], "full": [], "baseline": []}
        for _i in range(args.repeat):
            for mode in runs:
                runs[mode].append(measure(sessions[mode], ncu, tmp, mode))
        best = {m: min(r, key=lambda x: x["wall_s"]) for m, r in runs.items()}
        for m, r in runs.items():
            if len({x["passes"] for x in r}) != 1:
                raise WhowaitsError(f"{m}: pass counts differ between runs: {[x['passes'] for x in r]}")
        base_wall = best["baseline"]["wall_s"]
        ww, full = best["whowaits"], best["full"]
        result = {
            "kernel": vid,
            "shape": base.shape,
            "baseline": {"wall_s": base_wall, "passes": best["baseline"]["passes"], "sections": ["LaunchStats"]},
            "whowaits": {"wall_s": ww["wall_s"], "passes": ww["passes"],
                         "overhead_s": round(ww["wall_s"] - base_wall, 3)},
            "full": {"wall_s": full["wall_s"], "passes": full["passes"],
                     "overhead_s": round(full["wall_s"] - base_wall, 3)},
        }
        for m in runs:
            result[m]["runs_wall_s"] = [x["wall_s"] for x in runs[m]]
        result["ratios"] = {
            "passes": round(ww["passes"] / full["passes"], 3),
            "overhead": round(result["whowaits"]["overhead_s"] / result["full"]["overhead_s"], 3)
            if result["full"]["overhead_s"] > 0 else None,
        }
        result["targets"] = {"passes_max_ratio": 0.45, "overhead_max_ratio": 0.3,  # the set's budget: <= 0.45x with PM sampling
                             "passes_met": result["ratios"]["passes"] <= 0.45,
                             "overhead_met": (result["ratios"]["overhead"] is not None
                                              and result["ratios"]["overhead"] <= 0.3)}
        if args.all_out:
            one = cli_wall(["profile", vid, "--shape", base.shape, "--out", str(tmp / "one"), "--gpu", "h200"])
            every = cli_wall(["profile", "--all", "--ext", f"--ext-suffix={args.ext_suffix}", "--shape", base.shape,
                              "--out", str(args.all_out), "--gpu", "h200", "--force"])
            n = len(registry.versions()) + len(collect.EXT_SUBJECTS)
            result["profile_all"] = {"subjects": n, "wall_s": every, "one_version_wall_s": one,
                                     "ratio": round(every / one, 3), "target_max_ratio": 3.0}
    result["commands"] = {m: best[m]["command"] for m in ("baseline", "whowaits", "full")}
    for cmd in result["commands"].values():
        cmd[cmd.index("--export") + 1] = "<tmp>/" + Path(cmd[cmd.index("--export") + 1]).name
    result.update({"gpu": gpu, "driver_version": driver, "ncu_version": collect.ncu_version(ncu),
                   "time": datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
                   "method": __doc__.split("Method", 1)[1].split("Writes the JSON", 1)[0].strip()})
    provenance.write_json_atomic(args.out, result)
    print(f"wrote {args.out}: passes {ww['passes']}/{full['passes']} = {result['ratios']['passes']}, "
          f"overhead {result['whowaits']['overhead_s']}/{result['full']['overhead_s']} s = {result['ratios']['overhead']}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except WhowaitsError as err:
        print(f"collection_cost: error: {err}", file=sys.stderr)
        sys.exit(2)
