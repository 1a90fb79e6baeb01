"""Diff two versions' bottlenecks: stall breakdowns, who waits on whom, SSC, barriers, tensor
utilisation, roofline point and duration, each change marked significant or within noise.

:func:`diff` is a pure function of two summaries (launch summaries, docs/contract.md; e.g. from
:func:`profiler.compare.subjects.load`); the CLI and the notebooks only render what it returns.
Shares are fractions of all stall samples of a launch; changes are ``B - A``; intervals come from
:mod:`profiler.compare.stats` (Wilson per share, Newcombe per change, Bonferroni per table).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from profiler.compare import stats
from profiler.compare.stats import fmt_ns, fmt_ratio
from profiler.errors import WhowaitsError
from profiler.names import LEVELS, NOT_WAITING
from profiler.schema import Summary

# NOT_WAITING (profiler.names): reasons that are not a wait on another instruction (``selected``: the
# warp issued; ``not_selected``: it was eligible but another warp issued). They stay in every table but
# are never named the *top waiter*.

PHASE_COLUMNS = ["phase", "share_a", "share_b", "delta", "duration_ns_a", "duration_ns_b", "significant"]

SHARE_COLUMNS = ["samples_a", "samples_b", "share_a", "share_b", "lo_a", "hi_a", "lo_b", "hi_b",
                 "delta", "delta_lo", "delta_hi", "significant"]


@dataclass
class Diff:
    """Everything ``whowaits diff`` shows. Frames (all shares are fractions, ``delta = B - A``):

    - ``stalls``: reason + :data:`SHARE_COLUMNS`, one row per reason sampled in A or B, by max share.
    - ``classes``: class, top_reason_a, top_reason_b + :data:`SHARE_COLUMNS` (who waits, per opcode class).
    - ``waits``: class, reason + :data:`SHARE_COLUMNS` (opcode class x reason).
    - ``waits_on``: class, reason, producer (base opcode of the producer instruction) +
      :data:`SHARE_COLUMNS`: who waits on whom, scoreboard stalls by producer (summary ``waits_on``;
      samples split among candidate producers are rounded).
    - ``ssc``: class + :data:`SHARE_COLUMNS`, short-scoreboard samples per class (the first row,
      class ``all``, is SSC's share of all samples); shares of the class rows are of all samples.
    - ``barriers``: kind (static|executed), opcode, a, b, ratio (b / a; None where a is 0 or unknown),
      significant (static: any difference, the counts are exact; executed: beyond the ±5% band).
    - ``metrics``: metric, a, b, ratio, significant: duration, TFLOPS, tensor pipe % (of the path's own
      peak), tensor roof % (of the GPU's dense tensor roof: one scale for both paths), compute roof, tensor path,
      FLOPs, bytes and intensity per level (L1, L2, DRAM and shared memory), LDSM conflict ways and
      bank conflicts, DRAM and L2 throughput as % of peak, the L2 read fan-out (``l2_read_fanout``: SMs served per
      L2 read; ``l2_read_bytes``, ``l2_read_delivered_bytes``, ``l2_read_miss_share``, ``l2_read_multicast_share``:
      summary ``roofline.l2_reads``; null on both sides of reports without its counters, and then not in the
      table), stall cycles per issue, launch shape. Counters are one
      run each, so a change counts as significant beyond the run-to-run band
      (:data:`~profiler.compare.stats.DURATION_NOISE`, ±5%); None where a side is unknown.
    - ``regions``: region, source_a, source_b + :data:`SHARE_COLUMNS`: samples by source region (summary
      ``regions``; compared by name, the same vocabulary in every version).
    - ``phases``: phase (ramp|steady|tail, then dips: the steady state's dips, their lost activity as a share
      and as time), share_a, share_b, delta, duration_ns_a, duration_ns_b, significant (beyond two PM
      intervals of the kernel's time: the boundaries are known to one sample).
    ``verdict`` is one sentence (the time, the top waiter, then the region that moved most and a changed
    ramp or tail); ``top_a``/``top_b`` the top waiters ({class, reason, share});
    ``warnings`` the confounds (:mod:`profiler.compare.confound`); ``notes`` what could not be compared.
    """

    a: str
    b: str
    stalls: pd.DataFrame
    classes: pd.DataFrame
    waits: pd.DataFrame
    ssc: pd.DataFrame
    barriers: pd.DataFrame
    metrics: pd.DataFrame
    verdict: str
    top_a: dict | None
    top_b: dict | None
    speedup: float | None
    warnings: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    waits_on: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["class", "reason", "producer"]))
    regions: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["region", "source_a", "source_b"]))
    phases: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=PHASE_COLUMNS))
    timeline_a: dict | None = None
    timeline_b: dict | None = None

    TABLES = ("metrics", "stalls", "classes", "waits", "waits_on", "ssc", "barriers", "regions", "phases")

    def to_dict(self) -> dict:
        """JSON-ready: every frame as a list of records (NaN -> None)."""
        out = {"a": self.a, "b": self.b, "verdict": self.verdict, "speedup": self.speedup,
               "top_a": self.top_a, "top_b": self.top_b, "warnings": self.warnings, "notes": self.notes}
        for name in self.TABLES:
            out[name] = records(getattr(self, name))
        out["timeline_a"], out["timeline_b"] = self.timeline_a, self.timeline_b
        return out

    def long_frame(self) -> pd.DataFrame:
        """All tables stacked, with a leading ``table`` column (the CSV form)."""
        parts = [getattr(self, n).assign(table=n) for n in self.TABLES if len(getattr(self, n))]
        if not parts:
            return pd.DataFrame(columns=["table"])
        df = pd.concat(parts, ignore_index=True, sort=False)
        return df[["table"] + [c for c in df.columns if c != "table"]]


def records(df: pd.DataFrame) -> list[dict]:
    """Frame rows as plain-Python dicts (numpy scalars unwrapped, NaN and ±inf -> None: no format prints a
    non-finite number)."""
    out = []
    for row in df.to_dict(orient="records"):
        clean = {}
        for k, v in row.items():
            if isinstance(v, np.generic):
                v = v.item()
            if isinstance(v, float) and not np.isfinite(v):
                v = None
            clean[k] = v
        out.append(clean)
    return out


def total_samples(summary: dict) -> int:
    """All stall samples of a launch: the denominator of every share."""
    return int(sum(v or 0 for v in (summary.get("stall_samples") or {}).values()))


def _share_frame(keys: list[str], rows_a: dict, rows_b: dict, n_a: int, n_b: int) -> pd.DataFrame:
    idx = list(dict.fromkeys(list(rows_a) + list(rows_b)))
    if not idx:
        return pd.DataFrame(columns=keys + SHARE_COLUMNS)
    ka = np.array([rows_a.get(i, 0) for i in idx], dtype=float)
    kb = np.array([rows_b.get(i, 0) for i in idx], dtype=float)
    for k, n, side in ((ka, n_a, "A"), (kb, n_b, "B")):
        if n and k.max() > n:
            raise WhowaitsError(f"inconsistent summary of {side}: {int(k.max())} samples in one row of "
                                f"{'/'.join(keys)} but {n} stall samples in all")
    # no samples on a side: its shares are unknown (NaN), and no change is called significant
    s = stats.share_change(ka if n_a else np.zeros_like(ka), n_a, kb if n_b else np.zeros_like(kb), n_b)
    rows = [i if isinstance(i, tuple) else (i,) for i in idx]
    # built in one constructor: a column set at a time cost ~0.2 ms each, 13 per frame, 7 frames per diff
    df = pd.DataFrame({**{k: [r[j] for r in rows] for j, k in enumerate(keys)},
                       "samples_a": ka.astype(int), "samples_b": kb.astype(int),
                       **{c: s[c] for c in SHARE_COLUMNS[2:]}})
    df["significant"] = df["significant"].astype(bool)
    order = np.argsort(-np.fmax(np.nan_to_num(df["share_a"].to_numpy()), np.nan_to_num(df["share_b"].to_numpy())),
                       kind="stable")
    return df.iloc[order].reset_index(drop=True)


#: A top waiter is named only from enough samples. With at least MIN_TOTAL_SAMPLES stall samples in the launch
#: every share's Wilson 95% interval is at most ±10 points wide (±9.8 at a share of 50%), so "the top waiter
#: holds 40%" is a statement about the kernel, not about the sampler; and the top cell itself needs at least
#: MIN_TOP_SAMPLES samples (below 10 a count's Poisson 95% interval is wider than ±60% of it). A report of a
#: 10 µs launch sampled at ncu's default interval has a few dozen samples: it gets no top waiter, and says why.
MIN_TOTAL_SAMPLES = 100
MIN_TOP_SAMPLES = 10
#: Two cells are tied when their difference is within the 95% band of an even split of their pooled samples
#: (|k1 - k2| <= TIE_Z * sqrt(k1 + k2): a two-sided test of k1 = k2 given k1 + k2, normal approximation).
TIE_Z = 1.96


def _waiting_rows(summary: dict) -> list[dict]:
    """The cells that wait, by their samples off the kernel's exit path (``samples - at_exit``: a warp parked at
    the last barrier before EXIT has no work left, profiler.analyze.stalls.exit_tail), heaviest first; each row a
    copy whose ``samples`` are those."""
    rows = ({**w, "samples": (w.get("samples") or 0) - (w.get("at_exit") or 0)}
            for w in summary.get("who_waits") or [] if w.get("reason") not in NOT_WAITING)
    return sorted((w for w in rows if w["samples"] > 0),
                  key=lambda r: (-r["samples"], r.get("class") or "", r.get("reason") or ""))


def at_exit_samples(summary: dict) -> int:
    """Stall samples on the kernel's exit path (warps with no work left), over all who_waits cells."""
    return int(sum(w.get("at_exit") or 0 for w in summary.get("who_waits") or []))


def no_top_waiter(summary: dict) -> str | None:
    """Why a summary has no top waiter (None when it has one): no samples, or too few
    (:data:`MIN_TOTAL_SAMPLES`, :data:`MIN_TOP_SAMPLES`)."""
    n = total_samples(summary)
    rows = _waiting_rows(summary)
    if not n or not rows:
        return "no stall samples"
    if n < MIN_TOTAL_SAMPLES:
        return f"only {n} stall samples (a top waiter needs {MIN_TOTAL_SAMPLES})"
    if rows[0]["samples"] < MIN_TOP_SAMPLES:
        return f"the largest cell has {rows[0]['samples']} samples (a top waiter needs {MIN_TOP_SAMPLES})"
    return None


def top_waiter(summary: dict) -> dict | None:
    """The opcode class x reason with the most stall samples, ``selected``/``not_selected`` aside, and the samples
    of warps parked on the kernel's exit path (``at_exit``) left out of each cell.
    Returns ``{class, reason, samples, share, opcode, producer, tied_with}`` (share of all samples;
    ``opcode``: the opcode most of those samples sit on, where the summary says; ``producer``: the base opcode
    of the instruction most of them wait on, for scoreboard stalls where the summary has ``waits_on``, else
    None; ``tied_with``: the ``CLASS·reason`` of every other cell within :data:`TIE_Z` of it, [] when none),
    or None without enough samples (:func:`no_top_waiter` says why)."""
    if no_top_waiter(summary) is not None:
        return None
    n = total_samples(summary)
    rows = _waiting_rows(summary)
    w = rows[0]
    k = w["samples"]
    tied = [f"{r['class']}·{r['reason']}" for r in rows[1:] if k - r["samples"] <= TIE_Z * np.sqrt(k + r["samples"])]
    return {"class": w["class"], "reason": w["reason"], "samples": int(k), "share": k / n,
            "opcode": w.get("top_opcode"), "producer": top_producer(summary, w["class"], w["reason"]),
            "tied_with": tied}


def top_producer(summary: dict, cls: str, reason: str) -> str | None:
    """The producer opcode most of ``cls``·``reason``'s scoreboard samples wait on (summary
    ``waits_on``), or None."""
    got: dict[str, float] = {}
    for r in summary.get("waits_on") or []:
        if r.get("class") == cls and r.get("reason") == reason:
            got[r["producer_opcode"]] = got.get(r["producer_opcode"], 0.0) + (r.get("samples") or 0)
    return max(got, key=got.get) if got else None


def waiter_name(w: dict | None, opcode: bool = False) -> str:
    """``CLASS·reason`` (``CLASS·reason on OPCODE`` with ``opcode`` where the summary names it; ``, tied with
    X·r`` when another cell is within noise of it)."""
    if not w:
        return "nothing (too few stall samples, or none)"
    name = f"{w['class']}·{w['reason']}"
    if opcode and w.get("opcode"):
        name = f"{name} on {w['opcode']}"
    if opcode and w.get("producer"):
        name = f"{name} ← {w['producer']}"
    if w.get("tied_with"):
        name = f"{name} (tied with {', '.join(w['tied_with'][:3])}{' …' if len(w['tied_with']) > 3 else ''})"
    return name


def _pct(x) -> str:
    return "n/a" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{100 * x:.0f}%"


def _ratio(a, b):
    if a is None or b is None:
        return None
    try:
        return float(b) / float(a) if float(a) else None
    except (TypeError, ValueError):
        return None


def _beyond_noise(a, b, noise: float = stats.DURATION_NOISE):
    """Whether two counter values of one run each differ by more than the run-to-run band
    (None where either is unknown; equal values, zeros included, are never a change)."""
    if a is None or b is None or isinstance(a, str) or isinstance(b, str):
        return None
    if a == b:
        return False
    if not a:
        return True
    return abs(float(b) / float(a) - 1.0) > noise


def _metrics(sa: Summary, sb: Summary) -> pd.DataFrame:
    ra, rb = sa.get("roofline") or {}, sb.get("roofline") or {}
    dur = stats.duration_change(sa.get("duration_ns"), sb.get("duration_ns"))
    rows = [("duration_ns", sa.get("duration_ns"), sb.get("duration_ns"), dur["ratio"], dur["significant"]),
            ("achieved_tflops", ra.get("achieved_tflops"), rb.get("achieved_tflops"), None, None),
            ("tensor_pipe_pct", sa.get("tensor_pipe_pct"), sb.get("tensor_pipe_pct"), None, None),
            ("xu_pipe_pct", sa.get("xu_pipe_pct"), sb.get("xu_pipe_pct"), None, None),
            ("xu_pipe_pct_sass", sa.get("xu_pipe_pct_sass"), sb.get("xu_pipe_pct_sass"), None, None),
            ("tensor_roof_pct", sa.get("tensor_roof_pct"), sb.get("tensor_roof_pct"), None, None),
            ("compute_roof_tflops", (ra.get("ceilings") or {}).get("compute_tflops"),
             (rb.get("ceilings") or {}).get("compute_tflops"), None, None),
            ("tensor_path", sa.get("tensor_path"), sb.get("tensor_path"), None, None),
            ("flops", ra.get("flops"), rb.get("flops"), None, None)]
    for lv in LEVELS:
        rows.append((f"bytes_{lv}", (ra.get("bytes") or {}).get(lv), (rb.get("bytes") or {}).get(lv), None, None))
    for lv in LEVELS:
        rows.append((f"intensity_{lv}", (ra.get("intensity") or {}).get(lv), (rb.get("intensity") or {}).get(lv),
                     None, None))
    ta, tb = sa.get("throughput") or {}, sb.get("throughput") or {}
    for k in ("dram_pct_of_peak", "l2_pct_of_peak"):
        rows.append((k, ta.get(k), tb.get(k), None, None))
    l2a, l2b = ((r.get("l2_reads") or {}) for r in (ra, rb))
    for k in ("fanout", "bytes", "delivered_bytes", "miss_share", "multicast_share"):
        rows.append((f"l2_read_{k}", l2a.get(k), l2b.get(k), None, None))
    la_, lb_ = ((r.get("smem") or {}).get("ldsm") or {} for r in (ra, rb))
    rows.append(("ldsm_conflict_ways", la_.get("ways"), lb_.get("ways"), None, None))
    rows.append(("ldsm_bank_conflicts", la_.get("bank_conflicts"), lb_.get("bank_conflicts"), None, None))
    cpi_a, cpi_b = (None if c is None else sum(v for v in c.values() if v is not None)
                    for c in (sa.get("stall_cycles_per_issue"), sb.get("stall_cycles_per_issue")))
    rows.append(("stall_cycles_per_issue", cpi_a, cpi_b, None, None))
    la, lb = sa.get("launch") or {}, sb.get("launch") or {}
    for k in ("registers_per_thread", "shared_mem_bytes", "achieved_occupancy_pct", "waves_per_sm"):
        rows.append((k, la.get(k), lb.get(k), None, None))
    out = []
    for name, a, b, ratio, sig in rows:
        if name == "tensor_path":
            sig = None if a is None or b is None else a != b
        elif ratio is None:
            ratio = _ratio(a, b)
        if sig is None and name != "tensor_path":
            sig = _beyond_noise(a, b)
        out.append({"metric": name, "a": a, "b": b, "ratio": ratio, "significant": sig})
    return pd.DataFrame(out, columns=["metric", "a", "b", "ratio", "significant"])


def _waits_on_rows(summary: dict) -> dict:
    """(class, reason, producer opcode) -> samples (rounded) of a summary's ``waits_on``."""
    out: dict = {}
    for r in summary.get("waits_on") or []:
        k = (r["class"], r["reason"], r["producer_opcode"])
        out[k] = out.get(k, 0.0) + (r.get("samples") or 0)
    return {k: int(round(v)) for k, v in out.items()}


def _region_frame(a: dict, b: dict, na: int, nb: int) -> pd.DataFrame:
    ra = {r["name"]: r.get("samples") or 0 for r in a.get("regions") or []}
    rb = {r["name"]: r.get("samples") or 0 for r in b.get("regions") or []}
    na_r, nb_r = sum(ra.values()), sum(rb.values())
    fr = _share_frame(["region"], ra, rb, na_r if ra else 0, nb_r if rb else 0)
    src_a, src_b = _region_sources(a), _region_sources(b)
    fr.insert(1, "source_a", [src_a.get(n, _one_source(src_a)) for n in fr["region"]])
    fr.insert(2, "source_b", [src_b.get(n, _one_source(src_b)) for n in fr["region"]])
    return fr


def _region_sources(summary: dict) -> dict:
    return {r["name"]: r.get("source") for r in summary.get("regions") or []}


def _one_source(sources: dict) -> str | None:
    """The side's region source for a region it does not have (no samples there): its regions' one source
    (``inferred`` for cuDNN, which has no ``load_kv``), None when it has no regions or mixes sources."""
    kinds = set(sources.values())
    return kinds.pop() if len(kinds) == 1 else None


def _phase_frame(a: dict, b: dict) -> pd.DataFrame:
    from profiler.analyze.timeline import PHASES, phase_change_noise  # noqa: PLC0415

    ta, tb = a.get("timeline") or {}, b.get("timeline") or {}
    pa = {p["name"]: p for p in ta.get("phases") or []}
    pb = {p["name"]: p for p in tb.get("phases") or []}
    if not pa and not pb:
        return pd.DataFrame(columns=PHASE_COLUMNS)
    noise = phase_change_noise(ta, tb)
    rows = []
    for ph in PHASES:
        sa_, sb_ = (pa.get(ph) or {}).get("share"), (pb.get(ph) or {}).get("share")
        delta = None if sa_ is None or sb_ is None else sb_ - sa_
        rows.append({"phase": ph, "share_a": sa_, "share_b": sb_, "delta": delta,
                     "duration_ns_a": (pa.get(ph) or {}).get("duration_ns"),
                     "duration_ns_b": (pb.get(ph) or {}).get("duration_ns"),
                     "significant": None if delta is None or noise is None else abs(delta) > noise})
    # the steady state's dips (timeline.dip_share; summaries made before dips lack it: None)
    da, db = ta.get("dip_share"), tb.get("dip_share")
    delta = None if da is None or db is None else db - da
    rows.append({"phase": "dips", "share_a": da, "share_b": db, "delta": delta,
                 "duration_ns_a": None if da is None else da * (ta.get("duration_ns") or 0.0),
                 "duration_ns_b": None if db is None else db * (tb.get("duration_ns") or 0.0),
                 "significant": None if delta is None or noise is None else abs(delta) > noise})
    return pd.DataFrame(rows, columns=PHASE_COLUMNS)


def debug_notes(labelled: list) -> list[str]:
    """One note per summary of a ``-G`` debug build (``build.debug``): its times are not an optimised build's."""
    out = []
    for label, s in labelled:
        b = s.get("build") or {}
        if b.get("debug"):
            out.append(f"{label}: a -G debug build ({b.get('self_moves')} of {b.get('instructions')} instructions are "
                       "MOV Rn, Rn self-moves): optimisations off, its times say little about the optimised kernel")
    return out


def region_sentence(label_b: str, regions: pd.DataFrame) -> str | None:
    """``v06: softmax 31% → 19% of samples``: the region whose share moved most, when that move is
    significant (and both sides have regions)."""
    if regions is None or not len(regions):
        return None
    sig = regions[regions["significant"] & regions["share_a"].notna() & regions["share_b"].notna()
                  & (regions["region"] != "other")]
    if not len(sig):
        return None
    r = sig.iloc[int(np.argmax(np.abs(sig["delta"].to_numpy())))]
    kind = "" if r["source_a"] == r["source_b"] else f" (regions {r['source_a']} → {r['source_b']})"
    return f"{label_b}: {r['region']} {_pct(r['share_a'])} → {_pct(r['share_b'])} of samples{kind}"


def phase_sentence(phases: pd.DataFrame) -> str | None:
    """``the tail 13% → 5% of the kernel's time``: ramp and tail shares (and the steady state's dips) that
    changed beyond noise."""
    if phases is None or not len(phases):
        return None
    parts = []
    for _, r in phases.iterrows():
        if r["phase"] in ("ramp", "tail") and r["significant"] is True:
            parts.append(f"the {r['phase']} {_pct(r['share_a'])} → {_pct(r['share_b'])}")
        elif r["phase"] == "dips" and r["significant"] is True:
            parts.append(f"the steady state's dips {_pct(r['share_a'])} → {_pct(r['share_b'])}")
    return " and ".join(parts) + " of the kernel's time" if parts else None


def kernel_names(summary: Mapping) -> list[str]:
    """The function names of a summary's kernel(s) (a merged summary joins several with `` + ``)."""
    from profiler.compare.subjects import kernel_name  # noqa: PLC0415

    return list(dict.fromkeys(kernel_name(k) for k in str(summary.get("kernel") or "?").split(" + ")))


def same_kernel_names(a: Mapping, b: Mapping) -> bool:
    """Whether two summaries share a kernel function name (``flash_fwd`` in every rung of the ladder)."""
    return bool(set(kernel_names(a)) & set(kernel_names(b)))


def verdict(label_a: str, label_b: str, sa: dict, sb: dict, top_a: dict | None, top_b: dict | None,
            waits: pd.DataFrame | None = None, regions: pd.DataFrame | None = None,
            phases: pd.DataFrame | None = None, same_kernel: bool = True) -> str:
    """One sentence: the time change first, then where the top waiter went (with both shares). Different
    kernels (``same_kernel`` False) are not compared as versions: the sentence says so instead of a speed-up."""
    dur = stats.duration_change(sa.get("duration_ns"), sb.get("duration_ns"))
    times = f"{fmt_ns(sa.get('duration_ns'))} → {fmt_ns(sb.get('duration_ns'))}"
    if not same_kernel:
        head = (f"{label_b} and {label_a} are different kernels ({' + '.join(kernel_names(sb))} vs "
                f"{' + '.join(kernel_names(sa))}; {times}): not compared as versions")
    elif dur["ratio"] is None:
        head = f"{label_b} vs {label_a}: no duration to compare"
    elif not dur["significant"]:
        head = f"{label_b} runs as fast as {label_a} within noise (±{100 * stats.DURATION_NOISE:.0f}%, {times})"
    elif dur["speedup"] > 1:
        head = f"{label_b} is {fmt_ratio(dur['speedup'], 2)} faster than {label_a} ({times})"
    else:
        head = f"{label_b} is {fmt_ratio(1 / dur['speedup'], 2)} slower than {label_a} ({times})"

    def share_in(summary, w):
        n = total_samples(summary)
        if not w or not n:
            return None
        for r in summary.get("who_waits") or []:
            if r.get("class") == w["class"] and r.get("reason") == w["reason"]:
                return r["samples"] / n
        return 0.0

    if top_a is None or top_b is None:
        why = [f"{lb}: {no_top_waiter(s)}" for lb, s, w in ((label_a, sa, top_a), (label_b, sb, top_b)) if w is None]
        tail = "no top waiter to compare (" + "; ".join(why) + ")"
    elif (top_a["class"], top_a["reason"]) == (top_b["class"], top_b["reason"]):
        noise = ""
        if waits is not None and len(waits):
            hit = waits[(waits["class"] == top_a["class"]) & (waits["reason"] == top_a["reason"])]
            if len(hit) and not bool(hit["significant"].iloc[0]):
                noise = ", within noise"
        tail = f"the top waiter stays {waiter_name(top_b, True)} ({_pct(top_a['share'])} → {_pct(top_b['share'])}{noise})"
    else:
        tail = (f"the top waiter moved from {waiter_name(top_a, True)} ({_pct(top_a['share'])} → "
                f"{_pct(share_in(sb, top_a))}) to {waiter_name(top_b, True)} "
                f"({_pct(share_in(sa, top_b))} → {_pct(top_b['share'])})")
    extra = ""
    pa, pb = sa.get("tensor_path"), sb.get("tensor_path")
    if pa != pb and pa is not None and pb is not None:
        extra = f"; tensor path {pa} → {pb}"
    from profiler.analyze.overlap import step_sentence  # noqa: PLC0415

    for more in (region_sentence(label_b, regions), phase_sentence(phases),
                 step_sentence(label_b, sa.get("overlap"), sb.get("overlap"))):
        if more:
            extra += f"; {more}"
    return f"{head}; {tail}{extra}."


def diff(a: Summary, b: Summary, label_a: str = "A", label_b: str = "B", warnings: list | None = None,
         verbose: bool = False, same_kernel: bool | None = None) -> Diff:
    """Compare summary ``b`` against summary ``a`` (one launch each, or merged launches).

    ``warnings`` (the confound guard's findings) are carried into the result untouched. ``same_kernel``: whether
    A and B are versions of one kernel (None: when they share a kernel function name,
    :func:`same_kernel_names`); when not, no speed-up is given and the verdict says they are different kernels.
    """
    if same_kernel is None:
        same_kernel = same_kernel_names(a, b)
    na, nb = total_samples(a), total_samples(b)
    notes = []
    if not na or not nb:
        notes.append(f"no stall samples in {label_a if not na else label_b}: shares cannot be compared "
                     "(collect WarpStateStats/SourceCounters)")
    stalls = _share_frame(["reason"], {k: v or 0 for k, v in (a.get("stall_samples") or {}).items()},
                          {k: v or 0 for k, v in (b.get("stall_samples") or {}).items()}, na, nb)
    oa = {r["class"]: r.get("samples") or 0 for r in a.get("opcode_waits") or []}
    ob = {r["class"]: r.get("samples") or 0 for r in b.get("opcode_waits") or []}
    classes = _share_frame(["class"], oa, ob, na, nb)
    ta = {r["class"]: r.get("top_reason") for r in a.get("opcode_waits") or []}
    tb = {r["class"]: r.get("top_reason") for r in b.get("opcode_waits") or []}
    classes.insert(1, "top_reason_a", [ta.get(c) for c in classes["class"]])
    classes.insert(2, "top_reason_b", [tb.get(c) for c in classes["class"]])
    wa = {(r["class"], r["reason"]): r.get("samples") or 0 for r in a.get("who_waits") or []}
    wb = {(r["class"], r["reason"]): r.get("samples") or 0 for r in b.get("who_waits") or []}
    waits = _share_frame(["class", "reason"], wa, wb, na, nb)
    woa, wob = _waits_on_rows(a), _waits_on_rows(b)
    waits_on = _share_frame(["class", "reason", "producer"], woa, wob, na, nb)

    ssc_a, ssc_b = a.get("short_scoreboard") or {}, b.get("short_scoreboard") or {}
    head = _share_frame(["class"], {"all": ssc_a.get("samples") or 0}, {"all": ssc_b.get("samples") or 0}, na, nb)
    per = _share_frame(["class"], ssc_a.get("by_class") or {}, ssc_b.get("by_class") or {}, na, nb)
    ssc = pd.concat([head, per], ignore_index=True) if len(per) else head
    ssc["cycles_per_issue_a"] = [ssc_a.get("cycles_per_issue")] + [None] * (len(ssc) - 1)
    ssc["cycles_per_issue_b"] = [ssc_b.get("cycles_per_issue")] + [None] * (len(ssc) - 1)

    bar_rows = []
    for kind in ("static", "executed"):
        ba = ((a.get("barriers") or {}).get(kind)) or {}
        bb = ((b.get("barriers") or {}).get(kind)) or {}
        for op in sorted(set(ba) | set(bb)):
            va, vb = ba.get(op, 0), bb.get(op, 0)
            bar_rows.append({"kind": kind, "opcode": op, "a": va, "b": vb, "ratio": _ratio(va, vb),
                             # static counts are exact (the compiler's output); executed ones get the band
                             "significant": va != vb if kind == "static" else _beyond_noise(va, vb)})
    barriers = pd.DataFrame(bar_rows, columns=["kind", "opcode", "a", "b", "ratio", "significant"])

    metrics = _metrics(a, b)
    regions = _region_frame(a, b, na, nb)
    if len(regions) and set(regions["source_a"].dropna()) != set(regions["source_b"].dropna()):
        notes.append(f"regions are {'/'.join(sorted(set(regions['source_a'].dropna())))} in {label_a} and "
                     f"{'/'.join(sorted(set(regions['source_b'].dropna())))} in {label_b}: compared by name")
    phases = _phase_frame(a, b)
    top_a, top_b = top_waiter(a), top_waiter(b)
    dur = stats.duration_change(a.get("duration_ns"), b.get("duration_ns"))
    from profiler.compare.gaps import gap_lines  # noqa: PLC0415

    notes += gap_lines([(label_a, a), (label_b, b)], verbose=verbose)  # one line per report: what each lacks, said once
    notes += debug_notes([(label_a, a), (label_b, b)])
    return Diff(a=label_a, b=label_b, stalls=stalls, classes=classes, waits=waits, ssc=ssc, barriers=barriers,
                metrics=metrics,
                verdict=verdict(label_a, label_b, a, b, top_a, top_b, waits, regions, phases, same_kernel),
                top_a=top_a, top_b=top_b, speedup=dur["speedup"] if same_kernel else None, warnings=list(warnings or []), notes=notes,
                waits_on=waits_on, regions=regions, phases=phases,
                timeline_a=a.get("timeline"), timeline_b=b.get("timeline"))
