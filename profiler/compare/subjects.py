"""Find and load what is compared: a *subject* is one report of one version at one shape.

Versions are folders of ``reports/<gpu>/`` (``reports/h200/v03_ldsm/b1_h64_s1024_d128_fp16.ncu-rep``);
external subjects are versions too (``ext-sdpa-cudnn``). A spec given on the command line is
either a version id or a report path. Ladder order comes from the reports' provenance sidecars
(``ladder_order``, written at profile time); the rest follow (other versions by name, then ``ext-*``
subjects). Nothing here imports ``kernels``: the views know reports, not the code that produced them.

This is the one module of :mod:`profiler.compare` that touches files (with :mod:`.cache`): it
resolves specs, calls :func:`profiler.analyze.summarize` through the summary cache and reads
provenance sidecars. Everything else in the package
is a pure function of the summaries it returns.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from profiler import paths as _paths
from profiler.errors import WhowaitsError
from profiler.names import SHAPE_RE, is_external

REPORT_SUFFIX = ".ncu-rep"
DEFAULT_GPU = "h200"


@dataclass(frozen=True)
class Subject:
    """One report to compare: ``label`` is what tables print (the version id, or the file stem)."""

    label: str
    path: Path
    version: str | None = None
    shape: str | None = None


@dataclass
class Profiled:
    """A subject with its summary (docs/contract.md's launch summary, launches merged) and sidecar."""

    subject: Subject
    summary: dict
    launches: int = 1
    sidecar: dict | None = None
    meta: dict = field(default_factory=dict)
    #: the summaries of the launches that ``summary`` merges (one per launch, report order)
    parts: list = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.subject.label


# ----------------------------------------------------------------------------- locating

def reports_dir(gpu: str = DEFAULT_GPU, root: str | os.PathLike | None = None) -> Path:
    """The folder holding one folder per version (:func:`profiler.paths.reports_dir`)."""
    return _paths.reports_dir(gpu, root)


def _folder_sidecar(rdir: Path, version: str) -> dict:
    """The sidecar of one of ``version``'s reports (the first by shape that has one), or {}."""
    for rep in sorted(_reports_in(rdir / version)):
        try:
            side = _read_sidecar(rep)
        except WhowaitsError:
            continue
        if side:
            return side
    return {}


INFO_KEYS = ("title", "change", "expected_bottleneck", "ladder_order", "build_hash", "problem_flops")


def version_info(rdir: Path | None = None) -> dict[str, dict]:
    """What the sidecars say about each version with a report in ``rdir``: {version: {title, change,
    expected_bottleneck, ladder_order, build_hash, problem_flops}} (None where a sidecar lacks a key;
    versions without any sidecar are left out). Read from the reports' sidecars, never from ``kernels``."""
    rdir = reports_dir() if rdir is None else rdir
    out = {}
    for v in _report_folders(rdir):
        side = _folder_sidecar(rdir, v)
        if side:
            out[v] = {k: side.get(k) for k in INFO_KEYS}
    return out


def _report_folders(rdir: Path) -> list[str]:
    if not rdir.is_dir():
        return []
    return sorted(p.name for p in rdir.iterdir() if p.is_dir() and _reports_in(p))


def known_versions(rdir: Path) -> list[str]:
    """Every version with at least one report in ``rdir``: ladder versions in their sidecars'
    ``ladder_order``, then other versions by name, then external (``ext-*``) subjects by name."""
    have = _report_folders(rdir)
    order = {v: (_folder_sidecar(rdir, v) or {}).get("ladder_order") for v in have}
    ladder = sorted((v for v in have if isinstance(order[v], int) and not is_external(v)),
                    key=lambda v: (order[v], v))
    rest = [v for v in have if v not in ladder]
    return ladder + [v for v in rest if not is_external(v)] + [v for v in rest if is_external(v)]


def _reports_in(folder: Path) -> list[Path]:
    """The ``*.ncu-rep`` entries of ``folder`` that are not folders (a FIFO or an unreadable file
    is kept, so that loading it says what is wrong with it)."""
    return [p for p in folder.glob(f"*{REPORT_SUFFIX}") if not p.is_dir()]


def shapes_of(rdir: Path, version: str) -> list[str]:
    """Shape keys that ``version`` has reports for."""
    return sorted(p.name[: -len(REPORT_SUFFIX)] for p in _reports_in(rdir / version))


def _looks_like_path(spec: str) -> bool:
    return spec.endswith(REPORT_SUFFIX) or os.sep in spec or "/" in spec


def _elsewhere(spec: str, rdir: Path) -> Path | None:
    """A version folder named ``spec`` under another GPU's folder beside ``rdir`` (``reports/rtx-4090/
    mykernel-v1`` when ``rdir`` is ``reports/h200``): the one there is, or None (none, or several)."""
    parent = rdir.parent
    if not parent.is_dir():
        return None
    try:
        hits = [d / spec for d in sorted(parent.iterdir())
                if d != rdir and d.is_dir() and (d / spec).is_dir() and any((d / spec).glob(f"*{REPORT_SUFFIX}"))]
    except OSError:
        return None
    return hits[0] if len(hits) == 1 else None


def resolve(specs: list[str], shape: str | None = None, rdir: Path | None = None,
            labels: list[str] | None = None) -> list[Subject]:
    """Turn version ids or report paths into subjects, all at one shape, in the order given.

    Version ids take ``shape`` when given, else the one shape every named version has; a version id
    not in ``rdir`` is also looked for under the other GPU folders beside it (``reports/<gpu>/``).
    Report paths are labelled by the shortest part of their paths that tells them apart
    (:func:`profiler.compare.series.distinct_labels`); ``labels`` (one per spec) replaces all labels.
    Raises :class:`WhowaitsError` for an unknown version (listing the known ones), a version
    without a report at the shape, an ambiguous shape, a report path that does not exist, or
    labels that do not fit.
    """
    from profiler.compare.series import distinct_labels  # noqa: PLC0415

    rdir = reports_dir() if rdir is None else rdir
    if labels is not None:
        labels = list(labels)
        if len(labels) != len(specs):
            raise WhowaitsError(f"give one --label per version ({len(specs)}), not {len(labels)}")
        if any(not lb.strip() for lb in labels):
            raise WhowaitsError("a --label is empty")
        dup = sorted({lb for lb in labels if labels.count(lb) > 1})
        if dup:
            raise WhowaitsError(f"--label {dup[0]!r} is given twice; labels must tell the versions apart")
    known = known_versions(rdir)
    kinds: list[tuple[str, str]] = []
    folders: dict[str, Path] = {}
    for spec in specs:
        p = Path(spec)
        if p.is_dir() and not spec.endswith(REPORT_SUFFIX) and (spec in known or _looks_like_path(spec)):
            if spec in known:
                kinds.append(("version", spec))
                continue
            raise WhowaitsError(f"{spec} is a folder; give a report file (….ncu-rep) or a version id")
        if p.is_file() or (os.path.lexists(p) and (not p.is_dir() or spec.endswith(REPORT_SUFFIX))):
            kinds.append(("path", spec))  # load() says what is wrong with a FIFO, folder …
        elif spec in known:
            kinds.append(("version", spec))
        elif len([v for v in known if v.startswith(spec + "_")]) == 1:  # v03 for v03_ldsm
            kinds.append(("version", next(v for v in known if v.startswith(spec + "_"))))
        elif _looks_like_path(spec):
            raise WhowaitsError(f"no such report: {spec}")
        elif (rdir / spec).is_dir():
            raise WhowaitsError(
                f"version '{spec}' has no report in {rdir}/{spec}/; profile it first (whowaits profile {spec})")
        elif (found := _elsewhere(spec, rdir)) is not None:
            kinds.append(("version", spec))
            folders[spec] = found
        else:
            listed = ", ".join(known) if known else "none"
            raise WhowaitsError(f"unknown version '{spec}'; known versions with reports in {rdir}: {listed}")

    def folder(v: str) -> Path:
        return folders.get(v, rdir / v)

    def shapes(v: str) -> list[str]:
        return sorted(p.name[: -len(REPORT_SUFFIX)] for p in folder(v).glob(f"*{REPORT_SUFFIX}"))

    versions = [s for k, s in kinds if k == "version"]
    if versions:
        if shape is None:
            common = set(shapes(versions[0]))
            for v in versions[1:]:
                common &= set(shapes(v))
            if not common:
                raise WhowaitsError(
                    "the versions share no shape: " + "; ".join(
                        f"{v}: {', '.join(shapes(v))}" for v in versions) + " (use report paths)")
            if len(common) > 1:
                raise WhowaitsError(f"several shapes to choose from ({', '.join(sorted(common))}); pick one with --shape")
            shape = common.pop()
        else:
            for v in versions:
                if shape not in shapes(v):
                    raise WhowaitsError(
                        f"no report for version '{v}' at shape {shape} ({folder(v) / (shape + REPORT_SUFFIX)}); "
                        f"it has: {', '.join(shapes(v))}")

    path_specs = [s for k, s in kinds if k == "path"]
    path_labels = dict(zip(path_specs, distinct_labels(path_specs))) if len(set(path_specs)) > 1 else {}
    out = []
    for kind, spec in kinds:
        if kind == "version":
            out.append(Subject(label=spec, path=folder(spec) / f"{shape}{REPORT_SUFFIX}", version=spec, shape=shape))
        else:
            p = Path(spec)
            stem = p.name[: -len(REPORT_SUFFIX)] if p.name.endswith(REPORT_SUFFIX) else p.stem
            version = p.parent.name if p.parent.name else None
            label = path_labels.get(spec) or (version if version and version not in ("", ".") and SHAPE_RE.match(stem)
                                              else stem)
            out.append(Subject(label=label, path=p, version=version,
                               shape=stem if SHAPE_RE.match(stem) else None))
    if labels is not None:
        return [Subject(label=lb, path=s.path, version=s.version, shape=s.shape) for lb, s in zip(labels, out)]
    # Two subjects may print the same label (two shapes of one version, one report named twice): number them.
    counts = Counter(s.label for s in out)
    if any(c > 1 for c in counts.values()):
        seen: Counter = Counter()
        fixed = []
        for s in out:
            lb = s.label
            if counts[lb] > 1:
                seen[lb] += 1
                lb = f"{lb}#{seen[lb]}"
            fixed.append(Subject(label=lb, path=s.path, version=s.version, shape=s.shape))
        out = fixed
    return out


def resolve_all(shape: str | None = None, rdir: Path | None = None,
                omitted: list[str] | None = None) -> list[Subject]:
    """Every version with a report, ladder order then ext subjects, at one shape and one section set.

    Without ``shape`` the shape most versions have is taken (ties: the first by name), and the
    versions lacking it are left out. Reports taken with another section set than most (by their
    sidecars, e.g. the ``--set full`` starter reports beside ``--set whowaits`` ones) are left out
    too, since their stall samples are not comparable one to one; name them to include them.
    What is left out, and why, is appended to ``omitted`` (one line each) when given."""
    rdir = reports_dir() if rdir is None else rdir
    known = known_versions(rdir)
    if not known:
        raise WhowaitsError(f"no reports found in {rdir} (expected {rdir}/<version>/<shape>{REPORT_SUFFIX})")
    if shape is None:
        counts = Counter(s for v in known for s in shapes_of(rdir, v))
        shape = sorted(counts, key=lambda s: (-counts[s], s))[0]
    chosen = [v for v in known if shape in shapes_of(rdir, v)]
    if not chosen:
        raise WhowaitsError(f"no version has a report at shape {shape} in {rdir}")
    sets = {v: (_read_sidecar(rdir / v / f"{shape}{REPORT_SUFFIX}") or {}).get("section_set") for v in chosen}
    named = Counter(s for s in sets.values() if s)
    if len(named) > 1:
        main = sorted(named, key=lambda s: (-named[s], s))[0]
        dropped = [v for v in chosen if sets[v] not in (main, None)]
        chosen = [v for v in chosen if v not in dropped]
        if omitted is not None:
            omitted.extend(f"left out {v}: section set '{sets[v]}', not '{main}' like the rest "
                           f"(name it to compare it anyway)" for v in dropped)
    if omitted is not None:
        omitted.extend(f"left out {v}: no report at shape {shape}" for v in known
                       if shape not in shapes_of(rdir, v))
    return resolve(chosen, shape=shape, rdir=rdir)


# ----------------------------------------------------------------------------- loading

def _read_sidecar(path: Path) -> dict | None:
    from profiler.provenance import read_sidecar  # noqa: PLC0415

    return read_sidecar(path)


def load(subject: Subject, kernel: str | None = None) -> Profiled:
    """Summarise ``subject``'s report (launches matching ``kernel``, merged) with its sidecar."""
    from profiler.compare.cache import summaries  # noqa: PLC0415 (keeps import of this module cheap)

    return _profiled(subject, kernel, summaries(subject.path, kernel=kernel))


def _profiled(subject: Subject, kernel: str | None, launches: list[dict]) -> Profiled:
    from profiler.compare.merge import merge_launches  # noqa: PLC0415

    if not launches:
        what = f" matching --kernel '{kernel}'" if kernel else ""
        raise WhowaitsError(f"no kernel launch{what} in {subject.path}")
    # A launch ncu recorded no values for (its duration NaN while the others have one: the RTX 4070 and H800
    # public reports) would make every merged sum unknown; it is left out, and said so.
    empty = [la for la in launches if la.get("duration_ns") is None]
    left_out = []
    if empty and len(empty) < len(launches):
        left_out = [f"{subject.label}: launch {la.get('launch_index')} ({_short(la.get('kernel'))}) left out: "
                    "ncu recorded no values for it" for la in empty]
        launches = [la for la in launches if la.get("duration_ns") is not None]
    summary = merge_launches(launches)
    return Profiled(subject=subject, summary=summary, launches=len(launches),
                    sidecar=_read_sidecar(subject.path), meta={"left_out": left_out} if left_out else {},
                    parts=list(launches))


def kernel_name(kernel) -> str:
    """The function name of a demangled kernel, namespaces, template arguments and parameters dropped
    (``void whowaits::v07_tuned::flash_fwd<…>(…)`` -> ``flash_fwd``): what tells two versions of one kernel
    from two different kernels."""
    return _short(kernel)


def launch_key(summary: dict) -> tuple[str, tuple]:
    """(kernel function name, grid) of one launch's summary: how launches are matched across reports."""
    grid = tuple((summary.get("launch") or {}).get("grid") or ())
    return kernel_name(summary.get("kernel")), grid


def _key_text(key: tuple[str, tuple]) -> str:
    return f"{key[0]} grid {list(key[1])}" if key[1] else key[0]


def match_launches(profiled: list[Profiled]) -> None:
    """Compare like with like when a report holds several launches: keep, in every subject, the launches of
    the kernel function names every subject has and, for a name launched with several grids, the grids every
    subject has (a version may change its grid with its tile, so a name alone matches); say what was left out
    (a note in ``meta['left_out']``). With no kernel name in common, nothing is left out. A subject that still
    merges several launches says ``N launches summed`` with their names and grids."""
    if len(profiled) > 1 and all(p.parts for p in profiled) and any(len(p.parts) > 1 for p in profiled):
        names = set.intersection(*({kernel_name(s.get("kernel")) for s in p.parts} for p in profiled))
        if not names:
            _say_unmatched(profiled)
        grids: dict[str, set] = {}
        for n in names:
            per = [{launch_key(s)[1] for s in p.parts if kernel_name(s.get("kernel")) == n} for p in profiled]
            both = set.intersection(*per)
            grids[n] = both if both and any(len(g) > 1 for g in per) else set().union(*per)
        if names:
            from profiler.compare.merge import merge_launches  # noqa: PLC0415

            def kept(s: dict) -> bool:
                name, grid = launch_key(s)
                return name in names and grid in grids[name]

            for p in profiled:
                keep = [s for s in p.parts if kept(s)]
                drop = [s for s in p.parts if not kept(s)]
                if not drop:
                    continue
                gone = Counter(_key_text(launch_key(s)) for s in drop)
                p.meta.setdefault("left_out", []).append(
                    f"{p.label}: launches matched by kernel name and grid ({', '.join(sorted(names))}); "
                    f"left out {', '.join(f'{n} ×{c}' for n, c in gone.items())}")
                p.parts, p.summary, p.launches = keep, dict(merge_launches(keep)), len(keep)
    for p in profiled:
        _take_repeats(p)
        _say_summed(p)


#: launches of one kernel with one grid and block whose durations all lie within this fraction of their median are
#: repeats of one piece of work (ncu run without ``-c 1`` on a loop); beyond it the work differed (a grid-stride
#: kernel keeps its grid for any size), and the launches add up
REPEAT_SPREAD = 0.10


def repeats(parts: list[dict]) -> list[dict] | None:
    """When ``parts`` (one report's launches) are the same launches repeated, each the same number of times n >= 2
    (every (kernel, grid, block) group n launches, their durations within ``REPEAT_SPREAD`` of the group's
    median), the median-duration launch of each group, in report order; else None (the launches are summed)."""
    if len(parts) < 2:
        return None
    groups: dict[tuple, list[dict]] = {}
    for s in parts:
        name, grid = launch_key(s)
        block = tuple((s.get("launch") or {}).get("block") or ())
        groups.setdefault((name, grid, block), []).append(s)
    counts = {len(g) for g in groups.values()}
    if len(counts) != 1 or counts.pop() < 2:
        return None
    chosen = []
    for g in groups.values():
        times = [s.get("duration_ns") for s in g]
        if any(t is None for t in times):
            return None
        mid = sorted(times)[len(times) // 2]
        if mid <= 0 or any(abs(t - mid) > REPEAT_SPREAD * mid for t in times):
            return None
        chosen.append(next(s for s in g if s.get("duration_ns") == mid))
    return sorted(chosen, key=lambda s: s.get("launch_index") or 0)


def _take_repeats(p: Profiled) -> None:
    """A subject whose launches are repeats (:func:`repeats`) is compared by one of each, not by their sum (three
    repeats against one launch would read 3x slower), and says so."""
    one = repeats(p.parts)
    if one is None:
        return
    from profiler.compare.stats import fmt_ns  # noqa: PLC0415
    from profiler.compare.merge import merge_launches  # noqa: PLC0415

    n = len(p.parts) // len(one)
    times = sorted(s["duration_ns"] for s in p.parts)
    kept = ", ".join(f"launch {s.get('launch_index')}" for s in one)
    p.meta.setdefault("left_out", []).append(
        f"{p.label}: {len(p.parts)} launches are {n} repeats of the same {'launch' if len(one) == 1 else 'launches'} "
        f"({', '.join(_key_text(launch_key(s)) for s in one)}; {fmt_ns(times[0])} to {fmt_ns(times[-1])}): "
        f"compared by the median one ({kept}), not their sum")
    p.parts, p.summary, p.launches = list(one), dict(merge_launches(list(one))), len(one)


def _say_unmatched(profiled: list[Profiled]) -> None:
    """No kernel name is common to every subject, so none of their launches are matched: say which subjects
    share no kernel with the rest (the ones whose presence turned matching off for all)."""
    own = [{kernel_name(s.get("kernel")) for s in p.parts} for p in profiled]
    alone = [p.label for i, p in enumerate(profiled)
             if not own[i] & set().union(*(own[j] for j in range(len(profiled)) if j != i))]
    who = f" ({', '.join(alone)} shares no kernel with the others)" if alone else ""
    profiled[0].meta.setdefault("left_out", []).append(
        f"no kernel is common to every report{who}: each report's launches are summed as they are; "
        "compare fewer reports, or name one --kernel per report")


def _say_summed(p: Profiled) -> None:
    if p.launches > 1:
        names = Counter(_key_text(launch_key(s)) for s in p.parts)
        p.meta.setdefault("left_out", []).append(
            f"{p.label}: {p.launches} launches summed ({', '.join(f'{n} ×{c}' for n, c in names.items())}); "
            "pick one with --kernel")


def same_problem(a: Profiled, b: Profiled) -> bool:
    """Whether two subjects may be compared as versions of one kernel: a kernel function name in common, the
    same shape key (our ladder and the SDPA backends at one problem size), the same problem FLOPs in their
    sidecars or series file, or a series the user declared (a series file, or one --kernel per report)."""
    if a.meta.get("declared_series") and b.meta.get("declared_series"):
        return True
    na = {kernel_name(s.get("kernel")) for s in a.parts} or {kernel_name(a.summary.get("kernel"))}
    nb = {kernel_name(s.get("kernel")) for s in b.parts} or {kernel_name(b.summary.get("kernel"))}
    if na & nb:
        return True
    if a.subject.shape and a.subject.shape == b.subject.shape:
        return True
    fa = (a.meta or {}).get("problem_flops") or (a.sidecar or {}).get("problem_flops")
    fb = (b.meta or {}).get("problem_flops") or (b.sidecar or {}).get("problem_flops")
    return bool(fa) and fa == fb


def _short(kernel) -> str:
    """``void at::native::foo<…>(…)`` -> ``foo``: a kernel's name for a note."""
    name = str(kernel or "?").replace("(anonymous namespace)", "").replace("<unnamed>", "")
    name = re.split(r"[<(]", name)[0].split("::")[-1].split()
    return name[-1] if name else "?"


def load_many(subjects: list[Subject], kernels: list[str] | None = None) -> list[Profiled]:
    """:func:`load` each subject; ``kernels`` is one regex for all, or one per subject. Reports
    not yet in the summary cache are summarised in parallel when there are several
    (:func:`profiler.compare.cache.summaries_many`); the results are the serial path's."""
    from profiler.compare.cache import summaries_many  # noqa: PLC0415

    if not kernels:
        ks = [None] * len(subjects)
    elif len(kernels) == 1:
        ks = kernels * len(subjects)
    elif len(kernels) == len(subjects):
        ks = list(kernels)
    else:
        raise WhowaitsError(f"give one --kernel for all reports or one per report ({len(subjects)}), not {len(kernels)}")
    found = summaries_many([(s.path, k) for s, k in zip(subjects, ks)])
    out = [_profiled(s, k, launches) for s, k, launches in zip(subjects, ks, found)]
    if len(out) > 1 and len(set(ks)) == len(ks) and None not in ks:  # one --kernel per report: a declared series
        for p in out:
            p.meta["declared_series"] = True
    match_launches(out)
    return out
