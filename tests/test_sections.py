"""The `whowaits` section set (sections/*.section): parses, names only real gh100 metrics, covers the analyses.

Every file is parsed with protobuf's text format against sections/section-schema.textproto (a
FileDescriptorProto compiled at run time: no protoc). Every metric name must be on one of the gh100 lists
that ncu itself printed (profiler/data/gh100-metrics.txt, gh100-source-metrics.txt) or on the documented
allow-list of launch/device attributes read off the starter reports (gh100-launch-metrics.txt), with a
rollup that fits the metric's type. And every ncu metric that profiler/data/metrics.toml maps must be
collected by the set, so `whowaits show` has nothing `missing` on a whowaits-set report.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from profiler.sections import SECTIONS_DIR, section_files, section_metrics, set_metrics
from profiler import metrics as M
from profiler.errors import SectionError, WhowaitsError

DATA = Path(__file__).resolve().parents[1] / "profiler" / "data"
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_COUNTER_ROLLUPS = {"sum", "avg", "min", "max"}
_RATIO_ROLLUPS = {"ratio", "pct", "max_rate"}
_SUBMETRICS = {
    "per_second", "per_cycle_elapsed", "per_cycle_active", "peak_sustained", "peak_sustained_active",
    "peak_sustained_elapsed", "pct_of_peak_sustained_active", "pct_of_peak_sustained_elapsed",
}


def _query_list(path: Path) -> dict[str, str]:
    """{metric: type} from an `ncu --query-metrics` printout (first column name, second column type)."""
    out = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2 and _NAME.match(parts[0]) and parts[1] in ("Counter", "Ratio", "Throughput"):
            out[parts[0]] = parts[1]
    return out


def _pm_list(path: Path) -> dict[str, str]:
    """{metric: type} from profiler/data/gh100-pmsampling-metrics.txt (name, type, unit a line)."""
    out = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2 and not line.startswith("#") and parts[1] in ("Counter", "Ratio", "Throughput"):
            out[parts[0]] = parts[1]
    return out


def _allow_list(path: Path) -> set[str]:
    return {s for line in path.read_text().splitlines() if (s := line.strip()) and not s.startswith("#")}


HW = _query_list(DATA / "gh100-metrics.txt")
SOURCE = _query_list(DATA / "gh100-source-metrics.txt")
LAUNCH = _allow_list(DATA / "gh100-launch-metrics.txt")
PM = _pm_list(DATA / "gh100-pmsampling-metrics.txt")
_PM_DOMAIN = re.compile(r"^[A-Z][A-Z0-9_]*\.Triage[A-Za-z]*\.")
GROUPS = {"group:smsp__pcsamp_warp_stall_reasons", "group:smsp__pcsamp_warp_stall_reasons_not_issued"}


def _applies_to_cc90(filt) -> bool:
    lo = filt.MinArch if filt.HasField("MinArch") else 0
    hi = filt.MaxArch if filt.HasField("MaxArch") else 10**6
    return lo <= 90 <= hi


def name_problem(name: str, defined: set[str]) -> str | None:
    """Why ``name`` is not a metric ncu collects on gh100, or None when it is."""
    if name in GROUPS or name in defined:
        return None
    if name.startswith("group:"):
        return f"unknown metric group {name}"
    pm = name.startswith("pmsampling:") or _PM_DOMAIN.match(name) is not None
    if pm:  # a PM-sampled counter: its base name is on ncu's pmsampling list (domain prefix kept)
        bare = name.removeprefix("pmsampling:")
        dot = bare.find(".", bare.find("__"))
        base, rest = (bare, "") if dot < 0 else (bare[:dot], bare[dot + 1:])
    else:
        base, _, rest = name.partition(".")
    suffix = rest.split(".") if rest else []
    if not pm and (base in SOURCE or base in LAUNCH):
        return None if not suffix else f"{name}: source/launch metrics take no rollup"
    kind = (PM if pm else HW).get(base)
    if kind is None:
        return f"{name}: {base} is not a gh100 {'PM-sampling ' if pm else ''}metric"
    if not suffix:
        return f"{name}: a {kind} needs a rollup"
    first, more = suffix[0], suffix[1:]
    allowed = _RATIO_ROLLUPS if kind == "Ratio" else _COUNTER_ROLLUPS
    if first not in allowed or any(s not in _SUBMETRICS for s in more):
        return f"{name}: bad rollup/submetric for a {kind}"
    return None


def set_problems(folder: Path) -> list[str]:
    problems = []
    for path, msg in section_files(folder).items():
        defined = {d.Name for d in msg.MetricDefinitions.MetricDefinitions}
        for d in msg.MetricDefinitions.MetricDefinitions:
            if d.HasField("Filter") and not _applies_to_cc90(d.Filter):
                continue  # another architecture's metric: not in the gh100 lists
            for ref in re.findall(r"[a-z][a-z0-9_]*__[a-z0-9_.]+", d.Expression):
                if (p := name_problem(ref, defined)) is not None:
                    problems.append(f"{path.name}: expression of {d.Name}: {p}")
        for m in section_metrics(msg):
            if m.HasField("Filter") and not _applies_to_cc90(m.Filter):
                continue
            if not m.Name:
                problems.append(f"{path.name}: metric {m.Label!r} has no name")
            elif (p := name_problem(m.Name, defined)) is not None:
                problems.append(f"{path.name}: {p}")
    return problems


@pytest.fixture(scope="module")
def sections():
    return section_files()


def test_lists_are_loaded():
    assert len(HW) > 3000 and "dram__bytes" in HW and HW["smsp__average_warp_latency_per_inst_issued"] == "Ratio"
    assert len(PM) > 1000 and PM["FE_B.TriageCompute.gr__ctas_launched_realtime"] == "Counter"
    assert PM["smsp__warps_issue_stalled_long_scoreboard"] == "Counter"
    assert "inst_executed" in SOURCE and "smsp__pcsamp_warps_issue_stalled_barrier" in SOURCE
    assert "launch__grid_size" in LAUNCH


def test_every_section_file_parses_and_is_in_the_set(sections):
    files = sorted(SECTIONS_DIR.glob("*.section"))
    assert len(files) >= 5
    assert sorted(sections) == files  # every file belongs to the whowaits set
    ids = [m.Identifier for m in sections.values()]
    assert len(set(ids)) == len(ids)
    for msg in sections.values():
        assert msg.Identifier.startswith("Whowaits") and msg.DisplayName and msg.Description
        assert msg.HasField("Header") and len(msg.Header.Metrics) >= 2  # ncu prints the header in its output


def test_stalls_render_as_a_bar_chart(sections):
    charts = [it.BarChart for msg in sections.values() for body in msg.Body for it in body.Items if it.HasField("BarChart")]
    stall_chart = [c for c in charts if any("issue_stalled" in m.Name for m in c.Metrics)]
    assert stall_chart and len(stall_chart[0].Metrics) >= 18


def test_every_metric_name_is_a_gh100_metric():
    assert set_problems(SECTIONS_DIR) == []


def test_checker_rejects_bad_names_and_fields(tmp_path):
    good = (SECTIONS_DIR / "WhowaitsRoofline.section").read_text()
    (tmp_path / "a.section").write_text(good.replace("dram__bytes.sum.per_second", "dram__bites.sum.per_second"))
    (tmp_path / "b.section").write_text(
        good.replace('Identifier: "WhowaitsRoofline"', 'Identifier: "B"').replace("dram__bytes_read.sum", "dram__bytes_read")
    )
    pm = (SECTIONS_DIR / "WhowaitsPmSampling.section").read_text()
    (tmp_path / "d.section").write_text(
        pm.replace('Identifier: "WhowaitsPmSampling"', 'Identifier: "D"')
        .replace("TPC.TriageCompute.sm__pipe_tensor_cycles_active_realtime", "TPC.TriageCompute.sm__pipe_tensor_busy")
        .replace("pmsampling:dramc__throughput.avg", "pmsampling:dramc__throughput.bogus")
    )
    problems = set_problems(tmp_path)
    assert any("dram__bites is not a gh100 metric" in p for p in problems)
    assert any("TPC.TriageCompute.sm__pipe_tensor_busy is not a gh100 PM-sampling metric" in p for p in problems)
    assert any("pmsampling:dramc__throughput.bogus.pct_of_peak_sustained_elapsed: bad rollup" in p for p in problems)
    assert any("dram__bytes_read: a Counter needs a rollup" in p for p in problems)
    (tmp_path / "c.section").write_text(good + '\nColour: "red"\n')
    with pytest.raises(SectionError, match="c.section"):
        section_files(tmp_path)
    assert issubclass(SectionError, WhowaitsError)  # the CLI's one-line error, exit 2


def test_set_covers_every_metric_the_analyses_read():
    collected = set_metrics()
    uncovered = []
    for canonical, spec in M.metric_specs().items():
        if spec.section == "(device attributes)":
            assert any(n.startswith("device__attribute_") for n in spec.names)
            continue
        if not any(n in collected for n in spec.names):
            uncovered.append(f"{canonical}: {spec.names}")
    for path, (counters, _section) in M.tensor_op_counters().items():
        # fp16/bf16 sources with fp32 accumulate: the attention ladder's paths. tf32 and fp16-accumulate
        # counters may be trimmed for passes (sections/README.md: use --set full for such kernels).
        needed = [c for c in counters if re.search(r"src_(fp16|bf16)", c) and "dst_fp16" not in c]
        assert needed, path
        uncovered += [f"tensor_ops.{path}: {c}" for c in needed if c not in collected]
    for reason in M.stall_reasons():
        ratio = M.cycles_per_issue_metric(reason)
        if ratio.partition(".")[0] in HW and ratio not in collected:
            uncovered.append(f"stall {reason}: {ratio}")
    cfg = M.stall_config()
    uncovered += [n for n in (cfg["sample_count"], cfg["cycles_per_issue_total"]) if n not in collected]
    uncovered += [n for n in M.per_pc_metrics().values() if n not in collected]
    assert uncovered == []
    # per-PC stall samples (every reason) and executed instructions per opcode
    assert GROUPS <= collected
    assert "sass__inst_executed_per_opcode" in collected


def test_set_covers_every_timeline_series():
    """Every series the timeline views read is PM-sampled by the set (tensor, issue, DRAM, L2, CTAs, SM active)."""
    collected = set_metrics()
    pm_bases = {M.pm_base_name(n) for n in collected if M.is_pm_metric(n)}
    missing = [s for s, bases in M.timeline_config()["series"].items() if not any(b in pm_bases for b in bases)]
    assert missing == []


def test_set_is_smaller_than_full(sections):
    # not a pass count (that is measured on the GPU, reports/h200/collection-cost.json) but a guard
    # against the set quietly growing into --set full: a few hundred names at most.
    assert 50 < len(set_metrics()) < 300


# --- architecture filters: the set runs on Turing, Ampere, Ada and Hopper --------------------------------

#: What the ISA and the public reports say about where a metric exists: (pattern on the metric name, the
#: lowest compute capability that has it, the highest or None). wgmma (gmma/hgmma counters and the gmma stall
#: ratio) exists only on sm_90 (Blackwell's tcgen05 replaced it); thread-block clusters and stmatrix came with
#: sm_90; `l1tex__lsu_writeback_active_mem_lgds` is the CC 9.0 name (the A100 and RTX 4070 --set full reports
#: in tests/public-reports name it `…_mem_lg`); bf16/tf32 tensor paths, cp.async (LDGSTS) and structured
#: sparsity (the `sparsity_off` op counters) came with sm_80.
ARCH_RULES = [
    (r"gmma", 90, 90),
    (r"^launch__cluster_", 90, None),
    (r"_op_stsm", 90, None),
    (r"l1tex__lsu_writeback_(active|bytes)_mem_lgds", 90, None),
    (r"l1tex__lsu_writeback_(active|bytes)_mem_lg\.", 0, 89),
    (r"bf16|tf32|_op_ldgsts|sparsity", 80, None),
]
#: Turing, Ampere (A100, A10G), Ada, Hopper
ARCHS = (75, 80, 86, 89, 90)


def _ranges(msg) -> list[tuple[str, int, int]]:
    """(metric name, lowest CC, highest CC) of every metric and metric definition of one section, where
    the range is the intersection of the metric's own Filter with those of the messages around it."""
    out: list[tuple[str, int, int]] = []

    def narrow(filt, lo, hi):
        if filt is None:
            return lo, hi
        if filt.HasField("MinArch"):
            lo = max(lo, filt.MinArch)
        if filt.HasField("MaxArch"):
            hi = min(hi, filt.MaxArch)
        return lo, hi

    def walk(m, lo, hi):
        if any(fd.name == "Filter" for fd, _ in m.ListFields()):
            lo, hi = narrow(m.Filter, lo, hi)
        name = getattr(m, "Name", "") if m.DESCRIPTOR.name in ("Metric", "MetricDefinition") else ""
        if name:
            out.append((name, lo, hi))
        for fd, value in m.ListFields():
            if fd.message_type is None or fd.name == "Filter":
                continue
            repeated = fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED
            for item in (value if repeated else [value]):
                walk(item, lo, hi)

    walk(msg, 0, 10**6)
    return out


def test_arch_specific_metrics_are_filtered(sections):
    """Every metric that only some architectures have is asked for only there (ncu's `Filter { MinArch
    MaxArch }`), so the set runs on a T4, an A10G, an RTX card and the H200 alike."""
    bad = []
    for path, msg in sections.items():
        for name, lo, hi in _ranges(msg):
            for rx, need_lo, need_hi in ARCH_RULES:
                if re.search(rx, name) and (lo < need_lo or (need_hi is not None and hi > need_hi)):
                    bad.append(f"{path.name}: {name} applies to CC {lo}..{hi}, should be {need_lo}..{need_hi}")
    assert bad == []


def test_every_architecture_gets_the_portable_core(sections):
    """On every architecture the set still asks for the duration, the launch shape, PC sampling and DRAM
    bytes; Hopper gets the wgmma counters and no older chip does."""
    core = {"gpu__time_duration.sum", "launch__grid_size", "group:smsp__pcsamp_warp_stall_reasons",
            "dram__bytes.sum", "sm__inst_executed_pipe_tensor_op_hmma.sum"}
    for cc in ARCHS:
        names = {n for msg in sections.values() for n, lo, hi in _ranges(msg) if lo <= cc <= hi}
        assert core <= names, (cc, core - names)
        gmma = {n for n in names if "gmma" in n}
        assert bool(gmma) == (cc == 90), cc
        # an L1 level on every chip: the lgds writeback on Hopper, the lg one before it
        assert any("l1tex__lsu_writeback" in n for n in names), cc
