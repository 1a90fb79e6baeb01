"""`whowaits show`: one report's bottlenecks, launch by launch — a thin renderer over
:func:`profiler.analyze.summarize` (the JSON contract) and the analyses' frames."""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path
from typing import Optional

import typer

from profiler.cli._app import FORMAT_OPTION, Format, app, console


@app.command()
def show(
    report: Path = typer.Argument(..., help="An Nsight Compute report (.ncu-rep).", show_default=False),
    kernel: Optional[str] = typer.Option(None, "--kernel", "-k", help="Regex on the demangled kernel name."),
    fmt: Format = FORMAT_OPTION,
    top: int = typer.Option(10, "--top", min=1, help="How many top instructions (and who-waits cells) to list."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="List every field the report lacks, not one line."),
) -> None:
    """Show where one report's warps wait: stalls, who waits on whom, SSC, barriers, tensor
    cores, roofline, the L2 read fan-out (SMs served per L2 read), launch shape, and what runs while each wgmma / cp.async group works (the async-group
    overlap table: a COLLAPSED wait_group N>=1 has a lower wait right behind it, so the compiler removed the
    overlap the source asked for), per profiled launch."""
    from profiler.analyze import summarize  # noqa: PLC0415

    summaries = summarize(report, kernel=kernel, top=top)
    if fmt is Format.json:
        json.dump(summaries, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif fmt is Format.csv:
        write_csv(summaries, sys.stdout)
    else:
        render_tables(summaries, top=top, verbose=verbose)


# --- csv ----------------------------------------------------------------------------------------


def _flatten(prefix: str, value, out: list[tuple[str, object]]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        for i, v in enumerate(value):
            _flatten(f"{prefix}.{i}", v, out)
    elif isinstance(value, list):
        out.append((prefix, "x".join(str(x) for x in value)))
    else:
        out.append((prefix, value))


def write_csv(summaries: list[dict], stream) -> None:
    """A flat long table: report, launch, kernel, field (dotted path into the JSON object), value
    (empty for null)."""
    w = csv.writer(stream, lineterminator="\n")
    w.writerow(["report", "launch", "kernel", "field", "value"])
    for s in summaries:
        rows: list[tuple[str, object]] = []
        for key, value in s.items():
            if key in ("report", "launch_index", "kernel"):
                continue
            if key == "timeline" and isinstance(value, dict):  # the curves are for plots: whowaits timeline has them
                value = {k: v for k, v in value.items() if k != "curve"}
            _flatten(key, value, rows)
        for field, value in rows:
            w.writerow([s["report"], s["launch_index"], s["kernel"], field, "" if value is None else value])


# --- tables -------------------------------------------------------------------------------------


def _console():
    return console(160)


def _unknown(x) -> bool:
    """None, or a float that is not finite (never printed as nan/inf)."""
    return x is None or (isinstance(x, float) and not math.isfinite(x))


def _pct(x) -> str:
    return "—" if _unknown(x) else f"{100 * x:.1f}%"


def _num(x, fmt: str = "{:,.0f}") -> str:
    return "—" if _unknown(x) else fmt.format(x)


def _si(x, unit: str = "") -> str:
    if x is None:
        return "—"
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}".rstrip()


def _xu_line(s: dict) -> str:
    """The XU (MUFU) pipe beside the tensor pipe: ncu's counter, else the figure derived from the SASS."""
    from profiler.analyze.xu import xu_busier, xu_figure  # noqa: PLC0415

    xu, source = xu_figure(s)
    if source == "ncu":
        how = f"ncu's counter; {_num(s.get('xu_pipe_pct_sass'), '{:.1f}')}% from the SASS"
    elif source == "sass":
        how = "from the SASS: MUFU, I2F, F2I, POPC, FLO executed; the report lacks ncu's counter"
    else:
        how = "unknown: neither ncu's counter nor executed-instruction counts"
    line = f"[bold]XU (MUFU) pipe[/bold]: {_num(xu, '{:.1f}')}% of its peak ({how})"
    if xu_busier(s):
        line += (f" · [bold yellow]above the tensor pipe's {_num(s.get('tensor_pipe_pct'), '{:.1f}')}%: "
                 "the exponential is the nearer roof[/bold yellow]")
    return line


def _l2_reads_line(s: dict) -> str:
    """The L2 read fan-out (``roofline.l2_reads``): L2 bytes read for the SMs and their misses, the bytes the SMs
    received, how many SMs one L2 read served and TMA multicast's share; "not collected" (dim) without its
    counters (every report taken before WhowaitsRoofline had them, and ncu's own section sets)."""
    from profiler.names import L2_READ_COUNTERS  # noqa: PLC0415

    from profiler.analyze.roofline import L2_NO_VALUE  # noqa: PLC0415

    l2 = (s.get("roofline") or {}).get("l2_reads") or {}
    if all(l2.get(k) is None for k in L2_READ_COUNTERS):
        why = {m.get("reason") for m in s.get("missing") or []
               if str(m.get("field") or "").startswith("roofline.l2_reads.")}
        how = ("no value (ncu recorded none for this launch)" if L2_NO_VALUE in why
               else "not collected (whowaits' WhowaitsRoofline section collects its counters)")
        return f"[dim]L2 read fan-out: {how}[/dim]"
    per_req = (l2["sectors"] / l2["requests"] if l2.get("sectors") is not None and l2.get("requests") else None)
    miss = [f"miss {_pct(l2['miss_share'])}"] if l2.get("miss_share") is not None else []
    per = [f"{_num(per_req, '{:.2f}')} sectors/request"] if per_req is not None else []
    inner = f" ({', '.join(miss + per)})" if miss or per else ""
    line = (f"[bold]L2 reads for the SMs[/bold] {_si(l2.get('bytes'), 'B')}{inner}, delivered "
            f"{_si(l2.get('delivered_bytes'), 'B')}: [bold]fan-out {_num(l2.get('fanout'), '{:.2f}×')}[/bold] "
            "(SMs served per L2 read)")
    if l2.get("multicast_share") is not None:
        line += f", TMA multicast {_pct(l2['multicast_share'])} of delivered"
    return line


def _table(title: str, columns: list[tuple[str, str]]):
    from rich.table import Table  # noqa: PLC0415

    t = Table(title=title, title_justify="left", title_style="bold")
    for name, justify in columns:
        t.add_column(name, justify=justify, no_wrap=justify == "right")  # type: ignore[arg-type]
    return t


def render_waits_on(con, s: dict, top: int = 10) -> None:
    """The "who waits on whom" table of one launch summary: scoreboard stalls by the producer
    instruction they wait for (``waits_on``), with the unresolved samples as its caption. A stall
    whose producer says what it waits for is named so (``BRANCH·mbarrier wait (long_scoreboard) ←
    SYNCS``: a try-wait's predicate, :func:`profiler.analyze.producers.wait_kind`)."""
    rows = s.get("waits_on") or []
    t = _table(
        "Who waits on whom (scoreboard stalls ← producer)",
        [("waiter · reason", "left"), ("← producer (opcode)", "left"), ("samples", "right"), ("share", "right")],
    )
    from profiler.analyze.producers import wait_kind  # noqa: PLC0415

    for w in rows[:top]:
        kind = wait_kind(w["reason"], w.get("producer_opcode"))
        t.add_row(
            f"{w['class']}·{kind} ({w['reason']})" if kind else f"{w['class']}·{w['reason']}",
            f"← {w['producer_class']} ({w['producer_opcode']})", _num(w["samples"]), _pct(w["share"]),
        )
    notes = []
    if len(rows) > top:
        notes.append(f"{len(rows) - top} more rows (--top N, or --format json)")
    un = {r: n for r, n in (s.get("waits_on_unresolved") or {}).items() if n}
    if un:
        notes.append("no producer found: " + ", ".join(f"{r} {_num(n)}" for r, n in un.items()))
    if notes:
        t.caption = " · ".join(notes)
    con.print(t)


def render_timeline(con, s: dict) -> None:
    """One line of phases from PM sampling (``whowaits timeline`` has the series)."""
    tl = s.get("timeline") or {}
    if tl.get("phases"):
        ph = {p["name"]: p["share"] for p in tl["phases"]}
        st = tl.get("steady_tensor_pct")
        con.print(f"[bold]Timeline[/bold] (PM sampling, {_num(tl.get('duration_ns') and tl['duration_ns'] / 1e3, '{:.1f}')} µs): "
                  f"ramp {_pct(ph.get('ramp'))}, steady {_pct(ph.get('steady'))}, tail {_pct(ph.get('tail'))} of the time; "
                  f"steady tensor pipe {_num(st, '{:.1f}')}% (whowaits timeline for the series)")
    elif any(m.get("reason") for m in tl.get("missing") or []):
        con.print("[dim]Timeline: no phases: " + "; ".join(m["reason"] for m in tl["missing"] if m.get("reason"))
                  + "[/dim]")
    elif tl.get("missing"):
        con.print("[dim]Timeline: no PM sampling in this report (section "
                  + ", ".join(sorted({m['section'] for m in tl['missing']})) + ")[/dim]")


def render_regions(con, s: dict) -> None:
    """Samples and executed instructions by source region (declared by markers, or inferred from the SASS)."""
    regs = s.get("regions") or []
    if not regs:
        return
    source = regs[0]["source"]
    vocab = regs[0].get("vocabulary") or "neutral"
    if source != "inferred":
        how = ": @region markers"
    elif vocab == "attention":
        how = ": from the SASS, attention names (an exp of one MMA's result feeds another MMA)"
    else:
        how = ": from the SASS, by instruction kind (no exp between chained MMAs: not attention)"
    t = _table(
        f"Source regions ({source}{how})",
        [("region", "left"), ("samples", "right"), ("share", "right"), ("top reason", "left"),
         ("inst executed", "right"), ("PCs", "right")],
    )
    for r in regs:
        top = max(r["stall_samples"], key=lambda k: r["stall_samples"][k]) if r["stall_samples"] else "—"
        t.add_row(r["name"], _num(r["samples"]), _pct(r["share"]), top if r["samples"] else "—",
                  _num(r["inst_executed"]), _num(r["pcs"]))
    inh = sum(r["inherited_samples"] for r in regs)
    if inh:
        t.caption = f"{_num(inh)} samples sit in shared helpers and took the region of the code they were inlined into"
    con.print(t)


def _classes(d: dict | None, n: int = 4) -> str:
    if not d:
        return "—"
    items = sorted(((c, v) for c, v in d.items() if v), key=lambda kv: -kv[1])
    return ", ".join(f"{v} {c}" for c, v in items[:n]) + (" …" if len(items) > n else "") if items else "nothing"


def render_overlap(con, s: dict) -> None:
    """What runs while the tensor core (or cp.async) works: each async-group wait, what was issued under the
    group it retires, what runs until the next wait, and the collapsed overlaps (``overlap`` of the summary)."""
    from profiler.analyze.overlap import config, headline  # noqa: PLC0415

    sites = s.get("overlap")
    if sites is None:
        why = next((m.get("reason") for m in s.get("missing") or [] if m.get("field") == "overlap"), None)
        con.print(f"[dim]Async-group overlap: {why or 'no per-PC SASS in this report'}[/dim]")
        return
    head = config()["headline_class"]
    t = _table(
        "Async-group overlap (what runs while the group works; static instructions by class)",
        [("offset", "right"), ("wait", "left"), ("exec", "right"), ("samples", "right"), ("share", "right"),
         ("retires commit", "left"), ("under the group", "left"), (head, "right"), ("next wait", "left"),
         ("work between", "right"), ("verdict", "left")],
    )
    for r in sites:
        nxt = ", ".join(f"{o:#06x} (N={n})" for o, n in zip(r["next_offsets"], r["next_pending"])) or "end"
        verdict = "COLLAPSED" if r["collapsed"] else ("overlap" if r["next_lower"] and r["pending"] >= 1 else "")
        t.add_row(f"{r['offset']:#06x}", f"{r['group']} N={r['pending']}", _num(r["executed"]), _num(r["samples"]),
                  _pct(r["share"]), ", ".join(f"{o:#06x}" for o in r["commit_offsets"]) or "—",
                  _classes(r["overlap_static"]), _num(r["overlap_static"].get(head, 0)), nxt,
                  _num(r["between_work"], "{:,.1f}"), verdict)
    h = headline(sites)
    if h["collapsed"]:
        t.caption = (f"{h['collapsed']} collapsed overlap(s): a wait with N>=1 has a lower wait right behind it "
                     f"(<= {config()['max_work']} counted instructions between per execution; "
                     f"{h['under']} {head} under the group it retires); those lower waits hold {h['held']:,} "
                     f"samples ({_pct(h['held_share'])}): the compiler removed the overlap the source asked for")
    else:
        t.caption = "work between: counted (non-idle) instructions executed from this wait to the next, per execution"
    con.print(t)


def _dims(d, none_is_zero: bool = False) -> str:
    """A launch dimension ``[x, y, z]``; unknown: ``—``. A cluster of [0, 0, 0] (ncu's value for a launch
    without clusters) and, with ``none_is_zero``, an unknown one (GPUs before clusters) read ``none``."""
    if d is None:
        return "none" if none_is_zero else "—"
    d = list(d)
    if none_is_zero and all(v == 0 for v in d):
        return "none"
    return f"[{', '.join(str(v) for v in d)}]"


def render_tables(summaries: list[dict], top: int = 10, verbose: bool = False) -> None:
    """Rich tables for each launch summary (stdout)."""
    con = _console()
    for s in summaries:
        la, dev = s["launch"], s["device"]
        con.rule(f"[bold]launch {s['launch_index']}[/bold] · {s['report']}")
        con.print(f"[bold]{s['kernel']}[/bold]", soft_wrap=True)
        shape = (
            f"grid {_dims(la['grid'])}  block {_dims(la['block'])}  cluster {_dims(la['cluster'], none_is_zero=True)}  "
            f"regs/thread {_num(la['registers_per_thread'])}  smem/block {_num(la['shared_mem_bytes'], '{:,.0f} B')}  "
            f"waves/SM {_num(la['waves_per_sm'], '{:.2f}')}  achieved occupancy "
            f"{_num(la['achieved_occupancy_pct'], '{:.1f}%')}"
        )
        con.print(
            f"{dev['name']} (cc {dev['cc']}, {dev['sm_count']} SMs) · duration "
            f"{_num(None if s['duration_ns'] is None else s['duration_ns'] / 1e3, '{:,.2f} µs')}"
        )
        con.print(shape)
        b = s.get("build") or {}
        if b.get("debug"):
            con.print(f"[bold yellow]debug build (-G):[/bold yellow] {b['self_moves']:,} of {b['instructions']:,} "
                      "instructions are register self-moves (MOV Rn, Rn), which only unoptimised -G code has: "
                      "profile a build without -G (-lineinfo keeps the source lines)")

        t = _table("Stall breakdown (PC sampling)", [("reason", "left"), ("samples", "right"), ("share", "right"), ("cycles/issue", "right")])
        order = sorted(s["stall_samples"], key=lambda r: -(s["stall_samples"][r] or 0))
        for r in order:
            n = s["stall_samples"][r]
            if n == 0:
                continue
            cpi = s["stall_cycles_per_issue"].get(r)
            t.add_row(r, _num(n), _pct(s["stall_share"][r]), _num(cpi, "{:.3f}"))
        zero = [r for r in order if s["stall_samples"][r] == 0]
        if zero:
            t.caption = "no samples: " + ", ".join(zero)
        con.print(t)

        t = _table("Who waits on whom (opcode class × reason)", [("class", "left"), ("reason", "left"), ("samples", "right"), ("share", "right"), ("sits on", "left"), ("top instruction", "left")])
        for c in s["who_waits"][:top]:
            sits = c["top_opcode"]
            if c.get("at_exit"):  # warps with no work left, parked before EXIT (stalls.exit_tail)
                sits = f"{sits} ({_pct(c['at_exit'] / c['samples'])} at exit)" if c["samples"] else sits
            t.add_row(c["class"], c["reason"], _num(c["samples"]), _pct(c["share"]), sits, c["top_sass"])
        if len(s["who_waits"]) > top:
            t.caption = f"{len(s['who_waits']) - top} more cells (--top N, or --format json)"
        con.print(t)
        parked = sum(c.get("at_exit") or 0 for c in s["who_waits"])
        total = sum(c["samples"] for c in s["who_waits"])
        if parked and total:
            con.print(f"  {_pct(parked / total)} of the stall samples sit on the kernel's exit path (the fences and "
                      "last barrier before EXIT): warps with no work left, waiting for the others; the top waiter "
                      "leaves them out")

        t = _table("Waits by opcode class", [("class", "left"), ("samples", "right"), ("share", "right"), ("top reason", "left")])
        for c in s["opcode_waits"]:
            t.add_row(c["class"], _num(c["samples"]), _pct(c["share"]), c["top_reason"])
        con.print(t)

        ssc = s["short_scoreboard"]
        con.print(
            f"[bold]Short scoreboard (SSC)[/bold]: {_num(ssc['samples'])} samples, {_pct(ssc['share'])} "
            f"of stalls, {_num(ssc['cycles_per_issue'], '{:.3f}')} cycles/issue"
        )
        t = _table("SSC by waiting class", [("class", "left"), ("samples", "right")])
        for cls, n in ssc["by_class"].items():
            t.add_row(cls, _num(n))
        con.print(t)
        render_waits_on(con, s, top=top)
        ldsm = ((s["roofline"].get("smem") or {}).get("ldsm")) or {}
        if ldsm.get("wavefronts"):
            con.print(
                f"LDSM bank conflicts: {_num(ldsm['ways'], '{:.2f}')}-way "
                f"({_num(ldsm['bank_conflicts'])} conflicts in {_num(ldsm['wavefronts'])} wavefronts)"
            )

        t = _table("Barriers", [("opcode", "left"), ("static", "right"), ("executed", "right")])
        for op, n in s["barriers"]["static"].items():
            t.add_row(op, _num(n), _num(s["barriers"]["executed"].get(op)))
        con.print(t)

        rl = s["roofline"]
        ti = s["tensor_inst"]
        con.print(
            f"[bold]Tensor cores[/bold]: pipe {_num(s['tensor_pipe_pct'], '{:.1f}')}% active (of its path's peak) · "
            f"{_num(s.get('tensor_roof_pct'), '{:.1f}')}% of the dense tensor roof "
            f"({_num(rl['ceilings'].get('tensor_dense_tflops'), '{:.0f}')} TFLOP/s) · path "
            f"{s['tensor_path'] or '—'} (HMMA {_num(ti['hmma'])}, HGMMA {_num(ti['hgmma'])} executed)"
        )
        con.print(_xu_line(s))
        con.print(
            f"[bold]Roofline[/bold]: {_si(rl['flops'], 'FLOP')} → {_num(rl['achieved_tflops'], '{:.1f}')} "
            f"TFLOP/s achieved, compute roof {_num(rl['ceilings']['compute_tflops'], '{:.1f}')} TFLOP/s "
            f"(the {rl.get('compute_pipe') or '—'} pipe's, at SM clock "
            f"{_si((rl['ceilings'].get('clock_hz') or {}).get('sm'), 'Hz')}; pipes are not blended)"
        )
        t = _table(
            "Roofline by memory level",
            [("level", "left"), ("bytes", "right"), ("FLOP/byte", "right"), ("tensor FLOP/byte", "right"),
             ("bandwidth roof", "right"), ("attainable TFLOP/s", "right")],
        )
        for lv in ("smem", "l1", "l2", "dram"):
            if lv not in rl["bytes"]:
                continue
            t.add_row(
                "SMEM" if lv == "smem" else lv.upper(), _si(rl["bytes"][lv], "B"), _num(rl["intensity"][lv], "{:,.1f}"),
                _num((rl.get("intensity_tensor") or {}).get(lv), "{:,.1f}"),
                _si(rl["ceilings"]["bandwidth_bytes_per_s"][lv], "B/s"), _num(rl["attainable_tflops"][lv], "{:.1f}"),
            )
        con.print(t)
        sm = rl.get("smem") or {}
        by_op = {op: b for op, b in (sm.get("bytes_by_op") or {}).items() if b}
        if by_op:
            con.print("Shared memory by instruction: " + ", ".join(f"{op.upper()} {_si(b, 'B')}" for op, b in by_op.items()))
        fp = rl["flops_by_path"]
        c = rl["ceilings"]
        con.print(
            f"FLOPs: HMMA {_si(fp['tensor_hmma'])}, HGMMA {_si(fp['tensor_hgmma'])}, FP32 {_si(fp['fp32'])}, "
            f"FP16 {_si(fp['fp16'])} · roofs (TFLOP/s): HGMMA {_num(c['tensor_hgmma_tflops'], '{:.0f}')}, "
            f"HMMA {_num(c['tensor_hmma_tflops'], '{:.0f}')}, FP32 {_num(c['fp32_tflops'], '{:.1f}')}"
        )

        tp = s.get("throughput") or {}
        if tp.get("dram_bytes_per_s") is not None or tp.get("l2_bytes_per_s") is not None:
            con.print("Memory throughput (bytes over the launch's time): "
                      + ", ".join(f"{lv.upper()} {_si(tp.get(f'{lv}_bytes_per_s'), 'B/s')}"
                                  + (f" ({_num(tp.get(f'{lv}_pct_of_peak'), '{:.1f}')}% of peak)"
                                     if tp.get(f"{lv}_pct_of_peak") is not None else "")
                                  for lv in ("dram", "l2") if tp.get(f"{lv}_bytes_per_s") is not None))

        con.print(_l2_reads_line(s))

        render_timeline(con, s)
        render_regions(con, s)
        render_overlap(con, s)

        t = _table("Top instructions by stall samples", [("offset", "right"), ("class", "left"), ("samples", "right"), ("top reason", "left"), ("sass", "left")])
        for ins in s["top_instructions"]:
            t.add_row(f"{ins['offset']:#06x}", ins["class"], _num(ins["samples"]), ins["top_reason"], ins["sass"])
        con.print(t)

        from rich.markup import escape  # noqa: PLC0415

        from profiler.compare.gaps import gap_line  # noqa: PLC0415

        for line in gap_line(f"launch {s['launch_index']}", s, verbose=verbose):
            con.print("[dim]note: " + escape(line), highlight=False)
