"""Who waits on WHOM: the producer instruction a scoreboard stall waits for.

ncu samples a stalled warp at the instruction it is trying to issue (the consumer, or waiter). A
``short_scoreboard`` / ``long_scoreboard`` stall there means the consumer waits for an earlier
variable-latency instruction (the producer: LDSM, LDS, SHFL, MUFU … on the short scoreboard; LDG,
LDGSTS, global atomics … on the long one) that

* writes one of the consumer's source registers or predicates (read after write, ``raw``),
* writes one of its destination registers (write after write, ``waw``), or
* still has to read a register the consumer overwrites (write after read, ``war``: stores and
  other variable-latency instructions read their operands late).

The SASS text in a report carries no control codes (scoreboard bits), so the producer is found
from the register dataflow (operands and widths from :mod:`profiler.sass`). From the consumer,
the walk goes backwards over the control-flow graph of the SASS (:func:`profiler.sass.build_cfg`:
fall-through plus branch targets), nearest instruction first, preferring the loop's own previous
iteration to the way into the loop (an edge into a loop head from before it costs one "loop
entry"; candidates are taken from the fewest entries, i.e. the steady state), up to ``max_walk``
instructions. A register is settled by the first instruction that writes it (the producer when it
is a variable-latency instruction of the stall's scoreboard, otherwise there is none), and a source
register also by an instruction that reads it in between (that reader already waited for its
value). Destination registers (``waw``/``war``) are followed only ``dest_window`` instructions back.

A candidate is **retired** (it does not hold the consumer) when the path between it and the
consumer shows it had completed before the consumer issued, because an instruction on that path
waited for it (a warp issues in order, so whatever an earlier instruction waited for is done):

* its result was consumed: an instruction in between reads or overwrites a register it writes
  (a scoreboard covers all of an instruction's destination registers, so reading R10 of an
  ``LDSM … R8`` waits for R8..R11 as well);
* for a ``war`` candidate, its operands were read: an instruction in between overwrites a register
  it reads, or its result was consumed;
* its in-order group completed past it: instructions of one in-order group (``data/sass.toml``
  [in_order]: shared-memory instructions) complete in issue order, so once the walk has passed a
  later instruction of the group that the consumer waits for (a ``raw``/``waw`` candidate) or that
  was consumed in between, the earlier ones are complete when it is; the later one binds.

A stall right after ``DEPBAR.LE SBn, k`` (cp.async ``wait_group``; ncu samples it on the next
instruction) waits for the LDGSTS of the group committed by the (k+1)-th most recent ``LDGDEPBAR``
(dependency ``depbar``). The candidates left share the consumer's samples equally (they sit on
different paths, or in no order the SASS can decide). A consumer with none is ``unresolved``: its
samples are reported, never given to an invented producer (e.g. waits on a TMA store or fence,
which have no register to follow, or a candidate the path shows had completed).

The walk's limits live in ``data/producers.toml``; the ISA facts in ``data/sass.toml``.

Pure functions of a :class:`~profiler.report.Launch` (its ``sass`` frame) or of SASS text.
"""

from __future__ import annotations

import heapq
import re
from functools import lru_cache

import numpy as np
import pandas as pd

from profiler import metrics as M
from profiler.analyze._common import missing, with_missing
from profiler.sass import Instruction, build_cfg, late_read_mask, parse
from profiler.sass.instruction import GUARD

__all__ = [
    "parse_operands",
    "producer_pcs",
    "waits_on",
    "waits_on_unresolved",
    "SCOREBOARD_REASONS",
]

#: stall reason -> the scoreboard (``data/sass.toml`` [scoreboard] key) its producers set
SCOREBOARD_REASONS = {"short_scoreboard": "short", "long_scoreboard": "long"}

#: the operand parser, now :func:`profiler.sass.parse` (kept under its old name for callers)
parse_operands = parse

_GUARD = GUARD
_GROUP_BIT: dict[str, int] = {}


@lru_cache(maxsize=1)
def _cfg() -> dict:
    d = M._load("producers.toml")
    return {"version": d["version"], "max_walk": int(d["max_walk"]), "dest_window": int(d["dest_window"])}


def data_version() -> int:
    """``version`` of ``data/producers.toml``."""
    return int(_cfg()["version"])


def _group_bit(group: str | None) -> int:
    if group is None:
        return 0
    b = _GROUP_BIT.get(group)
    if b is None:
        b = _GROUP_BIT[group] = 1 << len(_GROUP_BIT)
    return b


_DEPBAR = re.compile(r"^DEPBAR\.LE\s+SB(\d+)\s*,\s*(0x[0-9a-fA-F]+|\d+)")


def _walk(c: int, preds):
    """Instructions before ``c`` in execution, as (index, level, distance, via), by (loop
    entries, distance); each instruction visited once, ``via`` the instruction it was reached
    from."""
    heap = [(0, 0, c, -1)]
    seen = {c}
    while heap:
        level, dist, i, via = heapq.heappop(heap)
        if i != c:
            yield i, level, dist, via
        for p, entry in preds[i]:
            if p not in seen:
                seen.add(p)
                heapq.heappush(heap, (level + entry, dist + 1, p, i))


def _find(c: int, kind: str, parsed: list, preds, texts, max_walk: int, dest_window: int = 1 << 30
          ) -> list[tuple[int, str]]:
    """Candidate producers (index, dependency) of consumer ``c`` on scoreboard ``kind``, retired
    ones left out (see the module docstring). ``parsed[i]`` is :func:`profiler.sass.parse` of
    ``texts[i]``, or None until first needed (filled in here)."""
    me = parsed[c]
    if me is None:
        me = parsed[c] = parse(texts[c])
    found: dict[int, tuple[int, str]] = {}  # index -> (level, dependency)
    # an explicit scoreboard wait (cp.async wait_group: DEPBAR.LE SBn, k) at or just before c
    for d in (c, c - 1):
        m = _DEPBAR.match(_GUARD.sub("", texts[d].strip(), count=1)) if d >= 0 else None
        if m and kind == "long":
            dep = _depbar_group(d, int(m.group(2), 0), preds, texts, max_walk)
            if dep:
                return [(k, "depbar") for k in dep]
    if not me.rmask and not me.wmask:
        return []
    # path state: registers still open (raw / destination), registers read (seen_r) and written
    # (seen_w) by the instructions between here and the consumer, in-order groups whose earlier
    # instructions are known complete (done: result written; rdone: operands read)
    late = late_read_mask()
    heap = [(0, 0, c, me.rmask, me.wmask, 0, 0, 0, 0)]
    seen = {c}
    steps = 0
    best = None
    push, pop = heapq.heappush, heapq.heappop
    while heap:
        level, dist, i, open_raw, open_dst, seen_r, seen_w, done, rdone = pop(heap)
        while True:  # follow a straight line without the heap while it has one predecessor
            if best is not None and level > best:
                heap = []
                break
            if i != c:
                steps += 1
                if steps > max_walk:
                    heap = []
                    break
                p = parsed[i]
                if p is None:
                    p = parsed[i] = parse(texts[i])
                wm = p.wmask
                gb = _group_bit(p.in_order)
                # completed before the consumer issued: consumed in between, or a later
                # instruction of its in-order group was waited for
                write_done = bool((seen_r | seen_w) & wm) or bool(done & gb)
                read_done = write_done or bool(seen_w & p.rmask & late) or bool(rdone & gb)
                is_prod = p.scoreboard == kind
                dep = None
                if open_raw:
                    hit = open_raw & wm
                    if hit:
                        if is_prod and not write_done:
                            dep = "raw"
                        open_raw &= ~hit
                    # an instruction in between already waited for these values
                    open_raw &= ~p.rmask
                if open_dst and dist > dest_window:
                    open_dst = 0
                if open_dst:
                    hit = open_dst & wm
                    if hit:
                        if is_prod and dep is None and not write_done:
                            dep = "waw"
                        open_dst &= ~hit
                    elif is_prod and dep is None and open_dst & p.rmask & late and not read_done:
                        dep = "war"  # a late operand read still pending
                if dep is not None:
                    found.setdefault(i, (level, dep))
                    best = level if best is None else min(best, level)
                if gb:  # earlier instructions of the group are complete when this one is
                    if write_done or dep == "raw" or dep == "waw":
                        done |= gb
                        rdone |= gb
                    elif read_done or dep == "war":
                        rdone |= gb
                seen_r |= p.rmask
                seen_w |= wm
                if not open_raw and not open_dst:
                    break  # this path is settled: do not walk further along it
            pr = preds[i]
            if len(pr) == 1:
                q, entry = pr[0]
                if q in seen:
                    break
                seen.add(q)
                if not entry and (not heap or heap[0][0] >= level):
                    i, dist = q, dist + 1
                    continue
                push(heap, (level + entry, dist + 1, q, open_raw, open_dst, seen_r, seen_w, done, rdone))
                break
            for q, entry in pr:
                if q not in seen:
                    seen.add(q)
                    push(heap, (level + entry, dist + 1, q, open_raw, open_dst, seen_r, seen_w, done, rdone))
            break
    return sorted((k, dep) for k, (lv, dep) in found.items() if lv == best)


def _depbar_group(d: int, pending: int, preds, texts, max_walk: int) -> list[int]:
    """The LDGSTS of the cp.async group that ``DEPBAR.LE SBn, pending`` at ``d`` waits for: walking
    back, the group committed by the (pending+1)-th most recent LDGDEPBAR."""
    commits = 0
    out = []
    steps = 0
    for k, level, _dist, _via in _walk(d, preds):
        steps += 1
        if steps > max_walk or level > 0 and commits == 0:
            break
        body = _GUARD.sub("", texts[k].strip(), count=1)
        if body.startswith("LDGDEPBAR"):
            commits += 1
            if commits > pending + 1:
                break
        elif body.startswith("LDGSTS") and commits == pending + 1:
            out.append(k)
    return sorted(out)


_PC_COLS = [
    "address", "offset", "sass", "opcode_class", "opcode", "reason", "samples", "weight",
    "producer_address", "producer_offset", "producer_sass", "producer_class", "producer_opcode",
    "dependency",
]


def producer_pcs(launch, reasons=tuple(SCOREBOARD_REASONS)) -> pd.DataFrame:
    """Per stalled PC and reason, the producer instruction(s) it waits on.

    One row per (consumer PC, reason, candidate producer) for every PC with samples of a
    scoreboard reason in ``reasons``; a consumer with no producer found has one row with null
    producer fields (unresolved). Rows are in consumer address order.

    Columns: ``address`` (uint64, the consumer's PC), ``offset`` (int64), ``sass`` (str),
    ``opcode_class`` (str), ``opcode`` (str, with modifiers), ``reason`` (str),
    ``samples`` (float64: the consumer's samples of ``reason`` times ``weight``),
    ``weight`` (float64: 1 / number of candidate producers; 1 when unresolved),
    ``producer_address`` (UInt64, <NA> when unresolved), ``producer_offset`` (Int64),
    ``producer_sass`` / ``producer_class`` / ``producer_opcode`` (str: SASS text, opcode class,
    base opcode; None when unresolved), ``dependency`` ("raw" / "waw" / "war"; None when
    unresolved).
    ``attrs["missing"]`` names SourceCounters when the report has no per-PC samples.
    """
    sass = launch.sass
    cols = [f"stall_{r}" for r in reasons if f"stall_{r}" in sass.columns]
    if len(sass) == 0 or not cols:
        return with_missing(
            pd.DataFrame(columns=_PC_COLS), [missing("waits_on", M.stall_config()["per_pc_section"])]
        )
    cfg = _cfg()
    texts = sass["sass"].to_numpy(dtype=object)
    addresses = sass["address"].to_numpy()
    offsets = sass["offset"].to_numpy()
    classes = sass["opcode_class"].to_numpy(dtype=object)
    opcodes = sass["opcode"].to_numpy(dtype=object)
    parsed: list[Instruction | None] = [None] * len(texts)  # filled as the walks reach them

    bases = sass["base"].to_numpy(dtype=object) if "base" in sass.columns else None
    preds = build_cfg(addresses, texts, bases).preds
    rows = []
    for col in cols:
        reason = col[len("stall_"):]
        kind = SCOREBOARD_REASONS[reason]
        vals = sass[col].to_numpy()
        for c in np.nonzero(vals)[0]:
            n = float(vals[c])
            cands = _find(int(c), kind, parsed, preds, texts, cfg["max_walk"], cfg["dest_window"])
            head = (addresses[c], offsets[c], texts[c], classes[c], opcodes[c], reason)
            if not cands:
                rows.append(head + (n, 1.0, None, None, None, None, None, None))
                continue
            w = 1.0 / len(cands)
            for k, dep in cands:
                rows.append(
                    head + (n * w, w, addresses[k], offsets[k], texts[k], classes[k],
                            (parsed[k] or parse(texts[k])).base, dep)
                )
    df = pd.DataFrame(rows, columns=_PC_COLS)
    df["address"] = df["address"].astype(np.uint64)
    df["offset"] = df["offset"].astype(np.int64)
    df["samples"] = df["samples"].astype(np.float64)
    df["weight"] = df["weight"].astype(np.float64)
    df["producer_address"] = pd.array(
        [None if v is None or pd.isna(v) else int(v) for v in df["producer_address"]], dtype="UInt64"
    )
    df["producer_offset"] = pd.array(
        [None if v is None or pd.isna(v) else int(v) for v in df["producer_offset"]], dtype="Int64"
    )
    df = df.sort_values(["address", "reason"], kind="stable").reset_index(drop=True)
    return with_missing(df, [])


_WO_COLS = ["class", "opcode", "reason", "producer_class", "producer_opcode", "samples", "share"]


def waits_on(launch, _pcs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Who waits on whom: scoreboard stall samples by consumer class x reason x producer,
    resolved producers only, sorted by samples (descending).

    Columns: ``class`` (str: the waiting instruction's opcode class), ``opcode`` (str: the
    consumer opcode with modifiers carrying most of the row's samples), ``reason`` (str),
    ``producer_class`` (str), ``producer_opcode`` (str: base opcode, e.g. ``LDSM``),
    ``samples`` (float64: split equally among candidate producers, so possibly fractional),
    ``share`` (float64: of ALL stall samples of the launch, every reason).
    ``attrs["unresolved"]``: {reason: samples} of consumers with no producer found;
    ``attrs["scoreboard_samples"]``: {reason: samples} of all stalls of those reasons (resolved +
    unresolved); ``attrs["missing"]`` as :func:`producer_pcs`.
    """
    pcs = producer_pcs(launch) if _pcs is None else _pcs
    df = pd.DataFrame(columns=_WO_COLS)
    if pcs.empty:
        df.attrs["unresolved"] = {}
        df.attrs["scoreboard_samples"] = {}
        return with_missing(df, pcs.attrs.get("missing", []))
    _, mat = launch.stall_matrix()
    total = float(mat.sum())
    cells: dict[tuple, float] = {}
    ops: dict[tuple, dict[str, float]] = {}
    unresolved: dict[str, float] = {}
    per_reason: dict[str, float] = {}
    for cls, op, reason, pcls, pop, n in zip(
        pcs["opcode_class"], pcs["opcode"], pcs["reason"], pcs["producer_class"],
        pcs["producer_opcode"], pcs["samples"].to_numpy(),
    ):
        n = float(n)
        per_reason[reason] = per_reason.get(reason, 0.0) + n
        if not isinstance(pcls, str):
            unresolved[reason] = unresolved.get(reason, 0.0) + n
            continue
        key = (cls, reason, pcls, pop)
        cells[key] = cells.get(key, 0.0) + n
        by_op = ops.setdefault(key, {})
        by_op[op] = by_op.get(op, 0.0) + n
    rows = [
        (k[0], max(ops[k].items(), key=lambda kv: (kv[1], kv[0]))[0], k[1], k[2], k[3], v,
         v / total if total else np.nan)
        for k, v in cells.items()
    ]
    rows.sort(key=lambda r: (-r[5], r[0], r[2], r[3], r[4]))
    df = pd.DataFrame(rows, columns=_WO_COLS)
    df["samples"] = df["samples"].astype(np.float64)
    df["share"] = df["share"].astype(np.float64)
    df.attrs["unresolved"] = {r: unresolved.get(r, 0.0) for r in sorted(per_reason)}
    df.attrs["scoreboard_samples"] = {r: per_reason[r] for r in sorted(per_reason)}
    return with_missing(df, [])


def waits_on_unresolved(waits: pd.DataFrame) -> dict[str, float]:
    """{reason: samples} that :func:`waits_on` could not give to a producer."""
    return dict(waits.attrs.get("unresolved", {}))
