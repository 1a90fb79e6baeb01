"""ncu_report's disassembly of a report, done in a second process beside the ingester's metric reads.

Most of a cold ingest is two kinds of native ncu_report calls: one ``IAction.sass_by_pc`` per
instruction slot (50-100 us each, plus a one-time start of the disassembler per process) and one
per-instance read per metric value (:func:`pc_columns`). Both take ncu_report's
own lock, so a thread gains nothing; a process does. :func:`request` hands the report's path to a
long-lived worker process (started on first use, one per ingesting process, and kept while that
process lives, so its disassembler starts once); the worker opens the report itself and, for every
launch in report order, answers with the text and source line of every instruction slot from the
lowest PC that ``inst_executed`` or the sample count names, to the first empty slot after the
highest one (:func:`disassemble`, the same walk :mod:`profiler.report` does), and with the
launch's PM-sampled timeline. Meanwhile the ingester reads the other metrics; :meth:`Pending.take`
then hands it the launch's answer.

The worker is an optimisation only: the ingester checks that the slots cover what it needs and
reads any slot the worker did not give through ncu_report itself, exactly as without a worker. A
worker that is off (``WHOWAITS_SASS_WORKER=0``, or one CPU), fails to start, dies (a native crash
on a damaged report), answers with an error or takes longer than :data:`TIMEOUT_S` is killed and
the ingester carries on alone; the next ingest starts a new one. A forked child never uses its parent's
worker.

For a report of a known build (:func:`profiler.sasscache.holds_any`: nothing to disassemble) the worker
reads the per-PC columns instead (:func:`pc_columns`: one native call per metric instance, the largest
part of such an ingest), while the ingester reads every other metric and the timeline. The ingester
takes the worker's columns of a launch only if they have come before it needs them, and otherwise reads
them itself, checking for the worker's answer before each column (:meth:`Pending.take` with
``wait=False``); so a worker that is still starting, or slowed by other jobs on the machine, costs a
known build nothing but the CPU it uses. When the ingester has read the report, it sends a cancel and
the worker stops at its next column.

Protocol (stdin/stdout of the worker, each message a little-endian uint32 length + a pickle):
request ``(path, use_sass_cache, cache_dir, known)`` (``cache_dir``: the ingester's ``WHOWAITS_CACHE_DIR``,
None when unset, so both look in the same SASS cache however the ingester's environment changed;
``known``: the per-PC columns instead of the text), or ``("cancel",)`` (the rest of the current report
is not needed; ignored between reports); answers ``("launch", index, answer)`` per launch, where
``answer`` is None (that launch failed in the worker) or a dict: ``slots`` (None, or
:func:`disassemble`'s dict: ``first``, ``step``, ``end`` (the first empty slot), ``texts`` and
``files``, ``lines`` (source info per slot)), ``timeline`` (None, or :func:`timeline`'s dict of the
launch's PM-sampled metrics, which the worker reads too: no analysis needs them before the ingester has
read every other metric) and, for a known build, ``pc`` (``names``: the metrics, ``columns`` and
``reasons``: :func:`pc_columns`); then ``("done",)`` (also after a cancel), or ``("error", message)``
when the report does not open. The worker exits at the end of its input (its parent closed the pipe or
died).
"""

from __future__ import annotations

import atexit
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from itertools import repeat
from pathlib import Path

from profiler import settings

__all__ = ["LATER", "TIMEOUT_S", "Pending", "disassemble", "enabled", "mangled", "off", "pc_columns", "pc_metrics", "pm_metrics", "reads_timeline",
           "request", "shutdown", "span", "timeline"]

#: seconds the ingester waits for one answer before it kills the worker and reads the text itself
TIMEOUT_S = 120.0
_LEN = struct.Struct("<I")


def enabled() -> bool:
    """``WHOWAITS_SASS_WORKER``: unset means on where this process may use two or more CPUs."""
    v = settings.text("WHOWAITS_SASS_WORKER")
    if v is not None:
        return settings.flag("WHOWAITS_SASS_WORKER")
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return cpus >= 2


# --- the worker's side ----------------------------------------------------------------------------


def span(pcs) -> tuple[int, int, int] | None:
    """(lowest PC, step, highest PC) of the PCs a launch's per-PC metrics name: the step is the smallest
    gap between two of them (16 bytes when there is one PC), as the ingester lays out a launch's slots;
    None without a PC."""
    ordered = sorted(set(pcs))
    if not ordered:
        return None
    return ordered[0], min((b - a for a, b in zip(ordered, ordered[1:])), default=16), ordered[-1]


def disassemble(action, pcs: list[int]) -> dict | None:
    """The slots of one launch from the PCs its per-PC metrics name: ``first`` (lowest PC),
    ``step`` (the smallest gap between PCs, 16 when there is one PC), ``end`` (the first slot past
    the highest PC whose text is empty), ``span`` (slots from the lowest to the highest PC), ``texts`` (ncu_report's text of each slot from ``first`` to
    ``end``, stripped) and ``files``/``lines`` (``IAction.source_info`` of each slot: None where it
    has none)."""
    laid = span(pcs)
    if laid is None:
        return None
    first, step, last = laid
    sass_by_pc = action.sass_by_pc
    texts = [(sass_by_pc(pc) or "").strip() for pc in range(first, last + step, step)]
    pc = last + step
    while True:
        text = (sass_by_pc(pc) or "").strip()
        if not text:
            break
        texts.append(text)
        pc += step
    end = pc
    files: list[str | None] = []
    lines: list[int | None] = []
    for pc in range(first, end, step):
        si = action.source_info(pc)
        files.append(None if si is None else si.file_name())
        lines.append(None if si is None else si.line())
    return {"first": first, "step": step, "end": end, "span": (last - first) // step + 1, "texts": texts,
            "files": files, "lines": lines}


def mangled(action) -> str | None:
    """The launch's mangled function name (None where ncu_report cannot say: no SASS-text cache)."""
    try:
        import ncu_report as ncu  # noqa: PLC0415

        return action.name(ncu.IAction.NameBase_MANGLED) or None
    except Exception:  # noqa: BLE001 - an ncu_report without that name base
        return None


def _instanced(action, wanted) -> dict:
    """name -> IMetric of the launch's metrics whose name ``wanted`` accepts and that are instanced by number
    (correlation ids, not strings), as :func:`profiler.report._ingest_action` sorts every metric it reads."""
    import ncu_report as ncu  # noqa: PLC0415

    out = {}
    for name in action.metric_names():
        if not wanted(name):
            continue
        m = action.metric_by_name(name)
        if m is None or not m.has_correlation_ids():
            continue
        if m.num_instances() < 1 or m.correlation_ids().kind() == ncu.IMetric.ValueKind_STRING:
            continue
        out[name] = m
    return out


def pm_metrics(action) -> dict:
    """name -> IMetric of the launch's PM-sampled metrics: instanced by number (not by a string),
    neither a per-PC nor a sampling metric, and named PM-sampled by ``[timeline]`` of metrics.toml
    (the same choice :func:`profiler.report._ingest_action` makes while it reads every metric)."""
    from profiler import metrics as M  # noqa: PLC0415

    stalls = M.stall_config()
    skip = {stalls["sample_count"], *M.per_pc_metrics().values()}
    return _instanced(action, lambda name: not (name in skip or name.startswith(stalls["sample_prefix"]))
                      and M.is_pm_metric(name))


def timeline(action, metrics: dict, f: dict | None = None) -> dict:
    """name -> (time stamps in ns, values) of each PM-sampled metric after
    ``IAction.timelines().aligned_metric`` (None where ncu_report aligns none); ``f``: the SWIG
    functions of :func:`profiler.report._swig` (faster), else the IMetric methods."""
    timelines = action.timelines()
    out: dict = {}
    for name in sorted(metrics):
        aligned = timelines.aligned_metric(metrics[name])
        if aligned is None:
            out[name] = None
            continue
        if f is not None:
            n = f["num_instances"](aligned)
            corr = f["correlation_ids"](aligned)
            as_uint64, as_double = f["as_uint64"], f["as_double"]
            out[name] = ([as_uint64(corr, i) for i in range(n)], [as_double(aligned, i) for i in range(n)])
        else:
            n = aligned.num_instances()
            corr = aligned.correlation_ids()
            out[name] = ([corr.as_uint64(i) for i in range(n)], [aligned.as_double(i) for i in range(n)])
    return out


# --- per-PC columns (read by the ingester, or by the worker for a known build) ----------------------


def _per_pc(metric, ncu, pcs_cache: dict) -> tuple[list[int], list[int]]:
    """(PCs, values) of a metric instanced by PC.

    The stall-sampling metrics of one group share one list of PCs: a list read before for the
    same instance count is reused when ten PCs spread over it agree (golden tests check every PC
    against ncu's source page). The SWIG functions are called directly: ~150k calls per
    report, and the Python wrappers double their cost.
    """
    n = metric.num_instances()
    corr = metric.correlation_ids()
    raw = getattr(getattr(ncu, "_ncu_report", None), "IMetric_as_uint64", None)
    if raw is None:  # a future ncu_report without the SWIG module layout

        def raw(m, i):
            return m.as_uint64(i)

    if metric.has_value() and metric.value() == 0:
        # counts are non-negative: a zero total means every instance is 0 (many stall reasons
        # are never sampled in a given kernel); the frame's zero-filled column says so
        return [], []
    pcs = pcs_cache.get(n)
    if pcs is None or any(raw(corr, i) != pcs[i] for i in {0, n - 1, *range(1, n, max(n // 8, 1))}):
        pcs = list(map(raw, repeat(corr, n), range(n)))
        pcs_cache[n] = pcs
    return pcs, list(map(raw, repeat(metric, n), range(n)))


def pc_columns(pc_metrics: dict, ncu, poll=None) -> tuple[dict[str, tuple[list[int], list[int]]], list[str]]:
    """The sass frame's per-PC columns (column -> (PCs, values)) and the stall reasons sampled, from
    ``pc_metrics`` (name -> IMetric: the metrics instanced by PC). ``poll``: called before each column;
    when it returns the whole result (the worker's, read meanwhile), that is returned instead."""
    from profiler import metrics as M  # noqa: PLC0415

    cfg = M.stall_config()
    reasons = M.sampled_reasons(pc_metrics)
    jobs = [(col, name) for col, name in M.per_pc_metrics().items() if name in pc_metrics]
    if cfg["sample_count"] in pc_metrics:
        jobs.append(("samples", cfg["sample_count"]))
    for reason in reasons:
        name = cfg["sample_prefix"] + reason
        if name in pc_metrics:
            jobs.append((f"stall_{reason}", name))
        if name + cfg["not_issued_suffix"] in pc_metrics:
            jobs.append((f"not_issued_{reason}", name + cfg["not_issued_suffix"]))
    cache: dict = {}
    columns: dict[str, tuple[list[int], list[int]]] = {}
    for col, name in jobs:
        got = poll() if poll is not None else None
        if got is not None:
            return got
        columns[col] = _per_pc(pc_metrics[name], ncu, cache)
    return columns, reasons


def pc_metrics(action) -> dict:
    """name -> IMetric of the launch's metrics instanced by PC: the sample count, the stall-sampling
    metrics and ``metrics.per_pc_metrics()``, each with numeric correlation ids (the same choice
    :func:`profiler.report._ingest_action` makes while it reads every metric)."""
    from profiler import metrics as M  # noqa: PLC0415

    stalls = M.stall_config()
    names = {stalls["sample_count"], *M.per_pc_metrics().values()}
    return _instanced(action, lambda name: name.startswith(stalls["sample_prefix"]) or name in names)


def _launch_answer(action, modules, known: bool = False, poll=None) -> dict:
    """The worker's answer for one launch: ``slots`` (:func:`disassemble`, or None) and ``timeline``; for
    a report of a known build (``known``: its text in the SASS cache) neither, but ``pc``: the launch's
    per-PC columns (:func:`pc_columns`) and the names of the metrics they came from, read while the
    ingester reads every other metric (and takes them only if they come before it has read them itself);
    ``poll``: passed to :func:`pc_columns` (the worker's check for a cancel)."""
    if known:
        import ncu_report as ncu  # noqa: PLC0415

        try:
            metrics = pc_metrics(action)
            columns, reasons = pc_columns(metrics, ncu, poll)
            return {"slots": None, "timeline": None,
                    "pc": {"names": sorted(metrics), "columns": columns, "reasons": reasons}}
        except _Cancelled:
            raise
        except Exception:  # noqa: BLE001 - the ingester reads the columns itself
            return {"slots": None, "timeline": None}
    try:
        slots = _launch_slots(action, modules)
    except Exception:  # noqa: BLE001 - the ingester reads the text itself
        slots = None
    if slots is not None and slots.get("known"):
        return {"slots": None, "timeline": None}
    if slots is not None and not reads_timeline(slots["span"]):
        return {"slots": slots, "timeline": None}
    try:
        pm = timeline(action, pm_metrics(action))
    except Exception:  # noqa: BLE001 - the ingester reads the timeline itself
        pm = None
    return {"slots": slots, "timeline": pm}


#: instruction slots up to which the worker reads the PM timeline too: beyond, its disassembly alone
#: outlasts the ingester's metric reads, so the ingester reads the timeline itself meanwhile (2-core
#: machine, CPU ms, worker / ingester: cuDNN full set, 1,272 slots, 110 / 89 with the timeline in the worker;
#: flash full set, 3,368 slots, 290 / 161, its timeline ~25 ms)
TIMELINE_SLOTS = 2000


def reads_timeline(slots: int) -> bool:
    """Whether the worker reads the timeline of a launch of ``slots`` instruction slots (both sides ask)."""
    return slots <= TIMELINE_SLOTS


def _launch_slots(action, modules) -> dict | None:
    from profiler import metrics as M  # noqa: PLC0415
    from profiler import sasscache  # noqa: PLC0415

    pcs: list[int] = []
    for name in (M.per_pc_metrics().get("inst_executed"), M.stall_config()["sample_count"]):
        m = action.metric_by_name(name) if name else None
        if m is None or not m.has_correlation_ids():
            continue
        corr = m.correlation_ids()
        pcs += [corr.as_uint64(i) for i in range(m.num_instances())]
    laid = span(pcs)
    if laid is None:
        return None
    name = mangled(action) if modules is not None else None
    if name:
        first, step, last = laid
        cached = sasscache.lookup(modules, name, first, step)
        if cached is not None and len(cached.texts) * step > last - first:
            return {"known": True}
    return disassemble(action, pcs)


def _send(out, message) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_LEN.pack(len(data)) + data)
    out.flush()


def _recv_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        try:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    return None
            chunk = os.read(fd, n - got)
        except (OSError, ValueError):  # the pipe was closed meanwhile (the worker ended on another thread)
            return None
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _fd(w) -> int | None:
    """The worker's answer pipe, None once closed (the worker ended on another thread)."""
    try:
        return w.proc.stdout.fileno()
    except (AttributeError, ValueError):
        return None


def _ready(fd: int) -> bool:
    """Whether bytes wait on ``fd`` (True for a closed pipe too: reading it then says so)."""
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def _recv(fd: int, deadline: float | None = None):
    head = _recv_exact(fd, _LEN.size, deadline)
    if head is None:
        return None
    body = _recv_exact(fd, _LEN.unpack(head)[0], deadline)
    return None if body is None else pickle.loads(body)


class _Cancelled(Exception):
    """The ingester has what it needs of this report (it sent :data:`_CANCEL`)."""


#: what the ingester sends when it no longer needs the rest of a known build's answers
_CANCEL = ("cancel",)


def main() -> int:
    """The worker: answer requests until the input ends."""
    import ncu_report as ncu  # noqa: PLC0415

    from profiler import sasscache  # noqa: PLC0415

    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but answers on the pipe
    stdin = sys.stdin.buffer.fileno()

    def cancelled():
        if _ready(stdin):  # a cancel (or the end of the input): stop this report here
            raise _Cancelled
        return None

    while True:
        req = _recv(stdin)
        if req is None:
            return 0
        if req == _CANCEL:  # for a report already answered in full
            continue
        path, use_cache, cache_dir, known = req
        settings.put("WHOWAITS_CACHE_DIR", cache_dir)
        try:
            ctx = ncu.load_report(path)
        except Exception as err:  # noqa: BLE001 - the ingester reports a report that does not open
            _send(out, ("error", f"{type(err).__name__}: {err}"))
            continue
        modules = sasscache.Modules(path) if use_cache else None
        index = 0
        try:
            for r in range(ctx.num_ranges()):
                rng = ctx.range_by_idx(r)
                for a in range(rng.num_actions()):
                    if known:
                        cancelled()
                    try:
                        answer: dict | None = _launch_answer(rng.action_by_idx(a), modules, known,
                                                             cancelled if known else None)
                    except _Cancelled:
                        raise
                    except Exception:  # noqa: BLE001 - the ingester reads this launch itself
                        answer = None
                    _send(out, ("launch", index, answer))
                    index += 1
        except _Cancelled:
            pass
        _send(out, ("done",))


# --- the ingester's side --------------------------------------------------------------------------


class _Worker:
    def __init__(self) -> None:
        # the parent's import path first (this package, and an ncu_report found through PYTHONPATH or
        # a path a notebook added), so the worker reads with the same code as the ingester
        path = [str(Path(__file__).resolve().parents[1]), *(p for p in sys.path if isinstance(p, str))]
        code = f"import sys; sys.path[:0] = {path!r}; from profiler.sass_worker import main; sys.exit(main())"
        self.pid = os.getpid()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, close_fds=True, bufsize=0,
        )
        self.busy = threading.Lock()
        self.draining = False  # busy only with the rest of a known build's report, after a cancel

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


_WORKER: _Worker | None = None
_GUARD = threading.Lock()


def _forget_in_child() -> None:
    global _WORKER
    _WORKER = None  # the pipes belong to the parent's worker; the child starts its own


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def shutdown() -> None:
    """End this process's worker (also at exit)."""
    global _WORKER
    with _GUARD:
        w, _WORKER = _WORKER, None
    if w is not None and w.pid == os.getpid():
        w.kill()


atexit.register(shutdown)


#: what :meth:`Pending.take` returns without waiting when the answer has not come yet
LATER = object()


class Pending:
    """The worker's answers for one report, taken launch by launch in report order (``known``: a report
    of a known build, whose answers carry per-PC columns that the ingester takes only if they come first)."""

    def __init__(self, worker: _Worker, known: bool = False) -> None:
        self._w: _Worker | None = worker
        self._next = 0
        self.known = known

    def take(self, index: int, wait: bool = True):
        """The answer for launch ``index``: ``slots``, ``timeline`` (and ``pc`` for a known build); None when
        the worker failed or is gone; :data:`LATER` when ``wait`` is false and the answer has not come."""
        while self._w is not None and self._next <= index:
            fd = _fd(self._w)
            if fd is not None and not wait and not _ready(fd):
                return LATER
            msg = None if fd is None else _recv(fd, time.monotonic() + TIMEOUT_S)
            if not isinstance(msg, tuple) or msg[0] != "launch" or msg[1] != self._next:
                self._fail()
                return None
            self._next += 1
            if msg[1] == index:
                return msg[2] if isinstance(msg[2], dict) else None
        return None

    def close(self, ok: bool = True) -> None:
        """Release the worker: after a whole report (``ok``) read what is left of its answers; after
        an error, or when they do not come, end it (the next ingest starts another)."""
        w = self._w
        if w is None:
            return
        if not ok:
            self._fail()
            return
        if self.known:
            # the ingester may have read every column itself before the worker's came (or before the
            # worker even started): the worker stops at its next column and answers "done", read on a
            # thread so that nothing here waits for it; the next cold ingest waits for that (request)
            try:
                _send(w.proc.stdin, _CANCEL)
            except (OSError, ValueError):
                self._fail()
                return
            w.draining = True
            threading.Thread(target=self._drain, daemon=True).start()
            return
        self._drain()

    def _drain(self) -> None:
        w = self._w
        if w is None:
            return
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            fd = _fd(w)
            msg = None if fd is None else _recv(fd, deadline)
            if isinstance(msg, tuple) and msg[0] == "done":
                break
            if not (isinstance(msg, tuple) and msg[0] == "launch"):
                self._fail()
                return
        self._w = None
        w.draining = False
        w.busy.release()

    def _fail(self) -> None:
        global _WORKER
        w, self._w = self._w, None
        if w is None:
            return
        with _GUARD:
            if _WORKER is w:
                _WORKER = None
        w.kill()
        w.busy.release()


_OFF = 0  # open off() blocks in this process


@contextmanager
def off():
    """No worker for the ingests inside this block: for a caller that keeps every CPU busy already (a
    pool of processes ingesting reports, profiler/compare/cache.py), where a worker per process would only
    open each report twice."""
    global _OFF
    _OFF += 1
    try:
        yield
    finally:
        _OFF -= 1


def request(path: str | os.PathLike, use_sass_cache: bool, known: bool = False) -> Pending | None:
    """Ask this process's worker for the slots of every launch of ``path`` (``known``: a report of a
    known build, for the per-PC columns instead, and only from a worker already running); None when the
    worker is off, cannot start or is busy with another report (the ingester then reads them itself)."""
    global _WORKER
    if _OFF or not enabled():
        return None
    with _GUARD:
        w = _WORKER
        if w is not None and (w.pid != os.getpid() or not w.alive()):
            w = _WORKER = None
        if w is None and known:
            # a worker started now cannot help a known build: its start (the interpreter, whowaits and
            # ncu_report's own, ~0.5 s) outlasts that build's whole ingest; the next cold ingest starts one
            return None
        if w is None:
            try:
                w = _WORKER = _Worker()
            except OSError:
                return None
    # a worker still reading the rest of a known build's report (cancelled) is free soon: a cold ingest, which
    # needs its disassembly, waits for it; a known build reads without it meanwhile
    if not w.busy.acquire(blocking=False) and not (w.draining and not known and w.busy.acquire(timeout=TIMEOUT_S)):
        return None
    try:
        _send(w.proc.stdin, (str(path), bool(use_sass_cache), settings.raw("WHOWAITS_CACHE_DIR"), bool(known)))
    except (OSError, ValueError):
        pending = Pending(w)
        pending._fail()
        return None
    return Pending(w, known)
