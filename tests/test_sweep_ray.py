"""`whowaits sweep --backend ray` on a local Ray cluster started here (two fake GPUs as Ray resources,
tests/fake_ncu/ on the workers' PATH). Checks that tasks hold one GPU each (pinned, never two ncu sessions on
one), that the reports and sidecars come back as bytes and are written by the driver under the manifest's
`out`, that a failing job loses nobody else's report, and that a second run skips what is done.

Ray's start-up dominates: ~5-10 s for `ray.init` on this 2-core machine (more under load), once per module."""

from __future__ import annotations

import json
import os

import pytest

ray = pytest.importorskip("ray")

from test_sweep import FAKE, KERNELS, REPORT, SHAPE, GPU0, GPU1, assert_no_overlap, sessions  # noqa: E402

MANIFEST = """
name = "r"
gpu = "h200"
out = "reports"
logs = "logs"
lock_dir = "locks"
retries = 1
retry_delay_s = 0.1
batch = 2
[subjects]
versions = ["v01", "v02", "v03"]
[[subjects.cmd]]
name = "ext-sdpa-flash"
cmd = "python3 scripts/sdpa_subject.py --backend flash --shape {shape}"
kernel = "flash_fwd_kernel"
launch_skip = 3
[shapes]
keys = ["b1_h64_s1024_d128"]
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ray")
    env = {"PATH": f"{FAKE}{os.pathsep}{os.environ['PATH']}", "FAKE_NVIDIA_SMI_GPUS": "2",
           "FAKE_NCU_REPORT": str(REPORT), "FAKE_NCU_KERNELS": KERNELS, "FAKE_NCU_TIMELINE": str(tmp / "timeline.txt"),
           "FAKE_NCU_LOG": str(tmp / "calls.log"), "FAKE_NCU_SLEEP": "0.3", "FAKE_NCU_CRASH_IF": "v02_smem",
           "WHOWAITS_CACHE_DIR": os.environ.get("WHOWAITS_CACHE_DIR", str(tmp / "cache"))}
    # The workers inherit the environment of the raylet this process starts: set here for the module's
    # cluster rather than passed as a job runtime_env (whose env-var plumbing cost ~0.85 s more per task
    # start-up: 2 tasks on a fresh cluster, 1.22 s vs 0.39 s, measured 2026-12-01 on the 2-core machine)
    mp = pytest.MonkeyPatch()
    for k, v in env.items():
        mp.setenv(k, v)
    mp.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    try:
        ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
    finally:
        mp.undo()  # the cluster keeps it; this test process's other tests must not
    yield tmp
    ray.shutdown()


def test_ray_sweep_writes_results_on_the_driver_and_resumes(cluster):
    from profiler.sweep import load_manifest, run_sweep

    tmp = cluster
    (tmp / "sweep.toml").write_text(MANIFEST)
    res = run_sweep(load_manifest(tmp / "sweep.toml"), backend="ray")
    st = {o.job.split(":")[1]: o for o in res.outcomes}
    assert {k: o.status for k, o in st.items()} == {"v01_naive": "done", "v02_smem_tiling": "failed",
                                                   "v03_tensor_cores": "done", "ext-sdpa-flash": "done"}
    assert st["v02_smem_tiling"].error_kind == "program_failed"
    written = sorted(str(p.relative_to(tmp / "reports")) for p in (tmp / "reports").rglob("*") if p.is_file())
    assert written == sorted(f"h200/{s}/{SHAPE}.{x}" for s in ("v01_naive", "v03_tensor_cores", "ext-sdpa-flash")
                             for x in ("json", "ncu-rep"))
    # the bytes that came back are the report the fake ncu wrote, and the sidecar describes them
    rep = tmp / "reports" / "h200" / "v03_tensor_cores" / f"{SHAPE}.ncu-rep"
    assert rep.read_bytes() == REPORT.read_bytes()
    side = json.loads(rep.with_name(f"{SHAPE}.json").read_text())
    from profiler.provenance import sha256_file

    assert side["report_sha256"] == sha256_file(rep) and side["build_hash"]
    assert st["v03_tensor_cores"].report == str(rep)
    runs = sessions(tmp)
    assert {d for d, _, _ in runs} <= {"0", "1", GPU0, GPU1} and runs
    assert_no_overlap(runs)
    ev = [json.loads(x) for x in (tmp / "logs" / "sweep.jsonl").read_text().splitlines()]
    assert ev[0]["backend"] == "ray" and any(e["event"] == "lock" for e in ev)
    assert (tmp / "logs" / "jobs" / f"profile-v02_smem_tiling-{SHAPE}.log").read_text().count("illegal memory") >= 1

    n_calls = len((tmp / "calls.log").read_text().splitlines())
    again = run_sweep(load_manifest(tmp / "sweep.toml"), backend="ray")
    st = {o.job.split(":")[1]: o.status for o in again.outcomes}
    assert st == {"v01_naive": "skipped", "v03_tensor_cores": "skipped", "ext-sdpa-flash": "skipped",
                  "v02_smem_tiling": "failed"}
    calls = (tmp / "calls.log").read_text().splitlines()[n_calls:]
    assert len(calls) == 1 and "kernels.runner v02_smem_tiling " in calls[0]
