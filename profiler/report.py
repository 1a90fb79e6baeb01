"""Ingestion: an Nsight Compute report -> tidy pandas frames, cached as parquet.

The ONLY module of the package that imports ``ncu_report`` (PyPI ``ncu-report``), and it does so
lazily inside :func:`_ingest`, so a warm cache needs no ``ncu_report`` at all.

Frames (one pair per profiled launch; see :class:`Launch`):

``Launch.metrics`` (long, one row per kernel-level metric value)
    ``report`` (str, the path given to :func:`load_report`), ``launch`` (int, index in the
    report), ``kernel`` (str, demangled name), ``metric`` (str, ncu metric name), ``instance``
    (str or None: the instance key of a metric instanced by a string, e.g. the opcode of
    ``sass__inst_executed_per_opcode``; None for the metric's own value), ``value`` (float64;
    NaN for a string-valued metric), ``text`` (str for string-valued metrics, else None),
    ``unit`` (str).
    Metrics instanced by PC are summarised by their own value here; their per-PC values are in
    ``Launch.sass``. Other numerically-instanced metrics (occupancy curves, memory tables) keep
    only their own value.

``Launch.sass`` (one row per SASS instruction of the profiled function, by address)
    ``launch`` (int), ``address`` (uint64, the PC), ``offset`` (int64, from the function's first
    PC), ``sass`` (str, ncu's SASS text without leading blanks), ``opcode`` (str, mnemonic with
    modifiers, e.g. ``HGMMA.64x128x16.F32``), ``base`` (str, e.g. ``HGMMA``), ``opcode_class``
    (str, see ``data/opcode_classes.toml``), ``inst_executed``, ``thread_inst_executed``,
    ``thread_inst_executed_true`` (int64, warp-/thread-level executed counts; 0 where the report
    has no value), ``samples`` (int64, ``smsp__pcsamp_sample_count``), ``stall_<reason>`` and
    ``not_issued_<reason>`` (int64, ``smsp__pcsamp_warps_issue_stalled_<reason>[_not_issued]``)
    for every reason the report samples (``metrics.sampled_reasons()``), ``source_file``
    (str or None) and ``source_line`` (Int64, <NA> without ``-lineinfo``).

``Launch.timeline`` (long, one row per PM sample of a PM-sampled metric; empty without PM sampling)
    ``launch`` (int), ``metric`` (str, the ncu name, e.g.
    ``TPC.TriageCompute.sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed`` or
    ``pmsampling:smsp__warps_issue_stalled_long_scoreboard.avg``), ``t_ns`` (int64, the sample's time
    stamp in ns from the start of the workload), ``value`` (float64). These are ncu_report's instance
    values after ``IAction.timelines().aligned_metric`` (aligned to the workload's time stamps, context
    switches filtered), exactly as returned; which metrics are PM-sampled is data (``[timeline]`` of
    ``data/metrics.toml``).

``Launch.sources`` (dict: file path -> text) the report's own copies of the source files
    (``--import-source yes``) that declare source regions (hold the marker token of
    ``data/regions.toml``, ``@region``); empty when none does. Cached as a frame ``launch``, ``file``,
    ``text``.

The cache lives in ``$WHOWAITS_CACHE_DIR`` (default ``~/.cache/whowaits``), keyed by the report
file's sha256 plus the schema and data-file versions and a hash of the ingestion code: a changed
file (or opcode map, or ingester) never hits a stale entry; an unreadable entry is ignored and
rebuilt.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path

import numpy as np
import pandas as pd

from profiler import metrics as M
from profiler.errors import WhowaitsError
from profiler.io import write_atomic
from profiler.provenance import sha256_file

__all__ = ["Launch", "Report", "cache_dir", "load_report", "select_launches", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1
_MAGIC = b"NVR\x00"
_CONTAINER = 2  # the uint32 after the magic in the ncu 2025.x reports this framing check knows

METRIC_COLUMNS = ["report", "launch", "kernel", "metric", "instance", "value", "text", "unit"]
TIMELINE_COLUMNS = ["launch", "metric", "t_ns", "value"]
SOURCE_COLUMNS = ["launch", "file", "text"]


def _empty_timeline() -> pd.DataFrame:
    return pd.DataFrame({"launch": pd.Series(dtype=np.int64), "metric": pd.Series(dtype=object),
                         "t_ns": pd.Series(dtype=np.int64), "value": pd.Series(dtype=np.float64)})


@dataclass
class Launch:
    """One profiled kernel launch (an ncu "action"): its metrics and its per-PC SASS frame."""

    report: str
    index: int
    kernel: str
    metrics: pd.DataFrame
    sass: pd.DataFrame
    timeline: pd.DataFrame = field(default_factory=_empty_timeline)
    sources: dict = field(default_factory=dict)
    _scalars: dict | None = field(default=None, repr=False, compare=False)
    _instanced: dict | None = field(default=None, repr=False, compare=False)
    _stalls: tuple | None = field(default=None, repr=False, compare=False)

    def _build_lookup(self) -> None:
        scalars: dict[str, object] = {}
        inst: dict[str, dict[str, float]] = {}
        m = self.metrics
        cols = [m[c].to_numpy(dtype=object) for c in ("metric", "instance", "text")]
        for name, instance, value, text in zip(cols[0], cols[1], m["value"].to_numpy(), cols[2]):
            if not isinstance(instance, str):
                scalars[name] = text if isinstance(text, str) else value
            else:
                inst.setdefault(name, {})[instance] = value
        self._scalars, self._instanced = scalars, inst

    def stall_matrix(self) -> tuple[list[str], np.ndarray]:
        """(reasons, int64 matrix PCs x reasons) of the per-PC stall samples in ``sass``, in
        ``metrics.sampled_reasons()`` order (reasons the report does not sample are left out).
        Computed once per launch."""
        if self._stalls is None:
            # A column ncu left as NaN (a launch it could not sample: the H800 public report's 2nd and
            # 4th launches) holds no samples; as int64 it would read as -2**63 per PC.
            cols = [(c[len("stall_"):], c) for c in self.sass.columns
                    if c.startswith("stall_") and not self.sass[c].isna().any()]
            reasons = [r for r, _ in cols]
            if cols:
                mat = np.column_stack([self.sass[c].to_numpy(dtype=np.int64) for _, c in cols])
            else:
                mat = np.zeros((len(self.sass), 0), dtype=np.int64)
            mat.setflags(write=False)
            self._stalls = (reasons, mat)
        return self._stalls

    def value(self, name: str):
        """The value of ncu metric ``name`` (float, or str for string metrics); None if absent."""
        if self._scalars is None:
            self._build_lookup()
        v = self._scalars.get(name)
        if isinstance(v, float) and np.isnan(v):
            return None
        return v

    def has(self, name: str) -> bool:
        """Whether the report holds ncu metric ``name``."""
        if self._scalars is None:
            self._build_lookup()
        return name in self._scalars

    def instances(self, name: str) -> dict[str, float]:
        """Instance key -> value of a metric instanced by string (e.g. per opcode); {} if absent."""
        if self._instanced is None:
            self._build_lookup()
        return dict(self._instanced.get(name, {}))

    def get(self, canonical: str):
        """(value, ncu metric name) of a canonical metric of ``metrics.toml``: the first of its
        names present in the report; (None, None) when none is."""
        for name in M.metric_spec(canonical).names:
            v = self.value(name)
            if v is not None:
                return v, name
        return None, None


@dataclass
class Report:
    """An ingested report: ``path`` as given, ``sha256`` of the file, its ``launches``."""

    path: str
    sha256: str
    launches: list[Launch]


# --- cache --------------------------------------------------------------------------------------


def cache_dir() -> Path:
    """``$WHOWAITS_CACHE_DIR`` or ``~/.cache/whowaits``."""
    env = os.environ.get("WHOWAITS_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "whowaits"


_CODE_FINGERPRINT: str | None = None


def _code_fingerprint() -> str:
    """Hash of the ingestion code (this module and the metric maps' reader): an edited ingester
    never reads entries an older one wrote, even if SCHEMA_VERSION was not bumped."""
    global _CODE_FINGERPRINT
    if _CODE_FINGERPRINT is None:
        h = hashlib.sha256()
        for mod in (__file__, M.__file__):
            try:
                h.update(Path(mod).read_bytes())
            except OSError:  # pragma: no cover - zipped installs
                h.update(mod.encode())
        _CODE_FINGERPRINT = h.hexdigest()[:10]
    return _CODE_FINGERPRINT


def _cache_paths(sha: str) -> tuple[Path, Path, Path, Path]:
    key = f"{sha}.s{SCHEMA_VERSION}-{M.data_version()}-{_code_fingerprint()}"
    d = cache_dir()
    return (d / f"{key}.metrics.parquet", d / f"{key}.sass.parquet", d / f"{key}.timeline.parquet",
            d / f"{key}.sources.parquet")


def _read_cache(sha: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame] | None:
    paths = _cache_paths(sha)
    if not all(p.is_file() for p in paths):
        return None
    try:
        mf, sf, tf, rf = (pd.read_parquet(p) for p in paths)
    except Exception:  # any unreadable entry is a miss: rebuilt below
        return None
    if (list(mf.columns) != METRIC_COLUMNS[1:] or "address" not in sf.columns or mf.empty
            or list(tf.columns) != TIMELINE_COLUMNS or list(rf.columns) != SOURCE_COLUMNS):
        return None
    return _normalize(mf), sf, tf, rf


def _normalize(mf: pd.DataFrame) -> pd.DataFrame:
    """Nullable string columns as object columns holding None (pandas >= 3 infers a string
    dtype that turns None into NaN)."""
    for col in ("instance", "text"):
        mf[col] = mf[col].astype(object).where(mf[col].notna(), None)
    return mf


def _atomic_write_parquet(frame: pd.DataFrame, path: Path) -> None:
    write_atomic(path, lambda tmp: frame.to_parquet(tmp, index=False))


def _write_cache(sha: str, mf: pd.DataFrame, sf: pd.DataFrame, tf: pd.DataFrame, rf: pd.DataFrame) -> None:
    mpath, spath, tpath, rpath = _cache_paths(sha)
    try:
        _atomic_write_parquet(sf, spath)
        _atomic_write_parquet(tf, tpath)
        _atomic_write_parquet(rf, rpath)
        _atomic_write_parquet(mf, mpath)  # metrics last: its presence marks a complete entry
    except OSError:
        pass  # a read-only or full cache dir only costs speed


# --- validation ---------------------------------------------------------------------------------



def _check_file(path: Path) -> None:
    """Reject a missing path, a non-report and a truncated report, each with one line."""
    if not path.exists():
        raise WhowaitsError(f"{path}: no such file")
    if path.is_dir():
        raise WhowaitsError(f"{path}: is a directory, not an Nsight Compute report (.ncu-rep)")
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            size = path.stat().st_size
            if head[:4] != _MAGIC:
                raise WhowaitsError(
                    f"{path}: not an Nsight Compute report (no NVR header; expected a .ncu-rep "
                    "written by ncu -o)"
                )
            # The container seen in ncu 2025.x reports (header word 2 after the magic): blocks
            # each prefixed by a little-endian uint32 length, the last one ending exactly at the
            # end of the file. A block that runs past the end means the file was cut short.
            # Other container versions are left to ncu_report (which then reads no launch or a
            # launch without metrics from a cut file: see _ingest).
            if len(head) < 8 or struct.unpack("<I", head[4:8])[0] != _CONTAINER:
                return
            off = 4
            while off + 4 <= size:
                f.seek(off)
                (n,) = struct.unpack("<I", f.read(4))
                off += 4 + n
            if off != size:
                raise WhowaitsError(
                    f"{path}: truncated or corrupt Nsight Compute report (its last block ends at "
                    f"byte {off}, the file has {size}); re-copy or re-profile it"
                )
    except OSError as err:
        raise WhowaitsError(f"{path}: cannot read: {err.strerror or err}") from err


# --- ingestion ----------------------------------------------------------------------------------


# --- the disassembler's thread ------------------------------------------------------------------
#
# ncu_report disassembles on a worker thread of its own (started by the first ``sass_by_pc`` call
# of the process): every call hands one PC to it and waits for the text. When the two threads sit
# on different CPUs each hand-off wakes the other CPU, and a call costs ~70 us; on one CPU it costs
# ~30 us (measured on a 2-CPU machine; a report has 1-4 thousand instruction slots). So while it
# reads the SASS text, the ingester keeps itself and that thread on the CPU it is running on, and
# puts both back as they were afterwards. Other threads are left alone.

_NCU_THREADS: set[int] = set()  # native ids of the threads ncu_report started in this process
#: the CPU to use instead of the current one (set by processes that share the CPUs out, e.g. the
#: parallel summaries of :mod:`profiler.compare.cache`); ignored when not allowed
_PREFERRED_CPU: int | None = None


def _thread_ids() -> set[int]:
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except (OSError, ValueError):
        return set()


def _current_cpu() -> int | None:
    try:
        with open("/proc/thread-self/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return None


@contextmanager
def _disassembler_beside_caller():
    """Run the block with this thread and ncu_report's disassembler thread on one CPU (see above);
    a no-op where thread affinity cannot be set or only one CPU is allowed."""
    try:
        me = threading.get_native_id()
        allowed = os.sched_getaffinity(me)
    except (AttributeError, OSError):
        yield
        return
    cpu = _PREFERRED_CPU if _PREFERRED_CPU in allowed else _current_cpu()
    if len(allowed) < 2 or cpu not in allowed:
        yield
        return
    saved: dict[int, set[int]] = {}

    def pin(tid: int) -> None:
        try:
            saved[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, {cpu})
        except OSError:  # the thread is gone
            _NCU_THREADS.discard(tid)

    pin(me)
    for tid in list(_NCU_THREADS):
        pin(tid)
    before = _thread_ids() if not _NCU_THREADS else None
    try:
        yield
    finally:
        if before is not None:  # the first call started ncu_report's thread (inheriting the pin)
            _NCU_THREADS.update(_thread_ids() - before)
        for tid in _NCU_THREADS | {me}:
            try:
                os.sched_setaffinity(tid, saved.get(tid, allowed))
            except OSError:
                _NCU_THREADS.discard(tid)


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


def _swig(ncu) -> dict:
    """The SWIG functions behind the ``IAction``/``IMetric`` methods the ingester calls per
    metric (~2000 metrics a report: the Python wrappers double the cost of each call), or the
    wrappers themselves where ncu_report lacks that module layout."""
    raw = getattr(ncu, "_ncu_report", None)
    names = {"metric_by_name": ("IAction_metric_by_name", ncu.IAction.metric_by_name)}
    for meth in ("kind", "unit", "has_value", "as_string", "as_double", "as_uint64",
                 "num_instances", "has_correlation_ids", "correlation_ids"):
        names[meth] = ("IMetric_" + meth, getattr(ncu.IMetric, meth))
    return {k: getattr(raw, swig, None) or wrapper for k, (swig, wrapper) in names.items()}


def _ingest_action(action, index: int, kernel: str, ncu) -> tuple[list, pd.DataFrame, pd.DataFrame, list]:
    """Rows of the metrics frame, the sass frame, the timeline frame and the source rows of one action."""
    im = ncu.IMetric
    kind_string = im.ValueKind_STRING
    f = _swig(ncu)
    by_name, kind_of, unit_of, has_value = f["metric_by_name"], f["kind"], f["unit"], f["has_value"]
    as_string, as_double, as_uint64 = f["as_string"], f["as_double"], f["as_uint64"]
    num_instances, has_corr = f["num_instances"], f["has_correlation_ids"]
    # IMetric.value(): the as_* function of the metric's value kind (None for ANY / UNKNOWN)
    value_of = {im.ValueKind_DOUBLE: as_double, im.ValueKind_FLOAT: as_double,
                im.ValueKind_STRING: as_string, im.ValueKind_UINT32: as_uint64,
                im.ValueKind_UINT64: as_uint64}
    stalls = M.stall_config()
    per_pc_names = {stalls["sample_count"], *M.per_pc_metrics().values()}
    sample_prefix = stalls["sample_prefix"]
    rows: list[tuple] = []
    pc_metrics = {}
    pm_metrics = {}
    for name in action.metric_names():
        m = by_name(action, name)
        if m is None:
            continue
        kind = kind_of(m)
        unit = unit_of(m) or ""
        if kind == kind_string:
            rows.append((name, None, np.nan, as_string(m) if has_value(m) else "", unit))
        else:
            get = value_of.get(kind)
            v = get(m) if (get is not None and has_value(m)) else None
            if isinstance(v, str):  # defensive: a string behind a numeric kind
                rows.append((name, None, np.nan, v, unit))
            else:
                rows.append((name, None, np.nan if v is None else float(v), None, unit))
        n = num_instances(m)
        if n > 1 or (n == 1 and has_corr(m)):
            if not has_corr(m):
                continue
            corr = f["correlation_ids"](m)
            if kind_of(corr) == kind_string:
                for i in range(n):
                    rows.append((name, as_string(corr, i), float(as_double(m, i)), None, unit))
            elif name.startswith(sample_prefix) or name in per_pc_names:
                pc_metrics[name] = m
            elif M.is_pm_metric(name):
                pm_metrics[name] = m

    sass = _sass_frame(action, index, pc_metrics, ncu)
    return rows, sass, _timeline_frame(action, index, pm_metrics, f), _region_sources(action, index)


def _region_sources(action, index: int) -> list[tuple]:
    """(launch, file, text) of the report's embedded source files that declare source regions."""
    token = M.region_config()["markers"]["token"]
    try:
        files = action.source_files()
        texts = {str(k): files[k] for k in files}
    except Exception:  # pragma: no cover - an ncu_report without source_files()
        return []
    return [(index, f, t) for f, t in sorted(texts.items()) if isinstance(t, str) and token in t]


def _timeline_frame(action, index: int, pm_metrics: dict, f: dict) -> pd.DataFrame:
    """The PM-sampled metrics of one action, aligned to the workload's time stamps by ncu_report."""
    if not pm_metrics:
        return _empty_timeline()
    timelines = action.timelines()
    names, times, values = [], [], []
    as_uint64, as_double, num_instances = f["as_uint64"], f["as_double"], f["num_instances"]
    for name in sorted(pm_metrics):
        aligned = timelines.aligned_metric(pm_metrics[name])
        if aligned is None:
            continue
        n = num_instances(aligned)
        corr = f["correlation_ids"](aligned)
        times += map(as_uint64, repeat(corr, n), range(n))
        values += map(as_double, repeat(aligned, n), range(n))
        names += [name] * n
    return pd.DataFrame({
        "launch": np.full(len(names), index, dtype=np.int64),
        "metric": pd.Series(names, dtype=object),
        "t_ns": np.array(times, dtype=np.int64),
        "value": np.array(values, dtype=np.float64),
    })


def _sass_frame(action, index: int, pc_metrics: dict, ncu) -> pd.DataFrame:
    cfg = M.stall_config()
    cache: dict = {}
    per_pc = M.per_pc_metrics()
    columns: dict[str, tuple[list[int], list[int]]] = {}
    for col, name in per_pc.items():
        if name in pc_metrics:
            columns[col] = _per_pc(pc_metrics[name], ncu, cache)
    if cfg["sample_count"] in pc_metrics:
        columns["samples"] = _per_pc(pc_metrics[cfg["sample_count"]], ncu, cache)
    reasons = M.sampled_reasons(pc_metrics)
    for reason in reasons:
        name = cfg["sample_prefix"] + reason
        if name in pc_metrics:
            columns[f"stall_{reason}"] = _per_pc(pc_metrics[name], ncu, cache)
        if name + cfg["not_issued_suffix"] in pc_metrics:
            columns[f"not_issued_{reason}"] = _per_pc(
                pc_metrics[name + cfg["not_issued_suffix"]], ncu, cache
            )

    # Every instruction slot of the function, as ncu's source page lists it: the PCs the metrics
    # name, the slots between them that no metric names (e.g. an unreachable BRA), and the
    # padding after the last one (the closing self-branch and NOPs), up to the first empty slot.
    known = sorted({pc for pcs, _ in columns.values() for pc in pcs})
    texts: list[str] = []
    if known:
        steps = [b - a for a, b in zip(known, known[1:]) if b > a]
        step = min(steps) if steps else 16
        all_pcs = list(range(known[0], known[-1] + step, step))
        sass_by_pc = action.sass_by_pc
        with _disassembler_beside_caller():
            texts = [(sass_by_pc(pc) or "").strip() for pc in all_pcs]
            pc = known[-1] + step
            while True:
                text = (sass_by_pc(pc) or "").strip()
                if not text:
                    break
                texts.append(text)
                all_pcs.append(pc)
                pc += step
    else:
        all_pcs = []
    addr = np.array(all_pcs, dtype=np.uint64)
    pos = {pc: i for i, pc in enumerate(all_pcs)}
    data: dict[str, object] = {
        "launch": np.full(len(all_pcs), index, dtype=np.int64),
        "address": addr,
        "offset": (addr - addr[0]).astype(np.int64) if len(addr) else np.array([], np.int64),
    }
    opcodes = [M.full_opcode(t) for t in texts]
    bases = [op.split(".", 1)[0] for op in opcodes]
    data["sass"] = texts
    data["opcode"] = opcodes
    data["base"] = bases
    data["opcode_class"] = [M.classify_opcode(b) for b in bases]
    wanted = [*per_pc, "samples"]
    for reason in reasons:
        wanted += [f"stall_{reason}", f"not_issued_{reason}"]
    for col in wanted:
        if col not in columns:
            continue
        arr = np.zeros(len(all_pcs), dtype=np.int64)
        pcs, vals = columns[col]
        idx = [pos[pc] for pc in pcs]
        arr[idx] = vals
        data[col] = arr
    files, lines = [], []
    for pc in all_pcs:
        si = action.source_info(pc)
        if si is None:
            files.append(None)
            lines.append(pd.NA)
        else:
            files.append(si.file_name())
            lines.append(si.line())
    data["source_file"] = files
    data["source_line"] = pd.array(lines, dtype="Int64")
    return pd.DataFrame(data)


def _ingest(path: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    try:
        import ncu_report as ncu
    except ImportError as err:
        raise WhowaitsError(
            "reading a report needs the ncu-report package (pip install ncu-report); "
            "it is not installed here"
        ) from err
    try:
        ctx = ncu.load_report(str(path))
    except Exception as err:
        raise WhowaitsError(f"{path}: ncu_report cannot open it: {err}") from err
    metric_rows: list[tuple] = []
    sass_frames = []
    timeline_frames = []
    source_rows: list[tuple] = []
    index = 0
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            kernel = action.name(ncu.IAction.NameBase_DEMANGLED) or action.name()
            rows, sass, timeline, srcs = _ingest_action(action, index, kernel, ncu)
            source_rows += srcs
            if not rows:
                raise WhowaitsError(
                    f"{path}: truncated or corrupt Nsight Compute report (launch {index} of "
                    f"kernel {kernel!r} has no metrics)"
                )
            metric_rows += [(index, kernel, *row) for row in rows]
            sass_frames.append(sass)
            timeline_frames.append(timeline)
            index += 1
    if index == 0:
        raise WhowaitsError(
            f"{path}: no profiled kernel launch in this report (empty, truncated or corrupt)"
        )
    mf = pd.DataFrame(metric_rows, columns=METRIC_COLUMNS[1:])
    mf["value"] = mf["value"].astype(np.float64)
    mf = _normalize(mf)
    sf = pd.concat(sass_frames, ignore_index=True)
    tf = pd.concat(timeline_frames, ignore_index=True) if timeline_frames else _empty_timeline()
    rf = pd.DataFrame(source_rows, columns=SOURCE_COLUMNS).astype({"launch": np.int64, "file": object, "text": object})
    return mf, sf, tf, rf


def load_report(path: str | os.PathLike, *, use_cache: bool = True) -> Report:
    """Read an Nsight Compute report into :class:`Report` (frames documented in this module's
    docstring), from the parquet cache when the file's sha256 has been ingested before.

    Raises :class:`WhowaitsError` (one line) for a missing path, a file that is not a report,
    and a truncated or corrupt report.
    """
    p = Path(path)
    _check_file(p)
    sha = sha256_file(p)
    cached = _read_cache(sha) if use_cache else None
    if cached is None:
        mf, sf, tf, rf = _ingest(p)
        if use_cache:
            _write_cache(sha, mf, sf, tf, rf)
    else:
        mf, sf, tf, rf = cached
    srcs: dict[int, dict] = {}
    for li, f, t in zip(rf["launch"].tolist(), rf["file"].tolist(), rf["text"].tolist()):
        srcs.setdefault(int(li), {})[f] = t
    report = str(path)
    launches = []
    if mf["launch"].nunique() == 1:
        groups = [(int(mf["launch"].iat[0]), mf)]
        sgroups = {int(mf["launch"].iat[0]): sf}
        tgroups = {int(mf["launch"].iat[0]): tf}
    else:
        groups = [(int(k), g) for k, g in mf.groupby("launch", sort=True)]
        sgroups = {int(k): g for k, g in sf.groupby("launch", sort=True)}
        tgroups = {int(k): g for k, g in tf.groupby("launch", sort=True)}
    for idx, g in groups:
        g = g.reset_index(drop=True)
        g.insert(0, "report", report)
        s = sgroups.get(idx)
        if s is None:
            s = sf.iloc[0:0]
        t = tgroups.get(idx)
        t = _empty_timeline() if t is None or t.empty else t.reset_index(drop=True)
        launches.append(Launch(report, idx, str(g["kernel"].iat[0]), g, s.reset_index(drop=True), t,
                               srcs.get(idx, {})))
    return Report(report, sha, launches)


def select_launches(report: Report, kernel_regex: str | None) -> list[Launch]:
    """Launches whose demangled kernel name matches ``kernel_regex`` (``re.search``); all of
    them for None. :class:`WhowaitsError` for an invalid regex or one that matches nothing."""
    if kernel_regex is None:
        return list(report.launches)
    try:
        rx = re.compile(kernel_regex)
    except re.error as err:
        raise WhowaitsError(f"--kernel {kernel_regex!r} is not a valid regex: {err}") from err
    out = [la for la in report.launches if rx.search(la.kernel)]
    if not out:
        names = sorted({_short(la.kernel) for la in report.launches})
        raise WhowaitsError(
            f"--kernel {kernel_regex!r} matches no launch in {report.path}; kernels there: "
            + "; ".join(names)
        )
    return out


def _short(name: str, width: int = 100) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"
