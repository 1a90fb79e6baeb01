"""Compare versions: diffs of two reports, the bottleneck's migration across the ladder, and the
confound guard. Pure functions over summaries (:mod:`.diff`, :mod:`.migration`, :mod:`.confound`,
:mod:`.stats`), plus :mod:`.subjects`, which finds and loads the reports.

Entry points used by the CLI and the notebooks::

    d = compare.diff_versions("ext-sdpa-flash", "ext-sdpa-cudnn")   # -> Diff
    m = compare.migrate()                                             # -> Migration (every version)
"""

from __future__ import annotations

from profiler.compare.confound import confounds
from profiler.compare.diff import Diff, diff, top_waiter
from profiler.compare.migration import Migration, migration
from profiler.compare.subjects import (Profiled, Subject, known_versions, load, load_many, reports_dir,
                                       resolve, resolve_all, version_info)

__all__ = ["Diff", "Migration", "Profiled", "Subject", "confounds", "diff", "diff_versions", "known_versions",
           "load", "load_many", "load_versions", "migrate", "migration", "reports_dir", "resolve", "resolve_all",
           "top_waiter", "version_info"]


def load_versions(specs=None, shape=None, kernels=None, reports=None, omitted=None) -> list[Profiled]:
    """Resolve ``specs`` (version ids or report paths; None: every comparable version with a report,
    see :func:`resolve_all`, which appends what it left out to ``omitted``) and load them."""
    rdir = reports_dir(root=reports)
    subjects = (resolve(list(specs), shape=shape, rdir=rdir) if specs
                else resolve_all(shape=shape, rdir=rdir, omitted=omitted))
    return load_many(subjects, kernels=list(kernels) if kernels else None)


def diff_versions(a: str, b: str, shape=None, kernels=None, reports=None) -> Diff:
    """Load two versions (or report paths) and diff B against A, with the confound guard's warnings."""
    pa, pb = load_versions([a, b], shape=shape, kernels=kernels, reports=reports)
    return diff(pa.summary, pb.summary, pa.label, pb.label, warnings=confounds([pa, pb]))


def migrate(specs=None, shape=None, kernels=None, reports=None, profiled=None, notes=None) -> Migration:
    """Load versions (default: all, ladder order) and compute their migration, confounds included.
    ``notes`` (e.g. what :func:`load_versions` left out) lead the migration's own notes."""
    notes = list(notes or [])
    if profiled is None:
        profiled = load_versions(specs, shape=shape, kernels=kernels, reports=reports, omitted=notes)
    return migration(profiled, warnings=confounds(profiled), notes=notes)
