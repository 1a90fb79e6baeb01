"""Compare versions: diffs of two reports, the bottleneck's migration across the ladder, and the
confound guard. Pure functions over summaries (:mod:`.diff`, :mod:`.migration`, :mod:`.confound`,
:mod:`.stats`), plus :mod:`.subjects`, which finds and loads the reports.

Entry points used by the CLI and the notebooks::

    d = compare.diff_versions("ext-sdpa-flash", "ext-sdpa-cudnn")   # -> Diff
    m = compare.migrate()                                             # -> Migration (every version)
    m = compare.migrate(["a.ncu-rep", "b.ncu-rep"])                   # a user's own series, in that order
    m = compare.migrate(["series.toml"])                              # … or from a series file (:mod:`.series`)

What a report lacks is said once per report (:mod:`.gaps`).
"""

from __future__ import annotations

from profiler.errors import WhowaitsError

from profiler.compare.confound import confounds
from profiler.compare.diff import Diff, diff, top_waiter
from profiler.compare.migration import Migration, migration
from profiler.compare.series import Series, distinct_labels, is_series_file, load_series
from profiler.compare.subjects import (SHAPE_RE, Profiled, Subject, known_versions, load, load_many, reports_dir,
                                       resolve, resolve_all, same_problem, version_info)

__all__ = ["Diff", "Migration", "Profiled", "Series", "distinct_labels", "is_series_file", "load_series",
           "load_series_versions", "Subject", "confounds", "diff", "diff_versions", "known_versions",
           "load", "load_many", "load_versions", "migrate", "migration", "reports_dir", "resolve", "resolve_all",
           "top_waiter", "version_info"]


def load_series_versions(path, kernels=None, only: list[str] | None = None) -> list[Profiled]:
    """Load the versions of a series file (:func:`profiler.compare.series.load_series`) in its order; each
    :class:`Profiled` carries the entry's change, hypothesis, verdict and problem FLOPs/bytes in ``meta``.
    ``kernels`` (one regex for all) applies where an entry names none; ``only`` picks versions by label,
    in that order."""
    series = load_series(path)
    if only is not None:
        by = {e.label: e for e in series.versions}
        unknown = [lb for lb in only if lb not in by]
        if unknown:
            raise WhowaitsError(f"{series.path} has no version labelled {unknown[0]!r}; its labels: "
                                + ", ".join(by))
        series.versions = [by[lb] for lb in only]
    subjects = []
    for e in series.versions:
        if not e.report.is_file():
            raise WhowaitsError(f"{series.path}: version {e.label}: no such report: {e.report}")
        stem = e.report.name[: -len(".ncu-rep")] if e.report.name.endswith(".ncu-rep") else e.report.stem
        subjects.append(Subject(label=e.label, path=e.report, version=None,
                                shape=stem if SHAPE_RE.match(stem) else None))
    default = list(kernels)[0] if kernels else None
    if kernels and len(kernels) > 1:
        raise WhowaitsError("with a series file give at most one --kernel (or kernel = … per version in the file)")
    out = load_many(subjects, kernels=[e.kernel or default for e in series.versions])
    for p, e in zip(out, series.versions):
        p.meta.update(e.meta())
        p.meta["series_title"] = series.title
        p.meta["declared_series"] = True
    return out


def _regex_label(regex: str) -> str:
    """A kernel regex as a row name: ``^void warptiling$`` -> ``warptiling``."""
    import re  # noqa: PLC0415

    text = re.sub(r"^\^?(void\s+)?|\$$", "", regex).replace("\\", "")
    return text.strip() or regex


def load_versions(specs=None, shape=None, kernels=None, reports=None, omitted=None, labels=None) -> list[Profiled]:
    """Resolve ``specs`` (version ids or report paths, in the order given; None: every comparable version
    with a report, see :func:`resolve_all`, which appends what it left out to ``omitted``) and load them.
    ``labels`` (one per spec) name the rows; a single spec ending in ``.toml`` is a series file
    (:func:`load_series_versions`). One report named several times with one ``--kernel`` each (four
    kernels of one report as four versions) is labelled by those regexes."""
    specs = list(specs) if specs else []
    if len(specs) == 1 and is_series_file(specs[0]):
        if labels:
            raise WhowaitsError("labels of a series file are set in the file, not with --label")
        return load_series_versions(specs[0], kernels=kernels)
    if any(is_series_file(s) for s in specs):
        raise WhowaitsError("give one series file (.toml) alone, not with other versions or reports")
    rdir = reports_dir(root=reports)
    subjects = (resolve(specs, shape=shape, rdir=rdir, labels=labels) if specs
                else resolve_all(shape=shape, rdir=rdir, omitted=omitted))
    ks = list(kernels) if kernels else None
    if not labels and ks and len(ks) == len(subjects) > 1 and len(set(ks)) == len(ks):
        paths = [s.path for s in subjects]
        if len(set(paths)) < len(paths):
            subjects = [Subject(label=_regex_label(k), path=s.path, version=s.version, shape=s.shape)
                        if paths.count(s.path) > 1 else s for s, k in zip(subjects, ks)]
    return load_many(subjects, kernels=ks)


def diff_versions(a: str, b: str, shape=None, kernels=None, reports=None, labels=None, verbose=False,
                  series=None) -> Diff:
    """Load two versions (or report paths) and diff B against A, with the confound guard's warnings.
    ``labels``: two names for A and B (default: the shortest distinct parts of their names);
    ``series``: a series file, A and B being labels of its versions."""
    if series is not None:
        if labels:
            raise WhowaitsError("with --series, A and B are the file's labels: give no --label")
        pa, pb = load_series_versions(series, kernels=kernels, only=[a, b])
    else:
        pa, pb = load_versions([a, b], shape=shape, kernels=kernels, reports=reports, labels=labels)
    d = diff(pa.summary, pb.summary, pa.label, pb.label, warnings=confounds([pa, pb]), verbose=verbose,
             same_kernel=same_problem(pa, pb))
    d.notes[:0] = [n for p in (pa, pb) for n in (p.meta or {}).get("left_out", [])]
    return d


def migrate(specs=None, shape=None, kernels=None, reports=None, profiled=None, notes=None, labels=None,
            verbose=False) -> Migration:
    """Load versions (default: all, ladder order) and compute their migration, confounds included.
    ``notes`` (e.g. what :func:`load_versions` left out) lead the migration's own notes."""
    notes = list(notes or [])
    if profiled is None:
        profiled = load_versions(specs, shape=shape, kernels=kernels, reports=reports, omitted=notes, labels=labels)
    return migration(profiled, warnings=confounds(profiled), notes=notes, verbose=verbose)
