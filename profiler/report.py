"""Ingestion: an Nsight Compute report -> tidy pandas frames, cached.

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

The cache lives in ``$WHOWAITS_CACHE_DIR`` (default ``~/.cache/whowaits``): one sealed file per
report, keyed by the report file's sha256 and the content of the ingester, the metric maps and
every data file (:mod:`profiler.cachefile`): a changed file (or opcode map, or ingester) never
hits a stale entry; a damaged or undecodable entry is deleted and rebuilt. The SASS text itself is
cached apart, per kernel function and keyed on the ELF module the report embeds
(:mod:`profiler.sasscache`), so a report of a build seen before (or any report after an edit to
this module or a data file) reads no SASS through ncu_report; ``load_report(use_cache=False)``
uses neither cache.
"""

from __future__ import annotations

import io
import os
import pickle
import re
import stat
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from profiler import cachefile, gcpause, sass_worker, sasscache
from profiler import metrics as M
from profiler.errors import WhowaitsError
from profiler.provenance import sha256_file

__all__ = ["Launch", "Report", "cache_dir", "check_file", "load_report", "select_launches"]

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
        assert self._scalars is not None
        v = self._scalars.get(name)
        if isinstance(v, float) and np.isnan(v):
            return None
        return v

    def has(self, name: str) -> bool:
        """Whether the report holds ncu metric ``name``."""
        if self._scalars is None:
            self._build_lookup()
        assert self._scalars is not None
        return name in self._scalars

    def instances(self, name: str) -> dict[str, float]:
        """Instance key -> value of a metric instanced by string (e.g. per opcode); {} if absent."""
        if self._instanced is None:
            self._build_lookup()
        assert self._instanced is not None
        return dict(self._instanced.get(name, {}))

    def get(self, canonical: str):
        """(value, ncu metric name) of a canonical metric of ``metrics.toml``: the first of its
        names present in the report; (None, None) when none is. A value of the wrong kind (text
        where ``metrics.toml`` promises a number, or the reverse) can only come from a damaged
        report: :class:`WhowaitsError`."""
        spec = M.metric_spec(canonical)
        for name in spec.names:
            v = self.value(name)
            if v is not None:
                if isinstance(v, str) != (spec.kind == "text"):
                    raise WhowaitsError(
                        f"{self.report}: corrupt Nsight Compute report (metric {name} of launch "
                        f"{self.index} holds {'text' if isinstance(v, str) else 'a number'}, not "
                        f"{'text' if spec.kind == 'text' else 'a number'}); re-copy or re-profile it")
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
    """``$WHOWAITS_CACHE_DIR`` or ``~/.cache/whowaits`` (:func:`profiler.paths.cache_dir`)."""
    from profiler.paths import cache_dir as _cache_dir  # noqa: PLC0415

    return _cache_dir()


#: what a parsed-frames entry is derived from (see :mod:`profiler.cachefile`): the ingester and its worker's
#: readers, the metric maps' reader, every data file, and the libraries that decode the report and pickle the frames
_FRAMES_FROM = (("report.py", "sass_worker.py", "sasscache.py", "metrics.py", "errors.py", "data"), ("ncu-report", "pandas", "numpy", "pyarrow"))
_FRAMES_SUFFIX = ".frames"


def _cache_path(sha: str) -> Path:
    """``<cache_dir>/<report sha256>.<fingerprint>.frames``: one file per report and producer."""
    return cache_dir() / f"{sha}.{cachefile.fingerprint(*_FRAMES_FROM)}{_FRAMES_SUFFIX}"


#: the payload's first bytes: the frames as one pickle (protocol 5) of a list of DataFrames
_FRAMES_MAGIC = b"whowaits-frames-pickle5\n"

#: every global a frames pickle may name (pandas 2-3, numpy 1-2, pyarrow string columns): the
#: unpickler refuses any other, so an entry can only rebuild DataFrames, never run code
#: (tests/test_report.py checks that every committed report's entry needs no other)
_PICKLE_GLOBALS = frozenset({
    ("builtins", "slice"),
    ("numpy", "dtype"), ("numpy", "ndarray"),
    ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.numeric", "_frombuffer"), ("numpy.core.numeric", "_frombuffer"),
    ("pandas", "DataFrame"), ("pandas", "Index"), ("pandas", "RangeIndex"),
    ("pandas", "Int64Dtype"), ("pandas", "StringDtype"),
    ("pandas._libs.internals", "_unpickle_block"),
    ("pandas.arrays", "ArrowStringArray"), ("pandas.arrays", "IntegerArray"),
    ("pandas.core.arrays.string_arrow", "ArrowStringArray"),
    ("pandas.core.arrays.integer", "IntegerArray"),
    ("pandas.core.indexes.base", "_new_Index"),
    ("pandas.core.internals.managers", "BlockManager"),
    ("pyarrow.lib", "_restore_array"), ("pyarrow.lib", "py_buffer"), ("pyarrow.lib", "type_for_alias"),
})


class _FramesUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) not in _PICKLE_GLOBALS:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a frames entry")
        return super().find_class(module, name)


def _frames_to_bytes(*frames: pd.DataFrame) -> bytes:
    """Frames as one payload: a magic line, then one pickle of the list of frames.

    Pickle, not parquet (until 2026-12-01 each frame was a parquet file): for the flash report's
    frames (3,306 PCs, 11k metric rows) writing took 1.6 ms against 17.5 ms and reading 1.5 ms against
    10.6 ms (median of 15, load average 8; Arrow IPC: 26.2 / 7.3 ms), for an entry of 2.8 MB
    instead of 0.2 MB. The entry stays sealed (:mod:`profiler.cachefile`), and :class:`_FramesUnpickler`
    admits only the constructors of DataFrames, so a forged entry cannot run code either.
    """
    return _FRAMES_MAGIC + pickle.dumps(list(frames), protocol=5)


def _frames_from_bytes(payload: bytes) -> list[pd.DataFrame]:
    if not payload.startswith(_FRAMES_MAGIC):
        raise ValueError("not a frames entry")
    frames = _FramesUnpickler(io.BytesIO(memoryview(payload)[len(_FRAMES_MAGIC):])).load()
    if not isinstance(frames, list) or not all(isinstance(f, pd.DataFrame) for f in frames):
        raise ValueError("a frames entry holds something else")
    return frames


def _valid_frames(mf: pd.DataFrame, sf: pd.DataFrame, tf: pd.DataFrame, rf: pd.DataFrame) -> bool:
    """The frames have the columns and dtypes this module's docstring promises."""
    if list(mf.columns) != METRIC_COLUMNS[1:] or mf.empty:
        return False
    if not (pd.api.types.is_integer_dtype(mf["launch"]) and pd.api.types.is_float_dtype(mf["value"])):
        return False
    need = {"launch": "i", "address": "u", "offset": "i", "sass": "O", "opcode": "O", "base": "O",
            "opcode_class": "O"}
    for col, kind in need.items():
        if col not in sf.columns:
            return False
        if kind != "O" and sf[col].dtype.kind != kind:
            return False
    if list(tf.columns) != TIMELINE_COLUMNS or list(rf.columns) != SOURCE_COLUMNS:
        return False
    return set(sf["launch"].unique()) <= set(mf["launch"].unique())


def _read_cache(sha: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame] | None:
    """The cached frames of report ``sha`` (metrics, sass, timeline, sources), or None: no entry,
    or one that fails its seal, its decoding or :func:`_valid_frames` (then it is deleted and the
    caller rebuilds it)."""
    path = _cache_path(sha)
    payload = cachefile.read(path)
    if payload is None:
        return None
    try:
        frames = _frames_from_bytes(payload)
        ok = len(frames) == 4 and _valid_frames(*frames)
    except Exception:  # noqa: BLE001 - any undecodable entry is a miss, rebuilt by the caller
        ok = False
    if not ok:
        cachefile.discard(path)
        return None
    return tuple(frames)  # as written: _read_actions normalised them


def _normalize(mf: pd.DataFrame) -> pd.DataFrame:
    """Nullable string columns as object columns holding None (pandas >= 3 infers a string
    dtype that turns None into NaN)."""
    for col in ("instance", "text"):
        mf[col] = mf[col].astype(object).where(mf[col].notna(), None)
    return mf


def _write_cache(sha: str, mf: pd.DataFrame, sf: pd.DataFrame, tf: pd.DataFrame, rf: pd.DataFrame) -> None:
    try:
        payload = _frames_to_bytes(mf, sf, tf, rf)
    except Exception:  # noqa: BLE001 - frames pickle cannot hold are still used, just not cached
        return
    cachefile.write(_cache_path(sha), payload)


# --- validation ---------------------------------------------------------------------------------


def check_file(path: Path) -> None:
    """Reject, each with one line, what is not a readable, complete report file: a missing path,
    a directory, a FIFO or device (``/dev/zero``: it would never end), an unreadable file, a file
    without the report header and a truncated report. Checks the file type before reading a
    byte, so nothing here can hang."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise WhowaitsError(f"{path}: no such file") from None
    except OSError as err:
        raise WhowaitsError(f"{path}: cannot read: {err.strerror or err}") from None
    if stat.S_ISDIR(st.st_mode):
        raise WhowaitsError(f"{path}: is a directory, not an Nsight Compute report (.ncu-rep)")
    if not stat.S_ISREG(st.st_mode):
        raise WhowaitsError(f"{path}: not a regular file (a FIFO, socket or device); "
                            "give the path of an Nsight Compute report (.ncu-rep)")
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            size = os.fstat(f.fileno()).st_size
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


# ncu_report disassembles on a worker thread of its own: every ``sass_by_pc`` call hands one PC to it and
# waits for the text. Pinning the ingester and that thread to one CPU was measured (load 1.7 and 7.0, 8-10
# interleaved rounds of load_report) to change nothing, so the ingester leaves scheduling to the OS.


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


def _ingest_action(action, index: int, kernel: str, ncu, modules=None, pending=None
                   ) -> tuple[list, pd.DataFrame, pd.DataFrame, list]:
    """Rows of the metrics frame, the sass frame, the timeline frame and the source rows of one action
    (``modules``: the report's :class:`profiler.sasscache.Modules`, None: no SASS-text cache;
    ``pending``: the :mod:`profiler.sass_worker` answers for this report, None: no worker)."""
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

    sources = _region_sources(action, index)
    timeline = None
    if pending is not None and pending.known:
        # a known build: the worker reads the per-PC columns meanwhile (profiler/sass_worker.py); the
        # timeline here, then the columns from whichever side has them first
        timeline = _timeline_frame(action, index, pm_metrics, f)
        answered: list = []

        def poll():
            if answered:  # one answer a launch: a failed or late one is not asked for again
                return None
            got = pending.take(index, wait=False)
            if got is sass_worker.LATER:
                return None
            answered.append(got)
            return _worker_columns(got, pc_metrics)

        columns, reasons = sass_worker.pc_columns(pc_metrics, ncu, poll=poll)
        sass = _sass_frame(action, index, columns, reasons, modules)
        return rows, sass, timeline, sources
    columns, reasons = sass_worker.pc_columns(pc_metrics, ncu)
    if pending is not None and not sass_worker.reads_timeline(_span_slots(columns)):
        # a long disassembly in the worker: read the timeline here meanwhile
        timeline = _timeline_frame(action, index, pm_metrics, f)
    # what a worker (profiler/sass_worker.py) read beside the reads above: slots (and the timeline)
    answer = pending.take(index) if pending is not None else None
    sass = _sass_frame(action, index, columns, reasons, modules, answer and answer.get("slots"))
    if timeline is None:
        timeline = _timeline_frame(action, index, pm_metrics, f, answer and answer.get("timeline"))
    return rows, sass, timeline, sources


def _worker_columns(answer, pc_metrics: dict) -> tuple[dict, list[str]] | None:
    """The per-PC columns of a worker's answer for a launch of a known build, if they came from the same
    metrics as the ingester chose (else None: the ingester reads them itself)."""
    pc = answer.get("pc") if isinstance(answer, dict) else None
    if not isinstance(pc, dict) or pc.get("names") != sorted(pc_metrics):
        return None
    columns, reasons = pc.get("columns"), pc.get("reasons")
    if not isinstance(columns, dict) or not isinstance(reasons, list):
        return None
    return columns, reasons


def _span_slots(columns: dict) -> int:
    """Instruction slots from the lowest to the highest PC that inst_executed and the sample count name
    (what the worker counts before its walk past the highest one; 0 without either)."""
    laid = sass_worker.span(pc for col in ("inst_executed", "samples") for pc in columns.get(col, ((), ()))[0])
    return 0 if laid is None else (laid[2] - laid[0]) // laid[1] + 1


def _region_sources(action, index: int) -> list[tuple]:
    """(launch, file, text) of the report's embedded source files that declare source regions."""
    token = M.region_config()["markers"]["token"]
    try:
        files = action.source_files()
        texts = {str(k): files[k] for k in files}
    except Exception:  # noqa: BLE001 - an ncu_report without source_files(), or one that fails inside it
        return []
    return [(index, f, t) for f, t in sorted(texts.items()) if isinstance(t, str) and token in t]


def _timeline_frame(action, index: int, pm_metrics: dict, f: dict, read: dict | None = None) -> pd.DataFrame:
    """The PM-sampled metrics of one action, aligned to the workload's time stamps by ncu_report
    (``read``: the worker's ``{name: (times, values) or None}``, used when it names the same metrics)."""
    if not pm_metrics:
        return _empty_timeline()
    if read is None or set(read) != set(pm_metrics):
        read = sass_worker.timeline(action, pm_metrics, f)
    names: list[str] = []
    times: list = []
    values: list = []
    for name in sorted(pm_metrics):
        if read[name] is None:
            continue
        t, v = read[name]
        times += t
        values += v
        names += [name] * len(t)
    return pd.DataFrame({
        "launch": np.full(len(names), index, dtype=np.int64),
        "metric": pd.Series(names, dtype=object),
        "t_ns": np.array(times, dtype=np.int64),
        "value": np.array(values, dtype=np.float64),
    })


def _sass_frame(action, index: int, columns: dict, reasons: list[str], modules=None, slots: dict | None = None
                ) -> pd.DataFrame:
    """The sass frame of one action from its per-PC columns (``slots``: what a worker read, or None)."""
    per_pc = M.per_pc_metrics()
    # every instruction slot of the function (_read_slots), from the PCs the metrics name; the stall columns of one sampling group share one list of PCs (sass_worker._per_pc): each list once
    lists = {id(pcs): pcs for pcs, _ in columns.values()}
    known = sorted({pc for pcs in lists.values() for pc in pcs})
    texts: list[str] = []
    opcodes: list[str] = []
    files: list = []
    lines: list = []
    if known:
        step = (sass_worker.span(known) or (0, 16, 0))[1]
        all_pcs = list(range(known[0], known[-1] + step, step))
        mangled = sass_worker.mangled(action) if modules is not None else None
        # the cached text (profiler/sasscache.py) needs the function's first PC: the lowest PC of
        # inst_executed (the entry instruction always executes), which must be the first PC named
        executed = columns.get("inst_executed", ([], []))[0]
        at_start = bool(mangled) and bool(executed) and min(executed) == known[0]
        cached = sasscache.lookup(modules, mangled, known[0], step) if at_start and mangled is not None else None
        if cached is not None and len(cached.texts) * step > known[-1] - known[0]:
            texts, opcodes, files, lines = cached
            all_pcs = list(range(known[0], known[0] + len(texts) * step, step))
        else:
            texts, all_pcs, files, lines = _read_slots(action, all_pcs, step, slots)
            opcodes = [M.full_opcode(t) for t in texts]
            if at_start and mangled is not None:
                sasscache.store(modules, mangled, known[0], step, texts, opcodes, files, lines)
    else:
        all_pcs = []
    addr = np.array(all_pcs, dtype=np.uint64)
    pos = {pc: i for i, pc in enumerate(all_pcs)}
    data: dict[str, object] = {
        "launch": np.full(len(all_pcs), index, dtype=np.int64),
        "address": addr,
        "offset": (addr - addr[0]).astype(np.int64) if len(addr) else np.array([], np.int64),
    }
    bases = [op.split(".", 1)[0] for op in opcodes]
    # Object columns of Python str (not pandas 3's Arrow-backed ``str``): every analysis reads these
    # as arrays or lists of str, and converting Arrow strings back took ~5% of a warm ``show``
    # (py-spy, flash report; see scripts/bench_show.py for the figures). They hold no missing values.
    data["sass"] = pd.Series(texts, dtype=object)
    data["opcode"] = pd.Series(opcodes, dtype=object)
    data["base"] = pd.Series(bases, dtype=object)
    data["opcode_class"] = pd.Series(M.classify_bases(bases), dtype=object)
    wanted = [*per_pc, "samples"]
    for reason in reasons:
        wanted += [f"stall_{reason}", f"not_issued_{reason}"]
    where: dict[int, np.ndarray] = {}  # id of a PC list -> the rows of its PCs
    for col in wanted:
        if col not in columns:
            continue
        arr = np.zeros(len(all_pcs), dtype=np.int64)
        pcs, vals = columns[col]
        idx = where.get(id(pcs))
        if idx is None:
            idx = where[id(pcs)] = np.fromiter((pos[pc] for pc in pcs), dtype=np.intp, count=len(pcs))
        arr[idx] = vals
        data[col] = arr
    data["source_file"] = files
    data["source_line"] = pd.array([pd.NA if ln is None else ln for ln in lines], dtype="Int64")
    return pd.DataFrame(data)


def _read_slots(action, all_pcs: list[int], step: int, slots: dict | None
                ) -> tuple[list[str], list[int], list, list]:
    """(texts, PCs, source files, source lines) of every instruction slot from the first of ``all_pcs``
    to the first empty slot past its last, as ncu's source page lists them: the PCs the metrics name,
    the slots between them that no metric names (e.g. an unreachable BRA), and the padding after the
    last one (the closing self-branch and NOPs). ``slots``: what a worker read (profiler/sass_worker.py),
    used where it covers a slot; the rest comes from ncu_report here."""
    got: dict[int, str] = {}
    src: dict[int, tuple] = {}
    if slots is not None and slots["step"] == step:
        span = range(slots["first"], slots["end"], step)
        src = dict(zip(span, zip(slots["files"], slots["lines"])))
        if len(slots["texts"]) == len(span):
            got = dict(zip(span, slots["texts"]))
            got[slots["end"]] = ""  # the worker stopped at the first empty slot
    sass_by_pc = action.sass_by_pc

    def text_at(pc: int) -> str:
        text = got.get(pc)
        return text if text is not None else (sass_by_pc(pc) or "").strip()

    all_pcs = list(all_pcs)
    texts = [text_at(pc) for pc in all_pcs]
    pc = all_pcs[-1] + step
    while True:
        text = text_at(pc)
        if not text:
            break
        texts.append(text)
        all_pcs.append(pc)
        pc += step
    files: list = []
    lines: list = []
    for pc in all_pcs:
        if pc in src:
            file, line = src[pc]
            files.append(file)
            lines.append(line)
            continue
        si = action.source_info(pc)
        files.append(None if si is None else si.file_name())
        lines.append(None if si is None else si.line())
    return texts, all_pcs, files, lines


class _NativeLog:
    """Captures what native code writes to file descriptor 2 while the block runs (ncu_report's
    protobuf/absl log lines, e.g. ``E0000 … Can't parse message …`` for a damaged report), so
    they never reach the terminal before whowaits' own one-line error. :attr:`lines` holds them
    afterwards; :meth:`replay` writes the harmless ones to stderr after a successful read."""

    _BOILERPLATE = "WARNING: All log messages before absl::InitializeLog() is called"

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __enter__(self):
        import tempfile  # noqa: PLC0415

        try:
            sys.stderr.flush()
            self._file = tempfile.TemporaryFile()
            self._saved = os.dup(2)
            os.dup2(self._file.fileno(), 2)
        except (OSError, ValueError, AttributeError):  # no fd 2 (embedded): capture nothing
            self._saved = None
        return self

    def __exit__(self, *exc) -> None:
        if self._saved is None:
            return
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        text = self._file.read().decode("utf-8", "replace")
        self._file.close()
        self.lines = [ln.strip() for ln in text.splitlines()
                      if ln.strip() and not ln.startswith(self._BOILERPLATE)]

    def errors(self) -> list[str]:
        """absl error and fatal lines (``E``/``F`` + a digit), message only."""
        return [ln.split("] ", 1)[-1] for ln in self.lines if ln[:1] in "EF" and ln[1:2].isdigit()]

    def replay(self) -> None:
        for ln in self.lines:
            print(f"whowaits: ncu_report: {ln}", file=sys.stderr)


def _corrupt(path: Path, why: str) -> WhowaitsError:
    return WhowaitsError(f"{path}: corrupt Nsight Compute report ({' '.join(why.split())[:200]}); "
                         "re-copy or re-profile it")


def _check_text(path: Path, mf: pd.DataFrame, sf: pd.DataFrame, rf: pd.DataFrame) -> None:
    """Every string the report gave is valid Unicode (a damaged string table can yield lone
    surrogates, which no file or terminal can take)."""
    for frame, cols in ((mf, ("kernel", "metric", "instance", "text", "unit")),
                        (sf, ("sass", "source_file")), (rf, ("file", "text"))):
        for col in cols:
            if col not in frame.columns:
                continue
            values = frame[col].to_numpy(dtype=object)
            try:
                try:
                    text = "\0".join(values)  # all str: one C call
                except TypeError:  # None or NaN among them
                    text = "\0".join(v for v in values if isinstance(v, str))
                text.encode()
            except UnicodeEncodeError:
                raise _corrupt(path, f"an undecodable string in its {col} table") from None


#: a pipe to the CLI's supervisor (profiler.cli._supervised): the path of the report about to be
#: read by native code goes there first, so a crash inside ncu_report can be blamed on its report
NATIVE_NOTE_FD: int | None = None


def _note_native(path: Path) -> None:
    if NATIVE_NOTE_FD is not None:
        try:
            os.write(NATIVE_NOTE_FD, (str(path).replace("\n", " ") + "\n").encode("utf-8", "replace"))
        except OSError:
            pass


def _ingest(path: Path, sass_cache: bool = True) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    _note_native(path)
    try:
        import ncu_report as ncu
    except ImportError as err:
        raise WhowaitsError(
            "reading a report needs the ncu-report package (pip install ncu-report); "
            "it is not installed here"
        ) from err
    log = _NativeLog()
    try:
        with log:
            mf, sf, tf, rf = _read_actions(path, ncu, sass_cache)
    except WhowaitsError:
        raise
    except Exception as err:  # noqa: BLE001 - the file passed check_file: the reader choked on it
        why = (log.errors() or [f"{type(err).__name__}: {err}"])[0]
        raise _corrupt(path, f"ncu_report: {why}") from None
    if log.errors():
        raise _corrupt(path, f"ncu_report: {log.errors()[0]}")
    log.replay()
    _check_text(path, mf, sf, rf)
    return mf, sf, tf, rf


def _read_actions(path: Path, ncu, sass_cache: bool = True
                  ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    modules = sasscache.Modules(path) if sass_cache else None
    # the worker disassembles beside the metric reads below (profiler/sass_worker.py), or, for a report of a
    # build seen before (its text in the SASS cache: nothing to disassemble), reads its per-PC columns; None:
    # no worker
    known_build = modules is not None and sasscache.holds_any(modules)
    pending = sass_worker.request(path, sass_cache, known=known_build)
    try:
        return _read_launches(path, ncu, modules, pending)
    except BaseException:
        if pending is not None:
            pending.close(ok=False)
        raise


def _read_launches(path: Path, ncu, modules, pending) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
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
            rows, sass, timeline, srcs = _ingest_action(action, index, kernel, ncu, modules, pending)
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
    if pending is not None:
        pending.close(ok=True)
    if index == 0:
        raise WhowaitsError(
            f"{path}: no profiled kernel launch in this report (empty, truncated or corrupt)"
        )
    mf = _metrics_frame(metric_rows)
    sf = pd.concat(sass_frames, ignore_index=True)
    tf = pd.concat(timeline_frames, ignore_index=True) if timeline_frames else _empty_timeline()
    rf = pd.DataFrame(source_rows, columns=SOURCE_COLUMNS).astype({"launch": np.int64, "file": object, "text": object})
    return mf, sf, tf, rf


def _metrics_frame(rows: list[tuple]) -> pd.DataFrame:
    """The metrics frame (``METRIC_COLUMNS`` but ``report``) of ``(launch, kernel, metric, instance,
    value, text, unit)`` rows, built column by column: ``pd.DataFrame(rows)`` then :func:`_normalize`
    took 23-27 ms for the flash report's 2,623 rows, this 2.6 ms (load average 7; the same frame,
    dtypes included). ``instance`` and ``text`` hold str or None (object columns, as _normalize makes them);
    ``kernel``, ``metric`` and ``unit`` are object columns of str too (Launch._build_lookup reads them as
    object arrays: no conversion from pandas 3's Arrow strings on every load)."""
    launch, kernel, metric, instance, value, text, unit = (list(c) for c in zip(*rows))
    return pd.DataFrame({
        "launch": pd.Series(launch, dtype=np.int64),
        "kernel": pd.Series(kernel, dtype=object),
        "metric": pd.Series(metric, dtype=object),
        "instance": pd.Series(instance, dtype=object),
        "value": np.array(value, dtype=np.float64),
        "text": pd.Series(text, dtype=object),
        "unit": pd.Series(unit, dtype=object),
    })


def load_report(path: str | os.PathLike, *, use_cache: bool = True) -> Report:
    """Read an Nsight Compute report into :class:`Report` (frames documented in this module's
    docstring), from the frames cache when the file's sha256 has been ingested before.

    Raises :class:`WhowaitsError` (one line) for a missing path, a file that is not a report,
    and a truncated or corrupt report.
    """
    p = Path(path)
    check_file(p)
    sha = sha256_file(p)
    cached = _read_cache(sha) if use_cache else None
    if cached is None:
        with gcpause.paused():
            mf, sf, tf, rf = _ingest(p, sass_cache=use_cache)
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
        more = f"; and {len(names) - _SHOWN_NAMES} more" if len(names) > _SHOWN_NAMES else ""
        raise WhowaitsError(
            f"--kernel {kernel_regex!r} matches no launch in {report.path}; kernels there: "
            + "; ".join(names[:_SHOWN_NAMES]) + more
        )
    return out


_SHOWN_NAMES = 10  # the one-line error names at most this many kernels (a sweep report holds hundreds)


def _short(name: str, width: int = 100) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"
