"""The wait log of one launch (``whowaits trace --waits``, docs/trace.md): 8-byte records -> per-edge wait time.

Input: what ``kernels/tracebuild.py`` (mode ``waits``) wrote on the GPU, ``<shape>.trace-waits.npz``: for every row =
(CTA, warpgroup) the records its leader thread stored (``kernels/common/sm90/trace.cuh``, ``WHOWAITS_TRACE_WAITS``),
each ``(entry << 40) | value``:

* entries 0-63 are waits, the value the cycles from the clock read before the wait to the one after it (nothing
  else in between): 0-31 an mbarrier keyed by ``(shared address >> 3) & 31``, 32-47 a named barrier by id, 48-51
  a wgmma group wait by its N;
* 64-143 are arrivals (value 0): 64-95 an mbarrier arrive, 96-127 an ``arrive.expect_tx`` (the TMA load it
  announces), 128-143 a ``bar.arrive``;
* 240 / 241 the row's clock64 / %globaltimer (low 40 bits) at the kernel's start and, where the warpgroup reaches
  its end, at its end; 242 the SM.

A pure function of those arrays (no GPU, no ncu), so it runs on committed data. Unlike the event trace
(:mod:`profiler.analyze.event_trace`) there is no timeline: no stamp cost to calibrate (a wait holds one clock read),
no critical path. What it gives is the per-edge weight with the kernel's own schedule: the build's wgmma windows
hold one clock read and the kernel's own instructions (``scripts/trace_windows.py --waits``).

* **Roles**: warpgroup 0 the ``producer``, 1.. the ``consumer`` s (CONTRACT.md), as the event trace.
* **Barriers** by the static graph's labels: an mbarrier key maps back to the static graph's addresses with the same
  key (``labels``: address -> ring label); no address: ``mbarrier#K``; addresses of different labels on one key:
  ``mbarrier#K (collides: ...)``, never guessed. A named barrier by id (``bar N``, or ``bar (runtime id)`` where
  the static graph has register ids), a wgmma wait by the tensor core.
* **Releasers**, from the arrivals of the same CTA: an mbarrier's by the roles whose leader arrived on its key
  (``arrive.expect_tx``: ``TMA ← producer``), a named barrier's by the other warpgroups that ``bar.arrive`` on it.
* **Weights**: ``cycles`` summed over rows; ``warp_cycles`` = cycles × the warps that wait there (``WARPS``:
  what ncu's PC sampler sees); shares are of all rows' active warp-cycles (start to end record; a producer that
  returns early: to its CTA's last end).
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from typing import Any

import numpy as np

from profiler.traceformat import WAIT_CLASSES, waits_name
from profiler.analyze.event_trace import TENSOR, WARPS, _labels_for, _role, mbarrier_releaser, named_releaser
from profiler.errors import WhowaitsError

__all__ = ["WAIT_CLASSES", "load_waits", "summarize_waits", "combine_classes", "decode", "waits_name"]

VALUE_MASK = (1 << 40) - 1
MBAR, BAR_SYNC, WGMMA, MBAR_ARRIVE, EXPECT_TX, BAR_ARRIVE = 0, 32, 48, 64, 96, 128
CLOCK, GLOBAL, SMID = 240, 241, 242


def load_waits(path) -> tuple[dict, dict]:
    """(arrays, meta) of a ``.trace-waits.npz``; a missing, damaged or foreign file is a WhowaitsError."""
    try:
        with np.load(path) as z:
            arrays = {k: z[k] for k in ("counts", "records")}
            meta = json.loads(bytes(z["meta"]).decode())
    except FileNotFoundError:
        raise WhowaitsError(f"no wait log at {path}: run `whowaits trace VERSION --waits` on the GPU") from None
    except Exception as exc:  # noqa: BLE001 - zip, npy, json and key errors all mean one thing here
        raise WhowaitsError(f"{path} is not a readable wait log ({type(exc).__name__}: {exc}); "
                            f"re-run `whowaits trace VERSION --waits`") from None
    if meta.get("trace_format") != "waits":
        raise WhowaitsError(f"{path}: not a wait log (trace_format {meta.get('trace_format')!r}); "
                            f"an event trace is read without --waits")
    return arrays, meta


def decode(records: np.ndarray, count: int) -> list[tuple[int, int]]:
    """A row's (entry, value) pairs, in order."""
    r = records[:count].astype(np.uint64)
    return list(zip((r >> np.uint64(40)).astype(int).tolist(), (r & np.uint64(VALUE_MASK)).astype(int).tolist()))


def _mbar_names(labels: dict) -> dict[int, str]:
    """mbarrier key -> the static graph's label for every address with that key (module docstring)."""
    by_key: dict[int, set] = defaultdict(set)
    for addr, label in labels.items():
        by_key[(addr >> 3) & 31].add(label)
    out = {}
    for k, names in by_key.items():
        out[k] = next(iter(names)) if len(names) == 1 else f"mbarrier#{k} (collides: {', '.join(sorted(names))})"
    return out


def summarize_waits(arrays: dict, meta: dict, labels: dict | None = None, static_labels: set | None = None,
                    *, block_cycles: int = 200, warps: dict | None = None) -> dict:
    """Per-edge wait time of one wait-logged launch (see the module docstring)."""
    rpw = int(meta.get("rows_per_warpgroup", 1))  # 4: one row per warp, each weighs one warp
    warps = {r: 1 for r in WARPS} if rpw > 1 else (warps or WARPS)
    names = _mbar_names(labels or {})
    per = int(meta["slots_per_cta"])
    counts, records = arrays["counts"], arrays["records"]
    rows: list[dict[str, Any]] = []
    for s in np.flatnonzero(counts > 0):
        pairs = decode(records[s], int(min(counts[s], records.shape[1])))
        clocks = [v for e, v in pairs if e == CLOCK]
        globals_ = [v for e, v in pairs if e == GLOBAL]
        wg = (int(s) % per) // rpw
        if rpw > 1 and not any(e < CLOCK for e, _ in pairs):
            continue  # a warp that logged no wait and no arrival (the producer's exited warps): no active time
        rows.append({"slot": int(s), "cta": int(s) // per, "wg": wg, "role": _role(wg),
                     "pairs": pairs, "clocks": clocks, "globals": globals_})
    overhead = {"untraced_us": meta["untraced_ms"] * 1e3, "traced_us": meta["traced_ms"] * 1e3,
                "overhead_pct": meta["overhead_pct"], "reps": meta.get("reps"), "rounds": meta.get("rounds"),
                "max_abs_diff_traced_vs_untraced": meta.get("max_abs_diff_traced_vs_untraced")}
    if not rows:  # e.g. the named-barrier class of a rung without named barriers (v10)
        return {"version": meta.get("version"), "shape": meta.get("shape"), "config": meta.get("config"),
                "gpu": meta.get("gpu"), "ctas": meta.get("ctas"), "slots": 0, "trace_format": "waits",
                "rows_per_warpgroup": rpw, "records": 0, "full_slots": meta.get("full_slots", 0),
                "clock_ghz": meta.get("clock_rate_khz", 1_980_000) / 1e6, "clock_from": "no rows",
                "warps_per_wait": warps, "shortest_wait_cycles": {}, "block_cycles": block_cycles,
                "mbarrier_keys": {}, "overhead": overhead, "active_cycles": 0, "edges": [], "heaviest": None,
                "missing": "no wait or arrival in the wait log"}
    cta_end: dict[int, int] = {}
    for r in rows:
        if len(r["clocks"]) >= 2:
            cta_end[r["cta"]] = max(cta_end.get(r["cta"], 0), r["clocks"][-1])
    mb: dict[tuple[int, int], dict[str, set]] = defaultdict(lambda: defaultdict(set))
    nb: dict[tuple[int, int], set] = defaultdict(set)
    for r in rows:
        for e, _ in r["pairs"]:
            if MBAR_ARRIVE <= e < EXPECT_TX:
                mb[r["cta"], e - MBAR_ARRIVE][r["role"]].add("arrive")
            elif EXPECT_TX <= e < BAR_ARRIVE:
                mb[r["cta"], e - EXPECT_TX][r["role"]].add("expect_tx")
            elif BAR_ARRIVE <= e < BAR_ARRIVE + 16:
                nb[r["cta"], e - BAR_ARRIVE].add(r["wg"])
    agg: dict[tuple, dict] = {}
    shortest: dict[str, int] = {}
    active = 0
    by_role_active: dict[str, int] = defaultdict(int)
    for r in rows:
        if r["clocks"]:
            end = r["clocks"][-1] if len(r["clocks"]) >= 2 else cta_end.get(r["cta"], r["clocks"][0])
            span = max(0, end - r["clocks"][0])
            active += span * warps.get(r["role"], 1)
            by_role_active[r["role"]] += span
        for e, v in r["pairs"]:
            if e >= MBAR_ARRIVE:
                continue
            if e < BAR_SYNC:
                kind, barrier = "mbarrier", names.get(e, f"mbarrier#{e}")
                releaser = mbarrier_releaser(mb.get((r["cta"], e), {}))
            elif e < WGMMA:
                kind, bar_id = "named_barrier", e - BAR_SYNC
                barrier = _labels_for(static_labels, bar_id)
                releaser = named_releaser(nb.get((r["cta"], bar_id), set()), r["wg"], r["role"])
            else:
                kind, barrier, releaser = "wgmma_group", "wgmma group", TENSOR
            shortest[kind] = min(shortest.get(kind, v), v)
            g = agg.setdefault((r["role"], barrier, releaser), {"cycles": 0, "waits": 0, "blocking": 0, "max": 0})
            g["cycles"] += v
            g["waits"] += 1
            g["blocking"] += int(v > block_cycles)
            g["max"] = max(g["max"], v)
    ghz, clock_how = _clock_ghz(rows, meta)
    edges = []
    for (waiter, barrier, releaser), g in agg.items():
        wc = g["cycles"] * warps.get(waiter, 1)
        edges.append({"waiter": waiter, "barrier": barrier, "releaser": releaser, "cycles": int(g["cycles"]),
                      "warp_cycles": int(wc), "ns": g["cycles"] / ghz, "share": wc / active if active else 0.0,
                      "share_of_waiter": g["cycles"] / by_role_active[waiter] if by_role_active[waiter] else 0.0,
                      "waits": g["waits"], "blocking_waits": g["blocking"], "mean_cycles": g["cycles"] / g["waits"],
                      "max_cycles": int(g["max"])})
    edges.sort(key=lambda e: -e["warp_cycles"])
    return {
        "version": meta.get("version"), "shape": meta.get("shape"), "config": meta.get("config"),
        "gpu": meta.get("gpu"), "ctas": meta.get("ctas"), "slots": len(rows), "trace_format": "waits",
        "rows_per_warpgroup": rpw,
        "records": int(sum(len(r["pairs"]) for r in rows)), "full_slots": meta.get("full_slots", 0),
        "clock_ghz": ghz, "clock_from": clock_how, "warps_per_wait": warps,
        "shortest_wait_cycles": shortest, "block_cycles": block_cycles,
        "mbarrier_keys": {str(k): v for k, v in sorted(names.items())},
        "overhead": overhead, "active_cycles": int(active), "edges": edges, "heaviest": edges[0] if edges else None,
    }


def _clock_ghz(rows: list[dict], meta: dict) -> tuple[float, str]:
    """Cycles per ns: per row with a start and an end pair, (clock1 - clock0) / (global1 - global0); the median."""
    slopes = []
    for r in rows:
        if len(r["clocks"]) >= 2 and len(r["globals"]) >= 2:
            dc = (r["clocks"][-1] - r["clocks"][0]) & VALUE_MASK
            dg = (r["globals"][-1] - r["globals"][0]) & VALUE_MASK
            if dg > 5000 and 0.3 < dc / dg < 4.0:
                slopes.append(dc / dg)
    if len(slopes) >= 4:
        return float(statistics.median(slopes)), f"fitted on {len(slopes)} rows (globaltimer vs clock64)"
    return meta.get("clock_rate_khz", 1_980_000) / 1e6, "device attribute CLOCK_RATE (fewer than 4 rows with 2 pairs)"


def _edge_class(barrier: str) -> str:
    if barrier == "wgmma group":
        return "wgmma"
    return "named" if barrier.startswith("bar ") else "mbarrier"


def combine_classes(full: dict, parts: dict[str, dict]) -> dict:
    """Each edge weighed by the log that recorded its class alone (``parts``: class -> that log's summary; the
    least perturbed measurement of it), named with the all-class log's releaser (a one-class log has no
    arrivals). Edges are ranked by ``share`` (of each log's own active warp-cycles: the logs ran apart, with
    overheads of their own); an edge whose class has no log of its own keeps the full log's figures."""
    releaser = {(e["waiter"], e["barrier"]): e["releaser"] for e in full.get("edges", [])}
    edges = []
    for e in full.get("edges", []):
        if _edge_class(e["barrier"]) not in parts:
            edges.append({**e, "from": "all"})
    for cls, s in sorted(parts.items()):
        for e in s.get("edges", []):
            if _edge_class(e["barrier"]) != cls:
                continue
            edges.append({**e, "releaser": releaser.get((e["waiter"], e["barrier"]), e["releaser"]), "from": cls})
    edges.sort(key=lambda e: -e["share"])
    return {"edges": edges, "heaviest": edges[0] if edges else None,
            "overhead_pct": {cls: s["overhead"]["overhead_pct"] for cls, s in sorted(parts.items())}}
