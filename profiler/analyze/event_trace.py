"""The measured role trace of one launch (docs/trace.md): raw clock64 events -> Perfetto JSON + per-edge summary.

Input: what ``kernels/tracebuild.py`` wrote on the GPU (``<shape>.trace-raw.npz``): for every slot = (CTA,
warpgroup) the events its leader thread stamped (``kernels/common/sm90/trace.cuh``): ``t`` (clock64 cycles
of that SM), ``kind``, ``arg`` (an mbarrier's shared address with the waited parity in bit 31, a named
barrier's id, wgmma_wait's N), the first two events of each slot being ``%smid`` and one ``%globaltimer``
reading. A pure function of those arrays (no GPU, no ncu), so it runs on committed data.

* **Time axis.** clock64 is per SM; each slot's (clock64, globaltimer) pair places it on the global axis.
  The SM clock is fitted per SM from the pairs of the CTAs that ran one after another on it and, where the
  slots wrote one, each slot's end pair (trace.cuh's finish(): a clock64 and a globaltimer at the kernel's end;
  slope of globaltimer over clock64), the median over SMs; the device's nominal clock when no SM has two points
  (one CTA per SM and no end pair: the committed format-1 traces of persistent rungs).
* **Roles** are the warp-specialised family's (CONTRACT.md): warpgroup 0 the ``producer``, warpgroups
  1.. the ``consumer`` s, the names the static graph (:mod:`profiler.analyze.roles`) infers from setmaxnreg.
* **Edges** ``waiter —[barrier]→ releaser`` with the static graph's labels: an mbarrier by its address
  (``labels``: address -> the static graph's ring label, e.g. ``mbarrier@0x400×2``), released by the roles
  whose leader arrived on it (``arrive.expect_tx`` = ``TMA ← producer``); a named barrier by id (the static
  label ``bar N``, or ``bar (runtime id)`` where the SASS holds ids in registers) released by the other
  warpgroups that ``bar.arrive`` on it; a wgmma group wait by the tensor core. Weight: the cycles the
  leader spent inside the waits (begin to end), summed over slots (``cycles``), and the same times the warps
  that wait there (``warp_cycles``: what ncu's PC sampler sees, which samples warps uniformly in time): every
  warp of a consumer warpgroup executes each of these waits (4), of the producer only the elected thread's
  warp (1; its other warps have exited) — ``warps``. Shares are of all slots' active warp-cycles (first to
  last event); edges are ordered by ``warp_cycles``, so the heaviest edge compares with the static graph's.
* **Stamp cost.** A stamp is not free (the leader's bookkeeping takes a few hundred cycles on the H200), and a
  wait's begin stamp is taken before that bookkeeping, so every wait interval holds one stamp's cost. The
  cost is calibrated from the launch itself: the shortest wait of any role (a wait that found its barrier
  already complete lasts one stamp; the stamp is the same code in every role), ``stamp_cycles``; every wait
  is counted as its interval minus that (at least 0), ``raw_cycles`` keeps the interval, and
  ``heaviest_uncalibrated`` names the heaviest edge by raw intervals.
* **Trace format 2** (trace.cuh's parked stamps; ``trace_format`` in the summary): the events
  between a wgmma commit and the wait that retires it (the commit, the wgmma wait's begin, a wait_group N>0's
  end, every mbarrier arrive and bar.arrive) are *parked*: the leader reads the clock and stores the event in
  shared memory (no load, no global store), and the next ordinary stamp copies them to the slot, in order,
  with their own timestamps; their ``kind`` carries ``PARKED_BIT`` (masked off here). A wait whose begin was
  parked (every wgmma wait) holds a park's cost, calibrated alike as the shortest such wait
  (``park_cycles``), at most one ordinary stamp: a park leaves less work after its clock read than an ordinary
  stamp (a shared store; no global store, no branch), so a shortest parked wait longer than the stamp is one
  that blocked — no wgmma wait of the launch found its group complete, as where every wait follows its commit
  by one or two parked stamps and no kernel instruction (the committed format-2 v10: shortest 192 cycles, no
  parked wait under 150, the stamp 151; v12-v16: 26-39, most of them non-blocking), and the launch does not
  measure a park's cost; it is then bounded by the stamp (``park_bounded_by_stamp``, the shortest wait kept
  as ``park_shortest_wait_cycles``), the most a park can leave, so the wgmma waits are counted at their
  least. The others hold one ordinary stamp (``stamp_cycles``, a wait's begin copying the parked
  events out before its clock read). ``PARK_DROPPED`` events (arg = parked events the device lost to a full
  parking area) are counted into ``dropped_events``. Format 1 (the committed traces) has neither: every
  figure of it is computed as before.
* **wgmma group, untraced estimate.** The stamps a consumer takes between a wgmma commit and the wait on it
  give the tensor core free cycles, so the traced wgmma waits are shorter than the untraced ones (the edge
  the static graph names heaviest). Per wgmma wait (begin b, end e) with its group's commit stamp c (the
  last commit before b, or the (N+1)-th last for ``wait_group N``) and k stamps in [c, b): the consumer's
  untraced work between commit and wait is W = (b - c) - k·stamp, the tensor core's time D = e - c when the
  wait blocked, so the untraced wait is D - W = (e - b) + k·stamp (format 2: each parked stamp among the k
  counts ``park_cycles``, each ordinary one ``stamp``; where ``park_cycles`` is only the stamp's bound, a
  parked stamp counts 0 in the lower bound and the bound in the upper). A wait that did not block (interval within
  ``block_margin`` cycles of the shortest wgmma wait) gives only an upper bound ((e - b) + k·stamp) and 0 as
  the lower; ``wgmma_untraced`` reports both sums, times the consumer's warps, and whether that edge would be
  the heaviest against every other edge's calibrated warp-cycles (``agrees`` when even the lower bound is,
  ``disagrees`` when not even the upper bound is, else ``undetermined``). The other edges are left as
  measured: the producer's empty waits are, if anything, inflated by the slowed consumers; the Q wait at a
  CTA's start is not (Q is issued after the CTA barrier, before any consumer stamp).
* **Overlap**: for every TMA load (an ``arrive.expect_tx`` of the producer), its time in flight = from that
  issue to the first consumer's wait end on that barrier after it; the share of it during which no consumer
  of the CTA was blocked in any wait is the load latency hidden behind consumer work.
* **Critical path** through one steady-state iteration (the middle one of consumer 0's K/V loop, in every
  CTA): walking back from the iteration's end on consumer 0, a blocking wait (over ``block_cycles``) hands
  the path to what released it: a full barrier to the TMA load in flight since the producer's issue and on
  to the producer's own waits, an empty barrier to the consumer that arrived last, a named barrier to the
  warpgroup that arrived, a wgmma wait to the tensor core since the group's commit. Reported as the share of
  the iteration spent on each segment kind, the mean over CTAs, plus the median CTA's path itself.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

__all__ = ["KINDS", "load_raw", "summarize", "chrome_trace"]

KINDS = {0: "start", 1: "globaltimer", 2: "mbar_wait_begin", 3: "mbar_wait_end", 4: "mbar_arrive",
         5: "mbar_expect_tx", 6: "bar_sync_begin", 7: "bar_sync_end", 8: "bar_arrive",
         9: "wgmma_wait_begin", 10: "wgmma_wait_end", 11: "wgmma_commit", 12: "park_dropped", 13: "end"}
PARKED_BIT = 0x100  # format 2 (trace.cuh): kind | this = a parked stamp (clock + shared store, copied out later)
PARK_DROPPED = 12   # format 2: arg = parked events lost to a full parking area
END = 13            # the slot's last clock64 (arg %smid), a globaltimer event after it (trace.cuh finish())
_BEGIN_END = {2: 3, 6: 7, 9: 10}
_ADDR_MASK = 0x00FFFFFF  # the shared-window offset (cluster/CTA window bits above)
TENSOR = "tensor core (wgmma)"


def load_raw(path) -> tuple[dict, dict]:
    """(arrays, meta) of a ``.trace-raw.npz``."""
    with np.load(path) as z:
        arrays = {k: z[k] for k in ("counts", "t", "kind", "arg")}
        meta = json.loads(bytes(z["meta"]).decode())
    return arrays, meta


@dataclass
class Wait:
    slot: int
    kind: str          # mbarrier | named_barrier | wgmma_group
    key: int           # address / id / N
    begin: int
    end: int
    parity: int = 0
    stamp: int = 0  # the stamp cost calibrated for the role (summarize sets it)
    begin_parked: bool = False  # format 2: the begin was a parked stamp (its interval holds a park, not a stamp)

    @property
    def raw_cycles(self) -> int:
        return self.end - self.begin

    @property
    def cycles(self) -> int:
        return max(0, self.end - self.begin - self.stamp)


@dataclass
class Slot:
    index: int
    cta: int
    wg: int
    role: str
    sm: int
    clk0: int
    gt0: int
    events: list = field(default_factory=list)   # (t, kind, arg) after the two start events, kind less PARKED_BIT
    waits: list = field(default_factory=list)
    first: int = 0
    last: int = 0
    parked: set = field(default_factory=set)     # format 2: indices into events of the parked stamps
    dropped: int = 0                             # format 2: parked events the device could not keep
    clk1: int | None = None                      # the end pair (clock64, globaltimer), where the slot wrote one
    gt1: int | None = None


def _role(wg: int) -> str:
    return "producer" if wg == 0 else "consumer"


def _slots(arrays: dict, meta: dict) -> list[Slot]:
    counts, t, kind, arg = arrays["counts"], arrays["t"], arrays["kind"], arrays["arg"]
    per = int(meta["slots_per_cta"])
    cap = t.shape[1]
    out = []
    for s in np.flatnonzero(counts > 0):
        n = int(min(counts[s], cap))
        if n < 3 or kind[s, 0] != 0 or kind[s, 1] != 1:
            continue
        sl = Slot(int(s), int(s) // per, int(s) % per, _role(int(s) % per), int(arg[s, 0]), int(t[s, 0]),
                  int(t[s, 1]))
        ev: list[tuple[int, int, int]] = []
        parked: set[int] = set()
        for i in range(2, n):
            k = int(kind[s, i])
            if k & ~PARKED_BIT == PARK_DROPPED:
                sl.dropped += int(arg[s, i])
                continue
            if k == END:  # the end pair: not an event of the kernel's, a second point on the SM's clock line
                sl.clk1 = int(t[s, i])
                continue
            if k == 1 and sl.clk1 is not None and sl.gt1 is None:
                sl.gt1 = int(t[s, i])
                continue
            if k & PARKED_BIT:
                parked.add(len(ev))
            ev.append((int(t[s, i]), k & ~PARKED_BIT, int(arg[s, i])))
        if not ev:
            continue
        sl.events, sl.parked = ev, parked
        sl.first, sl.last = min(sl.clk0, ev[0][0]), ev[-1][0]
        open_: dict[int, tuple[int, int, bool]] = {}
        for j, (tt, k, a) in enumerate(ev):
            if k in _BEGIN_END:
                open_[_BEGIN_END[k]] = (tt, a, j in parked)
            elif k in open_ and k in (3, 7, 10):
                t0, a0, bp = open_.pop(k)
                wk = {3: "mbarrier", 7: "named_barrier", 10: "wgmma_group"}[k]
                key = (a0 & 0x7FFFFFFF) & _ADDR_MASK if k == 3 else a0
                sl.waits.append(Wait(sl.index, wk, key, t0, tt, (a0 >> 31) & 1 if k == 3 else 0, begin_parked=bp))
        out.append(sl)
    return out


def _stamp_cycles(slots: list[Slot]) -> dict[str, int]:
    """The shortest wait interval of the launch (any role) whose begin was an ordinary stamp: one stamp's cost
    (module docstring), per role. Format 1 has only ordinary stamps: every wait."""
    lo = min((w.raw_cycles for s in slots for w in s.waits if not w.begin_parked), default=0)
    return {s.role: lo for s in slots}


def _park_cycles(slots: list[Slot]) -> tuple[int | None, int | None]:
    """Format 2: (park cost, shortest parked wait). The shortest wait interval whose begin was parked (a wgmma
    wait that found its group done) is what a parked begin leaves inside the interval, bounded by the shortest
    wait whose begin was an ordinary stamp (module docstring: a longer one blocked). (None, None) for format 1
    (no parked stamp)."""
    shortest = min((w.raw_cycles for s in slots for w in s.waits if w.begin_parked), default=None)
    ordinary = min((w.raw_cycles for s in slots for w in s.waits if not w.begin_parked), default=None)
    if shortest is None or ordinary is None:
        return shortest, shortest
    return min(shortest, ordinary), shortest


def _calibrate(slots: list[Slot]) -> tuple[dict[str, int], int | None, int | None]:
    """(stamp per role, park cost, shortest parked wait), and each wait's ``stamp`` set from them."""
    stamp, (park, shortest) = _stamp_cycles(slots), _park_cycles(slots)
    for sl in slots:
        for w in sl.waits:
            w.stamp = park if w.begin_parked else stamp.get(sl.role, 0)
    return stamp, park, shortest


def _clock_ghz(slots: list[Slot], meta: dict) -> tuple[float, str]:
    """Cycles per ns: per SM, the slope of globaltimer over clock64 through its CTAs' start pairs and its slots'
    end pairs (trace.cuh's finish(): two points even where one persistent CTA ran on the SM); median over SMs."""
    by_sm: dict[int, dict[tuple, tuple[int, int]]] = defaultdict(dict)
    for s in slots:
        by_sm[s.sm].setdefault(("start", s.cta), (s.clk0, s.gt0))
        if s.clk1 is not None and s.gt1 is not None:
            by_sm[s.sm][("end", s.index)] = (s.clk1, s.gt1)
    slopes = []
    for ctas in by_sm.values():
        pts = sorted(ctas.values())
        if len(pts) >= 2 and pts[-1][1] - pts[0][1] > 5000:
            c = np.array([p[0] for p in pts], dtype=float)
            g = np.array([p[1] for p in pts], dtype=float)
            slope = np.polyfit(g - g[0], c - c[0], 1)[0]  # cycles per ns
            if 0.3 < slope < 4.0:
                slopes.append(slope)
    if len(slopes) >= 4:
        return float(statistics.median(slopes)), f"fitted on {len(slopes)} SMs (globaltimer vs clock64)"
    return meta.get("clock_rate_khz", 1_980_000) / 1e6, "device attribute CLOCK_RATE (no SM with 2 clock points)"


def _labels_for(static_labels: set | None, bar_id: int) -> str:
    if static_labels:
        if f"bar {bar_id}" in static_labels:
            return f"bar {bar_id}"
        if "bar (runtime id)" in static_labels:
            return "bar (runtime id)"
    return f"bar {bar_id}"


def _releasers(slots: list[Slot]) -> tuple[dict, dict]:
    """Per CTA: mbarrier address -> {role: {arrive, expect_tx}}, named id -> set of arriving wgs."""
    mb: dict[tuple[int, int], dict[str, set]] = defaultdict(lambda: defaultdict(set))
    nb: dict[tuple[int, int], set] = defaultdict(set)
    for s in slots:
        for _tt, k, a in s.events:
            if k == 4:
                mb[s.cta, a & _ADDR_MASK][s.role].add("arrive")
            elif k == 5:
                mb[s.cta, a & _ADDR_MASK][s.role].add("expect_tx")
            elif k == 8:
                nb[s.cta, a].add(s.wg)
    return mb, nb


def mbarrier_releaser(roles: dict) -> str:
    """Who releases an mbarrier, from the roles that arrived on it in one CTA (role -> {"arrive", "expect_tx"}):
    an ``arrive.expect_tx`` is a TMA load issued by that role (``TMA ← producer``), a plain arrive the role."""
    tx = sorted(r for r, kinds in roles.items() if "expect_tx" in kinds)
    plain = sorted(r for r, kinds in roles.items() if "arrive" in kinds and r not in tx)
    parts = ([f"TMA ← {'+'.join(tx)}"] if tx else []) + plain
    return " + ".join(parts) if parts else "unresolved"


def named_releaser(arriving_wgs, wg: int, role: str, wg_role=None) -> str:
    """Who releases a named barrier that warpgroup ``wg`` (of ``role``) waits on: the other warpgroups that
    ``bar.arrive`` on it in the same CTA."""
    wg_role = wg_role or _role
    wgs = sorted(set(arriving_wgs) - {wg})
    rel = sorted({wg_role(g) + (" (other warpgroup)" if wg_role(g) == role else "") for g in wgs})
    return " + ".join(rel) if rel else "unresolved"


def _edge_of(w: Wait, s: Slot, mb, nb, labels: dict, static_labels: set | None, wg_role) -> tuple[str, str]:
    if w.kind == "wgmma_group":
        return "wgmma group", TENSOR
    if w.kind == "named_barrier":
        return _labels_for(static_labels, w.key), named_releaser(nb.get((s.cta, w.key), set()), s.wg, s.role, wg_role)
    return labels.get(w.key, f"mbarrier@{w.key:#x}"), mbarrier_releaser(mb.get((s.cta, w.key), {}))


WARPS = {"producer": 1, "consumer": 4}  # warps that execute each wait of the role (ws family, CONTRACT.md)


def summarize(arrays: dict, meta: dict, labels: dict | None = None, static_labels: set | None = None,
              *, block_cycles: int = 200, n_blocks: int | None = None, warps: dict | None = None) -> dict:
    """Per-edge wait time, overlap and critical path of one traced launch (see the module docstring).

    ``labels``: mbarrier address -> static label (from :func:`profiler.analyze.roles.mbarrier_labels`);
    ``static_labels``: every barrier label of the static graph (to name named barriers alike)."""
    labels = labels or {}
    warps = warps or WARPS
    slots = _slots(arrays, meta)
    if not slots:
        return {"version": meta.get("version"), "edges": [], "missing": "no events in the trace"}
    ghz, clock_how = _clock_ghz(slots, meta)
    stamp, park, park_shortest = _calibrate(slots)
    park_bounded = park is not None and park_shortest is not None and park < park_shortest  # module docstring
    mb, nb = _releasers(slots)
    wg_role = _role
    active = sum((s.last - s.first) * warps.get(s.role, 1) for s in slots)
    by_role_active: dict[str, int] = defaultdict(int)
    for s in slots:
        by_role_active[s.role] += s.last - s.first
    agg: dict[tuple, dict] = {}
    for s in slots:
        for w in s.waits:
            b, r = _edge_of(w, s, mb, nb, labels, static_labels, wg_role)
            g = agg.setdefault((s.role, b, r), {"cycles": 0, "raw": 0, "waits": 0, "blocking": 0})
            g["cycles"] += w.cycles
            g["raw"] += w.raw_cycles
            g["waits"] += 1
            g["blocking"] += int(w.cycles > block_cycles)
    edges = []
    for (waiter, barrier, releaser), g in agg.items():
        wc = g["cycles"] * warps.get(waiter, 1)
        edges.append({"waiter": waiter, "barrier": barrier, "releaser": releaser, "cycles": int(g["cycles"]),
                      "raw_cycles": int(g["raw"]), "warp_cycles": int(wc), "ns": g["cycles"] / ghz, "share": wc / active if active else 0.0,
                      "share_of_waiter": g["cycles"] / by_role_active[waiter] if by_role_active[waiter] else 0.0,
                      "waits": g["waits"], "blocking_waits": g["blocking"],
                      "mean_cycles": g["cycles"] / g["waits"]})
    raw_top = max(edges, key=lambda e: e["raw_cycles"] * warps.get(e["waiter"], 1), default=None)
    edges.sort(key=lambda e: -e["warp_cycles"])
    wgmma_est = _wgmma_untraced(slots, stamp.get("consumer", 0), edges, warps.get("consumer", 4), park=park,
                               park_lo=0 if park_bounded else park)
    overlap = _overlap(slots)
    crit = _critical(slots, mb, nb, labels, static_labels, block_cycles, n_blocks)
    spans = [(s.gt0 + (s.last - s.clk0) / ghz) - (s.gt0 - (s.clk0 - s.first) / ghz) for s in slots]
    return {
        "version": meta.get("version"), "shape": meta.get("shape"), "config": meta.get("config"),
        "gpu": meta.get("gpu"), "ctas": meta.get("ctas"), "slots": len(slots),
        "events": int(sum(len(s.events) + 2 for s in slots)),
        "dropped_events": meta.get("dropped_events", 0) + sum(s.dropped for s in slots),
        "clock_ghz": ghz, "clock_from": clock_how, "warps_per_wait": warps, "stamp_cycles": stamp,
        "overhead": {"untraced_us": meta["untraced_ms"] * 1e3, "traced_us": meta["traced_ms"] * 1e3,
                     "overhead_pct": meta["overhead_pct"], "reps": meta.get("reps"), "rounds": meta.get("rounds"),
                     "max_abs_diff_traced_vs_untraced": meta.get("max_abs_diff_traced_vs_untraced")},
        "active_cycles": int(active), "mean_slot_span_us": float(np.mean(spans)) / 1e3 if spans else None,
        "edges": edges, "heaviest": edges[0] if edges else None,
        "heaviest_uncalibrated": {k: raw_top[k] for k in ("waiter", "barrier", "releaser", "raw_cycles")} if raw_top else None,
        "wgmma_untraced": wgmma_est, "overlap": overlap, "critical_path": crit,
        **({"trace_format": 2, "park_cycles": park, "park_shortest_wait_cycles": park_shortest,
            "park_bounded_by_stamp": park_bounded,
            "parked_events": int(sum(len(s.parked) for s in slots))}
           if park is not None or any(s.parked for s in slots) else {}),
    }


def _wgmma_untraced(slots: list[Slot], stamp: int, edges: list[dict], n_warps: int, *,
                    block_margin: int = 64, park: int | None = None, park_lo: int | None = None) -> dict | None:
    """The consumers' wgmma-group waits as the untraced kernel would have them (module docstring). Format 2:
    a parked stamp between commit and wait gives the tensor core ``park`` cycles (``park_lo`` in the lower
    bound: 0 where the park's cost is only bounded), an ordinary one ``stamp``."""
    import bisect

    waits = [(s, w) for s in slots if s.role == "consumer" for w in s.waits if w.kind == "wgmma_group"]
    if not waits:
        return None
    shortest = min(w.raw_cycles for _, w in waits)
    lo = hi = blocked = 0
    ks, given = [], []
    for s, w in waits:
        ts = [e[0] for e in s.events]
        commits = [e[0] for e in s.events if e[1] == 11 and e[0] < w.begin]
        if len(commits) <= w.key:
            continue
        c = commits[-1 - w.key]
        i0, i1 = bisect.bisect_left(ts, c), bisect.bisect_left(ts, w.begin)
        k = i1 - i0
        ks.append(k)
        g = sum(park if (i in s.parked and park is not None) else stamp for i in range(i0, i1))
        g_lo = sum(park_lo if (i in s.parked and park_lo is not None) else stamp for i in range(i0, i1))
        given.append(g)
        est = w.raw_cycles + g
        hi += est
        if w.raw_cycles > shortest + block_margin:
            lo += w.raw_cycles + g_lo
            blocked += 1
    others = [e for e in edges if not (e["waiter"] == "consumer" and e["barrier"] == "wgmma group")]
    top = max(others, key=lambda e: e["warp_cycles"], default=None)
    bar = top["warp_cycles"] if top else 0
    verdict = "agrees" if lo * n_warps > bar else "disagrees" if hi * n_warps < bar else "undetermined"
    extra = {"stamp_cycles_between_commit_and_wait_median": float(np.median(given)) if given else None} if park is not None else {}
    return {**extra, "waits": len(ks), "blocked_waits": blocked, "stamps_between_commit_and_wait_median": float(np.median(ks)) if ks else None,
            "shortest_wait_cycles": int(shortest), "block_margin": block_margin, "cycles_lo": int(lo), "cycles_hi": int(hi),
            "warp_cycles_lo": int(lo * n_warps), "warp_cycles_hi": int(hi * n_warps),
            "heaviest_other": {k: top[k] for k in ("waiter", "barrier", "releaser", "warp_cycles")} if top else None,
            "heaviest_if_untraced": verdict}


def _blocked_intervals(slots: list[Slot]) -> dict[int, list[tuple[int, int]]]:
    """Per CTA, the consumers' wait intervals (any kind)."""
    out: dict[int, list] = defaultdict(list)
    for s in slots:
        if s.role == "consumer":
            out[s.cta] += [(w.begin, w.end) for w in s.waits]
    return out


def _covered(a: int, b: int, ivs: list[tuple[int, int]]) -> int:
    """Length of [a, b) covered by the union of intervals."""
    tot, cur = 0, a
    for x, y in sorted(ivs):
        if y <= cur or x >= b:
            continue
        x = max(x, cur)
        y = min(y, b)
        if y > x:
            tot += y - x
            cur = y
    return tot


def _overlap(slots: list[Slot]) -> dict:
    blocked = _blocked_intervals(slots)
    cons_waits: dict[tuple[int, int], list[int]] = defaultdict(list)  # (cta, addr) -> consumer wait ends
    for s in slots:
        if s.role == "consumer":
            for w in s.waits:
                if w.kind == "mbarrier":
                    cons_waits[s.cta, w.key].append(w.end)
    flight = hidden = loads = 0
    for s in slots:
        if s.role != "producer":
            continue
        for tt, k, a in s.events:
            if k != 5:
                continue
            ends = sorted(e for e in cons_waits.get((s.cta, a & _ADDR_MASK), []) if e >= tt)
            if not ends:
                continue
            loads += 1
            f = ends[0] - tt
            flight += f
            hidden += f - _covered(tt, ends[0], blocked[s.cta])
    prod_wait = sum(w.cycles for s in slots if s.role == "producer" for w in s.waits)
    prod_active = sum(s.last - s.first for s in slots if s.role == "producer")
    cons_mb = sum(w.cycles for s in slots if s.role == "consumer" for w in s.waits if w.kind == "mbarrier")
    cons_active = sum(s.last - s.first for s in slots if s.role == "consumer")
    return {"loads": loads, "load_in_flight_cycles": int(flight),
            "load_hidden_pct": 100.0 * hidden / flight if flight else None,
            "producer_waiting_pct": 100.0 * prod_wait / prod_active if prod_active else None,
            "consumer_mbarrier_waiting_pct": 100.0 * cons_mb / cons_active if cons_active else None}


def _critical(slots, mb, nb, labels, static_labels, block_cycles, n_blocks) -> dict:
    by_cta: dict[int, dict[int, Slot]] = defaultdict(dict)
    for s in slots:
        by_cta[s.cta][s.wg] = s
    shares: dict[str, list[float]] = defaultdict(list)
    paths = []
    for cta, wgs in sorted(by_cta.items()):
        c0 = wgs.get(1)
        if c0 is None or 0 not in wgs:
            continue
        # iterations: consumer 0's waits on the barrier it waits on most often (one per K/V tile)
        cnt: dict[int, list[Wait]] = defaultdict(list)
        for w in c0.waits:
            if w.kind == "mbarrier":
                cnt[labels.get(w.key, w.key)].append(w)
        if not cnt:
            continue
        ring = max(cnt.values(), key=len)
        starts = sorted(w.begin for w in ring)
        if len(starts) < 3:
            continue
        mid = len(starts) // 2
        t0, t1 = starts[mid - 1], starts[mid]
        path = _walk(wgs, c0, t0, t1, mb, nb, labels, static_labels, block_cycles)
        total = t1 - t0
        if total <= 0:
            continue
        acc: dict[str, int] = defaultdict(int)
        for seg in path:
            acc[seg["what"]] += seg["cycles"]
        for k2, v in acc.items():
            shares[k2].append(v / total)
        for k2 in list(shares):
            if k2 not in acc:
                shares[k2].append(0.0)
        paths.append((total, cta, path))
    if not paths:
        return {"missing": "no CTA with 3 or more loop iterations on consumer 0"}
    n = len(paths)
    mean = {k: float(np.sum(v)) / n for k, v in shares.items()}
    paths.sort(key=lambda p: p[0])
    total, cta, path = paths[len(paths) // 2]
    return {"ctas": n, "iteration_cycles_median": int(total), "mean_share": dict(sorted(mean.items(), key=lambda kv: -kv[1])),
            "median_cta": cta, "median_path": path}


def _last_before(events, kinds, key, t, mask=None):
    best = None
    for tt, k, a in events:
        if tt > t:
            break
        if k in kinds and ((a & mask) if mask else a) == key:
            best = tt
    return best


def _walk(wgs: dict, start_slot: Slot, t0: int, t1: int, mb, nb, labels, static_labels, block_cycles) -> list:
    """Segments of the critical path from t1 back to t0 (newest first), each {role, wg, what, cycles}."""
    segs = []
    slot, t = start_slot, t1
    guard = 0
    while t > t0 and guard < 200:
        guard += 1
        w = max((w for w in slot.waits if w.end <= t and w.end > t0), key=lambda w: w.end, default=None)
        if w is None:
            segs.append({"role": slot.role, "wg": slot.wg, "what": f"{slot.role} work", "cycles": t - t0})
            break
        if t > w.end:
            segs.append({"role": slot.role, "wg": slot.wg, "what": f"{slot.role} work", "cycles": t - w.end})
        t = w.end
        if w.cycles <= block_cycles:
            t = w.begin
            segs.append({"role": slot.role, "wg": slot.wg, "what": f"{slot.role} work", "cycles": w.raw_cycles})
            continue
        barrier, releaser = _edge_of(w, slot, mb, nb, labels, static_labels, _role)
        if w.kind == "wgmma_group":
            c = _last_before(slot.events, (11,), 0, w.begin)
            c = w.begin if c is None else c
            segs.append({"role": slot.role, "wg": slot.wg, "what": f"{TENSOR} (commit → wait end)",
                         "cycles": t - max(c, t0)})
            t = c
            continue
        if w.kind == "mbarrier":
            prod = wgs.get(0)
            issue = _last_before(prod.events, (5,), w.key, w.end, _ADDR_MASK) if prod else None
            if issue is not None and prod is not None and "TMA" in releaser:
                segs.append({"role": "TMA", "wg": 0, "what": f"TMA load in flight ({barrier})",
                             "cycles": t - max(issue, t0)})
                slot, t = prod, issue
                continue
            # released by a role's arrive: the last arriving warpgroup before the wait ended
            best = None
            for _g, s2 in wgs.items():
                if s2 is slot:
                    continue
                a = _last_before(s2.events, (4,), w.key, w.end, _ADDR_MASK)
                if a is not None and (best is None or a > best[0]):
                    best = (a, s2)
            if best is None:
                segs.append({"role": slot.role, "wg": slot.wg, "what": f"wait {barrier} (releaser unseen)",
                             "cycles": w.raw_cycles})
                t = w.begin
                continue
            segs.append({"role": slot.role, "wg": slot.wg, "what": f"wait {barrier} → {releaser}",
                         "cycles": t - max(best[0], t0)})
            slot, t = best[1], best[0]
            continue
        # named barrier: the other warpgroup's arrive
        best = None
        for _g, s2 in wgs.items():
            if s2 is slot:
                continue
            a = _last_before(s2.events, (8,), w.key, w.end)
            if a is not None and (best is None or a > best[0]):
                best = (a, s2)
        if best is None:
            segs.append({"role": slot.role, "wg": slot.wg, "what": f"wait {barrier} (releaser unseen)",
                         "cycles": w.raw_cycles})
            t = w.begin
            continue
        segs.append({"role": slot.role, "wg": slot.wg, "what": f"wait {barrier} → {releaser}",
                     "cycles": t - max(best[0], t0)})
        slot, t = best[1], best[0]
    return segs


def chrome_trace(arrays: dict, meta: dict, labels: dict | None = None, static_labels: set | None = None,
                 *, max_ctas: int | None = None) -> dict:
    """The Chrome/Perfetto trace (``traceEvents``) of a traced launch: one process per SM, one thread per
    (CTA, warpgroup) leader, waits as complete events named by barrier (args: releaser, cycles), arrives,
    TMA issues and wgmma commits as instant events. Times in µs from the first event."""
    labels = labels or {}
    slots = _slots(arrays, meta)
    if max_ctas is not None:
        keep = sorted({s.cta for s in slots})[:max_ctas]
        slots = [s for s in slots if s.cta in set(keep)]
    ghz, how = _clock_ghz(slots, meta)
    _calibrate(slots)
    mb, nb = _releasers(slots)
    t_min = min(s.gt0 - (s.clk0 - s.first) / ghz for s in slots) if slots else 0

    def us(s: Slot, t: int) -> float:
        return round((s.gt0 + (t - s.clk0) / ghz - t_min) / 1e3, 4)

    ev: list[dict] = []
    for sm in sorted({s.sm for s in slots}):
        ev.append({"ph": "M", "name": "process_name", "pid": sm, "args": {"name": f"SM {sm}"}})
    for s in slots:
        tid = s.cta * 8 + s.wg
        ev.append({"ph": "M", "name": "thread_name", "pid": s.sm, "tid": tid,
                   "args": {"name": f"CTA {s.cta} · {s.role} (wg{s.wg})"}})
        for w in s.waits:
            b, r = _edge_of(w, s, mb, nb, labels, static_labels, _role)
            ev.append({"ph": "X", "name": f"wait {b}", "cat": w.kind, "pid": s.sm, "tid": tid,
                       "ts": us(s, w.begin), "dur": round(w.raw_cycles / ghz / 1e3, 4),
                       "args": {"releaser": r, "cycles": w.raw_cycles, "cycles_less_stamp": w.cycles,
                                **({"begin_parked": True} if w.begin_parked else {})}})
        for j, (tt, k, a) in enumerate(s.events):
            if k in (4, 5, 8, 11):
                name = {4: "arrive", 5: "TMA issue (expect_tx)", 8: "bar.arrive", 11: "wgmma commit"}[k]
                what = (labels.get(a & _ADDR_MASK, f"mbarrier@{a & _ADDR_MASK:#x}") if k in (4, 5)
                        else f"bar {a}" if k == 8 else "")
                ev.append({"ph": "i", "s": "t", "name": f"{name} {what}".strip(), "cat": KINDS[k], "pid": s.sm,
                           "tid": tid, "ts": us(s, tt), **({"args": {"parked": True}} if j in s.parked else {})})
    return {"traceEvents": ev, "displayTimeUnit": "ns",
            "otherData": {"version": meta.get("version"), "shape": meta.get("shape"), "clock_ghz": ghz,
                          "clock_from": how, "source": "whowaits trace (clock64 per SM, globaltimer per slot)"}}
