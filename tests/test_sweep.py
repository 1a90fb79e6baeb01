"""`whowaits sweep`, local backend, on a machine without a GPU: tests/fake_ncu/ (ncu and nvidia-smi stand-ins
that replay ncu's recorded messages) stands first on PATH and fakes two H200s (FAKE_NVIDIA_SMI_GPUS=2). The fake
ncu writes a committed report as its export, so what is tested is the sweep's own work: one worker per GPU
pinned with CUDA_VISIBLE_DEVICES, the per-GPU lock (also against another process holding it), resume by build
hash, retries of a transient failure (the program runs out of GPU memory once), one failing job that loses
nobody else's report, per-job logs and the sweep's event log. The fake logs each session's start and end with
the CUDA_VISIBLE_DEVICES it saw, so 'never two sessions on one GPU' is checked on what ran, not on what the
sweep says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from profiler.errors import WhowaitsError

REPO = Path(__file__).resolve().parents[1]
FAKE = REPO / "tests" / "fake_ncu"
REPORT = REPO / "reports" / "h200" / "v07_tuned" / "b1_h64_s1024_d128_fp16.ncu-rep"
SHAPE = "b1_h64_s1024_d128_fp16"
GPU0, GPU1 = (f"GPU-00000000-0000-0000-0000-{i:012d}" for i in range(2))
VERSIONS = ["v01_naive", "v02_smem_tiling", "v03_tensor_cores"]
KERNELS = ",".join([f"void whowaits::{v}::flash_fwd<__half>()" for v in VERSIONS] + ["void pytorch_flash::flash_fwd_kernel<>()"])
MANIFEST = """
name = "t"
out = "reports"
logs = "logs"
lock_dir = "locks"
retries = 1
retry_delay_s = 0.1
batch = 2
lock_timeout_s = 60
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


def env_for(tmp: Path, **extra) -> dict:
    e = {k: v for k, v in os.environ.items() if k not in ("WHOWAITS_NCU", "CUDA_VISIBLE_DEVICES")}
    e.update(PATH=f"{FAKE}{os.pathsep}{e.get('PATH', '')}", FAKE_NVIDIA_SMI_GPUS="2", FAKE_NCU_REPORT=str(REPORT),
             FAKE_NCU_KERNELS=KERNELS, FAKE_NCU_TIMELINE=str(tmp / "timeline.txt"), FAKE_NCU_LOG=str(tmp / "calls.log"),
             FAKE_NCU_SLEEP="0.3", FAKE_NCU_CRASH_IF="v02_smem")
    e.update(extra)
    return e


def sweep(tmp: Path, *args: str, **extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys; from profiler.cli import main; sys.argv[0] = 'whowaits'; main()",
                           "sweep", str(tmp / "sweep.toml"), *args], cwd=REPO, env=env_for(tmp, **extra),
                          capture_output=True, text=True, timeout=300)


def events(tmp: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp / "logs" / "sweep.jsonl").read_text().splitlines()]


def sessions(tmp: Path) -> list[tuple[str, float, float]]:
    """(CUDA_VISIBLE_DEVICES, start, end) of every profiling session the fake ncu ran."""
    starts, out = {}, []
    for line in (tmp / "timeline.txt").read_text().splitlines():
        what, dev, pid, t = line.split()
        if what == "start":
            starts[pid] = (dev, float(t))
        else:
            dev, t0 = starts.pop(pid)
            out.append((dev, t0, float(t)))
    assert not starts, "a session never ended"
    return out


def assert_no_overlap(runs: list[tuple[str, float, float]]) -> None:
    for dev in {d for d, _, _ in runs}:
        spans = sorted((a, b) for d, a, b in runs if d == dev)
        for (a0, b0), (a1, b1) in zip(spans, spans[1:]):
            assert a1 >= b0, f"two ncu sessions at once on {dev}: {a0}-{b0} and {a1}-{b1}"


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    """One sweep: 3 ladder versions (batches of 2) + one --cmd subject on two fake GPUs; v02 crashes the runner,
    the first session runs out of GPU memory once."""
    tmp = tmp_path_factory.mktemp("sweep")
    (tmp / "sweep.toml").write_text(MANIFEST)
    cp = sweep(tmp, "--format", "json", FAKE_NCU_FLAKY=f"1:{tmp / 'flaky'}")
    return tmp, cp, json.loads(cp.stdout)


def test_one_failing_job_loses_nobody_else(first):
    tmp, cp, res = first
    assert cp.returncode == 1, cp.stderr
    status = {j["job"].split(":")[1]: j for j in res["jobs"]}
    assert {k: v["status"] for k, v in status.items()} == {
        "v01_naive": "done", "v02_smem_tiling": "failed", "v03_tensor_cores": "done", "ext-sdpa-flash": "done"}
    assert status["v02_smem_tiling"]["error_kind"] == "program_failed"
    assert "illegal memory access" in status["v02_smem_tiling"]["error"]
    written = sorted(str(p.relative_to(tmp / "reports")) for p in (tmp / "reports").rglob("*") if p.is_file())
    assert written == sorted(f"h200/{s}/{SHAPE}.{x}" for s in ("v01_naive", "v03_tensor_cores", "ext-sdpa-flash")
                             for x in ("json", "ncu-rep"))
    assert not list((tmp / "reports").rglob(".whowaits-profile-*"))


def test_transient_failure_is_retried(first):
    tmp, _, res = first
    retries = [e for e in events(tmp) if e["event"] == "retry"]
    assert len(retries) == 1 and retries[0]["error_kind"] == "gpu_busy" and "out of memory" in retries[0]["error"]
    again = next(j for j in res["jobs"] if j["job"] == retries[0]["job"])
    assert again["status"] == "done" and again["attempts"] == 2
    assert (tmp / "flaky").read_text().count("x") == len(sessions(tmp))  # every session went through the fake


def test_one_worker_per_gpu_pinned_and_never_two_sessions_on_one(first):
    tmp, _, res = first
    runs = sessions(tmp)
    assert {d for d, _, _ in runs} == {GPU0, GPU1}  # both GPUs worked, each pinned by UUID
    assert_no_overlap(runs)
    ev = events(tmp)
    assert ev[0]["event"] == "start" and ev[0]["gpus"] == [GPU0, GPU1] and ev[-1]["event"] == "end"
    # the sweep's own record says the same: lock/unlock alternate per GPU
    for g in (GPU0, GPU1):
        seq = [e["event"] for e in ev if e["event"] in ("lock", "unlock") and g in e["gpu"]]
        assert seq and seq == ["lock", "unlock"] * (len(seq) // 2)


def test_batches_share_one_ncu_session(first):
    tmp, _, _ = first
    calls = [c for c in (tmp / "calls.log").read_text().splitlines() if "--import " not in c]
    runner = [c for c in calls if "kernels.runner" in c]
    # v01+v02 in one session (v02 crashes it after v01), v03 alone (batch = 2), each retry alone
    assert any("kernels.runner v01_naive v02_smem_tiling " in c for c in runner)
    assert sum(1 for c in calls if "sdpa_subject.py" in c) >= 1


def test_logs_and_sidecars(first):
    tmp, _, res = first
    logs = {p.name for p in (tmp / "logs" / "jobs").glob("*.log")}
    assert logs == {f"profile-{s}-{SHAPE}.log" for s in VERSIONS + ["ext-sdpa-flash"]}
    v02 = (tmp / "logs" / "jobs" / f"profile-v02_smem_tiling-{SHAPE}.log").read_text()
    assert "attempt 1 on gpu" in v02 and "illegal memory access" in v02
    saved = json.loads((tmp / "logs" / "results.json").read_text())
    assert saved["done"] == 3 and saved["failed"] == 1 and len(saved["jobs"]) == 4
    from profiler.sweep import jobs as J

    for v in ("v01_naive", "v03_tensor_cores"):
        side = json.loads((tmp / "reports" / "h200" / v / f"{SHAPE}.json").read_text())
        expected = J.expected_build_hash(J.Job("profile", SHAPE, v, runner_arg=v))
        assert expected and side["build_hash"] == expected and side["version"] == v
        assert "kernels.runner" in side["ncu_command"] and v in side["ncu_command"]
    assert json.loads((tmp / "reports" / "h200" / "ext-sdpa-flash" / f"{SHAPE}.json").read_text()).get("build_hash") is None


def test_resume_skips_done_reruns_stale_and_force(first, tmp_path):
    src, _, _ = first
    import shutil

    for name in ("reports", "sweep.toml"):
        (shutil.copytree if (src / name).is_dir() else shutil.copy)(src / name, tmp_path / name)
    cp = sweep(tmp_path, "--format", "json", FAKE_NCU_SLEEP="0")
    res = json.loads(cp.stdout)
    st = {j["job"].split(":")[1]: j["status"] for j in res["jobs"]}
    assert st == {"v01_naive": "skipped", "v03_tensor_cores": "skipped", "ext-sdpa-flash": "skipped",
                  "v02_smem_tiling": "failed"}
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert len(calls) == 1 and "kernels.runner v02_smem_tiling " in calls[0]  # only the failed job ran again
    dry = json.loads(sweep(tmp_path, "--dry-run", "--format", "json").stdout)  # runs nothing
    assert {r["job"].split(":")[1]: r["status_h200"] for r in dry} == {
        "v01_naive": "done", "v02_smem_tiling": "todo", "v03_tensor_cores": "done", "ext-sdpa-flash": "done"}
    assert len((tmp_path / "calls.log").read_text().splitlines()) == 1

    side = tmp_path / "reports" / "h200" / "v03_tensor_cores" / f"{SHAPE}.json"
    data = json.loads(side.read_text())
    data["build_hash"] = "0" * 24  # built from other sources: stale
    side.write_text(json.dumps(data))
    before = (tmp_path / "reports" / "h200" / "v01_naive" / f"{SHAPE}.ncu-rep").stat().st_mtime_ns
    res = json.loads(sweep(tmp_path, "--format", "json", FAKE_NCU_CRASH_IF="^$", FAKE_NCU_SLEEP="0").stdout)
    st = {j["job"].split(":")[1]: j["status"] for j in res["jobs"]}
    assert st == {"v01_naive": "skipped", "ext-sdpa-flash": "skipped", "v03_tensor_cores": "done",
                  "v02_smem_tiling": "done"}
    assert json.loads(side.read_text())["build_hash"] != "0" * 24
    assert (tmp_path / "reports" / "h200" / "v01_naive" / f"{SHAPE}.ncu-rep").stat().st_mtime_ns == before

    res = json.loads(sweep(tmp_path, "--format", "json", "--force", FAKE_NCU_CRASH_IF="^$", FAKE_NCU_SLEEP="0").stdout)
    assert [j["status"] for j in res["jobs"]] == ["done"] * 4


def test_lock_held_by_another_process_is_waited_for(tmp_path):
    """Another process (this test) holds GPU 0's lock for a while: the sweep's worker for GPU 0 waits, says so
    in its log, and starts its first ncu session on GPU 0 only after the lock is released."""
    from profiler.sweep.gpus import Gpu, GpuLock

    (tmp_path / "sweep.toml").write_text(MANIFEST.replace('versions = ["v01", "v02", "v03"]', 'versions = ["v01", "v03"]')
                                         .replace("batch = 2", "batch = 1"))
    lock = GpuLock(tmp_path / "locks", Gpu("0", GPU0, "NVIDIA H200"))
    assert lock.try_acquire("holding GPU 0 for the test")
    released = {}

    def release_later():  # once the sweep says it waits for GPU 0 (at most 90 s), and a little more
        log = tmp_path / "logs" / "sweep.jsonl"
        t_end = time.time() + 90
        while time.time() < t_end and not (log.is_file() and '"lock_wait"' in log.read_text()):
            time.sleep(0.1)
        time.sleep(1.0)
        released["t"] = time.time()
        lock.release()

    th = threading.Thread(target=release_later)
    th.start()
    try:
        cp = sweep(tmp_path, "--format", "json", FAKE_NCU_CRASH_IF="^$")
    finally:
        th.join()
    assert cp.returncode == 0, cp.stderr
    ev = events(tmp_path)
    waits = [e for e in ev if e["event"] == "lock_wait"]
    assert waits and all(GPU0 in e["gpu"] for e in waits)
    assert waits[0]["holder"]["pid"] == os.getpid() and waits[0]["holder"]["what"] == "holding GPU 0 for the test"
    on0 = [t0 for d, t0, _ in sessions(tmp_path) if d == GPU0]
    assert all(t0 >= released["t"] for t0 in on0)
    assert_no_overlap(sessions(tmp_path))


def test_bench_and_check_jobs_fail_alone_without_torch(tmp_path):
    """bench and check jobs run `whowaits bench` / `python -m kernels.correctness` pinned to a GPU; on this machine
    (no torch, no GPU) they fail with those tools' own one-line error, and the profile job beside them is done."""
    (tmp_path / "sweep.toml").write_text(MANIFEST.replace('versions = ["v01", "v02", "v03"]', 'versions = ["v01"]')
                                         .replace("[[subjects.cmd]]", "[[subjects.nocmd]]").replace(
                                             'name = "t"', 'name = "t"\nrun = ["profile", "bench", "check"]')
                                         .split("[[subjects.nocmd]]")[0] + '[shapes]\nkeys = ["b1_h64_s1024_d128"]\n')
    cp = sweep(tmp_path, "--format", "json", FAKE_NCU_SLEEP="0")
    assert cp.returncode == 1, cp.stderr
    jobs = {j["job"]: j for j in json.loads(cp.stdout)["jobs"]}
    assert jobs[f"profile:v01_naive:{SHAPE}"]["status"] == "done"
    for kind in ("bench", "check"):
        j = jobs[f"{kind}:{SHAPE}"]
        assert j["status"] == "failed" and j["error_kind"] == "no_gpu" and j["attempts"] == 1
        assert "needs torch and an NVIDIA GPU" in j["error"]
    assert json.loads((tmp_path / "logs" / "check" / f"{SHAPE}.json").read_text())["rc"] == 2


def test_gpu_lock_across_processes(tmp_path):
    """flock holds across processes: a second process cannot take a held lock, and takes it once released."""
    from profiler.sweep.gpus import Gpu, GpuLock

    lock = GpuLock(tmp_path, Gpu("0", GPU0))
    assert lock.try_acquire("test")
    code = ("import sys; from pathlib import Path; from profiler.sweep.gpus import Gpu, GpuLock; "
            f"l = GpuLock(Path({str(tmp_path)!r}), Gpu('0', {GPU0!r})); print(l.try_acquire('other'))")
    def other():
        return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True).stdout.strip()
    assert other() == "False"
    lock.release()
    assert other() == "True"
    assert oct(lock.path.stat().st_mode & 0o777) == "0o666"


def test_visible_gpus(monkeypatch):
    from profiler.sweep.gpus import visible_gpus

    monkeypatch.setenv("PATH", f"{FAKE}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_GPUS", "4")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert [g.index for g in visible_gpus()] == ["0", "1", "2", "3"]
    assert [g.pin for g in visible_gpus({"CUDA_VISIBLE_DEVICES": "3,1"})] == [
        "GPU-00000000-0000-0000-0000-000000000003", GPU1]
    assert [g.index for g in visible_gpus({"CUDA_VISIBLE_DEVICES": GPU1 + ",2"})] == ["1", "2"]
    with pytest.raises(WhowaitsError, match="names 4 GPUs"):
        visible_gpus({"CUDA_VISIBLE_DEVICES": GPU1[:12]})
    for bad in ("", "-1"):
        with pytest.raises(WhowaitsError, match="no visible GPU"):
            visible_gpus({"CUDA_VISIBLE_DEVICES": bad})
    with pytest.raises(WhowaitsError, match="twice"):
        visible_gpus({"CUDA_VISIBLE_DEVICES": "1,1"})


@pytest.mark.parametrize("text,kind,transient", [
    ("the profiled program failed with exit code 1: torch.OutOfMemoryError: CUDA out of memory.", "gpu_busy", True),
    ("the profiled program failed with exit code 3: boom", "program_failed", False),
    ("ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM): run as root", "permission", False),
    ("the kernel filter matched no kernel launch (ncu: No kernels were profiled)", "no_kernel", False),
    ("timed out: the job process ran past 5 s and was killed", "timeout", True),
    ("v09 [x] does not compile: error: identifier", "build", False),
])
def test_error_kinds(text, kind, transient):
    from profiler.sweep.kinds import classify
    from profiler.sweep.kinds import transient as is_transient

    assert classify(text) == kind and is_transient(kind) is transient


def test_error_kinds_from_error_classes():
    """profiler.errors' classes name the kind; a transient message wins over the class (a crash because the GPU
    was out of memory is worth another attempt, a crash of the kernel is not)."""
    from profiler import errors
    from profiler.sweep.kinds import classify

    assert classify(errors.ProgramFailed("the profiled program failed with exit code 1: boom")) == "program_failed"
    assert classify("the profiled program failed with exit code 1: CUDA out of memory", errors.ProgramFailed) == "gpu_busy"
    assert classify(errors.NothingProfiled("x")) == "no_kernel" and classify(errors.CounterPermission("x")) == "permission"
    assert classify(errors.NcuFailed("ncu failed with exit code 1: x")) == "ncu_failed"
    assert classify(errors.NoGpu("x")) == "no_gpu" and classify(errors.NcuNotFound("x")) == "no_ncu"


@pytest.mark.parametrize("body,needle", [
    ("", "[subjects] is missing"),
    ("[subjects]\nversions = ['v01']\n", "[shapes] is missing"),
    ("run = ['fly']\n[subjects]\nversions = ['v01']\n[shapes]\nkeys = ['b1_h2_s128_d64']\n", "unknown job kind 'fly'"),
    ("[subjects]\nversions = ['v99']\n[shapes]\nkeys = ['b1_h2_s128_d64']\n", "unknown kernel version 'v99'"),
    ("[subjects]\nversions = ['v01']\n[shapes]\nkeys = ['b1_h2']\n", "bad shape key"),
    ("retries = 'x'\n[subjects]\nversions = ['v01']\n[shapes]\nkeys = ['b1_h2_s128_d64']\n", "retries must be int"),
    ("colour = 1\n", "unknown key 'colour'"),
    ("[subjects\n", "not valid TOML"),
])
def test_bad_manifest_is_one_line(tmp_path, body, needle):
    from profiler.sweep import load_manifest

    p = tmp_path / "m.toml"
    p.write_text(body)
    with pytest.raises(WhowaitsError) as err:
        load_manifest(p)
    assert needle in str(err.value) and str(p) in str(err.value) and "\n" not in str(err.value)


def test_manifest_crosses_shapes_and_cli_errors(tmp_path):
    from profiler.sweep import jobs as J
    from profiler.sweep import load_manifest

    p = tmp_path / "m.toml"
    p.write_text("run = ['profile', 'bench']\n[subjects]\nversions = ['v01', 'v07']\n[shapes]\n"
                 "keys = ['b1_h2_s128_d64', 'b1_h4_s256_d128_bf16']\ndtypes = ['fp16', 'bf16']\ncausal = [false, true]\n")
    m = load_manifest(p)
    assert m.shapes == ("b1_h2_s128_d64_fp16", "b1_h2_s128_d64_fp16_causal", "b1_h2_s128_d64_bf16",
                        "b1_h2_s128_d64_bf16_causal", "b1_h4_s256_d128_bf16")
    jobs = J.plan(m)
    assert len(jobs) == 2 * 5 + 5 and jobs[-1].id == "bench:b1_h4_s256_d128_bf16" and m.out == tmp_path / "reports"
    assert [len(b.jobs) for b in J.batches(jobs, 8)] == [2] * 5 + [1] * 5
    cp = subprocess.run([sys.executable, "-c", "import sys; from profiler.cli import main; sys.argv[0] = 'whowaits'; main()",
                         "sweep", str(tmp_path / "nope.toml")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert cp.returncode == 2 and cp.stderr.strip() == f"whowaits: error: no such manifest: {tmp_path / 'nope.toml'}"


def test_ray_backend_without_ray_is_one_line(tmp_path, monkeypatch):
    """Ray is an optional extra: without it, --backend ray says how to install it (and the local backend
    needs nothing of it)."""
    from profiler.sweep import load_manifest, run_sweep

    (tmp_path / "sweep.toml").write_text(MANIFEST)
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(WhowaitsError, match=r"pip install 'whowaits\[ray\]'"):
        run_sweep(load_manifest(tmp_path / "sweep.toml"), backend="ray")
    with pytest.raises(WhowaitsError, match="unknown backend 'slurm'"):
        run_sweep(load_manifest(tmp_path / "sweep.toml"), backend="slurm")
    with pytest.raises(WhowaitsError, match="go with --backend ray"):
        run_sweep(load_manifest(tmp_path / "sweep.toml"), address="auto")
    assert not (tmp_path / "reports").exists()


def test_resume_counts_a_report_with_the_same_sass_as_done(tmp_path):
    """A report whose recorded key differs from the rung's current key but whose SASS is the current build's
    (freshness 'restamp') is done; one whose SASS differs (v03's report filed as v04) is stale."""
    import shutil

    from profiler.sweep import jobs as J

    pytest.importorskip("kernels.build").find_nvcc()
    src = REPO / "reports" / "h200"
    for folder, as_version in (("v03_tensor_cores", "v03_tensor_cores"), ("v03_tensor_cores", "v04_swizzle_cp_async")):
        dst = tmp_path / "h200" / as_version
        dst.mkdir(parents=True)
        shutil.copy(src / folder / f"{SHAPE}.ncu-rep", dst)
        side = json.loads((src / folder / f"{SHAPE}.json").read_text()) | {"version": as_version, "build_hash": "f" * 24}
        (dst / f"{SHAPE}.json").write_text(json.dumps(side))
    st = {}
    for v in ("v03_tensor_cores", "v04_swizzle_cp_async"):
        j = J.Job("profile", SHAPE, v, runner_arg=v)
        st[v] = J.status(j, tmp_path, "h200", J.expected_build_hash(j))
    assert st == {"v03_tensor_cores": "restamp", "v04_swizzle_cp_async": "stale"}
    assert "restamp" in J.DONE and "stale" not in J.DONE


def test_git_commit_from_the_environment_wins_and_travels_with_the_job(monkeypatch):
    """$WHOWAITS_GIT_COMMIT wins over the .git git finds (a copy nested in another checkout, as the device's
    .devcarry/<name>, would report the outer HEAD); the sweep puts the driver's commit into every job's env;
    every device-side script refuses to start without it."""
    from profiler.provenance import git_state
    from profiler.sweep import jobs as J

    monkeypatch.setenv("WHOWAITS_GIT_COMMIT", "c" * 40)
    monkeypatch.setenv("WHOWAITS_GIT_DIRTY", "0")
    assert git_state(REPO) == ("c" * 40, False)
    assert J.commit_env() == {"WHOWAITS_GIT_COMMIT": "c" * 40, "WHOWAITS_GIT_DIRTY": "0"}
    monkeypatch.delenv("WHOWAITS_GIT_COMMIT")
    assert git_state(REPO)[0] != "c" * 40
    for script in ("scripts/device/h200_run.sh", "scripts/device/h200_ladder3.sh", "scripts/device/h200_v13.sh", "scripts/device/h200_profile_dataset.sh",
                   "scripts/device/h200_sweep.sh", "scripts/device/h200_recollect.py"):
        text = (REPO / script).read_text()
        assert "WHOWAITS_GIT_COMMIT:?" in text or 'settings.text("WHOWAITS_GIT_COMMIT")' in text, script


def test_an_interrupted_sweep_kills_its_running_ncu_sessions(tmp_path):
    """SIGTERM to the sweep (timeout, a scheduler) while a batch profiles: the job process runs in a session of
    its own, so the sweep kills it and ncu with it before it ends (its GPU lock dies with it: an ncu left running
    would profile on an unlocked GPU)."""
    import signal

    (tmp_path / "sweep.toml").write_text(MANIFEST)
    argv = [sys.executable, "-c", "import sys; from profiler.cli import main; sys.argv[0] = 'whowaits'; main()",
            "sweep", str(tmp_path / "sweep.toml")]
    proc = subprocess.Popen(argv, cwd=REPO, env=env_for(tmp_path, FAKE_NCU_SLEEP="60", FAKE_NCU_CRASH_IF="^$",
                                                         FAKE_NVIDIA_SMI_GPUS="1"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tl = tmp_path / "timeline.txt"
    deadline = time.time() + 120
    while time.time() < deadline and not (tl.is_file() and "start" in tl.read_text()):
        time.sleep(0.2)
    assert tl.is_file(), proc.communicate(timeout=30)
    pids = [int(line.split()[2]) for line in tl.read_text().splitlines() if line.startswith("start")]
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    assert proc.returncode != 0
    time.sleep(0.5)
    for pid in pids:
        try:  # gone, or a zombie nobody reaped yet (a container's init may not): not running
            state = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("State:"))
        except (OSError, StopIteration):
            state = "gone"
        assert state == "gone" or "Z" in state.split()[1], f"fake ncu {pid} still running ({state}) after the interrupt"
    assert any(e["event"] == "interrupted" and e["signal"] == "SIGTERM" for e in events(tmp_path))


def test_sweep_vs_singles_compares_per_shape(tmp_path):
    """scripts/sweep_vs_singles.py: per shape, the sweep's batches lock to unlock and its share of the command's
    wall against the sum of single `whowaits profile` runs, on the shapes that have singles only."""
    sys.path.insert(0, str(REPO / "scripts"))
    import sweep_vs_singles as SV

    a, b = "b1_h64_s1024_d128_fp16", "b4_h16_s4096_d128_fp16"
    ev = [{"t": 0, "event": "start"},
          {"t": 1, "event": "lock", "gpu": "g", "jobs": [f"profile:v01:{a}", f"profile:v02:{a}"]},
          {"t": 11, "event": "unlock", "gpu": "g"},
          {"t": 11, "event": "lock", "gpu": "g", "jobs": [f"profile:v01:{b}", f"profile:v02:{b}"]},
          {"t": 41, "event": "unlock", "gpu": "g"}]
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "sweep.jsonl").write_text("\n".join(json.dumps(e) for e in ev))
    jobs = [{"job": f"profile:{v}:{s}", "status": "done"} for v in ("v01", "v02") for s in (a, b)]
    (tmp_path / "logs" / "results.json").write_text(json.dumps(
        {"wall_s": 44.0, "jobs": jobs, "done": 4, "failed": 0, "gpus": ["g"], "started": "x"}))
    steps = [{"step": "sweep", "wall_s": 48.0, "rc": 0}] + [
        {"step": "single", "shape": a, "version": v, "wall_s": w, "rc": 0} for v, w in (("v01", 9.0), ("v02", 11.0))]
    (tmp_path / "timings.jsonl").write_text("\n".join(json.dumps(s) for s in steps))
    res = SV.compare(tmp_path)
    assert res["compared_shapes"] == [a]
    assert res["shapes"][a]["sweep_gpu_s"] == 10 and res["shapes"][a]["singles_s"] == 20
    assert res["shapes"][a]["speedup_gpu"] == 2.0 and res["shapes"][a]["sweep_share_s"] == 12.0
    assert "singles_s" not in res["shapes"][b] and "speedup_command" not in res["compared"]


def test_the_committed_h200_sweep_record(tmp_path):
    """reports/h200/sweeps/ladder-3-shapes/: the H200 sweep (39 jobs, none failed), its store (every report's
    row; queried from a copy, whose DuckDB file is rebuilt from the parquet parts) and its comparison."""
    import shutil

    pytest.importorskip("duckdb")
    rec = REPO / "reports" / "h200" / "sweeps" / "ladder-3-shapes"
    res = json.loads((rec / "logs" / "results.json").read_text())
    assert (res["done"], res["failed"], len(res["jobs"])) == (39, 0, 39)
    cmp_ = json.loads((rec / "comparison.json").read_text())
    assert cmp_["compared_shapes"] == [SHAPE] and cmp_["compared"]["speedup_gpu"] > 3
    shutil.copytree(rec / "store", tmp_path / "store", ignore=shutil.ignore_patterns("launches.duckdb", "index.json"))
    from profiler import store

    df = store.query("SELECT subject, shape, top_waiter FROM launches WHERE gpu = 'h200'", tmp_path / "store")
    assert len(df) == 39 and df["shape"].nunique() == 3 and df["subject"].nunique() == 13
    top = {(r.subject, r.shape): r.top_waiter for r in df.itertuples()}
    assert top[("v01_naive", "b4_h16_s4096_d128_fp16")] == "FP16·long_scoreboard"
    assert top[("v13_persistent", "b2_h32_s2048_d128_fp16")] == "WARPGROUP·barrier"
