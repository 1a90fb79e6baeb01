"""Is a committed report still a report of the rung's current build?

A rung's code also lives in shared headers (``kernels/common/``): editing one silently changes v03–v07 while
their reports and verdicts describe the old SASS. Every sidecar records the ``build_hash`` it was profiled
with (:mod:`profiler.provenance`); :func:`check` recomputes the rung's current build key (nvcc's version is
part of it, so nvcc must be on PATH; no GPU) and sorts each report into one of:

- ``fresh``: the key is unchanged;
- ``restamp``: the key changed but the current build's SASS is the profiled SASS, instruction by instruction
  (same opcode with modifiers at every offset, same length): e.g. a comment edited in an included header, a
  header renamed, or the key's own inputs changed (it covers the files the rung includes, transitively, by
  name relative to ``kernels/`` and bytes, so a header added beside them or another checkout path keeps it).
  The report still describes the code; its sidecar can take the new key
  (``scripts/backfill_provenance.py --restamp``), and a resumed sweep counts it as done;
- ``stale``: the SASS differs: the report, and any verdict drawn from it, describes code that no longer
  builds. Re-profile the rung (``whowaits profile VERSION --force``) or restore its sources (a landed rung is
  frozen);
- ``unknown``: a ladder report whose sidecar has no ``build_hash``.

Only ladder versions are checked (a sidecar with a ``ladder_order``); external subjects have no build of ours.
This module imports ``kernels`` (it builds), so views never import it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from profiler.provenance import read_sidecar

_SASS_LINE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Za-z0-9_.]*)")


@dataclass(frozen=True)
class Freshness:
    report: Path
    version: str
    status: str  # fresh | restamp | stale | unknown
    recorded: str | None
    current: str | None
    detail: str = ""


def cubin_opcodes(cubin: Path) -> dict[int, str]:
    """Offset -> opcode with modifiers (predicate dropped) of the one kernel in ``cubin`` (``cuobjdump -sass``)."""
    from kernels import sass  # noqa: PLC0415

    out = {}
    for line in sass.sass_text(cubin).splitlines():
        m = _SASS_LINE.match(line)
        if m:
            out[int(m.group(1), 16)] = m.group(2)
    return out


def report_opcodes(report: Path) -> dict[int, str]:
    """Offset -> opcode with modifiers of the profiled kernel (the first launch of the report)."""
    from profiler.report import load_report  # noqa: PLC0415

    sass = load_report(report).launches[0].sass
    return {int(o): str(op) for o, op in zip(sass["offset"], sass["opcode"])}


def sass_difference(report: Path, cubin: Path) -> str:
    """'' when the profiled kernel's SASS is the cubin's, else the first difference, in words."""
    rep, cub = report_opcodes(report), cubin_opcodes(cubin)
    for off in sorted(set(rep) | set(cub)):
        if rep.get(off) != cub.get(off):
            return (f"at offset {off:#x} the report has {rep.get(off) or 'nothing'}, the current build "
                    f"{cub.get(off) or 'nothing'} ({len(rep)} vs {len(cub)} instructions)")
    return ""


def check_report(report: Path) -> Freshness | None:
    """The freshness of one report of a ladder version (None for reports that are not of a ladder rung)."""
    from kernels import build as kbuild  # noqa: PLC0415
    from kernels import registry
    from kernels.config import Shape

    side = read_sidecar(report) or {}
    version = side.get("version") or report.parent.name
    if side.get("ladder_order") is None and version not in {v.id for v in registry.versions()}:
        return None
    recorded = side.get("build_hash")
    try:
        v = registry.get(version)
    except Exception as err:  # noqa: BLE001 - a rung removed from the ladder: its report describes nothing
        return Freshness(report, version, "stale", recorded, None, f"no such rung any more ({err})")
    s = Shape.parse(side.get("shape") or report.name[: -len(".ncu-rep")])
    cfg = v.config_for(s.head_dim, s.dtype, s.causal)
    current = kbuild._source_hash(v, cfg)
    if recorded is None:
        return Freshness(report, version, "unknown", None, current, "sidecar has no build_hash")
    if recorded == current:
        return Freshness(report, version, "fresh", recorded, current)
    res = kbuild.build(v, cfg)
    why = sass_difference(report, res.cubin)
    return Freshness(report, version, "stale" if why else "restamp", recorded, current,
                     why or "build key changed, SASS identical")


def check(rdir: Path) -> list[Freshness]:
    """:func:`check_report` for every ``<version>/<shape>.ncu-rep`` under ``rdir`` that is of a ladder rung."""
    out = []
    for rep in sorted(Path(rdir).glob("*/*.ncu-rep")):
        f = check_report(rep)
        if f is not None:
            out.append(f)
    return out


__all__ = ["Freshness", "check", "check_report", "cubin_opcodes", "report_opcodes", "sass_difference"]
