"""Run a sweep: plan the jobs, skip the done ones, hand batches to workers, retry transient failures, and
keep a record of everything.

Local backend (:func:`run_local`): one worker thread per visible GPU (:func:`profiler.sweep.gpus.visible_gpus`),
each taking the next batch from one shared queue, so a fast GPU takes more batches. Before each batch a
worker takes its GPU's lock (:class:`profiler.sweep.gpus.GpuLock`), re-checks which jobs are still to do
(another sweep may have done them meanwhile), runs the batch in a job process pinned with
``CUDA_VISIBLE_DEVICES`` (:func:`profiler.sweep.jobs.run_process`), and releases the lock. A failed job whose
error kind is transient (:mod:`profiler.sweep.kinds`) is queued again, alone, after ``retry_delay_s``, up to
``retries`` more times; any other failure is final for that job only: the other jobs of its batch and of
the sweep go on (reports already written are never touched).

Records under ``manifest.logs``: ``jobs/<kind>-<subject>-<shape>.log`` (every attempt's output), ``sweep.jsonl``
(one event per line: start, lock, unlock, attempt, retry, job, end, with times and GPUs: the proof that no
GPU ran two sessions at once), ``results.json`` (the summary table), written atomically at the end.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from typing import Callable

from profiler.errors import WhowaitsError
from profiler.sweep import jobs as J
from profiler.sweep.gpus import Gpu, GpuLock, lock_dir, visible_gpus
from profiler.sweep.record import Record, SweepResult, finish, prepare, settle

__all__ = ["Record", "SweepResult", "prebuild", "prepare", "run_local", "run_sweep"]


def _slug(manifest, gpu: Gpu) -> str:
    from profiler.provenance import gpu_slug

    return manifest.gpu or gpu_slug(gpu.name)


def prebuild(jobs: list[J.Job]) -> None:
    """Build every ladder rung the profile jobs need, in parallel, before any GPU is locked (a build inside
    the job would hold its GPU idle); the cache makes the job's own build a lookup. A rung that does not
    build is left to its job, which reports the compiler's error."""
    pairs: dict[tuple[str, str], None] = {}
    for j in jobs:
        if j.kind == "profile" and j.runner_arg and not j.runner_arg.startswith("sdpa-"):
            pairs.setdefault((j.runner_arg, j.shape), None)
    if not pairs:
        return
    try:
        from kernels import build, registry
        from kernels.config import Shape

        todo: list = []
        for vid, shape in pairs:
            try:
                v, s = registry.get(vid), Shape.parse(shape)
                todo.append((v, v.config_for(s.head_dim, s.dtype, s.causal)))
            except WhowaitsError:
                continue
        build.build_many(todo)
    except Exception:  # noqa: BLE001 - no nvcc here, ...: each job builds (and fails) on its own
        pass


class _Queue:
    """Batches waiting to run; a worker blocks while the queue is empty but a batch in flight may still
    come back for a retry."""

    def __init__(self, batches: list[J.Batch]):
        self.items = deque(batches)
        self.in_flight = 0
        self.cv = threading.Condition()

    def take(self) -> J.Batch | None:
        with self.cv:
            while True:
                now = time.monotonic()
                due = next((b for b in self.items if b.not_before <= now), None)
                if due is not None:
                    self.items.remove(due)
                    self.in_flight += 1
                    return due
                if not self.items and self.in_flight == 0:
                    return None
                wait = min((b.not_before for b in self.items), default=now + 1.0) - now
                self.cv.wait(timeout=max(0.05, min(wait, 1.0)))

    def finish(self, retry: J.Batch | None = None) -> None:
        with self.cv:
            if retry is not None:
                self.items.append(retry)
            self.in_flight -= 1
            self.cv.notify_all()


class _kill_jobs_on_interrupt:
    """While the workers run: SIGINT / SIGTERM (Ctrl-C, ``timeout``, a batch scheduler) kill the running job
    processes with their process groups (:func:`profiler.sweep.jobs.kill_live`: they run in sessions of their
    own, so the signal does not reach them), record it, and end the sweep as the signal would. Without this an
    interrupted sweep released its GPU locks (they die with the driver) while its ncu sessions went on."""

    def __init__(self, record: Record):
        self.record = record
        self.old: dict = {}

    def _handler(self, signum, frame):
        import signal

        J.kill_live()
        self.record.event("interrupted", signal=signal.Signals(signum).name)
        raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)

    def __enter__(self):
        import signal

        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.old[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc):
        import signal

        for sig, h in self.old.items():
            signal.signal(sig, h)
        J.kill_live()  # nothing is left running on a normal exit; after an error, nothing may be


def run_local(manifest, *, force: bool = False, on_event: Callable[[dict], None] | None = None,
              gpus: list[Gpu] | None = None) -> SweepResult:
    """Run ``manifest`` on this host's visible GPUs (see the module docstring)."""
    gpus = gpus or visible_gpus()
    lock_dir(manifest.lock_dir)  # fail now, in one line, if the lock folder cannot exist
    slugs = {g.pin: _slug(manifest, g) for g in gpus}
    t0 = time.perf_counter()
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    todo, hashes, skipped = prepare(manifest, force, list(slugs.values()))
    record = Record(manifest.logs, on_event)
    prebuild(todo)
    record.event("start", backend="local", manifest=str(manifest.path), gpus=[g.pin for g in gpus],
                 jobs=len(todo) + len(skipped), skipped=[o.job for o in skipped], pid=os.getpid())
    final: dict[str, J.Outcome] = {o.job: o for o in skipped}
    flock = threading.Lock()
    queue = _Queue(J.batches(todo, manifest.batch))
    from profiler.provenance import git_state

    commit = git_state(J.REPO)[0]
    git_env = J.commit_env()  # every job records the driver's commit (a copy without .git: $WHOWAITS_GIT_COMMIT)

    def worker(g: Gpu) -> None:
        slug = slugs[g.pin]
        lock = GpuLock(manifest.lock_dir, g)
        where = f"{g.label} ({g.pin})"
        while (batch := queue.take()) is not None:
            retry = None
            try:
                run_jobs = [j for j in batch.jobs if force or batch.attempt > 1
                            or J.status(j, manifest.out, slug, hashes.get(j.id), manifest.logs, commit) not in J.DONE]
                for j in batch.jobs:
                    if j not in run_jobs:  # done meanwhile (by another sweep)
                        with flock:
                            final[j.id] = J.Outcome(j.id, "skipped", gpu=where, note="done meanwhile")
                        record.event("job", job=j.id, gpu=where, status="skipped", attempt=batch.attempt)
                if not run_jobs:
                    continue
                batch = J.Batch(run_jobs, batch.attempt)
                log = record.job_log(batch, where)
                try:
                    try:
                        waited = lock.acquire(manifest.lock_timeout_s, what=f"whowaits sweep {manifest.name}: "
                                              f"{batch.describe()}", on_wait=lambda h: record.event(
                                                  "lock_wait", gpu=where, holder=h))
                    except WhowaitsError as err:
                        from profiler.sweep.kinds import classify

                        outs = [J.Outcome(j.id, "failed", error=str(err), error_kind=classify(err)) for j in run_jobs]
                    else:
                        record.event("lock", gpu=where, lock=str(lock.path), waited_s=round(waited, 3),
                                     jobs=[j.id for j in run_jobs], attempt=batch.attempt)
                        try:
                            spec = J.spec_for(batch, manifest, manifest.out, slug, hashes, git_env)
                            outs = J.run_process(spec, g.pin, timeout=manifest.timeout_s, log=log,
                                                 workdir=manifest.logs / ".spec")
                        finally:
                            lock.release()
                            record.event("unlock", gpu=where, jobs=[j.id for j in run_jobs])
                    retry = settle(manifest, batch, outs, where, record, final, flock, log.paths)
                finally:
                    log.close()
            except Exception as err:  # noqa: BLE001 - a worker bug fails its batch, never the sweep
                for j in batch.jobs:
                    with flock:
                        final.setdefault(j.id, J.Outcome(j.id, "failed", gpu=where, error_kind="internal",
                                                         error=f"internal error: {type(err).__name__}: {err}"[:300],
                                                         attempts=batch.attempt))
            finally:
                queue.finish(retry)

    threads = [threading.Thread(target=worker, args=(g,), name=f"sweep-{g.label}", daemon=True) for g in gpus]
    with _kill_jobs_on_interrupt(record):
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return finish(manifest, "local", [g.pin for g in gpus], todo, skipped, final, record, t0, started)


def run_sweep(manifest, *, backend: str = "local", address: str | None = None, accelerator_type: str | None = None,
              force: bool = False, on_event: Callable[[dict], None] | None = None) -> SweepResult:
    """Run a loaded manifest on the chosen backend."""
    if backend == "local":
        if address or accelerator_type:
            raise WhowaitsError("--address and --accelerator-type go with --backend ray")
        return run_local(manifest, force=force, on_event=on_event)
    if backend == "ray":
        from profiler.sweep.ray_backend import run_ray

        return run_ray(manifest, address=address, accelerator_type=accelerator_type, force=force, on_event=on_event)
    raise WhowaitsError(f"unknown backend {backend!r}: use local or ray")
