"""`whowaits trace`: the measured role trace of one warp-specialised rung (docs/trace.md) — runs the traced build
on the GPU (:mod:`kernels.tracebuild`) or re-reads its raw events (``--raw``), then writes the Perfetto / Chrome
trace and the summary (:mod:`profiler.analyze.event_trace`): per-edge wait time, producer/consumer overlap, the
critical path through one steady-state iteration, and the trace's overhead (traced vs untraced, same run)."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Optional

import typer

from profiler.cli._app import FORMAT_OPTION, Format, app
from profiler.errors import WhowaitsError
from profiler.io import write_atomic

DEFAULT_SHAPE = "b1_h64_s1024_d128_fp16"


def static_labels(version: str, shape: str, reports: Path | None = None) -> tuple[dict, set, dict | None]:
    """(mbarrier address -> label, every barrier label, heaviest static edge) from the committed report of
    ``version`` at ``shape``; empty where there is none (or ncu_report is missing, as on the GPU host)."""
    try:
        from profiler.analyze.roles import mbarrier_labels, role_graph  # noqa: PLC0415
        from profiler.paths import reports_dir  # noqa: PLC0415
        from profiler.report import load_report  # noqa: PLC0415

        root = reports or reports_dir()
        hits = sorted(root.glob(f"*/{version}*/{shape}.ncu-rep")) + sorted(root.glob(f"{version}*/{shape}.ncu-rep"))
        if not hits:
            return {}, set(), None
        la = load_report(hits[0]).launches[0]
        g = role_graph(la)
        h = g.heaviest()
        return (mbarrier_labels(la), {e.barrier for e in g.edges},
                {"waiter": h.waiter, "barrier": h.barrier, "releaser": h.releaser, "share": h.share,
                 "report": str(hits[0])} if h else None)
    except Exception:  # noqa: BLE001 - no report, no ncu_report: the trace names barriers by address
        return {}, set(), None


def same_edge(a: dict, b: dict) -> bool:
    """Two edges (trace summary / static graph dicts) are the same: waiter, barrier and releaser."""
    return (a["waiter"], a["barrier"], a["releaser"]) == (b["waiter"], b["barrier"], b["releaser"])


def write(raw: Path, out_dir: Path, *, version: str | None = None, reports: Path | None = None,
          max_ctas: int | None = None) -> dict:
    """Analyse a ``.trace-raw.npz``: writes ``<shape>.trace.json.gz`` and ``<shape>.trace-summary.json`` into
    ``out_dir``; returns the summary."""
    from profiler.analyze.event_trace import chrome_trace, load_raw, summarize  # noqa: PLC0415

    arrays, meta = load_raw(raw)
    ver = version or meta["version"]
    labels, names, static_top = static_labels(ver, meta["shape"], reports)
    summary = summarize(arrays, meta, labels, names)
    summary["static_heaviest"] = static_top
    if summary.get("heaviest") and static_top:
        summary["heaviest_agrees"] = same_edge(summary["heaviest"], static_top)
    out_dir.mkdir(parents=True, exist_ok=True)
    shape = meta["shape"]
    trace = chrome_trace(arrays, meta, labels, names, max_ctas=max_ctas)

    def gzipped(tmp: Path) -> None:
        with gzip.open(tmp, "wt", compresslevel=9) as fh:
            json.dump(trace, fh, separators=(",", ":"))

    write_atomic(out_dir / f"{shape}.trace.json.gz", gzipped)
    write_atomic(out_dir / f"{shape}.trace-summary.json", json.dumps(summary, indent=1) + "\n")
    return summary


def write_waits(raw: Path, out_dir: Path, *, version: str | None = None, reports: Path | None = None) -> dict:
    """Analyse a ``.trace-waits.npz`` (the wait log): writes ``<shape>.trace-waits-summary.json`` into ``out_dir``;
    returns the summary, with the static graph's heaviest edge and whether the two agree."""
    from profiler.analyze.trace_waits import (  # noqa: PLC0415
        WAIT_CLASSES, combine_classes, load_waits, summarize_waits, waits_name)

    arrays, meta = load_waits(raw)
    ver = version or meta["version"]
    labels, names, static_top = static_labels(ver, meta["shape"], reports)
    summary = summarize_waits(arrays, meta, labels, names)
    summary["classes"] = meta.get("classes", "all")
    summary["static_heaviest"] = static_top
    if summary.get("heaviest") and static_top:
        summary["heaviest_agrees"] = same_edge(summary["heaviest"], static_top)
    if summary["classes"] == "all" and summary.get("rows_per_warpgroup", 1) == 1:
        # the one-class logs beside it, where they were run: one row per warpgroup (by_class), per warp
        for key, per_warp in (("by_class", False), ("by_class_per_warp", True)):
            parts = {}
            for cls in WAIT_CLASSES:
                f = raw.parent / waits_name(meta["shape"], cls, per_warp)
                if cls not in ("all", "arrivals") and f.is_file():
                    a2, m2 = load_waits(f)
                    parts[cls] = summarize_waits(a2, m2, labels, names)
            if parts:
                summary[key] = combine_classes(summary, parts)
                if summary[key]["heaviest"] and static_top:
                    summary[key]["heaviest_agrees"] = same_edge(summary[key]["heaviest"], static_top)
    out_dir.mkdir(parents=True, exist_ok=True)
    dest = out_dir / raw.name.replace(".npz", "-summary.json")
    write_atomic(dest, json.dumps(summary, indent=1) + "\n")  # a summary is whole or absent
    return summary


def _print_waits(s: dict) -> None:
    o = s["overhead"]
    print(f"{s['version']} {s['shape']} (wait log): {s['ctas']} CTAs, {s['records']} records, clock "
          f"{s['clock_ghz']:.3f} GHz ({s['clock_from']}); shortest waits {s['shortest_wait_cycles']} cycles")
    print(f"overhead: untraced {o['untraced_us']:.1f} us, traced {o['traced_us']:.1f} us ({o['overhead_pct']:+.1f}%)")
    print("edges (leader-thread wait time; share = warp-weighted, of all warpgroups' active warp-cycles):")
    for e in s["edges"]:
        print(f"  {e['waiter']:9s} —[{e['barrier']}]→ {e['releaser']:28s} {e['ns'] / 1e3:9.1f} us "
              f"{100 * e['share']:5.1f}%  {e['waits']} waits, {e['blocking_waits']} blocking")
    for key, what in (("by_class", "each class logged alone"), ("by_class_per_warp", "each class alone, a row per warp")):
        bc = s.get(key)
        if not bc:
            continue
        ov = ", ".join(f"{k} {v:+.1f}%" for k, v in bc["overhead_pct"].items())
        print(f"{what} (overhead {ov}):")
        for e in bc["edges"]:
            print(f"  {e['waiter']:9s} —[{e['barrier']}]→ {e['releaser']:28s} {e['ns'] / 1e3:9.1f} us "
                  f"{100 * e['share']:5.1f}%  ({e['from']})")
    bc = s.get("by_class")
    bw = s.get("by_class_per_warp")
    if s.get("static_heaviest"):
        st = s["static_heaviest"]
        print(f"static graph's heaviest: {st['waiter']} —[{st['barrier']}]→ {st['releaser']} "
              f"({100 * st['share']:.1f}% of samples); agrees: {s.get('heaviest_agrees')}"
              + (f"; by class: {bc.get('heaviest_agrees')}" if bc else "")
              + (f"; by class, per warp: {bw.get('heaviest_agrees')}" if bw else ""))


@app.command()
def trace(
    version: str = typer.Argument(..., help="A warp-specialised ladder version (v10 on), e.g. v11_pingpong or v11."),
    shape: str = typer.Option(DEFAULT_SHAPE, "--shape", help="Shape key."),
    out: Path = typer.Option(Path("reports/h200/traces"), "--out", help="Folder; files go to OUT/<version>/."),
    raw: Optional[Path] = typer.Option(None, "--raw", help="Re-analyse this .trace-raw.npz (no GPU)."),
    max_ctas: Optional[int] = typer.Option(None, "--max-ctas", help="CTAs in the Perfetto JSON (all by default)."),
    waits: bool = typer.Option(False, "--waits", help="The wait log (-DWHOWAITS_TRACE_WAITS): one record per wait "
                               "and arrive, the kernel's own schedule, no timeline; --raw takes its .trace-waits.npz."),
    classes: str = typer.Option("all", "--class", help="With --waits: log one record class alone (wgmma, mbarrier, "
                                "named, arrivals; default all), the least perturbed measurement of it."),
    per_warp: bool = typer.Option(False, "--per-warp", help="With --waits: a row for every warp (lane 0), not "
                                  "one per warpgroup (its first thread): the warps of a warpgroup wait unlike."),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Measured role trace: clock64 stamps of every wait, arrive and issue by each warpgroup's leader thread
    (the -DWHOWAITS_TRACE build), as a Perfetto trace plus per-edge wait time, overlap, the critical path of
    one steady-state iteration and the overhead."""
    if (classes != "all" or per_warp) and not waits and (raw is None or ".trace-waits" not in raw.name):
        raise WhowaitsError("--class and --per-warp go with --waits (the wait log); the event trace logs everything")
    if raw is None:
        from kernels import registry  # noqa: PLC0415
        from kernels.tracebuild import run  # noqa: PLC0415

        vid = registry.get(version).id
        dest = out / vid
        from profiler.analyze.trace_waits import waits_name  # noqa: PLC0415

        run(vid, shape, dest, log=lambda m: print(m, file=sys.stderr), mode="waits" if waits else "events",
            classes=classes, per_warp=per_warp)
        raw = dest / (waits_name(shape, classes, per_warp) if waits else f"{shape}.trace-raw.npz")
    else:
        dest = raw.parent
        waits = waits or ".trace-waits" in raw.name
    if waits:
        s = write_waits(raw, dest)
        if fmt is Format.json:
            json.dump(s, sys.stdout, indent=1)
            sys.stdout.write("\n")
        else:
            _print_waits(s)
        return
    s = write(raw, dest)
    if fmt is Format.json:
        json.dump(s, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
    o = s["overhead"]
    print(f"{s['version']} {s['shape']}: {s['ctas']} CTAs, {s['events']} events, clock {s['clock_ghz']:.3f} GHz "
          f"({s['clock_from']})")
    print(f"overhead: untraced {o['untraced_us']:.1f} us, traced {o['traced_us']:.1f} us ({o['overhead_pct']:+.1f}%)")
    if s.get("trace_format") == 2:
        bound = (f", bounded by the stamp: the shortest parked wait, {s['park_shortest_wait_cycles']}, blocked"
                 if s.get("park_bounded_by_stamp") else "")
        print(f"trace format 2: {s['parked_events']} parked events (stamp {s['stamp_cycles'].get('consumer')} cycles, "
              f"parked {s['park_cycles']}{bound}), {s['dropped_events']} dropped")
    print("edges (leader-thread wait time; share = warp-weighted, of all warpgroups' active warp-cycles):")
    for e in s["edges"]:
        print(f"  {e['waiter']:9s} —[{e['barrier']}]→ {e['releaser']:28s} {e['ns'] / 1e3:9.1f} us "
              f"{100 * e['share']:5.1f}%  {e['waits']} waits, {e['blocking_waits']} blocking")
    ov = s["overlap"]
    print(f"overlap: {ov['load_hidden_pct'] and round(ov['load_hidden_pct'], 1)}% of TMA load time hidden behind "
          f"consumer work; producer waiting {ov['producer_waiting_pct'] and round(ov['producer_waiting_pct'], 1)}%")
    cp = s["critical_path"]
    if "mean_share" in cp:
        print(f"critical path of one steady-state iteration ({cp['iteration_cycles_median']} cycles median):")
        for k, v in cp["mean_share"].items():
            print(f"  {100 * v:5.1f}%  {k}")
    if s.get("static_heaviest"):
        print(f"heaviest edge agrees with the static graph: {s.get('heaviest_agrees')}")
    u = s.get("wgmma_untraced")
    if u:
        print(f"wgmma group, untraced estimate (stamps between commit and wait given back, median "
              f"{u['stamps_between_commit_and_wait_median']:g}): {u['warp_cycles_lo']:,}..{u['warp_cycles_hi']:,} "
              f"warp-cycles vs the next edge's {u['heaviest_other'] and u['heaviest_other']['warp_cycles']:,}: "
              f"heaviest {u['heaviest_if_untraced']}")
