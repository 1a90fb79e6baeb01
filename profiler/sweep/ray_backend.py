"""The Ray backend: ``whowaits sweep MANIFEST --backend ray [--address ADDR] [--accelerator-type T]``.

Each batch is one Ray task with ``num_gpus=1`` (and ``accelerator_type`` when asked), so Ray never gives
two tasks one GPU; the task still takes the node's per-GPU lock (:class:`profiler.sweep.gpus.GpuLock`),
since processes outside Ray may use the GPU too. The task runs the same job process as the local backend
(:func:`profiler.sweep.jobs.run_process`, pinned to the GPU Ray assigned) into a temporary folder on the
node, and returns each report and sidecar as bytes with the outcomes and the log; the driver writes them
atomically under ``manifest.out`` (temporary file, rename), so no shared filesystem is needed. Transient
failures (a lost node or worker included) are retried as on the local backend.

Resume: the driver reads which reports exist under ``manifest.out`` (every GPU folder) with their build
hashes and sends them with the batch; the node, which knows its GPU's folder, skips what is done. With
``gpu`` set in the manifest the driver skips those jobs itself.

Ray is an optional extra: ``pip install 'whowaits[ray]'``. Without ``--address`` a Ray already
initialised in this process is used, else ``ray.init()`` (``RAY_ADDRESS``, else a local Ray).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from profiler.errors import WhowaitsError
from profiler.io import write_atomic
from profiler.sweep import jobs as J
from profiler.sweep.record import Record, finish, prepare, settle


def _recorded(manifest, jobs: list[J.Job], hashes: dict | None = None) -> dict:
    """{job id: {gpu folder: recorded build hash}} for the profile reports that exist under ``manifest.out``;
    a report whose key changed but whose SASS is the current build's (:func:`profiler.sweep.jobs.status`
    ``restamp``) is given the expected key, so the task skips it as done."""
    hashes = hashes or {}
    out: dict[str, dict] = {}
    root = Path(manifest.out)
    folders = [p.name for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
    for j in jobs:
        if j.kind != "profile":
            continue
        for g in folders:
            rep = J.report_path(root, g, j)
            side = rep.with_name(j.shape + ".json")
            if rep.is_file() and side.is_file():
                try:
                    rec = json.loads(side.read_text()).get("build_hash")
                except (OSError, ValueError, AttributeError):
                    continue
                exp = hashes.get(j.id)
                if rec != exp and J.status(j, root, g, exp) == "restamp":
                    rec = exp
                out.setdefault(j.id, {})[g] = rec
    return out


def task(spec: dict, recorded: dict, force: bool, gpu_folder: str | None, timeout: float, lock_dir: str,
         lock_timeout: float, attempt: int) -> dict:
    """One batch on the GPU Ray assigned to this task (see the module docstring). Never raises."""
    from profiler.provenance import gpu_slug
    from profiler.sweep.gpus import GpuLock, visible_gpus
    from profiler.sweep.kinds import classify

    events: list[dict] = []
    lines: list[str] = []
    host = socket.gethostname()
    spec = J.Spec(**spec)
    try:
        g = visible_gpus()[0]
    except WhowaitsError as err:
        return {"host": host, "gpu": None, "outcomes": [asdict(J.Outcome(_jid(d), "failed",
                error=str(err), error_kind=classify(err))) for d in spec.jobs], "files": {}, "log": str(err),
                "events": events}
    slug = gpu_folder or gpu_slug(g.name)
    where = f"{host}:{g.label} ({g.pin})"
    todo, skipped = [], []
    for d in spec.jobs:
        jid = _jid(d)
        if not force and attempt == 1 and slug in recorded.get(jid, {}) \
                and recorded[jid][slug] == spec.build_hashes.get(jid):
            skipped.append(asdict(J.Outcome(jid, "skipped", gpu=where, note="done (same build hash)")))
        else:
            todo.append(d)
    if not todo:
        return {"host": host, "gpu": where, "outcomes": skipped, "files": {}, "log": "", "events": events}
    spec.jobs, spec.gpu = todo, slug
    tmp = Path(tempfile.mkdtemp(prefix="whowaits-sweep-"))
    spec.out = str(tmp / "reports")
    spec.logs = str(tmp / "logs")
    files: dict[str, bytes] = {}
    lock = GpuLock(lock_dir, g)
    try:
        try:
            waited = lock.acquire(lock_timeout, what=f"whowaits sweep (ray) on {host}: {len(todo)} job(s)")
        except WhowaitsError as err:
            outs = [J.Outcome(_jid(d), "failed", error=str(err), error_kind=classify(err)) for d in todo]
        else:
            events.append({"t": round(time.time(), 3), "event": "lock", "gpu": where, "lock": str(lock.path),
                           "waited_s": round(waited, 3), "jobs": [_jid(d) for d in todo], "attempt": attempt})
            try:
                outs = J.run_process(spec, g.pin, timeout=timeout, log=lines.append, workdir=tmp / "spec")
            finally:
                lock.release()
                events.append({"t": round(time.time(), 3), "event": "unlock", "gpu": where,
                               "jobs": [_jid(d) for d in todo]})
        for o in outs:
            if o.status == "done" and o.report:
                rep = Path(o.report)
                rel = rep.relative_to(spec.out)
                files[str(rel)] = rep.read_bytes()
                side = rep.with_name(rep.name[: -len(".ncu-rep")] + ".json")
                if side.is_file():
                    files[str(rel.with_name(side.name))] = side.read_bytes()
                o.report = str(rel)
    finally:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return {"host": host, "gpu": where, "outcomes": skipped + [asdict(o) for o in outs], "files": files,
            "log": "\n".join(lines), "events": events}


def _jid(d: dict) -> str:
    return J.Job(**{**d, "versions": tuple(d.get("versions") or ())}).id


def run_ray(manifest, *, address: str | None = None, accelerator_type: str | None = None, force: bool = False,
            on_event: Callable[[dict], None] | None = None):
    """Run ``manifest`` as Ray tasks (see the module docstring)."""
    try:
        import ray
    except ImportError:
        raise WhowaitsError("the Ray backend needs Ray: pip install 'whowaits[ray]' (or use --backend local)") from None
    started_here = False
    if not ray.is_initialized():
        try:
            ray.init(address=address, log_to_driver=False, include_dashboard=False)
        except Exception as err:  # noqa: BLE001 - ConnectionError, RuntimeError, ...: one line
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise WhowaitsError(f"cannot start or reach Ray{f' at {address}' if address else ''}: {first}") from None
        started_here = True
    try:
        if not ray.cluster_resources().get("GPU"):
            raise WhowaitsError("the Ray cluster has no GPU resources: start its nodes with GPUs (ray start --num-gpus N)")
        t0 = time.perf_counter()
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        todo, hashes, skipped = prepare(manifest, force, [manifest.gpu] if manifest.gpu else [])
        recorded = {} if force else _recorded(manifest, todo, hashes)
        git_env = J.commit_env()  # the driver's commit travels to the nodes (they may have no checkout)
        record = Record(manifest.logs, on_event)
        record.event("start", backend="ray", manifest=str(manifest.path), address=address,
                     gpus=[f"ray: {ray.cluster_resources().get('GPU', 0):g} GPU(s)"], jobs=len(todo) + len(skipped),
                     skipped=[o.job for o in skipped], pid=os.getpid())
        opts = {"num_gpus": 1, "max_retries": 0}
        if accelerator_type:
            opts["accelerator_type"] = accelerator_type
        remote = ray.remote(**opts)(task)
        final: dict[str, J.Outcome] = {o.job: o for o in skipped}
        import threading

        flock = threading.Lock()
        waiting = list(J.batches(todo, manifest.batch))
        pending: dict = {}
        while waiting or pending:
            now = time.monotonic()
            for b in [b for b in waiting if b.not_before <= now]:
                waiting.remove(b)
                spec = J.spec_for(b, manifest, Path("."), manifest.gpu or "", hashes, git_env)
                ref = remote.remote(asdict(spec), recorded, force, manifest.gpu, manifest.timeout_s,
                                    str(manifest.lock_dir), manifest.lock_timeout_s, b.attempt)
                pending[ref] = b
            if not pending:
                time.sleep(0.1)
                continue
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            for ref in ready:
                b = pending.pop(ref)
                try:
                    res = ray.get(ref)
                except Exception as err:  # noqa: BLE001 - the node or worker died: transient
                    first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
                    res = {"host": None, "gpu": "ray", "files": {}, "log": str(err), "events": [],
                           "outcomes": [asdict(J.Outcome(j.id, "failed", error=f"worker died: {first}",
                                                         error_kind="worker_lost")) for j in b.jobs]}
                retry = _land(manifest, b, res, record, final, flock)
                if retry is not None:
                    waiting.append(retry)
        return finish(manifest, "ray", [f"ray:{address or 'auto'}"], todo, skipped, final, record, t0, started)
    finally:
        if started_here:
            ray.shutdown()


def _land(manifest, batch: J.Batch, res: dict, record: Record, final: dict, flock) -> J.Batch | None:
    """Write a task's files under ``manifest.out`` (atomically), its log and events; settle its outcomes."""
    for e in res.get("events", []):
        record.event(e.pop("event"), **{**e, "node_t": e.pop("t")})
    out = Path(manifest.out)
    for rel, data in sorted(res.get("files", {}).items(), key=lambda kv: not kv[0].endswith(".ncu-rep")):
        write_atomic(out / rel, data)  # the report first, then its sidecar: a sidecar never describes a missing report
    outs = [J.Outcome(**o) for o in res["outcomes"]]
    for o in outs:
        if o.report:
            o.report = str(out / o.report)
    where = res.get("gpu") or "ray"
    done_skips = [o for o in outs if o.status == "skipped"]
    for o in done_skips:
        with flock:
            final[o.job] = o
        record.event("job", job=o.job, gpu=o.gpu, status="skipped", attempt=batch.attempt)
    ran = [o for o in outs if o.status != "skipped"]
    if not ran:
        return None
    ran_ids = {o.job for o in ran}
    sub = J.Batch([j for j in batch.jobs if j.id in ran_ids], batch.attempt)
    log = record.job_log(sub, where)
    try:
        for line in (res.get("log") or "").splitlines():
            log(line)
        return settle(manifest, sub, ran, where, record, final, flock, log.paths)
    finally:
        log.close()
