"""What runs while the tensor core works: the asynchronous-group overlap view.

A kernel that issues asynchronous work (a wgmma group, ``HGMMA … .gsb0`` after ``WARPGROUP.ARRIVE``; a
cp.async group, ``LDGSTS`` … ``LDGDEPBAR``) and waits for it later (``WARPGROUP.DEPBAR.LE gsb0, N`` /
``DEPBAR.LE SB0, N``: at most N groups of that kind still pending) only gains from the asynchrony if work
runs between the commit and the wait. This view finds, for every wait site of the SASS (kinds, opcodes and
what does not count as work: ``data/overlap.toml``), along the control-flow graph (:mod:`profiler.sass.cfg`,
loops included):

* **overlap**: the instructions issued between the commit of the group the wait retires (the (N+1)-th
  commit of that kind walking backwards from the wait; on several paths, every path, e.g. the loop's
  previous iteration and the prologue) and the wait: what runs under that group;
* **between**: the instructions from the wait to the next wait(s) of the same kind on every path forward
  (``next_offsets``, ``next_pending``), e.g. what runs between ``wait_group 1`` and ``wait_group 0``;
  ``next_lower``: every path reaches a wait with a smaller N next, committing no new group on the way.

Both are counted statically (instructions by opcode class, ``data/opcode_classes.toml``) and dynamically
(the ``inst_executed`` of those PCs: warp-level executions; a PC on several paths counts once). Each wait
has its stall samples (ncu samples a warp held by a wait on the wait itself, as ``barrier`` for wgmma)
and their share of the kernel's samples.

A wait with N >= 1 that is followed on every path by a wait with a smaller N, with at most ``max_work``
counted instructions (``data/overlap.toml`` [idle]: moves, constant loads, uniform ops, branches, NOPs and
non-blocking arrivals do not count) executed between them per execution of the first wait, is a
**collapsed overlap** (``collapsed``): the source asked for work to run under the younger group and the
compiler scheduled the lower wait right behind (v14: ptxas hoisted ``wgmma.wait_group 0`` above the
softmax). ``between_work`` is that count (dynamic; static where the wait never executed).

Pure functions of a :class:`~profiler.report.Launch` (its ``sass`` frame).
"""

from __future__ import annotations

from collections import deque
from functools import lru_cache

import numpy as np
import pandas as pd

from profiler import metrics as M
from profiler.analyze import buildcache
from profiler.analyze._common import missing, shared_cfg, with_missing
from profiler.analyze.buildcache import bits, unbits
from profiler.names import CLASS_COLUMN, NO_SECTION
from profiler.sass import parse

__all__ = ["COLUMNS", "config", "is_collapsed", "merge_sites", "overlap", "overlap_json"]

#: columns of :func:`overlap`, one row per wait site in address order
COLUMNS = ("group", "address", "offset", "sass", "pending", "executed", "samples", "share", "top_reason",
           "commit_offsets", "overlap_static", "overlap_executed", "next_offsets", "next_pending", "next_lower",
           "between_static", "between_executed", "between_work_executed", "between_work", "collapsed")

NO_GROUPS = "the SASS commits no wgmma or cp.async group"


@lru_cache(maxsize=1)
def config() -> dict:
    """``data/overlap.toml`` as Python: groups {name: {engine, commit, commit_barrier, wait, barrier}}, idle
    classes and opcode prefixes, ``max_work``, ``headline_class``."""
    d = M._load("overlap.toml")
    groups = {k: {"engine": g["engine"], "commit": frozenset(g["commit"]), "commit_barrier": g["commit_barrier"],
                  "wait": g["wait"], "barrier": g["barrier"]} for k, g in d["groups"].items()}
    return {"groups": groups, "idle_classes": frozenset(d["idle"]["classes"]),
            "idle_opcodes": tuple(d["idle"]["opcodes"]), "max_work": int(d["collapse"]["max_work"]),
            "headline_class": d["sentences"]["headline_class"]}


@lru_cache(maxsize=4096)
def _idle(cls: str, opcode: str) -> bool:
    c = config()
    return cls in c["idle_classes"] or any(opcode == p or opcode.startswith(p + ".") for p in c["idle_opcodes"])


def is_collapsed(pending: int, next_lower: bool, between_work: float | None) -> bool:
    """The collapsed-overlap rule (module docstring): N >= 1, a smaller N next on every path, and at most
    ``max_work`` counted instructions between."""
    return bool(pending >= 1 and next_lower and between_work is not None and between_work <= config()["max_work"])


def _roles(texts, bases, opcodes) -> tuple[dict[int, str], dict[int, tuple[str, int]]]:
    """({index: group} of commits, {index: (group, N)} of waits) for the group kinds the SASS commits."""
    groups = config()["groups"]
    waits_of = {g["wait"].split(".", 1)[0] for g in groups.values()}
    relevant = waits_of.union(*(g["commit"] for g in groups.values()))
    commits: dict[int, str] = {}
    waits: dict[int, tuple[str, int]] = {}
    for i, b in enumerate(bases):
        if b not in relevant:
            continue
        t, op = texts[i], opcodes[i]
        for name, g in groups.items():
            if b in g["commit"]:
                if not g["commit_barrier"] or any(x.kind == g["commit_barrier"] for x in parse(t).barriers):
                    commits[i] = name
            elif op == g["wait"]:
                bar = next((x for x in parse(t).barriers if x.kind == g["barrier"]), None)
                if bar is not None and bar.count is not None:
                    waits[i] = (name, int(bar.count))
    present = set(commits.values())
    return commits, {i: w for i, w in waits.items() if w[0] in present}


def _retired(w: int, group: str, pending: int, preds, commits, waits) -> tuple[set[int], set[int]]:
    """(commits of the group wait ``w`` retires, instructions issued since them up to ``w``): backwards
    over every path, counting commits of ``group`` until the (N+1)-th. A path stops at an earlier wait of the
    group that already left no more than N pending at ``w`` (its N' plus the commits passed since <= N): on
    that path ``w`` retires nothing."""
    # states (instruction, commits passed so far); c never exceeds pending in the queue (the (N+1)-th commit
    # ends its path), so one visited bitmap per count
    seen = [bytearray(len(preds)) for _ in range(pending + 1)]
    q: deque = deque((p, 0) for p, _ in preds[w])
    found: set[int] = set()
    body: set[int] = set()
    pop, push = q.popleft, q.append
    while q:
        i, c = pop()
        sc = seen[c]
        if sc[i] or i == w:
            continue
        sc[i] = 1
        earlier = waits.get(i)
        if earlier is not None and earlier[0] == group and earlier[1] + c <= pending:
            continue
        if commits.get(i) == group:
            c += 1
            if c == pending + 1:
                found.add(i)
                continue
            sc = seen[c]
        body.add(i)
        for p, _ in preds[i]:
            if not sc[p]:
                push((p, c))
    return found, body - found


def _between(w: int, group: str, succs, waits) -> tuple[set[int], set[int], bool]:
    """(next waits of ``group`` on every path forward from ``w``, the instructions before them, whether some
    path ends (exit) or comes back to ``w`` without another wait)."""
    nxt: set[int] = set()
    body: set[int] = set()
    open_end = False
    state = bytearray(len(succs))  # 1: in body or nxt (w itself is never marked: reaching it is an open end)
    q: deque = deque(succs[w])
    if not succs[w]:
        open_end = True
    pop, push = q.popleft, q.append
    while q:
        i = pop()
        if i == w:
            open_end = True
            continue
        if state[i]:
            continue
        state[i] = 1
        got = waits.get(i)
        if got is not None and got[0] == group:
            nxt.add(i)
            continue
        body.add(i)
        si = succs[i]
        if not si:
            open_end = True
        for j in si:
            if not state[j]:
                push(j)
    return nxt, body, open_end


def _counts(idx, codes: np.ndarray, names: list[str], executed: np.ndarray | None
            ) -> tuple[dict[str, int], dict[str, int] | None]:
    """({class: instructions}, {class: executions} or None) of the instructions ``idx``, classes in the order
    of their first instruction (address order); ``codes[i]`` indexes ``names``, ``executed`` int64."""
    if not len(idx):
        return {}, ({} if executed is not None else None)
    ix = np.asarray(idx, dtype=np.intp)  # sorted
    c = codes[ix]
    uniq, first, cnt = np.unique(c, return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    st = {names[u]: int(k) for u, k in zip(uniq[order].tolist(), cnt[order].tolist())}
    if executed is None:
        return st, None
    sums = np.zeros(len(names), dtype=np.int64)
    np.add.at(sums, c, executed[ix])
    return st, {names[u]: int(sums[u]) for u in uniq[order].tolist()}


def _static(launch, texts, bases, opcodes, classes) -> dict:
    """What :func:`overlap` takes from the SASS alone (kept per build: :mod:`.buildcache`): ``sites``, one
    per wait in address order: [index, group, N, the commits it retires, the instructions issued under them
    (:func:`~.buildcache.bits`), the next waits, the instructions between (bits), the counted ones among
    them (bits), ``next_lower``]; [] when the SASS commits no group."""
    commits, waits = _roles(texts, bases, opcodes)
    if not waits:
        return {"sites": []}
    n_ins = len(texts)
    addresses = [int(a) for a in launch.sass["address"]]
    cfg = shared_cfg(launch, addresses, texts, bases)
    sites = []
    for w in sorted(waits):
        group, n = waits[w]
        found, under = _retired(w, group, n, cfg.preds, commits, waits)
        nxt, body, open_end = _between(w, group, cfg.succs, waits)
        work_idx = [i for i in body if not _idle(classes[i], opcodes[i])]
        # a smaller N next on every path, with no new group committed on the way (that wait waits on another set)
        lower = (bool(nxt) and not open_end and all(waits[j][1] < n for j in nxt)
                 and not any(commits.get(i) == group for i in body))
        sites.append([w, group, n, sorted(found), bits(under, n_ins), [[j, waits[j][1]] for j in sorted(nxt)],
                      bits(body, n_ins), bits(work_idx, n_ins), lower])
    return {"sites": sites}


def _decode(n_ins: int):
    def decode(st: dict) -> list:
        out = [(int(w), str(g), int(n), [int(i) for i in found], unbits(under, n_ins),
                [(int(j), int(k)) for j, k in nxt], unbits(body, n_ins), unbits(work, n_ins), bool(lower))
               for w, g, n, found, under, nxt, body, work, lower in st["sites"]]
        if any(not 0 <= i < n_ins for s in out for i in (s[0], *s[3], *(j for j, _ in s[5]))):
            raise ValueError("overlap: not this frame's")
        return out
    return decode


def overlap(launch) -> pd.DataFrame:
    """One row per wait site of an asynchronous group (:data:`COLUMNS`; the module docstring says what
    each means). ``overlap_*`` / ``between_*`` are {opcode class: instructions} (static) and {class:
    warp-level executions} (``None`` without ``inst_executed``); offsets are from the kernel's first PC.
    ``attrs["missing"]`` says why the frame is empty: no SASS (SourceCounters), or no async group (section
    ``none``, with the reason)."""
    rows, gone = _rows(launch)
    return with_missing(pd.DataFrame(rows, columns=COLUMNS) if rows else pd.DataFrame(columns=COLUMNS), gone)


def _rows(launch) -> tuple[list[dict], list[dict]]:
    """(the rows of :func:`overlap`, its ``missing`` entries)."""
    s = launch.sass
    if s is None or len(s) == 0 or "sass" not in s:
        return [], [missing("overlap", "SourceCounters")]
    texts = s["sass"].tolist()
    opcodes = s["opcode"].tolist() if "opcode" in s else [M.full_opcode(t) for t in texts]
    bases = s["base"].tolist() if "base" in s else [op.split(".", 1)[0] for op in opcodes]
    classes = s[CLASS_COLUMN].tolist() if CLASS_COLUMN in s else [M.classify_opcode(b) for b in bases]
    sites = buildcache.part(launch, "overlap", lambda: _static(launch, texts, bases, opcodes, classes),
                            _decode(len(texts)))
    if not sites:
        return [], [{**missing("overlap", NO_SECTION), "reason": NO_GROUPS}]
    addresses = s["address"].tolist()
    offsets = s["offset"].tolist() if "offset" in s else [a - addresses[0] for a in addresses]
    ex_arr = None
    if "inst_executed" in s:
        ex = s["inst_executed"].to_numpy()
        if ex.dtype.kind in "iu":
            ex_arr = ex.astype(np.int64)
        else:
            executed = s["inst_executed"].tolist()
            if not any(x != x for x in executed):  # NaN: a launch ncu did not count
                ex_arr = np.array([int(x) for x in executed], dtype=np.int64)
    ex_int = ex_arr.tolist() if ex_arr is not None else None
    samples_np = s["samples"].to_numpy() if "samples" in s else None
    if samples_np is not None and samples_np.dtype.kind in "iu":
        samples = samples_np
        total = int(samples.sum(dtype=np.int64))
    else:
        samples = [0 if x != x else x for x in s["samples"].tolist()] if "samples" in s else [0] * len(s)
        total = sum(int(x) for x in samples)
    reasons, mat = launch.stall_matrix()
    names = list(dict.fromkeys(classes))
    code_of = {c: k for k, c in enumerate(names)}
    codes = np.fromiter((code_of[c] for c in classes), dtype=np.intp, count=len(classes))
    rows = []
    for w, group, n, found, under, nxt, body, work_idx, lower in sites:
        ov_st, ov_ex = _counts(under, codes, names, ex_arr)
        bt_st, bt_ex = _counts(body, codes, names, ex_arr)
        work_ex = int(ex_arr[work_idx].sum()) if ex_arr is not None else None
        ex_w = ex_int[w] if ex_int is not None else None
        if ex_w:
            work = work_ex / ex_w
        else:  # never executed (or no counts): the static count
            work = float(len(work_idx))
        row_stalls = mat[w] if mat.shape[1] else []
        top = None
        if len(row_stalls) and int(max(row_stalls)) > 0:
            top = reasons[int(row_stalls.argmax())]
        rows.append({
            "group": group, "address": int(addresses[w]), "offset": int(offsets[w]), "sass": texts[w], "pending": n,
            "executed": ex_w, "samples": int(samples[w]), "share": (int(samples[w]) / total if total else 0.0),
            "top_reason": top,
            "commit_offsets": sorted(int(offsets[i]) for i in found),
            "overlap_static": ov_st, "overlap_executed": ov_ex,
            "next_offsets": sorted(int(offsets[j]) for j, _ in nxt), "next_pending": [k for _, k in nxt],
            "next_lower": lower,
            "between_static": bt_st, "between_executed": bt_ex,
            "between_work_executed": work_ex, "between_work": work,
            "collapsed": is_collapsed(n, lower, work),
        })
    return rows, []


def overlap_json(launch) -> tuple[list[dict] | None, list[dict]]:
    """(the summary's ``overlap`` list, or None; its ``missing`` entries): plain values, one object per wait
    site (:class:`profiler.schema.OverlapSite`), ``kernel`` named in each."""
    # the rows themselves, not overlap()'s frame read back (the same values: the frame's columns only widen
    # an int column holding None to float, and each value is made an int, a float or None here)
    rows, gone = _rows(launch)
    if not rows:
        return None, list(gone)
    out = []
    for r in rows:
        r = {k: r[k] for k in COLUMNS}
        r["address"], r["offset"], r["pending"], r["samples"] = (int(r["address"]), int(r["offset"]),
                                                                 int(r["pending"]), int(r["samples"]))
        r["share"], r["between_work"] = float(r["share"]), float(r["between_work"])
        r["executed"] = None if r["executed"] is None or pd.isna(r["executed"]) else int(r["executed"])
        bwe = r["between_work_executed"]
        r["between_work_executed"] = None if bwe is None or pd.isna(bwe) else int(bwe)
        r["next_lower"], r["collapsed"] = bool(r["next_lower"]), bool(r["collapsed"])
        r["top_reason"] = r["top_reason"] if isinstance(r["top_reason"], str) else None
        r["kernel"] = launch.kernel
        out.append(r)
    return out, gone


def _add(a: dict | None, b: dict | None) -> dict | None:
    if a is None or b is None:
        return None
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def merge_sites(lists: list[list[dict] | None], total_samples: float | None) -> list[dict] | None:
    """The ``overlap`` of merged launches: sites of one kernel (``kernel``, ``group``, ``offset``) add up
    (executions, samples, executed counts), static counts are the kernel's own (counted once), shares are
    over ``total_samples``, ``between_work`` and ``collapsed`` recomputed from the sums; None when no launch
    has any site."""
    if all(x is None for x in lists):
        return None
    acc: dict = {}
    for sites in lists:
        for r in sites or []:
            key = (r.get("kernel"), r["group"], r["offset"])
            a = acc.get(key)
            if a is None:
                acc[key] = dict(r)
                continue
            a["executed"] = None if a["executed"] is None or r["executed"] is None else a["executed"] + r["executed"]
            a["samples"] += r["samples"]
            a["overlap_executed"] = _add(a["overlap_executed"], r["overlap_executed"])
            a["between_executed"] = _add(a["between_executed"], r["between_executed"])
            bwe = (None if a["between_work_executed"] is None or r["between_work_executed"] is None
                   else a["between_work_executed"] + r["between_work_executed"])
            a["between_work_executed"] = bwe
    out = []
    for a in acc.values():
        a["share"] = a["samples"] / total_samples if total_samples else 0.0
        if a["executed"] and a["between_work_executed"] is not None:
            a["between_work"] = a["between_work_executed"] / a["executed"]
        a["collapsed"] = is_collapsed(a["pending"], a["next_lower"], a["between_work"])
        out.append(a)
    return out


# --- reading a summary's overlap (views and step sentences) ----------------------------------------------
def collapsed_pairs(sites: list[dict] | None) -> list[dict]:
    """For each collapsed wait of ``sites`` (a summary's ``overlap``): {``site``, ``next``: the lower waits right
    behind it, ``held``: their samples, ``under``: the headline class's instructions (static) issued under the
    group those waits retire (the most over them)}."""
    by_off = {(r.get("kernel"), r["offset"]): r for r in sites or []}
    head = config()["headline_class"]
    out = []
    for r in sites or []:
        if not r["collapsed"]:
            continue
        nxt = [by_off[(r.get("kernel"), o)] for o in r["next_offsets"] if (r.get("kernel"), o) in by_off]
        out.append({"site": r, "next": nxt, "held": sum(n["samples"] for n in nxt),
                    "under": max((n["overlap_static"].get(head, 0) for n in nxt), default=0)})
    return out


def headline(sites: list[dict] | None) -> dict:
    """One launch's overlap in a few numbers: ``collapsed`` (collapsed waits), ``held`` (samples on the waits
    right behind them), ``held_share``, ``under`` (the headline class's instructions under the group the lower
    wait of the heaviest collapsed pair retires: none in v14), ``lower_under`` (the same for the heaviest N=0
    wait that follows an N >= 1 wait, collapsed or not: what runs under that group once the overlap exists),
    ``head`` (the class, MUFU)."""
    head = config()["headline_class"]
    pairs = collapsed_pairs(sites)
    held = sum(p["held"] for p in pairs)
    shares = sum(n["share"] for p in pairs for n in p["next"])
    by_off = {(r.get("kernel"), r["offset"]): r for r in sites or []}
    lower = [by_off[(r.get("kernel"), o)] for r in sites or [] if r["pending"] >= 1 and r["next_lower"]
             for o in r["next_offsets"] if (r.get("kernel"), o) in by_off]
    top_lower = max(lower, key=lambda x: x["samples"], default=None)
    return {"collapsed": len(pairs), "held": held, "held_share": shares,
            "under": max((p["under"] for p in pairs), default=None) if pairs else None,
            "lower_under": None if top_lower is None else top_lower["overlap_static"].get(head, 0),
            "sequences": len({id(x) for x in lower}), "head": head}


def step_sentence(label: str, a: list[dict] | None, b: list[dict] | None) -> str | None:
    """One clause when a collapsed overlap appears or disappears between two versions' ``overlap`` (``a``
    before, ``b`` after), else None: e.g. "v15: the collapsed wgmma overlap is gone (a wait_group N>=1 no longer
    has its lower wait right behind it): 66 MUFU now run under the group that wait retires"."""
    ha, hb = headline(a), headline(b)
    if ha["collapsed"] and not hb["collapsed"]:
        group = collapsed_pairs(a)[0]["site"]["group"]
        under = hb["lower_under"]
        if under is not None:
            tail = f": {under} {hb['head']} now run under the group that wait retires"
        elif any(r["group"] == group for r in b or []):
            tail = f"; it waits on every {group} group with N=0 only"
        else:
            tail = f"; it has no {group} wait"
        return (f"{label}: the collapsed {group} overlap is gone (a wait_group N>=1 no longer has its lower wait "
                f"right behind it){tail}")
    if hb["collapsed"] and not ha["collapsed"]:
        group = collapsed_pairs(b)[0]["site"]["group"]
        return (f"{label}: a collapsed {group} overlap appears (a wait_group N>=1 has its lower wait right "
                f"behind it, {hb['under']} {hb['head']} under the group that wait retires; it holds "
                f"{hb['held']:,} samples, {100 * hb['held_share']:.1f}%)")
    return None
