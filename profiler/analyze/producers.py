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
samples are reported, never given to an invented producer (e.g. waits on a TMA store, which has no
register to follow, or a candidate the path shows had completed). A memory fence (MEMBAR, FENCE, the
CCTL of an ld.acquire: ``data/producers.toml`` [fences]) waits for every memory operation of the warp in
flight: its samples go to the pseudo-producer ``MEMORY`` / "memory in flight", not to unresolved.

The walk's limits live in ``data/producers.toml``; the ISA facts in ``data/sass.toml``.

Pure functions of a :class:`~profiler.report.Launch` (its ``sass`` frame) or of SASS text.
"""

from __future__ import annotations

import heapq
from functools import lru_cache

import numpy as np
import pandas as pd

from profiler import metrics as M
from profiler.analyze import buildcache
from profiler.analyze._common import missing, shared_cfg, with_missing
from profiler.sass import late_read_mask, parse, scoreboard_of

__all__ = [
    "SCOREBOARD_REASONS",
    "parse_operands",
    "producer_pcs",
    "wait_kind",
    "waits_on",
    "waits_on_unresolved",
]

#: stall reason -> the scoreboard (``data/sass.toml`` [scoreboard] key) its producers set
SCOREBOARD_REASONS = {"short_scoreboard": "short", "long_scoreboard": "long"}

#: the operand parser, now :func:`profiler.sass.parse` (kept under its old name for callers)
parse_operands = parse

_GROUP_BIT: dict[str, int] = {}


@lru_cache(maxsize=1)
def _cfg() -> dict:
    d = M._load("producers.toml")
    return {"max_walk": int(d["max_walk"]), "dest_window": int(d["dest_window"])}


def wait_kind(reason: str, producer_opcode: str | None) -> str | None:
    """What a scoreboard stall on ``producer_opcode`` is in words (``data/producers.toml``
    [wait_kinds]): ``("long_scoreboard", "SYNCS")`` -> ``"mbarrier wait"``; None when it is just
    the scoreboard wait ncu names."""
    if not producer_opcode:
        return None
    return _kinds().get(reason, {}).get(producer_opcode)


@lru_cache(maxsize=1)
def _fences() -> dict:
    """``[fences]`` of ``data/producers.toml``: the fence opcodes, and the pseudo-producer their waits go to."""
    d = M._load("producers.toml")["fences"]
    return {"opcodes": frozenset(d["opcodes"]), "producer_class": str(d["producer_class"]),
            "producer_opcode": str(d["producer_opcode"])}


@lru_cache(maxsize=1)
def _kinds() -> dict[str, dict[str, str]]:
    return {r: dict(m) for r, m in M._load("producers.toml").get("wait_kinds", {}).items()}


def _group_bit(group: str | None) -> int:
    if group is None:
        return 0
    b = _GROUP_BIT.get(group)
    if b is None:
        b = _GROUP_BIT[group] = 1 << len(_GROUP_BIT)
    return b


def _depbar_pending(text: str) -> int | None:
    """k of a ``DEPBAR.LE SBn, k`` (wait until at most k cp.async groups are pending), else None."""
    ins = parse(text)
    if ins.opcode != "DEPBAR.LE" or not ins.barriers or ins.barriers[0].kind != "sb":
        return None
    return ins.barriers[0].count


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


@lru_cache(maxsize=65536)
def _info(text: str) -> tuple[int, int, str | None, int]:
    """What the walk needs of one SASS line: (read mask, write mask, scoreboard, in-order group bit)."""
    ins = parse(text)
    return ins.rmask, ins.wmask, ins.scoreboard, _group_bit(ins.in_order)


def _producer_masks(texts, bases) -> dict[str, tuple[int, int]]:
    """{scoreboard: (registers some producer on it writes, registers one writes or reads late)} in
    the whole kernel: only these can ever give a candidate, so the walk follows no other."""
    late = late_read_mask()
    out: dict[str, tuple[int, int]] = {}
    if bases is None:
        bases = [M.base_opcode(t) for t in texts]
    for t, b in zip(texts, bases):
        kinds = scoreboard_of(b)
        if kinds is not None:
            rm, wm, _, _ = _info(t)
            for kind in kinds.split("|"):
                w, wl = out.get(kind, (0, 0))
                out[kind] = (w | wm, wl | wm | (rm & late))
    return out


def _find(c: int, kind: str, info: list, preds, texts, max_walk: int, dest_window: int = 1 << 30,
          masks: tuple[int, int] | None = None, single: list | None = None,
          bases: list | None = None) -> list[tuple[int, str]]:
    """Candidate producers (index, dependency) of consumer ``c`` on scoreboard ``kind``, retired
    ones left out (see the module docstring). ``info[i]`` is :func:`_info` of ``texts[i]``, or None
    until first needed (filled in here); ``masks`` is :func:`_producer_masks` (None: follow every
    register); ``single[i]`` is the one (predecessor, loop entry) of ``i``, or None (computed from
    ``preds`` when not given)."""
    me = info[c]
    if me is None:
        me = info[c] = _info(texts[c])
    found: dict[int, tuple[int, str]] = {}  # index -> (level, dependency)
    # an explicit scoreboard wait (cp.async wait_group: DEPBAR.LE SBn, k) at or just before c
    for d in (c, c - 1):
        pending = _depbar_pending(texts[d]) if d >= 0 and kind == "long" else None
        if pending is not None:
            dep = _depbar_group(d, pending, preds, texts, max_walk, bases)
            if dep:
                return [(k, "depbar") for k in dep]
    open_raw0, open_dst0 = me[0], me[1]
    if masks is not None:  # a register no producer of this scoreboard touches can give no candidate
        open_raw0 &= masks[0]
        open_dst0 &= masks[1]
    if not open_raw0 and not open_dst0:
        return []
    # Path state, besides the registers still open (raw / destination): registers read or written
    # (seen) and late-read registers written (seen_wl) by the instructions between here and the
    # consumer, and in-order groups whose earlier instructions are known complete (done: result
    # written; rdone: operands read).
    late = late_read_mask()
    heap = [(0, 0, c, open_raw0, open_dst0, 0, 0, 0, 0)]
    seen = {c}
    steps = 0
    best = None
    push, pop = heapq.heappush, heapq.heappop
    single = [pr[0] if len(pr) == 1 else None for pr in preds] if single is None else single
    while heap:
        level, dist, i, open_raw, open_dst, seen_any, seen_wl, done, rdone = pop(heap)
        if best is not None and level > best:
            break  # only candidates from the fewest loop entries are kept
        while True:  # follow a straight line without the heap while it has one predecessor
            if i != c:
                steps += 1
                if steps > max_walk:
                    heap = []
                    break
                p = info[i]
                if p is None:
                    p = info[i] = _info(texts[i])
                rm, wm, sb, gb = p
                is_prod = sb == kind or (sb is not None and "|" in sb and kind in sb)  # "long|short": either
                dep = None
                if open_raw:
                    hit = open_raw & wm
                    if hit:
                        # a producer is retired when it had completed: consumed in between, or a
                        # later instruction of its in-order group was waited for
                        if is_prod and not (seen_any & wm or done & gb):
                            dep = "raw"
                        open_raw &= ~hit
                    # an instruction in between already waited for these values
                    open_raw &= ~rm
                if open_dst and dist > dest_window:
                    open_dst = 0
                if open_dst:
                    hit = open_dst & wm
                    if hit:
                        if is_prod and dep is None and not (seen_any & wm or done & gb):
                            dep = "waw"
                        open_dst &= ~hit
                    elif (is_prod and dep is None and open_dst & rm & late
                          and not (seen_any & wm or done & gb or seen_wl & rm or rdone & gb)):
                        dep = "war"  # a late operand read still pending
                if dep is not None:
                    found.setdefault(i, (level, dep))
                    best = level if best is None else min(best, level)
                if gb:  # earlier instructions of the group are complete when this one is
                    if dep == "raw" or dep == "waw" or seen_any & wm or done & gb:
                        done |= gb
                        rdone |= gb
                    elif dep == "war" or seen_wl & rm:
                        rdone |= gb
                seen_any |= rm | wm
                seen_wl |= wm & late
                if not open_raw and not open_dst:
                    break  # this path is settled: do not walk further along it
            sp = single[i]
            if sp is not None:
                q, entry = sp
                if q in seen:
                    break
                seen.add(q)
                if not entry and (not heap or heap[0][0] >= level):
                    i, dist = q, dist + 1
                    continue
                push(heap, (level + entry, dist + 1, q, open_raw, open_dst, seen_any, seen_wl, done, rdone))
                break
            for q, entry in preds[i]:
                if q not in seen:
                    seen.add(q)
                    push(heap, (level + entry, dist + 1, q, open_raw, open_dst, seen_any, seen_wl, done, rdone))
            break
    return sorted((k, dep) for k, (lv, dep) in found.items() if lv == best)


def _depbar_group(d: int, pending: int, preds, texts, max_walk: int, bases: list | None = None) -> list[int]:
    """The LDGSTS of the cp.async group that ``DEPBAR.LE SBn, pending`` at ``d`` waits for: walking
    back, the group committed by the (pending+1)-th most recent LDGDEPBAR."""
    commits = 0
    out = []
    steps = 0
    for k, level, _dist, _via in _walk(d, preds):
        steps += 1
        if steps > max_walk or level > 0 and commits == 0:
            break
        base = parse(texts[k]).base if bases is None else bases[k]
        if base == "LDGDEPBAR":
            commits += 1
            if commits > pending + 1:
                break
        elif base == "LDGSTS" and commits == pending + 1:
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
    found = _pc_rows(launch, reasons)
    if found is None:
        return with_missing(
            pd.DataFrame(columns=_PC_COLS), [missing("waits_on", M.stall_config()["per_pc_section"])]
        )
    rows, addresses, offsets, texts, classes, opcodes = found
    cs = [r[0] for r in rows]
    ks = [r[4] for r in rows]
    df = pd.DataFrame({
        "address": addresses[cs].astype(np.uint64),
        "offset": offsets[cs].astype(np.int64),
        "sass": texts[cs],
        "opcode_class": classes[cs],
        "opcode": opcodes[cs],
        "reason": [r[1] for r in rows],
        "samples": np.array([r[2] for r in rows], dtype=np.float64),
        "weight": np.array([r[3] for r in rows], dtype=np.float64),
        "producer_address": pd.array([None if k is None else int(addresses[k]) for k in ks], dtype="UInt64"),
        "producer_offset": pd.array([None if k is None else int(offsets[k]) for k in ks], dtype="Int64"),
        "producer_sass": [None if k is None else texts[k] for k in ks],
        "producer_class": [None if k is None else classes[k] for k in ks],
        "producer_opcode": [r[6] for r in rows],
        "dependency": [r[5] for r in rows],
    }, columns=_PC_COLS)
    return with_missing(df, [])


def _pc_rows(launch, reasons=tuple(SCOREBOARD_REASONS)):
    """What :func:`producer_pcs` tabulates: ``(rows, addresses, offsets, texts, classes, opcodes)``,
    rows ``(consumer index, reason, samples, weight, producer index or None, dependency, producer base opcode)`` in
    consumer address order, then reason; None without per-PC samples."""
    sass = launch.sass
    # a column ncu left as NaN holds no samples (as in Launch.stall_matrix)
    cols = [f"stall_{r}" for r in reasons if f"stall_{r}" in sass.columns and not sass[f"stall_{r}"].isna().any()]
    if len(sass) == 0 or not cols:
        return None
    cfg = _cfg()
    texts = sass["sass"].to_numpy(dtype=object)
    addresses = sass["address"].to_numpy()
    offsets = sass["offset"].to_numpy()
    classes = sass["opcode_class"].to_numpy(dtype=object)
    opcodes = sass["opcode"].to_numpy(dtype=object)
    bases = sass["base"].to_numpy(dtype=object) if "base" in sass.columns else None
    # the walk of each consumer depends on the SASS alone: kept per build (profiler.analyze.buildcache),
    # "<scoreboard><consumer index>" -> [[producer index, dependency, its base opcode], ...]; the graph only
    # when one is new
    known = buildcache.part(launch, "producers", dict, lambda d: _check_known(d, len(texts)))
    walk: dict = {}

    def find(c: int, kind: str) -> list:
        if not walk:  # the graph, every slot's registers and the producers' masks: kept per build too
            preds, info, masks, pbases = buildcache.side(
                launch, "walk", lambda: _walk_data(launch, addresses, texts, bases),
                lambda d: _walk_decode(d, len(texts)))
            walk.update(preds=preds, single=[pr[0] if len(pr) == 1 else None for pr in preds],
                        masks=masks, info=list(info), bases=pbases)
        pb = walk["bases"]
        return [[k, dep, pb[k]]
                for k, dep in _find(c, kind, walk["info"], walk["preds"], texts, cfg["max_walk"],
                                    cfg["dest_window"], walk["masks"].get(kind, (0, 0)), walk["single"], pb)]

    rows = []
    for col in cols:
        reason = col[len("stall_"):]
        kind = SCOREBOARD_REASONS[reason]
        vals = sass[col].to_numpy()
        for c in np.nonzero(vals)[0]:
            c = int(c)
            n = float(vals[c])
            name = f"{kind}{c}"
            cands = known.get(name)
            if cands is None:
                cands = known[name] = find(c, kind)
                buildcache.touch(launch)
            if not cands:
                rows.append((c, reason, n, 1.0, None, None, None))
                continue
            w = 1.0 / len(cands)
            for k, dep, base in cands:
                rows.append((c, reason, n * w, w, k, dep, base))
    rows.sort(key=lambda r: (r[0], r[1]))  # consumer address order, then reason (stable)
    return rows, addresses, offsets, texts, classes, opcodes


def _walk_data(launch, addresses, texts, bases) -> dict:
    """What the producer walk reads of the SASS, as plain JSON: the control-flow graph's predecessors
    (``starts``, ``preds``, ``entries``: :func:`~.buildcache.ints`), every slot's (read mask, write mask,
    scoreboard, in-order group, base opcode as the parser reads it) (masks in hex) and :func:`_producer_masks`."""
    preds = shared_cfg(launch, addresses, texts, bases).preds
    starts = [0]
    for pr in preds:
        starts.append(starts[-1] + len(pr))
    info = []
    for t in texts:
        ins = parse(t)
        info.append([format(ins.rmask, "x"), format(ins.wmask, "x"), ins.scoreboard, ins.in_order, ins.base])
    masks = {k: [format(w, "x"), format(wl, "x")] for k, (w, wl) in _producer_masks(texts, bases).items()}
    return {"starts": buildcache.ints(starts), "preds": buildcache.ints([p for pr in preds for p, _ in pr]),
            "entries": buildcache.ints([e for pr in preds for _, e in pr]), "info": info, "masks": masks}


def _walk_decode(d: dict, n: int) -> tuple[list, list, dict, list[str]]:
    starts = buildcache.unints(d["starts"], n + 1).tolist()
    m = starts[-1]
    flat = buildcache.unints(d["preds"], m).tolist()
    entries = buildcache.unints(d["entries"], m).tolist()
    if starts[0] != 0 or any(b < a for a, b in zip(starts, starts[1:])) or any(not 0 <= p < n for p in flat):
        raise ValueError("walk: not this frame's")
    preds = [[(flat[k], entries[k]) for k in range(starts[i], starts[i + 1])] for i in range(n)]
    if len(d["info"]) != n:
        raise ValueError("walk: not this frame's")
    info = [(int(rm, 16), int(wm, 16), sb, _group_bit(grp)) for rm, wm, sb, grp, _ in d["info"]]
    masks = {str(k): (int(w, 16), int(wl, 16)) for k, (w, wl) in d["masks"].items()}
    return preds, info, masks, [str(x[4]) for x in d["info"]]


def _check_known(known: dict, n: int) -> dict:
    if not isinstance(known, dict) or not all(
            isinstance(v, list) and all(len(c) == 3 and isinstance(c[0], int) and 0 <= c[0] < n for c in v)
            for v in known.values()):
        raise TypeError("producers: {consumer: [[producer, dependency, base opcode], ...]} of this frame")
    return known


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
    if _pcs is None:
        # the rows themselves, not producer_pcs' frame: building its string columns and reading them
        # back cost ~10% of waits_on on the flash report (py-spy); the same rows in the same order
        found = _pc_rows(launch)
        if found is None or not found[0]:  # no per-PC samples, or no scoreboard wait: the frame's way
            pcs = producer_pcs(launch)
        else:
            rows, _, _, _, classes, opcodes = found
            pcs = None
            seq = ((classes[c], opcodes[c], reason, None if k is None else classes[k], base, n)
                   for c, reason, n, _, k, _, base in rows)
    else:
        pcs = _pcs
    if pcs is not None:
        if pcs.empty:
            df = pd.DataFrame(columns=_WO_COLS)  # only here: an empty frame costs ~0.2 ms
            df.attrs["unresolved"] = {}
            df.attrs["scoreboard_samples"] = {}
            return with_missing(df, pcs.attrs.get("missing", []))
        seq = zip(pcs["opcode_class"], pcs["opcode"], pcs["reason"], pcs["producer_class"],
                  pcs["producer_opcode"], pcs["samples"].to_numpy())
    _, mat = launch.stall_matrix()
    total = float(mat.sum())
    cells: dict[tuple, float] = {}
    ops: dict[tuple, dict[str, float]] = {}
    unresolved: dict[str, float] = {}
    per_reason: dict[str, float] = {}
    fences = _fences()
    fence_ops = fences["opcodes"]
    for cls, op, reason, pcls, pop, n in seq:
        n = float(n)
        per_reason[reason] = per_reason.get(reason, 0.0) + n
        if not isinstance(pcls, str):
            if str(op).split(".", 1)[0] not in fence_ops:
                unresolved[reason] = unresolved.get(reason, 0.0) + n
                continue
            # a memory fence waits for all the warp's memory operations in flight (data/producers.toml [fences])
            pcls, pop = fences["producer_class"], fences["producer_opcode"]
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
