"""Merge the summaries of several launches into one (sums of samples, bytes, FLOPs and time).

A kernel filter may match several launches of a report (several kernels of one forward, or many
launches of one kernel). Comparing versions then means comparing their totals: sampled stalls add
up, as do durations, FLOPs, bytes, instruction counts and who-waits-on-whom samples; shares,
intensities, achieved and attainable TFLOPS, LDSM conflict ways and the L2 read fan-out are recomputed from the sums;
utilisations are duration-weighted means; ``tensor_roof_pct`` is the summed tensor FLOPs over the
summed time against the first launch's dense tensor roof. The result has the schema of a single launch
(:class:`profiler.schema.Summary`); values that do not add up are ``None`` (``launch_index``,
``launch``, ``stall_cycles_per_issue``, ``short_scoreboard.cycles_per_issue``). A single launch is
returned unchanged.
"""

from __future__ import annotations

from collections import defaultdict

from profiler.analyze.overlap import merge_sites
from profiler.analyze.roofline import l2_read_derived
from profiler.names import L2_READ_COUNTERS, LEVELS, SMEM_OPS
from profiler.schema import Summary, validate_summary


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


def _sum_keys(dicts: list[dict], keys) -> dict:
    """Per key: the sum over ``dicts`` (None when any launch lacks it)."""
    return {k: _sum([(d or {}).get(k) for d in dicts]) for k in keys}


def _shares(samples: dict, total: float | None) -> dict:
    return {k: (v / total if total else 0.0) for k, v in samples.items()}


def _regroup(rows_list, keys, total, carry=(), sums=()):
    """Rows of several launches summed by ``keys``; ``carry`` fields come from the launch row with
    the most samples of that key (e.g. the instruction the most samples of a class x reason sit on);
    ``sums`` fields are added up like the samples (who_waits' ``at_exit``)."""
    acc: dict = defaultdict(float)
    extra: dict = defaultdict(lambda: dict.fromkeys(sums, 0))
    best: dict = {}
    for rows in rows_list:
        for r in rows or []:
            key = tuple(r.get(k) for k in keys)
            n = r.get("samples") or 0
            acc[key] += n
            for s in sums:
                extra[key][s] += r.get(s) or 0
            if carry and (key not in best or n > best[key][0]):
                best[key] = (n, {c: r.get(c) for c in carry})
    out = []
    for key, samples in sorted(acc.items(), key=lambda kv: -kv[1]):
        row = dict(zip(keys, key))
        row["samples"] = samples
        row["share"] = samples / total if total else 0.0
        row.update(best.get(key, (0, {c: None for c in carry}))[1])
        if sums:
            row.update(extra[key])
        out.append(row)
    return out


def _ints(rows: list[dict]) -> list[dict]:
    for r in rows:
        r["samples"] = int(round(r["samples"]))
    return rows


def _top_reason(rows: list[dict], who: list[dict]) -> list[dict]:
    for row in rows:
        cands = [w for w in who if w["class"] == row["class"]]
        row["top_reason"] = max(cands, key=lambda w: w["samples"])["reason"] if cands else None
    return rows


def _roofline(roofs: list[dict], dur) -> dict:
    flops = _sum([r.get("flops") for r in roofs])
    tensor = _sum([r.get("flops_tensor") for r in roofs])
    by_path = _add_dicts([r.get("flops_by_path") for r in roofs])
    nbytes = _sum_keys([r.get("bytes") for r in roofs], LEVELS)

    def per_byte(v):
        return {lv: (v / b if v is not None and b else None) for lv, b in nbytes.items()}

    ceilings = roofs[0].get("ceilings")
    pipes = list(dict.fromkeys(r.get("compute_pipe") for r in roofs))
    pipe = pipes[0] if len(pipes) == 1 else None  # launches on different pipes: no one roof
    pipe_flops = tensor if pipe == "tensor" else (by_path or {}).get(pipe) if pipe else None
    compute = (ceilings or {}).get("compute_tflops") if pipe else None
    bws = (ceilings or {}).get("bandwidth_bytes_per_s") or {}
    pipe_int = per_byte(pipe_flops)
    attainable = {lv: (min(compute, pipe_int[lv] * bws[lv] / 1e12)
                       if compute is not None and pipe_int[lv] is not None and bws.get(lv) else None)
                  for lv in LEVELS}
    smems = [r.get("smem") or {} for r in roofs]
    ldsm = _sum_keys([s.get("ldsm") for s in smems], ("wavefronts", "bank_conflicts"))
    wf, bc = ldsm["wavefronts"], ldsm["bank_conflicts"]
    ldsm["ways"] = wf / (wf - bc) if wf is not None and bc is not None and wf - bc > 0 else None
    l2 = _sum_keys([r.get("l2_reads") for r in roofs], L2_READ_COUNTERS)
    l2.update(l2_read_derived(l2))
    return {
        "flops": flops,
        "flops_by_path": by_path,
        "bytes": nbytes,
        "intensity": per_byte(flops),
        "achieved_tflops": (flops / dur / 1e3 if flops is not None and dur else None),
        "flops_tensor": tensor,
        "intensity_tensor": per_byte(tensor),
        "achieved_tensor_tflops": (tensor / dur / 1e3 if tensor is not None and dur else None),
        "compute_pipe": pipe,
        "attainable_tflops": attainable,
        "ceilings": ceilings,
        "smem": {"bytes_by_op": _sum_keys([s.get("bytes_by_op") for s in smems], SMEM_OPS), "ldsm": ldsm},
        "l2_reads": l2,
    }


def _regions(L: list[dict]) -> list[dict]:
    """Regions summed by (name, source); ``pcs`` count each distinct kernel's code once; shares recomputed."""
    acc: dict = {}
    seen: set = set()
    for x in L:
        first = x.get("kernel") not in seen
        seen.add(x.get("kernel"))
        for r in x.get("regions") or []:
            key = (r["name"], r["source"], r.get("vocabulary"))
            a = acc.setdefault(key, {"name": r["name"], "source": r["source"],
                                     "vocabulary": r.get("vocabulary") or "neutral", "stall_samples": {}, "samples": 0,
                                     "share": 0.0, "inst_executed": 0, "pcs": 0, "inherited_samples": 0})
            for k, v in (r.get("stall_samples") or {}).items():
                a["stall_samples"][k] = a["stall_samples"].get(k, 0) + v
            for k in ("samples", "inst_executed", "inherited_samples"):
                a[k] += r.get(k) or 0
            if first:
                a["pcs"] += r.get("pcs") or 0
    total = sum(a["samples"] for a in acc.values())
    for a in acc.values():
        a["share"] = a["samples"] / total if total else 0.0
    return list(acc.values())


def merge_launches(launches: list[Summary]) -> Summary:
    """One summary standing for all ``launches`` (each a :class:`~profiler.schema.Summary`), itself a
    :class:`~profiler.schema.Summary`.

    ``kernel`` joins the distinct names with `` + ``; ``launch_indices`` lists the merged launches;
    ``launch`` (a launch's shape) is None, since launches may differ; ``ceilings`` and ``device`` are the
    first launch's. ``who_waits``, ``opcode_waits``, ``waits_on`` and the SSC ``by_class`` are summed by
    their keys (``who_waits``' top instruction is that of the launch with the most samples in the row);
    ``top_instructions`` are concatenated and re-sorted (each names its ``kernel``).
    """
    if not launches:
        raise ValueError("no launches to merge")
    if len(launches) == 1:
        return launches[0]
    L = launches
    merged: dict = {}
    names = list(dict.fromkeys(x.get("kernel") for x in L))
    merged["report"] = L[0].get("report")
    merged["launch_index"] = None
    merged["launch_indices"] = [i for x in L for i in (x.get("launch_indices") or [x.get("launch_index")])]
    merged["kernel"] = " + ".join(str(n) for n in names)
    merged["duration_ns"] = _sum([x.get("duration_ns") for x in L])
    samples = _add_dicts([{k: v or 0 for k, v in (x.get("stall_samples") or {}).items()} for x in L])
    merged["stall_samples"] = samples
    total = sum(samples.values()) if samples else None
    merged["stall_share"] = _shares(samples, total) if samples else None
    merged["stall_cycles_per_issue"] = None  # a ratio per launch: not additive without issue counts
    ssc = [x.get("short_scoreboard") or {} for x in L]
    ssc_samples = _sum([s.get("samples") for s in ssc])
    merged["short_scoreboard"] = {"samples": ssc_samples,
                                  "share": (ssc_samples / total if total and ssc_samples is not None else None),
                                  "cycles_per_issue": None,
                                  "by_class": _add_dicts([s.get("by_class") or {} for s in ssc])}
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
    for key in ("tensor_pipe_pct", "xu_pipe_pct", "xu_pipe_pct_sass"):
        pcts = [x.get(key) for x in L]
        merged[key] = (sum(p * d for p, d in zip(pcts, durs)) / sum(durs)
                       if None not in pcts and sum(durs) else None)
    paths = list(dict.fromkeys(x.get("tensor_path") for x in L))
    merged["tensor_path"] = paths[0] if len(paths) == 1 else "+".join(str(p) for p in paths)
    merged["tensor_inst"] = _sum_keys([x.get("tensor_inst") for x in L], ("hmma", "hgmma"))
    merged["roofline"] = rl = _roofline([x.get("roofline") or {} for x in L], merged["duration_ns"])
    dense = (rl["ceilings"] or {}).get("tensor_dense_tflops")
    merged["tensor_roof_pct"] = (100.0 * rl["achieved_tensor_tflops"] / dense
                                 if rl["achieved_tensor_tflops"] is not None and dense else None)
    who = _ints(_regroup([x.get("who_waits") for x in L], ("class", "reason"), total,
                         carry=("top_opcode", "top_address", "top_sass"), sums=("at_exit",)))
    merged["opcode_waits"] = _top_reason(_ints(_regroup([x.get("opcode_waits") for x in L], ("class",), total)), who)
    merged["who_waits"] = who
    merged["waits_on"] = _regroup([x.get("waits_on") for x in L],
                                  ("class", "opcode", "reason", "producer_class", "producer_opcode"), total)
    merged["waits_on_unresolved"] = dict(_add_dicts([{k: float(v) for k, v in (x.get("waits_on_unresolved") or {}).items()}
                                                     for x in L]) or {})
    tops = [{**t, "kernel": t.get("kernel") or x.get("kernel")} for x in L for t in x.get("top_instructions") or []]
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
    merged["regions"] = _regions(L)
    merged["role_edges"] = [{**r, "inferred": any(e.get("inferred") for x in L for e in x.get("role_edges") or []
                                                  if (e["waiter"], e["barrier"], e["releaser"])
                                                  == (r["waiter"], r["barrier"], r["releaser"]))}
                            for r in _ints(_regroup([x.get("role_edges") for x in L],
                                                    ("waiter", "barrier", "releaser"), total))]
    merged["overlap"] = merge_sites([x.get("overlap") for x in L], total)
    from profiler.analyze.summary import throughput  # noqa: PLC0415

    merged["throughput"] = throughput(merged["roofline"], merged["duration_ns"])
    builds, seen_b = [], set()
    for x in L:  # a kernel's code counts once
        if x.get("kernel") not in seen_b:
            seen_b.add(x.get("kernel"))
            builds.append(x.get("build") or {})
    debug = [b.get("debug") for b in builds]
    merged["build"] = {"debug": None if None in debug else any(debug),
                       "self_moves": _sum([b.get("self_moves") for b in builds]),
                       "instructions": _sum([b.get("instructions") for b in builds])}
    missing = {}
    for x in L:
        for m in x.get("missing") or []:
            missing[(m.get("field"), m.get("section"))] = m
    merged["missing"] = list(missing.values())
    return validate_summary(merged)
