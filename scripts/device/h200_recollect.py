"""Re-collect the committed data set with the extended `whowaits` set (PM sampling) in ONE device call.

    OUT=$OUT WHOWAITS_GIT_COMMIT=<commit> WHOWAITS_GIT_DIRTY=0 python3 scripts/device/h200_recollect.py [--budget S]

Run on the GPU machine from the repository root, with the cubins built beforehand at the same path (so the
sources ncu imports, `--import-source yes`, are found: a cubin's line table names absolute paths).
1. Warp states over time: `scripts/pm_warp_state_candidates/WhowaitsPmWarpStates.section.candidate*` are tried in order on the newest
   ladder version under `--set whowaits`; the first whose pass count stays <= --max-passes and whose report holds
   every warp-state series it names becomes `sections/WhowaitsPmWarpStates.section`; none fitting: the set stays
   without it. Written to $OUT/ws_probe.json.
2. Every ladder version and the runner's external subjects (torch SDPA flash, cuDNN): one ncu session per
   subject (each report holds only its own process's modules), into $OUT/reports.tgz (h200/<subject>/<shape>.*).
3. ncu's own source page (`--page source --csv --print-source cuda,sass`) of the new v03, v07 and v09 reports, gzipped,
   for the golden line test: $OUT/source_pages.tgz.
4. scripts/collection_cost.py on v07_tuned (LaunchStats only / whowaits / full, interleaved, up to --cost-repeat
   rounds as --budget seconds allow) into $OUT/collection-cost.json.
The section folder that was used goes back as $OUT/sections.tgz.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from profiler import collect, settings  # noqa: E402
from profiler import metrics as M  # noqa: E402
from profiler.errors import WhowaitsError  # noqa: E402

T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:6.1f}s] {msg}", flush=True)


def ws_names(section_text: str) -> set[str]:
    import re

    return set(re.findall(r'Name: "pmsampling:smsp__warps_issue_stalled_([a-z_]+)\.avg"', section_text))


def probe_warp_states(ncu: str, version: str, shape: str, max_passes: int, out: Path) -> dict:
    target = collect.SECTIONS_DIR / "WhowaitsPmWarpStates.section"
    cands = sorted((REPO / "scripts" / "pm_warp_state_candidates").glob("WhowaitsPmWarpStates.section.candidate*"))
    tried = []
    chosen = None
    base = collect.plan_version(version, shape)
    collect._build_versions(base.build, base.shape)
    from profiler.report import load_report

    with tempfile.TemporaryDirectory(prefix="ws-probe-") as td:
        for cand in cands:
            shutil.copy(cand, target)
            stem = Path(td) / cand.suffix.lstrip(".")
            argv = base.ncu_argv(ncu, stem)
            cp = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=180)
            text = cp.stdout + cp.stderr
            outcome = collect.parse_ncu_output(text, cp.returncode)
            passes = outcome.profiled[0][1] if outcome.profiled else None
            got = set()
            rep = stem.with_name(stem.name + ".ncu-rep")
            want = ws_names(cand.read_text())
            try:  # the device image has no ncu_report: then the series are checked back home
                if rep.is_file():
                    la = load_report(rep, use_cache=False).launches[0]
                    got = {s[len("warps_"):] for s in M.timeline_series(la.timeline["metric"].unique())
                           if s.startswith("warps_")}
            except WhowaitsError:
                got = set(want) if rep.is_file() else set()
            ok = (outcome.error is None and passes is not None and passes <= max_passes and want <= got)
            tried.append({"candidate": cand.name, "passes": passes, "error": outcome.error,
                          "warp_states": sorted(got), "wanted": sorted(want), "ok": ok,
                          "ncu_tail": text.strip().splitlines()[-3:]})
            log(f"warp-state candidate {cand.name}: passes {passes}, series {sorted(got)}, ok {ok}")
            if ok:
                chosen = cand.name
                break
    if chosen is None:
        target.unlink(missing_ok=True)
    result = {"chosen": chosen, "max_passes": max_passes, "tried": tried}
    (out / "ws_probe.json").write_text(json.dumps(result, indent=1))
    return result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default=collect.DEFAULT_SHAPE)
    ap.add_argument("--max-passes", type=int, default=17, help="0.45 x the 38 passes of --set full")
    ap.add_argument("--budget", type=float, default=400.0, help="seconds this script may use in all")
    ap.add_argument("--cost-repeat", type=int, default=2)
    args = ap.parse_args()
    if not settings.text("WHOWAITS_GIT_COMMIT"):  # the sidecars' commit: the device copy has no .git of its own
        sys.exit("set WHOWAITS_GIT_COMMIT=<commit of the code> (the device copy has no .git of its own)")
    out = Path(os.environ.get("OUT", "/tmp/recollect"))
    out.mkdir(parents=True, exist_ok=True)
    from kernels import registry

    ncu = collect.find_ncu()
    versions = [v.id for v in registry.versions()]
    log(f"versions {versions}")
    ws = probe_warp_states(ncu, "v07_tuned", args.shape, args.max_passes, out)
    with tarfile.open(out / "sections.tgz", "w:gz") as tf:
        tf.add(collect.SECTIONS_DIR, arcname="sections")
    root = Path(tempfile.mkdtemp(prefix="recollect-"))
    summary = {"warp_states": ws["chosen"], "subjects": {}}
    subjects = [([v], []) for v in versions] + [([], [e]) for e in collect.EXT_SUBJECTS]
    for ids, ext in subjects:
        name = ids[0] if ids else collect.EXT_SUBJECTS[ext[0]][0]
        try:
            session = collect.plan_versions(ids, args.shape, ext=ext)
            res = collect.run_session(session, out_root=root, gpu="h200", force=True)
            fails = [f.error for f in res.failures]
            passes = [r.passes for r in res.results if r.ok]
            summary["subjects"][name] = {"passes": passes, "errors": fails}
            log(f"{name}: passes {passes} {fails or ''}")
        except WhowaitsError as err:
            summary["subjects"][name] = {"errors": [str(err)]}
            log(f"{name}: ERROR {err}")
    with tarfile.open(out / "reports.tgz", "w:gz") as tf:
        tf.add(root / "h200", arcname="h200")
    pages = Path(tempfile.mkdtemp(prefix="pages-"))
    for v in [v for v in versions if v in ("v03_tensor_cores", "v07_tuned", "v09_wgmma")]:
        rep = root / "h200" / v / f"{args.shape}.ncu-rep"
        if rep.is_file():
            cp = subprocess.run([ncu, "--import", str(rep), "--page", "source", "--csv", "--print-source",
                                 "cuda,sass"], capture_output=True, text=True, timeout=120)
            (pages / f"{v}_{args.shape}.source-cuda-sass.csv.gz").write_bytes(gzip.compress(cp.stdout.encode(), 9))
    with tarfile.open(out / "source_pages.tgz", "w:gz") as tf:
        tf.add(pages, arcname="pages")
    (out / "recollect.json").write_text(json.dumps(summary, indent=1))
    left = args.budget - (time.perf_counter() - T0)
    per_round = 3 * 11  # baseline + whowaits + full, one process start each (~7-11 s on the H200)
    repeat = min(args.cost_repeat, int((left - 10) // per_round))
    if repeat >= 1:
        log(f"collection cost, {repeat} round(s) ({left:.0f} s left)")
        subprocess.run([sys.executable, "scripts/collection_cost.py", "--version", "v07_tuned", "--shape", args.shape,
                        "--repeat", str(repeat), "--out", str(out / "collection-cost.json")], cwd=REPO,
                       timeout=max(60, int(left - 5)))
    else:
        log(f"collection cost skipped: {left:.0f} s left, one round needs ~{per_round} s")
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
