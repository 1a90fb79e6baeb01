"""The disassembly worker (profiler/sass_worker.py) on the committed reports: the frames a cold ingest
builds with the worker equal, to the last byte, those built without it (one and several launches,
PM timelines, SASS cache on and off); the ingester then never disassembles in its own process; a worker
that dies, is killed or hangs costs nothing but time; a worker never outlives its process; a forked
child starts its own."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import ncu_report
import pandas as pd
import pytest

from profiler import report as R
from profiler import sass_worker
from profiler.errors import WhowaitsError

ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "reports/h200"
PUBLIC = ROOT / "tests/public-reports"
FLASH = H200 / "ext-sdpa-flash-fullset/b1_h64_s1024_d128_fp16.ncu-rep"  # 3,368 slots, PM timeline
CUDNN = H200 / "ext-sdpa-cudnn-fullset/b1_h64_s1024_d128_fp16.ncu-rep"
SUBJECTS = [
    CUDNN,
    H200 / "zoo/cublas-gemm-fp16/m8192_n8192_k8192_fp16.ncu-rep",  # nvjet, warp-specialised
    H200 / "v21_causal_pairs/b4_h16_s4096_d128_fp16.ncu-rep",  # whowaits set
    PUBLIC / "esmm-research/a10g-sgemm-default-set.ncu-rep",  # 4 launches, an A10G, no per-PC source
    PUBLIC / "sglang-flyinglandlord/h800-sampling-flash-full.ncu-rep",  # 5 launches of 2 kernels
]


@pytest.fixture(autouse=True)
def _worker_idle():
    """Each test starts with this process's worker idle (a known build's last answers drain on a thread)."""
    _idle()


@pytest.fixture
def in_process_disassembly(monkeypatch):
    """Counts ncu_report's sass_by_pc calls in this process."""
    calls: list[int] = []
    real = ncu_report.IAction.sass_by_pc

    def counting(self, pc):
        calls.append(pc)
        return real(self, pc)

    monkeypatch.setattr(ncu_report.IAction, "sass_by_pc", counting)
    return calls


def _ingest(path: Path, worker: str, monkeypatch, sass_cache: bool = False):
    monkeypatch.setenv("WHOWAITS_SASS_WORKER", worker)
    return R._ingest(path, sass_cache=sass_cache)


@pytest.mark.parametrize("path", SUBJECTS, ids=lambda p: p.parent.name)
def test_frames_with_the_worker_equal_those_without(path, monkeypatch, in_process_disassembly):
    alone = _ingest(path, "0", monkeypatch)
    has_sass = len(alone[1]) > 0  # the A10G default set has no per-PC metrics: no SASS either way
    assert bool(in_process_disassembly) == has_sass, "the reference is this process's own disassembly"
    in_process_disassembly.clear()
    helped = _ingest(path, "1", monkeypatch)
    for a, b in zip(alone, helped):
        pd.testing.assert_frame_equal(a, b)
    assert in_process_disassembly == [], "the worker read every slot: none was read here again"
    if has_sass:
        assert helped[1]["sass"].str.len().gt(0).all()


@pytest.mark.parametrize("path", [FLASH, CUDNN], ids=lambda p: p.parent.name)
def test_the_pm_timeline_equals_ncu_reports_whoever_reads_it(path, monkeypatch):
    """The worker reads a launch's PM-sampled metrics when its disassembly is short (cuDNN, 1,272 slots),
    the ingester when it is long (flash, 3,368 slots: it reads them while the worker disassembles); both
    sides decide from the same PCs, so the ingester never reads them after waiting for the worker."""
    helped = _ingest(path, "1", monkeypatch)
    tf = helped[2]
    assert len(tf) > 1000 and tf["metric"].nunique() >= 5
    action = ncu_report.load_report(str(path)).range_by_idx(0).action_by_idx(0)
    pm = sass_worker.pm_metrics(action)
    assert set(pm) == set(tf["metric"])
    for name in sorted(pm)[:3]:
        times, values = sass_worker.timeline(action, {name: pm[name]})[name]
        got = tf[tf["metric"] == name]
        assert got["t_ns"].tolist() == times and got["value"].tolist() == values
    slots = len(helped[1])
    assert sass_worker.reads_timeline(slots) == (path == CUDNN)
    read_here: list[int] = []
    real = R._timeline_frame

    def counting(action, index, pm_metrics, f, read=None):
        read_here.append(read is None)
        return real(action, index, pm_metrics, f, read)

    monkeypatch.setattr(R, "_timeline_frame", counting)
    _ingest(path, "1", monkeypatch)
    # cuDNN: one call, with the worker's reading; flash: one call before the worker's answer, reading here
    assert read_here == ([False] if path == CUDNN else [True])


def test_a_known_build_and_a_changed_cache_folder(tmp_path, monkeypatch, in_process_disassembly):
    """With the SASS cache on, the first report of a build is disassembled by the worker (not here) and
    cached; a second report of the same build reads the cache; a new cache folder set in this process
    after the worker started is the one the worker looks in (so it disassembles again, not here)."""
    second = H200 / "ext-sdpa-cudnn/b1_h64_s1024_d128_fp16.ncu-rep"
    truth = _ingest(second, "0", monkeypatch)
    in_process_disassembly.clear()
    monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(tmp_path / "a"))
    _ingest(CUDNN, "1", monkeypatch, sass_cache=True)
    assert list((tmp_path / "a").glob("*.sass")), "the parent caches the worker's text"
    got = _ingest(second, "1", monkeypatch, sass_cache=True)
    pd.testing.assert_frame_equal(got[1], truth[1])
    monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(tmp_path / "b"))
    again = _ingest(second, "1", monkeypatch, sass_cache=True)
    pd.testing.assert_frame_equal(again[1], truth[1])
    assert in_process_disassembly == []
    assert list((tmp_path / "b").glob("*.sass"))


KNOWN = [(CUDNN, H200 / "ext-sdpa-cudnn/b1_h64_s1024_d128_fp16.ncu-rep"),
         (PUBLIC / "sglang-flyinglandlord/h800-sampling-flash-full.ncu-rep",) * 2]  # 5 launches of 2 kernels


@pytest.mark.parametrize("first,second", KNOWN, ids=lambda p: p.parent.name)
def test_a_known_builds_per_pc_columns_from_the_worker_equal_the_ingesters(first, second, tmp_path, monkeypatch):
    """For a report of a known build the worker reads the per-PC columns of every launch: they equal, value for
    value, what the ingester reads itself from the metrics it chose; the whole ingest gives the same frames
    whether the ingester took the worker's columns or read them itself, and the worker is free afterwards."""
    import ncu_report as ncu

    monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(tmp_path))
    truth = _ingest(second, "0", monkeypatch)
    _ingest(first, "1", monkeypatch, sass_cache=True)  # the build is known from here on
    pending = sass_worker.request(second, True, known=True)
    assert pending is not None and pending.known
    ctx = ncu.load_report(str(second))
    actions = [ctx.range_by_idx(r).action_by_idx(a) for r in range(ctx.num_ranges())
               for a in range(ctx.range_by_idx(r).num_actions())]
    for i, action in enumerate(actions):
        mine = sass_worker.pc_metrics(action)
        answer = pending.take(i)
        assert R._worker_columns(answer, mine) == sass_worker.pc_columns(mine, ncu)
        if mine:
            assert R._worker_columns(answer, dict(list(mine.items())[1:])) is None  # other metrics: not taken
    pending.close(ok=True)
    _idle()
    # taken whenever they came first: a slow ingester takes every launch's columns from the worker
    took: list = []
    real = R._worker_columns

    def slow(answer, pc_metrics):
        got = real(answer, pc_metrics)
        took.append(got is not None)
        return got

    def waiting(self, index, wait=True):
        return real_take(self, index, wait=True)

    real_take = sass_worker.Pending.take
    monkeypatch.setattr(R, "_worker_columns", slow)
    monkeypatch.setattr(sass_worker.Pending, "take", waiting)
    helped = _ingest(second, "1", monkeypatch, sass_cache=True)
    assert took and all(took)
    for a, b in zip(truth, helped):
        pd.testing.assert_frame_equal(a, b)
    # and ones that never come (the worker busy elsewhere) are read here
    monkeypatch.setattr(sass_worker.Pending, "take", lambda self, index, wait=True: sass_worker.LATER)
    for a, b in zip(truth, _ingest(second, "1", monkeypatch, sass_cache=True)):
        pd.testing.assert_frame_equal(a, b)
    _idle()


def _idle() -> None:
    """Wait until this process's worker has drained its last report (a known build's answers are read on a
    thread after the ingest returns)."""
    w = sass_worker._WORKER
    deadline = time.monotonic() + 60
    while w is not None and w.alive() and not w.busy.acquire(blocking=False):
        assert time.monotonic() < deadline, "the drain never released the worker"
        time.sleep(0.05)
    else:
        if w is not None and w.alive():
            w.busy.release()


def test_a_known_builds_worker_stops_when_the_ingester_is_done(tmp_path, monkeypatch):
    """The ingester of a known build does not wait for the rest of the worker's reads: closing sends a cancel
    and returns, the worker stops at its next column and is free for the next report (a cold ingest waits for
    that, a known build goes without it meanwhile); one that does not answer the cancel is ended after the
    timeout."""
    monkeypatch.setenv("WHOWAITS_SASS_WORKER", "1")
    monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(tmp_path))
    many = PUBLIC / "sglang-flyinglandlord/h800-sampling-flash-full.ncu-rep"  # 5 launches
    sass_worker.shutdown()
    assert sass_worker.request(many, True, known=True) is None  # no worker is started for a known build
    assert sass_worker._WORKER is None
    warm = sass_worker.request(CUDNN, False)  # a cold ingest starts one
    assert warm is not None
    warm.close(ok=True)
    pending = sass_worker.request(many, True, known=True)
    assert pending is not None
    w = sass_worker._WORKER
    assert pending.take(0) is not None  # the worker is under way
    t = time.monotonic()
    pending.close(ok=True)
    assert time.monotonic() - t < 0.5, "closing does not wait for the worker"
    again = sass_worker.request(CUDNN, True)  # a cold ingest waits for the cancelled report's end
    assert again is not None and sass_worker._WORKER is w and w.alive()
    assert again.take(0) is not None
    again.close(ok=True)
    known = sass_worker.request(CUDNN, True, known=True)
    assert known is not None and known.take(0)["pc"]["columns"]  # the columns in full
    known.close(ok=True)
    _idle()
    pending = sass_worker.request(many, True, known=True)
    os.kill(w.proc.pid, 19)  # SIGSTOP: the cancel is never answered
    monkeypatch.setattr(sass_worker, "TIMEOUT_S", 0.5)
    t = time.monotonic()
    pending.close(ok=True)
    assert time.monotonic() - t < 0.5
    assert sass_worker.request(CUDNN, True, known=True) is None  # a known build does not wait for it
    deadline = time.monotonic() + 30
    while w.proc.poll() is None:  # ended after the timeout
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert sass_worker._WORKER is None


def test_a_dead_worker_is_replaced_and_costs_nothing_but_time(monkeypatch):
    monkeypatch.setenv("WHOWAITS_SASS_WORKER", "1")
    truth = _ingest(CUDNN, "0", monkeypatch)
    _ingest(CUDNN, "1", monkeypatch)
    w = sass_worker._WORKER
    assert w is not None and w.alive()
    w.proc.kill()
    w.proc.wait()
    pending = sass_worker.request(CUDNN, False)  # the dead one is noticed: a new worker answers
    assert pending is not None and sass_worker._WORKER is not w
    pending.close(ok=True)
    # a worker killed while the ingester waits for its answer: the ingester reads the text itself
    pending = sass_worker.request(CUDNN, False)
    assert pending is not None
    sass_worker._WORKER.proc.kill()
    assert pending.take(0) is None
    assert sass_worker._WORKER is None
    pending.close(ok=True)  # after a failure: nothing left to release
    got = _ingest(CUDNN, "1", monkeypatch)
    for a, b in zip(truth, got):
        pd.testing.assert_frame_equal(a, b)


def test_a_worker_that_does_not_answer_is_ended_after_the_timeout(monkeypatch):
    monkeypatch.setenv("WHOWAITS_SASS_WORKER", "1")
    pending = sass_worker.request(CUDNN, False)
    assert pending is not None
    w = sass_worker._WORKER
    os.kill(w.proc.pid, 19)  # SIGSTOP: alive, silent
    monkeypatch.setattr(sass_worker, "TIMEOUT_S", 0.5)
    t = time.monotonic()
    assert pending.take(0) is None
    assert time.monotonic() - t < 10
    assert w.proc.poll() is not None and sass_worker._WORKER is None


def test_a_damaged_report_gives_the_usual_error_and_leaves_no_busy_worker(tmp_path, monkeypatch):
    """A report whose blocks are intact but whose content is not a report: the ingester's one-line error;
    the worker of that read is released (the next read gets one)."""
    monkeypatch.setenv("WHOWAITS_SASS_WORKER", "1")
    bad = tmp_path / "bad.ncu-rep"
    blob = bytearray(CUDNN.read_bytes())
    for i in range(2000, len(blob) - 2000, 997):
        blob[i] ^= 0x5A
    bad.write_bytes(bytes(blob))
    with pytest.raises(WhowaitsError):
        R.load_report(bad, use_cache=False)
    pending = sass_worker.request(CUDNN, False)
    assert pending is not None, "a worker is free for the next report"
    pending.close(ok=True)


def test_the_worker_ends_with_its_process(tmp_path):
    code = ("import os, sys; os.environ['WHOWAITS_SASS_WORKER'] = '1'\n"
            "from profiler import report, sass_worker\n"
            f"report._ingest(__import__('pathlib').Path({str(CUDNN)!r}), sass_cache=False)\n"
            "print(sass_worker._WORKER.proc.pid, flush=True)\n"
            "os._exit(0)\n")  # no atexit: the worker must notice the closed pipe by itself
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    pid = int(out.stdout.split()[-1])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _running(pid):
        time.sleep(0.1)
    assert not _running(pid), "the worker outlived its process"


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_forked_child_does_not_use_its_parents_worker(monkeypatch):
    monkeypatch.setenv("WHOWAITS_SASS_WORKER", "1")
    _ingest(CUDNN, "1", monkeypatch)
    assert sass_worker._WORKER is not None
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        os.write(w, b"none" if sass_worker._WORKER is None else b"inherited")
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    assert os.read(r, 16) == b"none"
    os.close(r)


def test_off_and_on(monkeypatch):
    monkeypatch.setenv("WHOWAITS_SASS_WORKER", "0")
    assert not sass_worker.enabled() and sass_worker.request(CUDNN, False) is None
    monkeypatch.setenv("WHOWAITS_SASS_WORKER", "1")
    assert sass_worker.enabled()
    with sass_worker.off():  # a pool of ingesting processes (profiler/compare/cache.py) turns it off
        assert sass_worker.request(CUDNN, False) is None
    pending = sass_worker.request(CUDNN, False)
    assert pending is not None
    pending.close(ok=True)
    monkeypatch.delenv("WHOWAITS_SASS_WORKER")
    assert sass_worker.enabled() == (len(os.sched_getaffinity(0)) >= 2)
