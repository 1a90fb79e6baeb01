"""A user's own series: labels that tell reports apart, and the series file (TOML).

Most users do not profile our ladder: they have N versions of their own kernel, profiled as
``.ncu-rep`` files named however their repository names them. Two helpers make those a ladder:

- :func:`distinct_labels`: the shortest part of each report's path that tells it apart from the
  others (``…/cutlass/report-s4.ncu-rep``, ``…/report-s8.ncu-rep``, ``…/report-s8-persist.ncu-rep`` ->
  ``s4``, ``s8``, ``s8-persist``), so that rows can be told apart without typing ``--label``.
- :func:`load_series`: a series file, per version a label, a report, an optional kernel regex, the
  problem's FLOPs or bytes for one call (fills the TFLOPS or GB/s column), a one-line change, a
  hypothesis and a verdict::

      title = "SGEMM 4096³ on an A10G, step by step"

      [[version]]
      label = "blocktile-1d"
      report = "profiles/one_blocktiling.ncu-rep"   # relative to this file
      kernel = "one_blocktiling"                     # optional: launches to take (regex)
      problem_flops = 137438953472                   # optional: 2·M·N·K
      change = "each thread computes 8 outputs of a column"
      hypothesis = "fewer loads per FMA: LDS waits fall"
      verdict = "…"

Pure functions of paths and text; reading the TOML is the only I/O here.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from profiler.errors import WhowaitsError

REPORT_SUFFIX = ".ncu-rep"
_SEP = re.compile(r"([/\\_.\-]+)")
ENTRY_KEYS = ("label", "report", "kernel", "problem_flops", "problem_bytes", "title", "change", "hypothesis",
              "verdict")
TEXT_KEYS = ("label", "report", "kernel", "title", "change", "hypothesis", "verdict")


def _stem_path(p: str | Path) -> str:
    s = str(p).replace("\\", "/")
    return s[: -len(REPORT_SUFFIX)] if s.endswith(REPORT_SUFFIX) else s


def _tokens(s: str) -> list[str]:
    """``a/b-c_d`` -> ``['a', '/', 'b', '-', 'c', '_', 'd']`` (words and the separators between them)."""
    return [t for t in _SEP.split(s) if t]


def distinct_labels(paths: list[str | Path]) -> list[str]:
    """The shortest distinct part of each path: the words left once the words every path shares at
    the start and at the end are dropped (cut at separators ``/ _ - .``). A path left with nothing
    (it is the common part itself) keeps its file name; labels that still collide fall back to the
    whole path; when the part left spans folders but the file names differ, the file names alone
    are used. One path: its file stem (or its folder when the stem is a shape key shared by design)."""
    full = [_stem_path(p) for p in paths]
    if not full:
        return []
    if len(full) == 1 or len(set(full)) == 1:
        return [_single(p) for p in full]
    toks = [_tokens(s) for s in full]
    n = min(len(t) for t in toks)
    pre = 0
    while pre < n and len({t[pre] for t in toks}) == 1:
        pre += 1
    suf = 0
    while suf < n - pre and len({t[len(t) - 1 - suf] for t in toks}) == 1:
        suf += 1
    out = []
    for s, t in zip(full, toks):
        mid = t[pre: len(t) - suf]
        while mid and _SEP.fullmatch(mid[0]):
            mid = mid[1:]
        while mid and _SEP.fullmatch(mid[-1]):
            mid = mid[:-1]
        out.append("".join(mid) or _single(s))
    if len(set(out)) < len(out):
        return full
    stems = [f.rsplit("/", 1)[-1] for f in full]
    if any("/" in lb for lb in out) and len(set(stems)) == len(stems):
        return distinct_labels(stems)  # the file names alone tell them apart: keep folders out of it
    return out


def _single(stem_path: str) -> str:
    from profiler.names import SHAPE_RE  # noqa: PLC0415

    parts = stem_path.split("/")
    if SHAPE_RE.match(parts[-1]) and len(parts) > 1 and parts[-2] not in ("", "."):
        return parts[-2]
    return parts[-1]


@dataclass(frozen=True)
class SeriesEntry:
    """One version of a series file."""

    label: str
    report: Path
    kernel: str | None = None
    problem_flops: float | None = None
    problem_bytes: float | None = None
    title: str = ""
    change: str = ""
    hypothesis: str = ""
    verdict: str = ""

    def meta(self) -> dict:
        """What the views show beside the numbers (``Profiled.meta``)."""
        return {"title": self.title, "change": self.change, "hypothesis": self.hypothesis, "verdict": self.verdict,
                "problem_flops": self.problem_flops, "problem_bytes": self.problem_bytes}


@dataclass
class Series:
    """A series file: its ``title`` and ``versions`` in order."""

    path: Path
    title: str = ""
    versions: list = field(default_factory=list)


def is_series_file(spec: str) -> bool:
    return str(spec).endswith(".toml")


def _number(v, where: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        raise WhowaitsError(f"{where} must be a positive number, not {v!r}")
    return float(v)


def load_series(path: str | Path) -> Series:
    """Read and check a series file (see the module docstring). Report paths are relative to the file.
    Raises :class:`WhowaitsError` naming the file and the entry for anything wrong in it."""
    path = Path(path)
    if not path.is_file():
        raise WhowaitsError(f"no such series file: {path}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise WhowaitsError(f"{path}: not a valid TOML file ({err})") from None
    except OSError as err:
        raise WhowaitsError(f"cannot read {path}: {err.strerror or err}") from None
    unknown = set(data) - {"title", "version"}
    if unknown:
        raise WhowaitsError(f"{path}: unknown key(s) {', '.join(sorted(unknown))} (expected title and [[version]] tables)")
    rows = data.get("version")
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise WhowaitsError(f"{path}: no [[version]] tables; each needs at least report = \"….ncu-rep\"")
    title = data.get("title", "")
    if not isinstance(title, str):
        raise WhowaitsError(f"{path}: title must be a string")
    reports = []
    for i, r in enumerate(rows, 1):
        where = f"{path}: version {i}"
        bad = set(r) - set(ENTRY_KEYS)
        if bad:
            raise WhowaitsError(f"{where}: unknown key(s) {', '.join(sorted(bad))} (known: {', '.join(ENTRY_KEYS)})")
        for k in TEXT_KEYS:
            if k in r and not isinstance(r[k], str):
                raise WhowaitsError(f"{where}: {k} must be a string")
        if not r.get("report"):
            raise WhowaitsError(f"{where}: needs report = \"….ncu-rep\"")
        rep = Path(r["report"]).expanduser()
        reports.append(rep if rep.is_absolute() else path.parent / rep)
    given = [r.get("label") or None for r in rows]
    derived = distinct_labels(reports)
    labels = [g or d for g, d in zip(given, derived)]
    dup = sorted({lb for lb in labels if labels.count(lb) > 1})
    if dup:
        raise WhowaitsError(f"{path}: label {dup[0]!r} is used twice; give each version its own label")
    out = []
    for i, (r, rep, lb) in enumerate(zip(rows, reports, labels), 1):
        where = f"{path}: version {i} ({lb})"
        if r.get("kernel"):
            try:
                re.compile(r["kernel"])
            except re.error as err:
                raise WhowaitsError(f"{where}: kernel {r['kernel']!r} is not a valid regex: {err}") from None
        out.append(SeriesEntry(label=lb, report=rep, kernel=r.get("kernel") or None,
                               problem_flops=_number(r.get("problem_flops"), f"{where}: problem_flops"),
                               problem_bytes=_number(r.get("problem_bytes"), f"{where}: problem_bytes"),
                               title=r.get("title", ""), change=r.get("change", ""),
                               hypothesis=r.get("hypothesis", ""), verdict=r.get("verdict", "")))
    return Series(path=path, title=title, versions=out)
