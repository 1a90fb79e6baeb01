"""What both sweep backends share (the local one, :mod:`profiler.sweep.driver`, and the Ray one,
:mod:`profiler.sweep.ray_backend`): planning which jobs are still to do (:func:`prepare`), the sweep's
records (:class:`Record`), settling a batch's outcomes with the retries of transient failures
(:func:`settle`) and ending a sweep (:func:`finish`, :class:`SweepResult`).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from profiler.io import write_json_atomic
from profiler.sweep import jobs as J
from profiler.sweep.kinds import transient

__all__ = ["Record", "SweepResult", "finish", "prepare", "settle"]


@dataclass
class SweepResult:
    manifest: str
    backend: str
    gpus: list[str]
    outcomes: list[J.Outcome]
    wall_s: float
    started: str
    notes: list[str] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def failed(self) -> list[J.Outcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    def as_dict(self) -> dict:
        return {"manifest": self.manifest, "backend": self.backend, "gpus": self.gpus, "started": self.started,
                "wall_s": round(self.wall_s, 3), "done": self.count("done"), "skipped": self.count("skipped"),
                "failed": self.count("failed"), "notes": self.notes, "jobs": [asdict(o) for o in self.outcomes]}


class Record:
    """The sweep's own log (``sweep.jsonl``) and per-job logs; thread-safe. ``on_event`` sees every event."""

    def __init__(self, logs: Path, on_event: Callable[[dict], None] | None = None):
        self.logs = Path(logs)
        (self.logs / "jobs").mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._f = open(self.logs / "sweep.jsonl", "a", buffering=1)
        self.on_event = on_event

    def event(self, event: str, **kw) -> None:
        rec = {"t": round(time.time(), 3), "event": event, **kw}
        with self._lock:
            self._f.write(json.dumps(rec) + "\n")
        if self.on_event:
            self.on_event(rec)

    def job_log(self, batch: J.Batch, where: str):
        """A function writing one line to the log of every job of ``batch`` (each attempt appends)."""
        paths = [self.logs / "jobs" / f"{j.slug}.log" for j in batch.jobs]
        files = [open(p, "a", buffering=1) for p in paths]
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
        head = (f"=== {stamp} UTC attempt {batch.attempt} on {where}; batch of {len(batch.jobs)}: "
                f"{', '.join(j.id for j in batch.jobs)} ===")
        lock = threading.Lock()

        def write(line: str) -> None:
            with lock:
                for f in files:
                    f.write(line + "\n")

        write(head)
        def close() -> None:
            for f in files:
                f.close()

        write.close = close  # type: ignore[attr-defined]
        write.paths = paths  # type: ignore[attr-defined]
        return write

    def close(self) -> None:
        self._f.close()


def prepare(manifest, force: bool, slugs: list[str]) -> tuple[list[J.Job], dict, list[J.Outcome]]:
    """(jobs to run, expected build hashes, outcomes of jobs skipped as done on every GPU folder in ``slugs``)."""
    from profiler.provenance import git_state

    all_jobs = J.plan(manifest)
    hashes = {j.id: J.expected_build_hash(j) for j in all_jobs if j.kind == "profile"}
    commit = git_state(J.REPO)[0]
    todo, skipped = [], []
    for j in all_jobs:
        st = [] if force or not slugs else [J.status(j, manifest.out, s, hashes.get(j.id), manifest.logs, commit)
                                            for s in slugs]
        if st and all(x in J.DONE for x in st):
            note = ("done (same SASS; build key changed: scripts/backfill_provenance.py --restamp)"
                    if "restamp" in st else "done (same build hash)")
            skipped.append(J.Outcome(j.id, "skipped", gpu=",".join(sorted(set(slugs))), note=note))
        else:
            todo.append(j)
    return todo, hashes, skipped


def settle(manifest, batch: J.Batch, outs: list[J.Outcome], where: str, record: Record, final: dict,
            lock: threading.Lock, log_paths: list[Path]) -> J.Batch | None:
    """Record each outcome; return a batch of the transient failures to try again (None if there is none)."""
    by_id = {j.id: j for j in batch.jobs}
    paths = dict(zip([j.id for j in batch.jobs], log_paths))
    again = []
    for o in outs:
        o.gpu, o.attempts, o.log = where, batch.attempt, str(paths.get(o.job, ""))
        if o.status == "failed" and transient(o.error_kind or "") and batch.attempt <= manifest.retries:
            again.append(by_id[o.job])
            record.event("retry", job=o.job, gpu=where, attempt=batch.attempt, error_kind=o.error_kind, error=o.error)
            continue
        with lock:
            final[o.job] = o
        record.event("job", job=o.job, gpu=where, status=o.status, attempt=batch.attempt, error_kind=o.error_kind,
                     error=o.error, report=o.report, wall_s=round(o.wall_s, 3))
    if not again:
        return None
    return J.Batch(again, attempt=batch.attempt + 1, not_before=time.monotonic() + manifest.retry_delay_s)


def finish(manifest, backend, gpus, todo, skipped, final, record, t0, started) -> SweepResult:
    """Every job's final outcome (never ran: failed), the end event, ``results.json``; the result."""
    order = [o.job for o in skipped] + [j.id for j in todo]
    outs = [final.get(i) or J.Outcome(i, "failed", error="never ran (the sweep was interrupted)", error_kind="error")
            for i in dict.fromkeys(order)]
    res = SweepResult(str(manifest.path), backend, gpus, outs, time.perf_counter() - t0, started)
    record.event("end", wall_s=round(res.wall_s, 3), done=res.count("done"), skipped=res.count("skipped"),
                 failed=res.count("failed"))
    record.close()
    write_json_atomic(Path(manifest.logs) / "results.json", res.as_dict())
    return res
