#!/usr/bin/env python3
"""Snapshot of every launch summary of every committed report, to prove a change leaves them alone.

Writes one JSON file per launch (``json.dumps(summary, indent=1)``: floats as Python's ``repr`` writes
them, so any change of a value, however small, changes the bytes; keys in the summary's own order, so a
change of any dict's order shows too; ``--sort-keys`` writes the canonical sorted form instead) for every
``.ncu-rep`` under reports/ and tests/ (public reports, fixtures, golden), named
``<report path with / as __>__launch<index>.json``; a report that cannot be read or summarised gets one
``<...>__error.txt`` with the error's type and message instead; beside each, ``…launch<index>.more.json``
holds what other commands show of the same analyses (the whole role graph, the per-PC producers; left out
with ``--summaries-only``). With ``--compare DIR`` it then compares
the new folder with an earlier one file by file and exits 1 on any difference (missing, extra or
changed files), naming them.

Usage: python scripts/summaries_snapshot.py OUT_DIR [--compare BASE_DIR] [--time] [--sort-keys] [--summaries-only]
(``--time`` prints each report's summarize_launch time; the frames cache of ``$WHOWAITS_CACHE_DIR``
is used and filled as by ``whowaits show``.)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def reports() -> list[Path]:
    """Every committed ``.ncu-rep`` under reports/ and tests/, sorted."""
    return sorted(p for top in ("reports", "tests") for p in (ROOT / top).rglob("*.ncu-rep"))


def _more(launch) -> dict:
    """What other commands show of the same analyses beyond the summary: the whole role graph (``whowaits
    roles``: roles, edges with evidence and wait-site PCs, unresolved reasons) and the per-PC producers."""
    from profiler.analyze import producer_pcs
    from profiler.analyze.roles import role_graph

    out: dict = {}
    if len(launch.sass) and "sass" in launch.sass.columns:
        out["roles"] = role_graph(launch).to_dict()
    out["producer_pcs"] = producer_pcs(launch).astype(object).where(lambda f: f.notna(), None).to_dict("split")
    return out


def snapshot(out: Path, timed: bool = False, sort_keys: bool = False, extra: bool = True) -> int:
    from profiler.analyze import summarize_launch
    from profiler.report import load_report

    out.mkdir(parents=True, exist_ok=True)
    n = 0
    total = 0.0
    for path in reports():
        stem = str(path.relative_to(ROOT)).replace("/", "__")
        try:
            report = load_report(path)
            t = time.perf_counter()
            for launch in report.launches:
                s = summarize_launch(launch)
                (out / f"{stem}__launch{launch.index}.json").write_text(
                    json.dumps(s, sort_keys=sort_keys, indent=1) + "\n")
                if extra:
                    (out / f"{stem}__launch{launch.index}.more.json").write_text(
                        json.dumps(_more(launch), sort_keys=sort_keys, indent=1, default=repr) + "\n")
                n += 1
            dt = time.perf_counter() - t
            total += dt
            if timed:
                print(f"{dt * 1e3:8.1f} ms  {len(report.launches):3d} launches  {path.relative_to(ROOT)}")
        except Exception as err:  # noqa: BLE001 - the error itself is part of the snapshot
            (out / f"{stem}__error.txt").write_text(f"{type(err).__name__}: {err}\n")
    print(f"{n} launch summaries of {len(reports())} reports written to {out}"
          + (f"; summarize_launch total {total * 1e3:.0f} ms" if timed else ""))
    return n


def compare(new: Path, base: Path) -> int:
    a = {p.name: p for p in base.iterdir()}
    b = {p.name: p for p in new.iterdir()}
    bad = sorted(set(a) ^ set(b)) + sorted(k for k in set(a) & set(b) if a[k].read_bytes() != b[k].read_bytes())
    for k in bad:
        print(f"DIFFERS: {k}")
    print(f"{len(set(a) & set(b))} files compared, {len(bad)} differ")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--compare", type=Path, default=None)
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--sort-keys", action="store_true")
    ap.add_argument("--summaries-only", action="store_true")
    args = ap.parse_args(argv)
    snapshot(args.out, args.time, args.sort_keys, not args.summaries_only)
    return compare(args.out, args.compare) if args.compare else 0


if __name__ == "__main__":
    sys.exit(main())
