"""Read the fields the gate checks from a summary (:class:`profiler.schema.Summary`), by their contract names.

The one place that knows where a field sits in a summary: ``stall_share``, ``who_waits``, ``waits_on``
(every producer edge, never truncated), ``roofline.smem.ldsm.ways`` and ``missing``. Each reader returns
``(value, note)``; ``value`` is None when the summary cannot say (the note says why), never a silent 0.
"""

from __future__ import annotations

from profiler.check.policy import ShareKey
from profiler.compare.diff import total_samples
from profiler.compare.gaps import STAND_INS, optional
from profiler.names import NO_SECTION
from profiler.schema import Summary


def share(summary: Summary, key: ShareKey) -> tuple[float | None, str]:
    """The share of all stall samples that ``key`` names (a fraction), with a note."""
    n = total_samples(summary)
    if not n:
        return None, "no stall samples in the report (collect WarpStateStats/SourceCounters)"
    if key.cls is None:
        shares = summary.get("stall_share")
        if not isinstance(shares, dict):
            return None, "stall_share absent from the summary"
        value = shares.get(key.reason)
        if value is None:
            return None, f"the report does not sample stall reason {key.reason!r}"
        return float(value), ""
    if key.producer is None:
        rows = summary.get("who_waits")
        if rows is None:
            return None, "who_waits absent from the summary"
        got = sum(r.get("samples") or 0 for r in rows if r.get("class") == key.cls and r.get("reason") == key.reason)
        return got / n, ""
    rows = summary.get("waits_on")
    if rows is None:
        return None, "waits_on absent from the summary"
    got = sum(r.get("samples") or 0 for r in rows
              if (r.get("class"), r.get("reason"), r.get("producer_opcode")) == (key.cls, key.reason, key.producer))
    return got / n, ""


def bank_conflict_ways(summary: Summary) -> tuple[float | None, str]:
    """``roofline.smem.ldsm.ways`` (LDSM wavefronts per request); 1 with no ldmatrix executed."""
    ldsm = (((summary.get("roofline") or {}).get("smem") or {}).get("ldsm")) or {}
    ways = ldsm.get("ways")
    if ways is not None:
        return float(ways), ""
    if ldsm.get("wavefronts") == 0:
        return 1.0, "no ldmatrix executed"
    return None, "roofline.smem.ldsm absent (the report lacks the WhowaitsPipes section)"


def l2_fanout(summary: Summary) -> tuple[float | None, str]:
    """``roofline.l2_reads.fanout``: the bytes the SMs received from the crossbar over the bytes the L2 read for them
    (SMs served per L2 read); None with the reason when the report did not collect its counters."""
    l2 = ((summary.get("roofline") or {}).get("l2_reads")) or {}
    if l2.get("fanout") is not None:
        return float(l2["fanout"]), ""
    return None, ("roofline.l2_reads.fanout not collected (the WhowaitsRoofline section, or ncu's full set, "
                  "collects its counters)")


def missing(summary: Summary) -> list[str]:
    """The summary's ``missing`` entries as ``field (section)`` strings; a field whose stand-in has a value
    (:data:`profiler.compare.gaps.STAND_INS`: ``xu_pipe_pct`` by ``xu_pipe_pct_sass``) is not missing, nor is an
    optional view's field (:func:`profiler.compare.gaps.optional`: the L2 read fan-out)."""
    return [f"{m.get('field')} ({m.get('section')})" for m in summary.get("missing") or []
            if m.get("section") != NO_SECTION  # the kernel has none: no section would supply it
            and not optional(str(m.get("field") or ""))
            and not (m.get("field") in STAND_INS and summary.get(STAND_INS[m["field"]]) is not None)]


def collapsed_overlaps(summary: Summary) -> tuple[list[str] | None, str]:
    """The collapsed async-group overlaps of ``overlap`` as ``group wait@offset(N) -> next@offset`` strings
    ([] when none), with a note; None when the summary has no ``overlap`` key at all."""
    if "overlap" not in summary:
        return None, "overlap absent from the summary"
    sites = summary.get("overlap")
    if sites is None:
        return [], "no async-group wait in the kernel"
    return [f"{r['group']} wait@{r['offset']:#06x}(N={r['pending']}) -> "
            + ",".join(f"{o:#06x}" for o in r["next_offsets"]) for r in sites if r.get("collapsed")], ""
