"""Merge the summaries of several launches into one (sums of samples, bytes, FLOPs and time).

A kernel filter may match several launches of a report (several kernels of one forward, or many
launches of one kernel). Comparing versions then means comparing their totals: sampled stalls add
up, as do durations, FLOPs and bytes; shares, intensities and achieved TFLOPS are recomputed from
the sums; utilisations are duration-weighted means. A single launch is returned unchanged.
"""

from __future__ import annotations

from collections import defaultdict

LEVELS = ("l1", "l2", "dram", "smem")


def _sum(values):
    vals = [v for v in values if v is not None]
    return sum(vals) if len(vals) == len(values) and vals else None


def _add_dicts(dicts):
    if any(d is None for d in dicts):
        return None
    out: dict = defaultdict(int)
    for d in dicts:
        for k, v in d.items():
            out[k] += v or 0
    return dict(out)


def _shares(samples: dict, total: float | None) -> dict:
    return {k: (v / total if total else 0.0) for k, v in samples.items()}


def _regroup(rows_list, keys, total, top_reason_from=None):
    acc: dict = defaultdict(int)
    for rows in rows_list:
        for r in rows or []:
            acc[tuple(r.get(k) for k in keys)] += r.get("samples") or 0
    out = []
    for key, samples in sorted(acc.items(), key=lambda kv: -kv[1]):
        row = dict(zip(keys, key))
        row["samples"] = samples
        row["share"] = samples / total if total else 0.0
        out.append(row)
    if top_reason_from is not None:
        for row in out:
            cands = [w for w in top_reason_from if w["class"] == row["class"]]
            row["top_reason"] = max(cands, key=lambda w: w["samples"])["reason"] if cands else None
    return out


def merge_launches(launches: list[dict]) -> dict:
    """One summary standing for all ``launches`` (DESIGN.md's ``show`` objects).

    ``kernel`` joins the distinct names with `` + ``; ``launch_indices`` lists the merged launches;
    ``launch`` (a launch's shape) is None, since launches may differ. ``top_instructions`` are concatenated and re-sorted (addresses of different
    kernels are kept apart by their ``kernel`` key).
    """
    if not launches:
        raise ValueError("no launches to merge")
    if len(launches) == 1:
        return launches[0]
    L = launches
    merged: dict = {}
    names = list(dict.fromkeys(x.get("kernel") for x in L))
    merged["kernel"] = " + ".join(str(n) for n in names)
    merged["report"] = L[0].get("report")
    merged["launch_indices"] = [x.get("launch_index", i) for i, x in enumerate(L)]
    merged["duration_ns"] = _sum([x.get("duration_ns") for x in L])
    samples = _add_dicts([{k: v or 0 for k, v in (x.get("stall_samples") or {}).items()} for x in L])
    merged["stall_samples"] = samples
    total = sum(samples.values()) if samples else None
    merged["stall_share"] = _shares(samples, total) if samples else None
    merged["stall_cycles_per_issue"] = None  # a ratio per launch: not additive without issue counts
    ssc = [x.get("short_scoreboard") or {} for x in L]
    ssc_samples = _sum([s.get("samples") for s in ssc])
    by_class = _regroup([s.get("by_class") if isinstance(s.get("by_class"), list) else
                         [{"class": k, "samples": v} for k, v in (s.get("by_class") or {}).items()] for s in ssc],
                        ("class",), ssc_samples)
    merged["short_scoreboard"] = {"samples": ssc_samples,
                                  "share": (ssc_samples / total if total and ssc_samples is not None else None),
                                  "cycles_per_issue": None, "by_class": by_class}
    static, seen = [], set()
    for x in L:  # static counts belong to a kernel's code: count each distinct kernel once
        if x.get("kernel") not in seen:
            seen.add(x.get("kernel"))
            static.append((x.get("barriers") or {}).get("static"))
    merged["barriers"] = {
        "static": _add_dicts(static),
        "executed": _add_dicts([(x.get("barriers") or {}).get("executed") for x in L]),
    }
    durs = [x.get("duration_ns") or 0 for x in L]
    pcts = [x.get("tensor_pipe_pct") for x in L]
    merged["tensor_pipe_pct"] = (sum(p * d for p, d in zip(pcts, durs)) / sum(durs)
                                 if None not in pcts and sum(durs) else None)
    paths = list(dict.fromkeys(x.get("tensor_path") for x in L))
    merged["tensor_path"] = paths[0] if len(paths) == 1 else "+".join(str(p) for p in paths)
    roofs = [x.get("roofline") or {} for x in L]
    flops = _sum([r.get("flops") for r in roofs])
    nbytes = {lv: _sum([(r.get("bytes") or {}).get(lv) for r in roofs]) for lv in LEVELS}
    dur = merged["duration_ns"]
    merged["roofline"] = {
        "flops": flops,
        "flops_by_path": _add_dicts([r.get("flops_by_path") for r in roofs]),
        "bytes": nbytes,
        "intensity": {lv: (flops / b if flops is not None and b else None) for lv, b in nbytes.items()},
        "achieved_tflops": (flops / dur / 1e3 if flops is not None and dur else None),
        "ceilings": roofs[0].get("ceilings"),
    }
    who = _regroup([x.get("who_waits") for x in L], ("class", "reason"), total)
    merged["who_waits"] = who
    merged["opcode_waits"] = _regroup([x.get("opcode_waits") for x in L], ("class",), total, top_reason_from=who)
    tops = []
    for x in L:
        for t in x.get("top_instructions") or []:
            tops.append({**t, "kernel": x.get("kernel")})
    merged["top_instructions"] = sorted(tops, key=lambda t: -(t.get("samples") or 0))[:20]
    regs: dict = {}
    for x in L:  # by (name, source): declared and inferred regions are never added together
        for r in x.get("regions") or []:
            k = (r["name"], r["source"])
            acc = regs.setdefault(k, {"name": r["name"], "source": r["source"], "stall_samples": {}, "samples": 0,
                                      "inst_executed": 0, "pcs": 0, "inherited_samples": 0})
            for reason, v in (r.get("stall_samples") or {}).items():
                acc["stall_samples"][reason] = acc["stall_samples"].get(reason, 0) + (v or 0)
            for key in ("samples", "inst_executed", "pcs", "inherited_samples"):
                acc[key] += r.get(key) or 0
    rtotal = sum(r["samples"] for r in regs.values())
    merged["regions"] = [{**r, "share": r["samples"] / rtotal if rtotal else 0.0} for r in regs.values()]
    # a timeline belongs to one launch: merged launches keep none (whowaits timeline shows each)
    merged["timeline"] = None
    merged["launch"] = None
    merged["device"] = L[0].get("device")
    missing = {}
    for x in L:
        for m in x.get("missing") or []:
            missing[(m.get("field"), m.get("section"))] = m
    merged["missing"] = list(missing.values())
    return merged
