"""What a check reads: bench result files, report summaries and a baseline, located and validated.

- **Bench files** (``whowaits bench``): ``<folder>/<YYYY-MM-DD>-<shape>.json`` = ``{"provenance", "rows"}``;
  for an implementation at a shape the newest file (by its date prefix) with a row for it, and for every
  implementation its rule compares it with (``min_ratio``), is taken: ratios stay within that one run, and a
  newer run of a few rows does not hide the last run that has them all; a single file may be named instead. A second run of the same day
  is committed as ``<YYYY-MM-DDTHHMM>-<shape>.json`` (the UTC start time of the run), which sorts after the
  day's plain file, so it neither overwrites the earlier run nor loses to it.
- **Reports**: ``<folder>/<version>/<shape>.ncu-rep``, summarised through the summary cache
  (:mod:`profiler.compare.cache`); where no report exists, ``<shape>.summary.json`` (the output of
  ``whowaits show REPORT --format json``) stands in, so a CI job may keep summaries instead of reports.
  Several launches are merged (:func:`profiler.compare.merge.merge_launches`).
- **Baseline** (``--baseline REF``): a bench ``.json`` file; a folder laid out like the repository (the
  policy's paths are looked up below it); or a git revision (``main``, ``HEAD~1``, a commit), whose
  files at the policy's paths are read with ``git show`` into a temporary folder.

Anything named but absent is a :class:`~profiler.errors.WhowaitsError` (exit 2): a gate never passes
for want of its input.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from kernels.bench import suspect_rows
from profiler.errors import WhowaitsError
from profiler.names import EXT_PREFIX, is_external
from profiler.schema import SchemaError, Summary, validate_summaries

BENCH_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2}(?:T\d{4})?)-(b\d+_h\d+_s\d+_d\d+_[a-z0-9]+(?:_causal)?)\.json$")
REPORT_SUFFIX = ".ncu-rep"
SUMMARY_SUFFIX = ".summary.json"


CUDNN_BEST = "cudnn-best"  # the name a rule uses for the faster of CUDNN_ROWS (Bench.row)
CUDNN_ROWS = ("sdpa-cudnn", "sdpa-auto")


@dataclass
class Bench:
    """One bench result file: its rows by implementation, its shape and provenance."""

    path: Path
    shape: str
    rows: dict[str, dict]
    provenance: dict = field(default_factory=dict)
    suspect: dict[str, str] = field(default_factory=dict)  # rows left out: a fallback path timed (kernels.bench.suspect_rows)

    def row(self, name: str) -> dict | None:
        """The row of ``name``; an external subject ``ext-sdpa-flash`` is the bench's ``sdpa-flash``;
        ``cudnn-best`` is the faster of the ``sdpa-cudnn`` and ``sdpa-auto`` rows (one cuDNN kernel on the H200,
        timed twice: the gate compares with cuDNN at its best in that run, kernels.bench.CUDNN_ROWS)."""
        if name in self.rows:
            return self.rows[name]
        if name == CUDNN_BEST:
            timed = [self.rows[n] for n in CUDNN_ROWS if n in self.rows and self.rows[n].get("tflops")]
            return max(timed, key=lambda r: r["tflops"]) if timed else None
        if is_external(name) and name[len(EXT_PREFIX):] in self.rows:
            return self.rows[name[len(EXT_PREFIX):]]
        return None


def read_bench(path: str | Path) -> Bench:
    """Read and validate one bench result file (WhowaitsError, one line, on anything wrong)."""
    p = Path(path)
    if not p.is_file():
        raise WhowaitsError(f"no such bench file: {p} (run whowaits bench, or fix the path)")
    try:
        data = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise WhowaitsError(f"{p}: not a bench result file ({type(err).__name__}: {err})") from None
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and isinstance(r.get("implementation"), str)
                                             for r in rows):
        raise WhowaitsError(f"{p}: not a bench result file (expected {{\"provenance\": …, \"rows\": [{{\"implementation\": …}}]}})")
    shapes = {r.get("shape") for r in rows}
    if len(shapes) != 1 or not isinstance(next(iter(shapes)), str):
        raise WhowaitsError(f"{p}: expected the rows of one shape, found {sorted(map(str, shapes))}")
    for r in rows:
        for key in ("ms", "tflops"):
            if r.get(key) is not None and not isinstance(r.get(key), (int, float)):
                raise WhowaitsError(f"{p}: row {r['implementation']}: {key} must be a number or null")
    prov = data.get("provenance") if isinstance(data.get("provenance"), dict) else {}
    by_name = {r["implementation"]: r for r in rows}
    suspect = suspect_rows({n: r.get("tflops") for n, r in by_name.items()})
    return Bench(path=p, shape=next(iter(shapes)), rows={n: r for n, r in by_name.items() if n not in suspect},
                 provenance=prov, suspect=suspect)


def bench_files(where: str | Path) -> dict[str, list[Path]]:
    """Shape -> bench files in folder ``where``, newest first (by the date in the name), or the one file
    ``where``. A check takes, per implementation, the newest file that has a row for it, so a run of a
    few new rows does not hide the others' last measurement."""
    p = Path(where)
    if p.is_file():
        return {read_bench(p).shape: [p]}
    if not p.is_dir():
        raise WhowaitsError(f"no such bench file or folder: {p}")
    found: dict[str, list[tuple[str, Path]]] = {}
    for f in p.glob("*.json"):
        m = BENCH_NAME.match(f.name)
        if m:
            found.setdefault(m.group(2), []).append((m.group(1), f))
    return {shape: [f for _, f in sorted(files, key=lambda x: (x[0], x[1].name), reverse=True)]
            for shape, files in sorted(found.items())}


def find_report(reports: str | Path, version: str, shape: str) -> Path | None:
    """The report (or stand-in summary) of ``version`` at ``shape`` under ``reports``, or None."""
    base = Path(reports) / version
    for cand in (base / f"{shape}{REPORT_SUFFIX}", base / f"{shape}{SUMMARY_SUFFIX}"):
        if cand.is_file():
            return cand
    return None


def report_shapes(reports: str | Path, version: str) -> list[str]:
    """Shapes ``version`` has a report or summary for."""
    base = Path(reports) / version
    out = {f.name[: -len(REPORT_SUFFIX)] for f in base.glob(f"*{REPORT_SUFFIX}")}
    out |= {f.name[: -len(SUMMARY_SUFFIX)] for f in base.glob(f"*{SUMMARY_SUFFIX}")}
    return sorted(out)


def load_summary(path: str | Path) -> Summary:
    """One summary (launches merged) of a report or a ``.summary.json`` file."""
    from profiler.compare.merge import merge_launches  # noqa: PLC0415

    p = Path(path)
    if p.name.endswith(SUMMARY_SUFFIX):
        try:
            launches = json.loads(p.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise WhowaitsError(f"{p}: not a summary file ({type(err).__name__}: {err})") from None
        if isinstance(launches, dict):
            launches = [launches]
        if not isinstance(launches, list) or not launches:
            raise WhowaitsError(f"{p}: not a summary file (expected whowaits show --format json output)")
        try:
            validate_summaries(launches)
        except SchemaError as err:
            raise WhowaitsError(f"{p}: not a summary of whowaits show --format json: {err}") from None
        for i, x in enumerate(launches):
            bad = _counts_problem(x)
            if bad:
                raise WhowaitsError(f"{p}: launch {i}: {bad}")
    else:
        from profiler.compare.cache import summaries  # noqa: PLC0415

        launches = summaries(p)
        if not launches:
            raise WhowaitsError(f"no kernel launch in {p}")
    return merge_launches(launches)


def _counts_problem(x: dict) -> str | None:
    """Sample counts the schema's types allow but shares cannot come from (negative ones)."""
    for reason, v in (x.get("stall_samples") or {}).items():
        if v is not None and v < 0:
            return f"stall_samples.{reason} is negative ({v})"
    for key in ("who_waits", "waits_on", "opcode_waits"):
        for i, r in enumerate(x.get(key) or []):
            if (r.get("samples") or 0) < 0:
                return f"{key}[{i}].samples is negative"
    return None


# ----------------------------------------------------------------------------- baseline

@dataclass
class Baseline:
    """Where baseline files come from: ``bench`` (one file), or ``root`` (a folder mirroring the
    repository), plus a description for messages. ``tmp`` is removed by :meth:`close`."""

    ref: str
    bench: Bench | None = None
    root: Path | None = None
    tmp: Path | None = None

    def path(self, rel: Path) -> Path:
        return (self.root or Path(".")) / rel

    def close(self) -> None:
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


def _git(repo: Path, *args: str, binary: bool = False):
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=not binary, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None


def git_revision(repo: Path, ref: str) -> str | None:
    """The commit ``ref`` names in the git repository at ``repo``, or None."""
    proc = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    return proc.stdout.strip() if proc is not None and proc.returncode == 0 and proc.stdout.strip() else None


def materialize(repo: Path, rev: str, rels: list[Path], dest: Path) -> None:
    """Copy the files (and folders) ``rels`` (relative to the repository root) at ``rev`` under ``dest``."""
    for rel in rels:
        proc = _git(repo, "ls-tree", "-r", "--name-only", rev, "--", rel.as_posix())
        names = proc.stdout.split("\n") if proc is not None and proc.returncode == 0 else []
        for name in filter(None, names):
            blob = _git(repo, "show", f"{rev}:{name}", binary=True)
            if blob is None or blob.returncode != 0:
                continue
            out = dest / name
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(blob.stdout)


def open_baseline(ref: str, root: Path, rels: list[Path]) -> Baseline:
    """Resolve ``--baseline REF`` (see the module docstring); ``root`` is the repository root the
    policy's relative paths ``rels`` (bench and report folders) start from."""
    p = Path(ref)
    if p.is_file():
        if p.suffix != ".json":
            raise WhowaitsError(f"--baseline {ref}: a file baseline must be a bench .json "
                                "(for reports give a folder or a git revision)")
        return Baseline(ref=ref, bench=read_bench(p))
    if p.is_dir():
        return Baseline(ref=ref, root=p)
    rev = git_revision(root, ref)
    if rev is None:
        raise WhowaitsError(f"--baseline {ref}: no such file, folder or git revision")
    tmp = Path(tempfile.mkdtemp(prefix="whowaits-baseline-"))
    try:
        materialize(root, rev, rels, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Baseline(ref=f"{ref} ({rev[:12]})", root=tmp, tmp=tmp)
