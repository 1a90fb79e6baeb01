"""Hold a policy against the measured data: one :class:`Result` per check, version and shape.

Inputs are located first (:mod:`.inputs`); a bench file, report or baseline a rule needs but that does
not exist raises :class:`~profiler.errors.WhowaitsError` before anything is judged. A value the data
cannot give (a field the report lacks, a timing without a measured spread) is a result with verdict
``error``; the CLI exits 2 for those, 1 for a ``fail``, 0 when everything passes.

Noise: shares against the baseline use :func:`profiler.compare.diff.diff` (Wilson/Newcombe intervals,
Bonferroni per table); time against the baseline uses :func:`profiler.check.timing.compare_rows`
(the run-to-run spread ``whowaits bench --repeat N`` measured).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from profiler.check import fields, timing
from profiler.check.inputs import (Baseline, Bench, bench_files, git_revision, load_summary, open_baseline,
                                   read_bench, find_report, report_shapes)
from profiler.check.policy import BENCH_CHECKS, BUILD_CHECKS, REPORT_CHECKS, Policy, Rule
from profiler.errors import WhowaitsError

VERDICTS = ("pass", "fail", "error")


@dataclass
class Result:
    """One check of one rule for one version at one shape."""

    rule: int  # 1-based rule number in the policy
    check: str  # e.g. "min_tflops", "max_share[HMMA·wait]", "no_regression.time"
    version: str
    shape: str | None
    field: str  # what was read, by contract name (e.g. "stall_share.wait", "bench.tflops")
    value: float | str | list | None
    value_text: str
    op: str  # "<=", ">=", "==", "none"
    limit: float | str | None
    limit_text: str
    verdict: str  # pass | fail | error
    message: str
    source: str = ""  # the file the value came from
    line: int | None = None  # the rule's key in the policy file (annotations)

    @property
    def subject(self) -> str:
        return self.version + (f" @ {self.shape}" if self.shape else "")

    def as_dict(self) -> dict:
        d = asdict(self)
        d["subject"] = self.subject
        return d


@dataclass
class CheckReport:
    """Everything ``whowaits check`` prints."""

    policy: str
    baseline: str | None
    results: list[Result] = field(default_factory=list)

    @property
    def counts(self) -> dict:
        return {v: sum(r.verdict == v for r in self.results) for v in VERDICTS}

    @property
    def exit_code(self) -> int:
        c = self.counts
        return 2 if c["error"] else 1 if c["fail"] else 0

    def as_dict(self) -> dict:
        return {"policy": self.policy, "baseline": self.baseline, "passed": self.exit_code == 0,
                "exit_code": self.exit_code, "counts": self.counts,
                "results": [r.as_dict() for r in self.results]}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


class _Context:
    """Caches and locations for one evaluation."""

    def __init__(self, policy: Policy, bench: Path | None, reports: Path | None, baseline: Baseline | None):
        self.policy = policy
        self.bench_dir = bench or policy.bench
        self.reports = reports or policy.reports
        self.baseline = baseline
        self._bench: dict = {}
        self._summaries: dict = {}
        self._builds: dict = {}
        self._current_benches = None

    # --- bench
    def benches(self) -> dict[str, list[Path]]:
        if self._current_benches is None:
            self._current_benches = bench_files(self.bench_dir)
        return self._current_benches

    def read(self, path: Path) -> Bench:
        if path not in self._bench:
            self._bench[path] = read_bench(path)
        return self._bench[path]

    def _with_row(self, files: dict, shape: str, version: str, where, peers: tuple[str, ...] = ()) -> Bench:
        if shape not in files:
            have = ", ".join(files) or "none"
            raise WhowaitsError(f"no bench file for shape {shape} in {where} (it has: {have}); "
                                f"run whowaits bench -s {shape}")
        newest = None  # the newest file with the version's row, for the message when none has its peers too
        for path in files[shape]:
            b = self.read(path)
            if b.row(version) is not None:
                newest = newest or b
                if all(b.row(p) is not None for p in peers):
                    return b
        if newest is not None:
            lacks = ", ".join(p for p in peers if newest.row(p) is None)
            raise WhowaitsError(f"{newest.path}: no row for {lacks} (rule min_ratio), and no older bench file of "
                                f"{shape} in {where} has rows for {version} and {', '.join(peers)}; bench them "
                                f"in one run: whowaits bench {version} {' '.join(peers)} -s {shape}")
        raise WhowaitsError(f"no row for {version} in the bench files of {shape} in {where} "
                            f"(newest: {files[shape][0].name}); bench it: whowaits bench {version} -s {shape}")

    def bench(self, shape: str, version: str, peers: tuple[str, ...] = ()) -> Bench:
        """The newest current bench file of ``shape`` with a row for ``version`` and for each of ``peers`` (a
        rule's min_ratio references: its ratios stay within one run, and a newer run of a few rows that lacks
        a peer does not hide the last run that has them all)."""
        return self._with_row(self.benches(), shape, version, self.bench_dir, tuple(peers))

    def has_row(self, shape: str, version: str) -> bool:
        return any(self.read(p).row(version) is not None for p in self.benches().get(shape, []))

    def baseline_bench(self, shape: str, version: str) -> Bench:
        b = self._need_baseline()
        if b.bench is not None:
            if b.bench.shape != shape:
                raise WhowaitsError(f"baseline {b.ref} is a bench file of shape {b.bench.shape}, not {shape}")
            if b.bench.row(version) is None:
                raise WhowaitsError(f"baseline {b.ref}: no row for {version}")
            return b.bench
        where = b.path(self._rel(self.policy.bench))
        files = bench_files(where) if where.exists() else {}
        return self._with_row(files, shape, version, f"baseline {b.ref} ({where})")

    # --- reports
    def summary(self, path: Path) -> dict:
        key = str(path)
        if key not in self._summaries:
            self._summaries[key] = load_summary(path)
        return self._summaries[key]

    def report(self, version: str, shape: str) -> Path:
        p = find_report(self.reports, version, shape)
        if p is None:
            raise WhowaitsError(f"no report for {version} at {shape} in {self.reports} "
                                f"(expected {version}/{shape}.ncu-rep); profile it: whowaits profile {version}")
        return p

    def baseline_report(self, version: str, shape: str) -> Path:
        b = self._need_baseline()
        if b.root is None:
            raise WhowaitsError(f"baseline {b.ref} is a bench file: shares need a baseline with reports "
                                "(a folder or a git revision)")
        where = b.path(self._rel(self.policy.reports))
        p = find_report(where, version, shape)
        if p is None:
            raise WhowaitsError(f"baseline {b.ref}: no report for {version} at {shape} under {where}")
        return p

    def _need_baseline(self) -> Baseline:
        if self.baseline is None:
            raise WhowaitsError("a rule compares with a baseline (min_relative / no_regression) but none is "
                                "given: pass --baseline REF or set [check] baseline")
        return self.baseline

    def _rel(self, p: Path) -> Path:
        rel = relative(p, self.policy.root)
        if rel is None:
            raise WhowaitsError(f"{p} is outside the policy's folder {self.policy.root}: a folder or git "
                                "baseline finds files by their path relative to it")
        return rel

    # --- builds
    def build(self, version: str, shape: str | None):
        from kernels import build as kbuild  # noqa: PLC0415 (build facts only: nvcc)
        from kernels import registry  # noqa: PLC0415
        from kernels.config import Shape  # noqa: PLC0415

        ver = registry.get(version)
        if shape is not None:
            s = Shape.parse(shape)
            cfg = ver.config_for(s.head_dim, s.dtype, s.causal)
        else:
            cfg = None
        key = (version, shape)
        if key not in self._builds:
            self._builds[key] = (ver, kbuild.build(ver, cfg))
        return self._builds[key]


def relative(p: Path, root: Path) -> Path | None:
    """``p`` relative to ``root`` (as written, else with symlinks resolved), or None if outside it."""
    for a, b in ((Path(os.path.abspath(p)), Path(os.path.abspath(root))), (p.resolve(), root.resolve())):
        try:
            return a.relative_to(b)
        except ValueError:
            continue
    return None


def _is_ladder(version: str) -> bool:
    try:
        from kernels import registry  # noqa: PLC0415
    except ImportError:
        return False
    return any(v.id == version for v in registry.versions())


class _Judge:
    def __init__(self, ctx: _Context, rule: Rule, version: str, shape: str | None):
        self.ctx, self.rule, self.version, self.shape = ctx, rule, version, shape
        self.out: list[Result] = []

    def add(self, check: str, fld: str, value, value_text: str, op: str, limit, limit_text: str, ok: bool | None,
            source: str = "", note: str = "", key: str | None = None) -> None:
        verdict = "error" if ok is None else "pass" if ok else "fail"
        subject = self.version + (f" @ {self.shape}" if self.shape else "")
        msg = f"{subject}: {check}: {fld} = {value_text}, limit {op} {limit_text}"
        if verdict == "fail":
            msg += " — violated"
        if note:
            msg += f" ({note})"
        base = key or check.split("[")[0].split(".")[0]
        self.out.append(Result(rule=self.rule.index + 1, check=check, version=self.version, shape=self.shape,
                               field=fld, value=value, value_text=value_text, op=op, limit=limit,
                               limit_text=limit_text, verdict=verdict, message=msg, source=source,
                               line=self.rule.lines.get(base, self.rule.line)))

    # --- bench
    def bench(self) -> None:
        r = self.rule
        b = self.ctx.bench(self.shape, self.version, tuple(r.min_ratio))
        row = b.row(self.version)
        src = str(b.path)
        tflops = row.get("tflops")
        untimed = f"not timed: {row.get('note') or 'ms is null'}"
        if r.min_tflops is not None:
            self.add("min_tflops", "bench.tflops", tflops, "n/a" if tflops is None else f"{tflops:.1f} TFLOPS",
                     ">=", r.min_tflops, f"{r.min_tflops:g} TFLOPS", tflops is not None and tflops >= r.min_tflops,
                     src, "" if tflops is not None else untimed)
        for ref, factor in r.min_ratio.items():
            other = b.row(ref)
            ratio = tflops / other["tflops"] if tflops is not None and other.get("tflops") else None
            self.add(f"min_ratio[{ref}]", f"bench.tflops / bench[{ref}].tflops", ratio,
                     "n/a" if ratio is None else f"{ratio:.3f} ({tflops:.1f} / {other['tflops']:.1f} TFLOPS)",
                     ">=", factor, f"{factor:g}", ratio is not None and ratio >= factor, src,
                     "" if ratio is not None else untimed if tflops is None else f"{ref} not timed", key="min_ratio")
        if r.min_relative is not None:
            brow = self.ctx.baseline_bench(self.shape, self.version).row(self.version)
            ratio = tflops / brow["tflops"] if tflops is not None and brow.get("tflops") else None
            self.add("min_relative", "bench.tflops / baseline bench.tflops", ratio,
                     "n/a" if ratio is None else f"{ratio:.3f} ({tflops:.1f} / {brow['tflops']:.1f} TFLOPS)",
                     ">=", r.min_relative, f"{r.min_relative:g}", ratio is not None and ratio >= r.min_relative,
                     src, "" if ratio is not None else "not timed on one side")

    def time_regression(self) -> None:
        b = self.ctx.bench(self.shape, self.version)
        row = b.row(self.version)
        brow = self.ctx.baseline_bench(self.shape, self.version).row(self.version)
        res = timing.compare_rows(brow, row, alpha=self.ctx.policy.alpha)
        tol = self.ctx.policy.time_tolerance
        if res["verdict"] in ("no spread", "not timed"):
            ok = None
        else:
            ok = not (res["verdict"] == "slower" and res["ratio"] - 1 > tol)
        value = res["ratio"]
        band = f", band ±{100 * res['band']:.1f}%" if res["band"] is not None else ""
        text = "n/a" if value is None else f"{value:.3f}x ({res['verdict']}{band})"
        limit_text = f"{1 + tol:.3g}x the baseline's time unless within the measured noise"
        self.add("no_regression.time", "bench.ms / baseline bench.ms", value, text, "<=", 1 + tol, limit_text, ok,
                 str(b.path), timing.verdict_text(res), key="no_regression")

    # --- reports
    def report(self) -> None:
        r = self.rule
        path = self.ctx.report(self.version, self.shape)
        s = self.ctx.summary(path)
        src = str(path)
        for key, limit in r.max_share.items():
            value, note = fields.share(s, key)
            self.add(f"max_share[{key.text}]", key.field, value, "n/a" if value is None else _pct(value), "<=",
                     limit, _pct(limit), None if value is None else value <= limit, src, note, key="max_share")
        if r.max_bank_conflict_ways is not None:
            ways, note = fields.bank_conflict_ways(s)
            lim = r.max_bank_conflict_ways
            self.add("max_bank_conflict_ways", "roofline.smem.ldsm.ways", ways,
                     "n/a" if ways is None else f"{ways:g}-way", "<=", lim, f"{lim:g}-way",
                     None if ways is None else ways <= lim, src, note)
        if r.min_l2_fanout is not None:
            fan, note = fields.l2_fanout(s)
            lim = r.min_l2_fanout
            self.add("min_l2_fanout", "roofline.l2_reads.fanout", fan, "n/a" if fan is None else f"{fan:.2f}x",
                     ">=", lim, f"{lim:g}x", None if fan is None else fan >= lim, src, note)
        if r.no_missing:
            gone = fields.missing(s)
            self.add("no_missing", "missing", gone, "none" if not gone else "; ".join(gone), "==", [], "none",
                     not gone, src)
        if r.no_collapsed_overlap:
            hits, note = fields.collapsed_overlaps(s)
            self.add("no_collapsed_overlap", "overlap[].collapsed", hits,
                     "n/a" if hits is None else ("none" if not hits else "; ".join(hits)), "==", [], "none",
                     None if hits is None else not hits, src, note)

    def share_regression(self) -> None:
        from profiler.compare.diff import diff  # noqa: PLC0415
        from profiler.names import NOT_WAITING  # noqa: PLC0415

        cur_path = self.ctx.report(self.version, self.shape)
        base_path = self.ctx.baseline_report(self.version, self.shape)
        d = diff(self.ctx.summary(base_path), self.ctx.summary(cur_path), "baseline", self.version)
        tol = self.ctx.policy.share_tolerance
        rises = []
        for name, frame, keys in (("stall_share", d.stalls, ("reason",)), ("who_waits", d.waits, ("class", "reason")),
                                  ("waits_on", d.waits_on, ("class", "reason", "producer"))):
            for row in frame.to_dict(orient="records"):
                if row["reason"] in NOT_WAITING or not row["significant"] or not row["delta_lo"] > tol:
                    continue
                label = row["reason"] if keys == ("reason",) else f"{row['class']}·{row['reason']}" + (
                    f" ← {row['producer']}" if "producer" in keys else "")
                rises.append((row["delta_lo"], f"{name}[{label}]", row))
        rises.sort(key=lambda x: -x[0])
        if rises:
            lo, fld, row = rises[0]
            value = row["delta"]
            text = (f"+{100 * value:.1f} points ({_pct(row['share_a'])} → {_pct(row['share_b'])}, "
                    f"interval [{100 * row['delta_lo']:+.1f}, {100 * row['delta_hi']:+.1f}])")
            note = "also " + ", ".join(f for _, f, _ in rises[1:4]) if len(rises) > 1 else ""
        else:
            fld, value, text, note = "stall_share, who_waits, waits_on", 0.0, "no significant rise", ""
        self.add("no_regression.share", fld, value, text, "<=", tol,
                 f"+{100 * tol:g} points above the baseline's share (significant at alpha {self.ctx.policy.alpha:g})",
                 not rises, str(cur_path), note, key="no_regression")

    # --- build
    def build(self) -> None:
        from kernels.build import static_violations  # noqa: PLC0415 (build facts only)

        r = self.rule
        ver, res = self.ctx.build(self.version, self.shape)
        bad = static_violations(ver, res)
        src = str(ver.path / "version.toml")
        if r.no_spills:
            spill = res.spill_bytes
            self.add("no_spills", "build.spill_bytes", spill, f"{spill} B", "==", 0,
                     "0 B" + (" (version.toml allow_spills = true)" if ver.allow_spills else ""), not bad["spills"],
                     src, f"ptxas: {res.registers} registers, {bad['spills'][0]}" if bad["spills"] else "")
        if r.sass:
            text = [f"expected {o} absent" for o in bad["expect_sass"]] + \
                   [f"forbidden {o} present" for o in bad["forbid_sass"]]
            self.add("sass", "build.sass_opcodes", text or "as declared", "; ".join(text) if text else "as declared",
                     "==", "version.toml", "version.toml's expect_sass/forbid_sass", not text, src,
                     f"expect {'/'.join(ver.expect_sass) or '-'}, forbid {'/'.join(ver.forbid_sass) or '-'}"
                     if text else "")


def _hold(ctx: _Context, rule: Rule, version: str) -> list[Result]:
    """Every check of ``rule`` for ``version``. A check the rule names itself needs its input (absent:
    WhowaitsError); a check it only inherits from ``[check.defaults]`` applies where the input exists
    (a report for ``no_missing``, a ladder version for ``no_spills``/``sass``)."""
    def wants(checks) -> tuple[bool, bool]:
        on = [c for c in checks if rule.has(c)]
        return bool(on), any(c in rule.explicit for c in on)

    bench_on, bench_explicit = wants(BENCH_CHECKS)
    report_on, report_explicit = wants(REPORT_CHECKS)
    regress_on, regress_explicit = wants(("no_regression",))
    build_on, build_explicit = wants(BUILD_CHECKS)
    if build_on and not _is_ladder(version):
        if build_explicit:
            raise WhowaitsError(f"rule {rule.index + 1}: {version} is not a ladder version "
                                "(kernels/<version>/version.toml): no_spills/sass cannot be checked")
        build_on = False
    kinds = {k for k, on in (("bench", bench_on or regress_on), ("report", report_on or regress_on),
                             ("build", build_on)) if on}
    out: list[Result] = []
    for shape in _shapes(ctx, rule, version, kinds):
        j = _Judge(ctx, rule, version, shape)
        has_bench = (bench_on or regress_on) and shape is not None and ctx.has_row(shape, version)
        has_report = shape is not None and find_report(ctx.reports, version, shape) is not None
        if bench_on and (bench_explicit or has_bench):
            j.bench()
        if regress_on:
            if regress_explicit and not has_bench and not has_report:
                raise WhowaitsError(f"rule {rule.index + 1} no_regression: neither a bench row nor a report for "
                                    f"{version} at {shape} (in {ctx.bench_dir}, {ctx.reports})")
            if has_bench:
                j.time_regression()
            if has_report:
                j.share_regression()
        if report_on and (report_explicit or has_report):
            j.report()
        if build_on:
            j.build()
        out.extend(j.out)
    if not out:
        raise WhowaitsError(f"rule {rule.index + 1} checks nothing for {version}: no bench row, report or "
                            f"ladder version to hold its inherited checks against (looked in {ctx.reports / version})")
    return out


def _shapes(ctx: _Context, rule: Rule, version: str, kinds: set[str]) -> list[str | None]:
    if rule.shape is not None:
        return [rule.shape]
    shapes: set[str] = set()
    if "bench" in kinds:
        shapes |= {s for s in ctx.benches() if ctx.has_row(s, version)}
    if "report" in kinds:
        shapes |= set(report_shapes(ctx.reports, version))
    if not shapes and kinds - {"build"} and rule.explicit - set(BUILD_CHECKS):
        raise WhowaitsError(f"rule {rule.index + 1}: no bench row or report for {version} "
                            f"(looked in {ctx.bench_dir} and {ctx.reports / version})")
    return sorted(shapes) or [None]


def evaluate(policy: Policy, baseline: str | None = None, bench: str | Path | None = None,
             reports: str | Path | None = None) -> CheckReport:
    """Hold every rule of ``policy``; ``baseline`` overrides the policy's, ``bench``/``reports``
    override where the current data is read (e.g. a CI job's fresh bench folder)."""
    ref = baseline if baseline is not None else policy.baseline
    ctx = _Context(policy, Path(bench) if bench else None, Path(reports) if reports else None, None)
    needs_baseline = any(r.min_relative is not None or r.no_regression for r in policy.rules)
    if ref is not None and needs_baseline:
        # the baseline is the policy's own data at REF (--bench/--reports only move the current side)
        rels = [r for r in (relative(p, policy.root) for p in (policy.bench, policy.reports)) if r is not None]
        ctx.baseline = open_baseline(ref, policy.root, rels)
    elif needs_baseline:
        ctx._need_baseline()
    elif ref is not None and not Path(ref).exists() and git_revision(policy.root, ref) is None:
        raise WhowaitsError(f"--baseline {ref}: no such file, folder or git revision")
    used = ctx.baseline.ref if ctx.baseline else f"{ref} (unused: no rule compares with it)" if ref else None
    report = CheckReport(policy=str(policy.path), baseline=used)
    try:
        for rule in policy.rules:
            for version in rule.versions:
                report.results.extend(_hold(ctx, rule, version))
    finally:
        if ctx.baseline is not None:
            ctx.baseline.close()
    return report
