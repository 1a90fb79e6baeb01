"""Sweep jobs: what one manifest expands to, which jobs are already done, and the job function itself.

A :class:`Job` is one subject at one shape for ``profile`` (its report + sidecar), or one shape for
``bench`` (every manifest version plus the torch baselines, measured in one run, as ``whowaits bench``
does) and ``check`` (``python -m kernels.correctness``). Profile jobs of ladder versions and runner subjects at
one shape are grouped into a :class:`Batch` of up to ``manifest.batch``: ONE ncu session over ONE runner
process (ncu's first profiled kernel per process is the expensive one; :func:`profiler.collect.run_session`
splits the session report per subject and goes on past a subject that crashes). ``--cmd`` subjects and
bench/check jobs are batches of one.

Resume: a profile job is *done* when its report and sidecar exist and the sidecar's ``build_hash`` equals the
build cache key of the rung it would profile now (:func:`expected_build_hash`; null for external programs,
so for them the existing pair counts as done). A report whose hash differs is profiled again (*stale*) unless
the rung's current build has the profiled SASS instruction by instruction (:func:`profiler.freshness.check_report`
says ``restamp``: a header moved, a comment changed): then it still describes the code and counts as done
(status ``restamp``; ``scripts/backfill_provenance.py --restamp`` takes the new key into its sidecar).
A bench job is done when today's result file for its shape exists (the file ``whowaits bench`` writes);
a check job when its log under the sweep's logs says it passed at the same commit.

:func:`execute` runs one batch in the calling process (it is what the job process, ``python -m
profiler.sweep.jobproc SPEC.json RESULT.json``, calls; the local backend starts that process pinned to its GPU, a Ray task
does the same on its node). It calls :func:`profiler.collect.run_session` for profile batches and the
existing ``whowaits bench`` / ``kernels.correctness`` entry points for the others: nothing is duplicated here.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from profiler import paths
from profiler.errors import WhowaitsError
from profiler.sweep.kinds import classify

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Job:
    kind: str  # profile | bench | check
    shape: str
    subject: str | None = None  # report folder (version id, ext-…, a cmd subject's name); None for bench/check
    runner_arg: str | None = None  # version id or runner ext name: batched into one runner session
    cmd: str | None = None  # for --cmd subjects: the command line (shape placeholders filled in)
    kernel: str | None = None
    launch_skip: int = 0
    nvtx: str | None = None
    versions: tuple[str, ...] = ()  # bench / check: the versions they run

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.subject}:{self.shape}" if self.subject else f"{self.kind}:{self.shape}"

    @property
    def slug(self) -> str:
        return self.id.replace(":", "-")


@dataclass
class Batch:
    jobs: list[Job]
    attempt: int = 1
    not_before: float = 0.0  # monotonic time before which a retry does not start

    @property
    def kind(self) -> str:
        return self.jobs[0].kind

    @property
    def shape(self) -> str:
        return self.jobs[0].shape

    def describe(self) -> str:
        j = self.jobs[0]
        if j.kind != "profile":
            return f"{j.kind} {j.shape}"
        names = [x.subject for x in self.jobs]
        return f"profile {', '.join(names[:3])}{' …' if len(names) > 3 else ''} @ {j.shape}"


@dataclass
class Outcome:
    """What became of one job."""

    job: str
    status: str  # done | skipped | failed
    gpu: str | None = None
    error: str | None = None
    error_kind: str | None = None
    attempts: int = 0
    wall_s: float = 0.0
    report: str | None = None
    passes: int | None = None
    log: str | None = None
    note: str | None = None


def _fill(template: str, shape: str) -> str:
    from kernels.config import Shape

    s = Shape.parse(shape)
    return template.format(shape=s.key, batch=s.batch, heads=s.heads, seqlen=s.seqlen, head_dim=s.head_dim,
                           dtype=s.dtype, causal=int(s.causal))


def plan(manifest) -> list[Job]:
    """Every job of the manifest, in the order they are queued: profile, then bench, then check; by shape."""
    jobs: list[Job] = []
    for kind in manifest.run:
        for shape in manifest.shapes:
            if kind == "profile":
                for v in manifest.versions:
                    jobs.append(Job("profile", shape, v, runner_arg=v))
                from profiler.collect import EXT_SUBJECTS

                for e in manifest.ext:
                    jobs.append(Job("profile", shape, EXT_SUBJECTS[e][0], runner_arg=e))
                for c in manifest.cmds:
                    try:
                        cmd = _fill(c.cmd, shape)
                    except (KeyError, IndexError, ValueError) as err:
                        raise WhowaitsError(f"{manifest.path}: subjects.cmd {c.name!r}: bad placeholder in cmd ({err})") from None
                    jobs.append(Job("profile", shape, c.name, cmd=cmd, kernel=c.kernel, launch_skip=c.launch_skip,
                                    nvtx=c.nvtx))
            elif manifest.versions:
                jobs.append(Job(kind, shape, versions=tuple(manifest.versions)))
            else:
                raise WhowaitsError(f"{manifest.path}: run = [{kind!r}] needs subjects.versions")
    ids = [j.id for j in jobs]
    dup = next((i for i in ids if ids.count(i) > 1), None)
    if dup:
        raise WhowaitsError(f"{manifest.path}: two subjects would write the same report ({dup})")
    return jobs


def batches(jobs: list[Job], size: int) -> list[Batch]:
    """Runner profile jobs of one shape in batches of up to ``size``; everything else alone."""
    out: list[Batch] = []
    open_by_shape: dict[str, Batch] = {}
    for j in jobs:
        if j.kind == "profile" and j.runner_arg and size > 1:
            b = open_by_shape.get(j.shape)
            if b is None or len(b.jobs) >= size:
                b = open_by_shape[j.shape] = Batch([])
                out.append(b)
            b.jobs.append(j)
        else:
            out.append(Batch([j]))
    # a runner session launches ladder versions before ext subjects (collect.plan_versions): keep that order
    from profiler.collect import EXT_SUBJECTS

    for b in out:
        b.jobs.sort(key=lambda j: j.runner_arg in EXT_SUBJECTS)
    return out


# ------------------------------------------------------------------------------------------------- resume
def expected_build_hash(job: Job) -> str | None:
    """The build cache key of the rung a profile job would profile now (kernels.build); None for external
    subjects, and where it cannot be computed here (no nvcc, a config the version does not support)."""
    if job.kind != "profile" or not job.runner_arg or job.runner_arg.startswith(("sdpa-",)):
        return None
    try:
        from kernels import build, registry
        from kernels.config import Shape

        v = registry.get(job.runner_arg)
        s = Shape.parse(job.shape)
        return build._source_hash(v, v.config_for(s.head_dim, s.dtype, s.causal))
    except Exception:  # noqa: BLE001 - unknown here; the job itself reports why it cannot build
        return None


def report_path(out: Path, gpu: str, job: Job) -> Path:
    """The report a job writes (:func:`profiler.paths.report_path` of its subject and shape)."""
    return paths.report_path(out, gpu, str(job.subject), job.shape)


DONE = ("done", "restamp")  # statuses a resumed sweep skips


def same_sass(report: Path) -> bool:
    """True when ``report``'s rung builds today to the SASS it profiled (freshness ``restamp`` or ``fresh``);
    False when it differs or cannot be told here (no nvcc, an unreadable report: profile again)."""
    try:
        from profiler import freshness

        f = freshness.check_report(report)
    except Exception:  # noqa: BLE001 - cannot tell: the safe answer is to profile again
        return False
    return f is not None and f.status in ("fresh", "restamp")


def status(job: Job, out: Path, gpu: str, expected: str | None, logs: Path | None = None, commit: str | None = None) -> str:
    """``done`` | ``restamp`` | ``stale`` | ``todo`` for a job on a GPU folder (see the module docstring);
    :data:`DONE` are the ones a sweep skips."""
    if job.kind == "profile":
        rep = report_path(out, gpu, job)
        side = rep.with_name(job.shape + ".json")
        if not (rep.is_file() and side.is_file()):
            return "todo"
        try:
            recorded = json.loads(side.read_text()).get("build_hash")
        except (OSError, ValueError, AttributeError):
            return "stale"
        if recorded == expected:
            return "done"
        if recorded and expected and same_sass(rep):
            return "restamp"
        return "stale"
    if job.kind == "bench":
        day = _dt.datetime.now(_dt.timezone.utc).date().isoformat()
        return "done" if (Path(out) / gpu / "bench" / f"{day}-{job.shape}.json").is_file() else "todo"
    if job.kind == "check" and logs is not None:
        try:
            rec = json.loads((Path(logs) / "check" / f"{job.shape}.json").read_text())
        except (OSError, ValueError):
            return "todo"
        return "done" if rec.get("rc") == 0 and rec.get("git_commit") == commit and commit else "todo"
    return "todo"


# ------------------------------------------------------------------------------------------------- executing
@dataclass
class Spec:
    """Everything the job process needs: JSON-serialisable, so it travels to a job process or a Ray node."""

    jobs: list[dict]
    out: str  # reports root the job writes into (the driver's on the local backend; a temporary one on Ray)
    gpu: str  # folder under out
    section_set: str = "whowaits"
    warmup: int = 3
    logs: str | None = None
    build_hashes: dict = field(default_factory=dict)  # job id -> expected build hash
    env: dict = field(default_factory=dict)  # extra environment for ncu and the profiled program


def commit_env() -> dict[str, str]:
    """``WHOWAITS_GIT_COMMIT`` / ``WHOWAITS_GIT_DIRTY`` of the driver's checkout, for the job's environment:
    a job process on a Ray node (or in a copy without .git) records the commit of the code the driver planned."""
    from profiler.provenance import git_state

    commit, dirty = git_state(REPO)
    env = {"WHOWAITS_GIT_COMMIT": commit} if commit else {}
    if commit and dirty is not None:
        env["WHOWAITS_GIT_DIRTY"] = "1" if dirty else "0"
    return env


def spec_for(batch: Batch, manifest, out: Path, gpu: str, hashes: dict, git_env: dict | None = None) -> Spec:
    env = (commit_env() if git_env is None else git_env) | dict(manifest.env)
    return Spec([asdict(j) for j in batch.jobs], str(out), gpu, manifest.section_set, manifest.warmup,
                str(manifest.logs), {j.id: hashes.get(j.id) for j in batch.jobs}, env)


def _profile(spec: Spec, jobs: list[Job], log) -> list[Outcome]:
    from profiler import collect

    env = dict(spec.env)
    if jobs[0].cmd is not None:
        j = jobs[0]
        session = collect.plan_command(j.cmd, j.kernel, j.subject, j.shape, launch_skip=j.launch_skip,
                                       section_set=spec.section_set, nvtx_range=j.nvtx)
    else:
        versions = [j.runner_arg for j in jobs if j.runner_arg not in collect.EXT_SUBJECTS]
        ext = [j.runner_arg for j in jobs if j.runner_arg in collect.EXT_SUBJECTS]
        session = collect.plan_versions(versions, jobs[0].shape, ext=ext, section_set=spec.section_set,
                                        warmup=spec.warmup)
    session.env.update(env)
    log(f"ncu command: {' '.join(session.ncu_argv('ncu', '<tmp>/session'))}")
    result = collect.run_session(session, out_root=Path(spec.out), gpu=spec.gpu, force=True, on_line=log)
    by_name = {r.target.name: r for r in result.results}
    out = []
    for j in jobs:
        r = by_name.get(j.subject)
        if r is None:
            out.append(Outcome(j.id, "failed", error="not in the session", error_kind="error"))
        elif r.ok:
            out.append(Outcome(j.id, "done", report=str(r.report), passes=r.passes))
        else:
            out.append(Outcome(j.id, "failed", error=r.error, error_kind=classify(r.error, r.error_kind)))
    return out


def _child(argv: list[str], log, env: dict) -> tuple[int, str]:
    proc = subprocess.Popen(argv, cwd=REPO, env=os.environ | env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace", bufsize=1)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        log(lines[-1])
    return proc.wait(), "\n".join(lines)


def _last_error_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "error" in ln.lower():
            return ln[:300]
    return lines[-1][:300] if lines else "no output"


def _bench(spec: Spec, job: Job, log) -> Outcome:
    argv = [sys.executable, "-c", "import sys; from profiler.cli import main; sys.argv[0] = 'whowaits'; main()",
            "bench", *job.versions, "--shape", job.shape, "--out", str(Path(spec.out) / spec.gpu / "bench"), "--force"]
    rc, text = _child(argv, log, spec.env)
    if rc != 0:
        msg = _last_error_line(text)
        return Outcome(job.id, "failed", error=msg, error_kind=classify(msg))
    return Outcome(job.id, "done")


def _check(spec: Spec, job: Job, log) -> Outcome:
    from profiler.io import write_json_atomic
    from profiler.provenance import git_state

    rc, text = _child([sys.executable, "-m", "kernels.correctness", *job.versions, "--shapes", job.shape], log, spec.env)
    if spec.logs:
        write_json_atomic(Path(spec.logs) / "check" / f"{job.shape}.json",
                          {"rc": rc, "git_commit": git_state(REPO)[0], "summary": text.strip().splitlines()[-1:]})
    if rc != 0:
        msg = _last_error_line(text) if rc == 2 else f"kernels.correctness failed: {_last_error_line(text)}"
        return Outcome(job.id, "failed", error=msg, error_kind=classify(msg))
    return Outcome(job.id, "done")


def execute(spec: Spec, log=print) -> list[Outcome]:
    """Run one batch here (see the module docstring); every job gets an outcome, nothing is raised."""
    jobs = [Job(**{**d, "versions": tuple(d.get("versions") or ())}) for d in spec.jobs]
    t0 = time.perf_counter()
    try:
        if jobs[0].kind == "profile":
            outs = _profile(spec, jobs, log)
        elif jobs[0].kind == "bench":
            outs = [_bench(spec, jobs[0], log)]
        else:
            outs = [_check(spec, jobs[0], log)]
    except WhowaitsError as err:
        outs = [Outcome(j.id, "failed", error=str(err), error_kind=classify(err)) for j in jobs]
    except Exception as err:  # noqa: BLE001 - one job's bug must not end the sweep; the log has the traceback
        import traceback

        log(traceback.format_exc())
        outs = [Outcome(j.id, "failed", error=f"internal error: {type(err).__name__}: {err}"[:300],
                        error_kind="internal") for j in jobs]
    wall = time.perf_counter() - t0
    for o in outs:
        o.wall_s = wall / len(outs)
    for o in outs:
        log(f"job {o.job}: {o.status}" + (f" [{o.error_kind}] {o.error}" if o.error else ""))
    return outs


_LIVE: set[int] = set()  # job processes running now (each leads its own process group: ncu and the program too)


def kill_live() -> None:
    """Kill every running job process with its process group (ncu, the profiled program). The job processes
    start sessions of their own (so a batch's timeout kills exactly its batch), so a signal to the sweep does
    not reach them: the driver calls this when it is interrupted, or a GPU would go on profiling unlocked."""
    import signal

    for pid in list(_LIVE):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


def run_process(spec: Spec, pin: str, *, timeout: float, log, workdir: Path) -> list[Outcome]:
    """Run one batch in a job process of its own, pinned with ``CUDA_VISIBLE_DEVICES=pin``; a process that
    runs past ``timeout`` is killed (its process group: ncu and the profiled program too)."""
    import signal
    import tempfile
    import threading

    workdir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".spec-", suffix=".json", dir=workdir)
    res_path = Path(tmp).with_suffix(".result.json")
    with os.fdopen(fd, "w") as f:
        json.dump(asdict(spec), f)
    env = os.environ | spec.env | {"CUDA_VISIBLE_DEVICES": pin, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    argv = [sys.executable, "-m", "profiler.sweep.jobproc", tmp, str(res_path)]
    jobs = [d for d in spec.jobs]
    try:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", bufsize=1, start_new_session=True)
        _LIVE.add(proc.pid)
        killed = threading.Event()

        def kill():
            killed.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass

        timer = threading.Timer(timeout, kill) if timeout and timeout > 0 else None
        if timer:
            timer.daemon = True
            timer.start()
        assert proc.stdout is not None
        for line in proc.stdout:
            log(line.rstrip("\n"))
        rc = proc.wait()
        _LIVE.discard(proc.pid)
        if timer:
            timer.cancel()
        try:
            raw = json.loads(res_path.read_text())
            return [Outcome(**o) for o in raw]
        except (OSError, ValueError, TypeError):
            if killed.is_set():
                msg, kind = f"timed out: the job process ran past {timeout:.0f} s and was killed", "timeout"
            else:
                msg, kind = f"the job process died (exit code {rc}) before it reported", "worker_lost"
            return [Outcome(Job(**{**d, "versions": tuple(d.get("versions") or ())}).id, "failed", error=msg,
                            error_kind=kind) for d in jobs]
    finally:
        Path(tmp).unlink(missing_ok=True)
        res_path.unlink(missing_ok=True)
