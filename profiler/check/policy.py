"""The gate's policy: ``whowaits.toml`` (table ``[check]``) or ``pyproject.toml`` (``[tool.whowaits.check]``).

Format (every key optional unless said; docs/gate.md has a full example)::

    [check]
    reports = "reports/h200"        # <version>/<shape>.ncu-rep (or .summary.json), relative to this file
    bench = "reports/h200/bench"    # bench folder (per row, the newest <date>-<shape>.json that has it) or one file
    baseline = "main"               # default for --baseline: bench .json, folder, or git revision
    alpha = 0.05                    # level of the comparisons: shares Bonferroni-split per diff table,
                                    # time per rule and shape (bench --compare splits it over its rows)
    share_tolerance = 0.02          # no_regression: a share may rise this much (fraction of samples)
    time_tolerance = 0.02           # no_regression: a significant slowdown up to 2% still passes

    [check.defaults]                # merged into every rule below (a rule's own keys win)
    no_spills = true

    [[check.rule]]
    version = "v07_tuned"           # required: a version id (reports/<gpu>/<version>), or a list of them
    shape = "b1_h64_s1024_d128_fp16"  # the shape the rule holds at (default: every shape with data)
    min_tflops = 288                # bench row tflops >= 288
    min_ratio = { sdpa-flash = 0.95 }  # tflops >= 0.95 x sdpa-flash's, same bench run
    min_relative = 0.97             # tflops >= 0.97 x the baseline bench's
    max_share = { "wait" = 0.5, "HMMA·wait" = 0.35, "HMMA·short_scoreboard ← LDSM" = 0.15 }
    max_bank_conflict_ways = 1      # roofline.smem.ldsm.ways
    min_l2_fanout = 2.0             # roofline.l2_reads.fanout: SMs served per L2 read (bytes delivered / read)
    no_regression = true            # vs the baseline: time (bench --repeat spread) and shares (Newcombe)
    no_spills = true                # ptxas: 0 spill bytes (unless version.toml allow_spills)
    sass = true                     # version.toml expect_sass present, forbid_sass absent in the cubin
    no_missing = true               # the report's `missing` list is empty
    no_collapsed_overlap = true     # no wait_group N>=1 with a lower wait right behind it (`overlap`)

``max_share`` keys name a stall reason (``stall_share``), a class·reason cell (``who_waits``) or a
waiter ← producer edge (``waits_on``); ``.`` may stand for ``·`` and ``<-`` for ``←``. Names are checked
against the stall reasons, opcode classes and base opcodes of ``profiler/data/`` when the policy loads,
so a typo is an error, never a rule that silently holds.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from profiler.errors import WhowaitsError
from profiler.names import SHAPE_RE

POLICY_FILE = "whowaits.toml"

#: every check a rule can hold, in the order results are listed
CHECKS = ("min_tflops", "min_ratio", "min_relative", "no_regression", "max_share", "max_bank_conflict_ways",
          "min_l2_fanout",
          "no_missing", "no_collapsed_overlap", "no_spills", "sass")
BENCH_CHECKS = ("min_tflops", "min_ratio", "min_relative")
REPORT_CHECKS = ("max_share", "max_bank_conflict_ways", "min_l2_fanout", "no_missing", "no_collapsed_overlap")
BUILD_CHECKS = ("no_spills", "sass")
SETTINGS = ("reports", "bench", "baseline", "alpha", "share_tolerance", "time_tolerance", "defaults", "rule")


@dataclass(frozen=True)
class ShareKey:
    """A ``max_share`` key: a reason, a class·reason, or a class·reason ← producer (base opcode)."""

    reason: str
    cls: str | None = None
    producer: str | None = None

    @property
    def text(self) -> str:
        if self.cls is None:
            return self.reason
        return f"{self.cls}·{self.reason}" + (f" ← {self.producer}" if self.producer else "")

    @property
    def field(self) -> str:
        """The summary field it reads, by docs/contract.md's names."""
        if self.cls is None:
            return f"stall_share.{self.reason}"
        if self.producer is None:
            return f"who_waits[{self.cls}·{self.reason}].share"
        return f"waits_on[{self.cls}·{self.reason} ← {self.producer}].share"


def parse_share_key(text: str) -> ShareKey:
    """Parse and validate a ``max_share`` key (WhowaitsError naming what is unknown)."""
    from profiler import metrics  # noqa: PLC0415

    raw = str(text).replace("<-", "←")
    head, _, producer = raw.partition("←")
    head = head.strip().replace("·", ".")
    producer = producer.strip() or None
    cls, _, reason = head.rpartition(".")
    cls = cls.strip() or None
    reason = reason.strip()
    reasons = metrics.stall_reasons()
    if reason not in reasons:
        raise WhowaitsError(f"max_share key {text!r}: unknown stall reason {reason!r} "
                            f"(known: {', '.join(reasons)})")
    if cls is not None and cls not in metrics.opcode_classes():
        raise WhowaitsError(f"max_share key {text!r}: unknown opcode class {cls!r} "
                            f"(known: {', '.join(metrics.opcode_classes())})")
    if producer is not None:
        if cls is None:
            raise WhowaitsError(f"max_share key {text!r}: an edge needs a waiter CLASS·reason before ←")
        if producer not in metrics.known_base_opcodes():
            raise WhowaitsError(f"max_share key {text!r}: unknown producer opcode {producer!r} "
                                "(a SASS base opcode such as LDSM, LDG, LDGSTS, SHFL, MUFU, SYNCS)")
    return ShareKey(reason=reason, cls=cls, producer=producer)


@dataclass(frozen=True)
class Rule:
    """One ``[[check.rule]]`` with the defaults merged in; ``line`` is its header's line in the file
    and ``lines`` the line of each of its keys (for annotations)."""

    index: int
    versions: tuple[str, ...]
    shape: str | None = None
    min_tflops: float | None = None
    min_ratio: dict = field(default_factory=dict)
    min_relative: float | None = None
    max_share: dict = field(default_factory=dict)  # ShareKey -> limit (fraction)
    max_bank_conflict_ways: float | None = None
    min_l2_fanout: float | None = None
    no_regression: bool = False
    no_missing: bool = False
    no_collapsed_overlap: bool = False
    no_spills: bool = False
    sass: bool = False
    explicit: frozenset = frozenset()  # checks the rule names itself (not only through defaults)
    line: int | None = None
    lines: dict = field(default_factory=dict)

    def has(self, check: str) -> bool:
        value = getattr(self, check)
        return bool(value) if not isinstance(value, (int, float)) or isinstance(value, bool) else True


@dataclass(frozen=True)
class Policy:
    """A loaded policy; paths are absolute (relative ones are taken from the policy file's folder)."""

    path: Path
    reports: Path
    bench: Path
    baseline: str | None
    alpha: float
    share_tolerance: float
    time_tolerance: float
    rules: tuple[Rule, ...]

    @property
    def root(self) -> Path:
        return self.path.parent


def find_policy(start: Path | None = None) -> Path:
    """``whowaits.toml`` in ``start`` (default: the working folder) or a parent, else a
    ``pyproject.toml`` there with ``[tool.whowaits.check]``; WhowaitsError when neither exists."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / POLICY_FILE).is_file():
            return d / POLICY_FILE
        pp = d / "pyproject.toml"
        if pp.is_file():
            try:
                if "check" in tomllib.loads(pp.read_text(encoding="utf-8-sig")).get("tool", {}).get("whowaits", {}):
                    return pp
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError, AttributeError):
                pass
    raise WhowaitsError(f"no policy found: write {POLICY_FILE} (a [check] table) in {here} or a parent, "
                        "or pass --policy FILE")


def _number(where: str, key: str, value, lo: float | None = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise WhowaitsError(f"{where}: {key} must be a number, got {value!r}")
    if lo is not None and value < lo:
        raise WhowaitsError(f"{where}: {key} must be >= {lo}, got {value!r}")
    return float(value)


def _rule_lines(text: str, header: str) -> list[tuple[int, dict]]:
    """For each ``[[<header>]]`` in the file: its 1-based line and {key: line} of the keys below it."""
    out: list[tuple[int, dict]] = []
    head = re.compile(r"^\s*\[\[\s*" + re.escape(header).replace(r"\.", r"\s*\.\s*") + r"\s*\]\]")
    key = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_-]*)\s*=")
    current = None
    for i, line in enumerate(text.splitlines(), 1):
        if head.match(line):
            current = (i, {})
            out.append(current)
        elif line.lstrip().startswith("["):
            current = None
        elif current is not None:
            m = key.match(line)
            if m:
                current[1].setdefault(m.group(1), i)
    return out


def _versions(where: str, value) -> tuple[str, ...]:
    vals = [value] if isinstance(value, str) else value
    if not isinstance(vals, list) or not vals or not all(isinstance(v, str) and v.strip() for v in vals):
        raise WhowaitsError(f"{where}: 'version' must be a version id or a list of them")
    return tuple(v.strip() for v in vals)


def _rule(where: str, index: int, raw: dict, defaults: dict, line: int | None, lines: dict) -> Rule:
    unknown = set(raw) - set(CHECKS) - {"version", "shape"}
    if unknown:
        raise WhowaitsError(f"{where}: unknown key(s) {', '.join(sorted(unknown))} "
                            f"(known: version, shape, {', '.join(CHECKS)})")
    if "version" not in raw:
        raise WhowaitsError(f"{where}: 'version' is required")
    merged = {**defaults, **raw}
    kw: dict = {"index": index, "versions": _versions(where, raw["version"]), "line": line, "lines": lines,
                "explicit": frozenset(k for k in raw if k in CHECKS)}
    shape = merged.get("shape")
    if shape is not None:
        if not isinstance(shape, str) or not SHAPE_RE.match(shape):
            raise WhowaitsError(f"{where}: shape {shape!r} is not a shape key like b1_h64_s1024_d128_fp16")
        kw["shape"] = shape
    for key in ("min_tflops", "min_relative", "max_bank_conflict_ways", "min_l2_fanout"):
        if merged.get(key) is not None:
            kw[key] = _number(where, key, merged[key])
    if "min_ratio" in merged:
        if not isinstance(merged["min_ratio"], dict) or not merged["min_ratio"]:
            raise WhowaitsError(f"{where}: min_ratio must be a table {{implementation = factor}}")
        kw["min_ratio"] = {str(k): _number(where, f"min_ratio.{k}", v) for k, v in merged["min_ratio"].items()}
    if "max_share" in merged:
        if not isinstance(merged["max_share"], dict) or not merged["max_share"]:
            raise WhowaitsError(f"{where}: max_share must be a table {{\"reason\" | \"CLASS·reason\" | "
                                f"\"CLASS·reason ← PRODUCER\" = fraction}}")
        shares = {}
        for k, v in merged["max_share"].items():
            limit = _number(where, f"max_share.{k!r}", v)
            if limit > 1:
                raise WhowaitsError(f"{where}: max_share.{k!r} = {v} is a fraction of all samples (0..1)")
            shares[parse_share_key(k)] = limit
        kw["max_share"] = shares
    for key in ("no_regression", "no_missing", "no_collapsed_overlap", "no_spills", "sass"):
        if key in merged:
            if not isinstance(merged[key], bool):
                raise WhowaitsError(f"{where}: {key} must be true or false")
            kw[key] = merged[key]
    rule = Rule(**kw)
    if not any(rule.has(c) for c in CHECKS):
        raise WhowaitsError(f"{where}: the rule checks nothing (give one of {', '.join(CHECKS)})")
    return rule


def load_policy(path: str | Path | None = None) -> Policy:
    """Load and validate a policy (default: :func:`find_policy`). Every problem is a one-line
    WhowaitsError naming the file and the key."""
    p = Path(path) if path is not None else find_policy()
    if not p.is_file():
        raise WhowaitsError(f"no such policy file: {p}")
    try:
        text = p.read_text(encoding="utf-8-sig")  # a byte-order mark (some Windows editors write one) is no error
        data = tomllib.loads(text)
    except (OSError, UnicodeDecodeError) as err:
        raise WhowaitsError(f"{p}: cannot read ({err})") from None
    except tomllib.TOMLDecodeError as err:
        raise WhowaitsError(f"{p}: invalid toml: {err}") from None
    except RecursionError:
        raise WhowaitsError(f"{p}: invalid toml: arrays or tables nested too deeply") from None
    if p.name == "pyproject.toml":
        table, prefix = data.get("tool", {}).get("whowaits", {}).get("check"), "tool.whowaits.check"
    else:
        table, prefix = data.get("check"), "check"
    if not isinstance(table, dict):
        raise WhowaitsError(f"{p}: no [{prefix}] table")
    unknown = set(table) - set(SETTINGS)
    if unknown:
        raise WhowaitsError(f"{p}: unknown key(s) in [{prefix}]: {', '.join(sorted(unknown))} "
                            f"(known: {', '.join(SETTINGS)})")
    root = p.resolve().parent
    where = f"{p.name} [{prefix}]"

    def folder(key: str, default: str) -> Path:
        value = table.get(key, default)
        if not isinstance(value, str) or not value:
            raise WhowaitsError(f"{where}: {key} must be a path")
        return (root / value) if not Path(value).is_absolute() else Path(value)

    alpha = _number(where, "alpha", table.get("alpha", 0.05))
    if not 0 < alpha < 1:
        raise WhowaitsError(f"{where}: alpha must be in (0, 1), got {alpha}")
    tol = _number(where, "share_tolerance", table.get("share_tolerance", 0.02))
    time_tol = _number(where, "time_tolerance", table.get("time_tolerance", 0.02))
    baseline = table.get("baseline")
    if baseline is not None and not isinstance(baseline, str):
        raise WhowaitsError(f"{where}: baseline must be a path or a git revision")
    defaults = table.get("defaults", {})
    if not isinstance(defaults, dict):
        raise WhowaitsError(f"{where}: [{prefix}.defaults] must be a table")
    bad = set(defaults) - set(CHECKS) - {"shape"}
    if bad:
        raise WhowaitsError(f"{p.name} [{prefix}.defaults]: unknown key(s) {', '.join(sorted(bad))}")
    raw_rules = table.get("rule", [])
    if not isinstance(raw_rules, list) or not raw_rules:
        raise WhowaitsError(f"{where}: no rules (add [[{prefix}.rule]] tables)")
    lines = _rule_lines(text, f"{prefix}.rule")
    rules = []
    for i, raw in enumerate(raw_rules):
        line, key_lines = lines[i] if i < len(lines) else (None, {})
        rules.append(_rule(f"{p.name} rule {i + 1}" + (f" (line {line})" if line else ""), i, raw, defaults,
                           line, key_lines))
    return Policy(path=p, reports=folder("reports", "reports/h200"), bench=folder("bench", "reports/h200/bench"),
                  baseline=baseline, alpha=alpha, share_tolerance=tol, time_tolerance=time_tol,
                  rules=tuple(rules))
