"""The JSON contract, written out: ``python -m profiler.contract`` generates ``docs/contract.md``.

The launch summary's fields and types come from :mod:`profiler.schema` (the types the summary cache
validates against), the store's columns from :mod:`profiler.store.schema`, the sidecar's keys from
:data:`profiler.provenance.SIDECAR_KEYS`; what each field means is :data:`SUMMARY_MEANINGS` below (or the
comment beside the field in ``profiler/schema.py`` where this table has none). The other commands' JSON
(timeline, roles, diff, migration, check) is not typed: :data:`OUTPUTS` declares every field they print,
and ``tests/test_contract.py`` runs each command on committed reports and fails on a field not declared
here. ``python -m profiler.contract --check`` exits 1 when the committed file differs from the generated
one (the test does the same).
"""

from __future__ import annotations

import re
import sys
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "contract.md"

# --- the launch summary: what each field means ---------------------------------------------------------------
# Paths: ``a.b`` a nested object, ``a[]`` the items of a list. A field absent here takes the comment beside it
# in profiler/schema.py; tests/test_contract.py fails on a field with neither.
SUMMARY_MEANINGS: dict[str, str] = {
    "report": "path of the .ncu-rep file as given",
    "launch_index": "index of the launch in the report (0-based); null when merged",
    "launch_indices": "the launches this object covers (`[launch_index]` for one launch)",
    "kernel": "demangled kernel name; merged: the distinct names joined by ` + `",
    "duration_ns": "the launch's duration, ns (`gpu__time_duration.sum`)",
    "stall_samples": "stall samples per stall reason (ncu's suffixes: `long_scoreboard`, `wait`, …), from "
                     "`smsp__pcsamp_warps_issue_stalled_<reason>`; equal to what ncu prints for the report",
    "stall_share": "each reason's share of all stall samples (fractions, summing to 1 over the reasons)",
    "stall_cycles_per_issue": "average warps stalled on the reason per issued instruction "
                              "(`smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio`); null when merged",
    "short_scoreboard": "short-scoreboard (SSC) stalls: waits on a variable-latency MIO result "
                        "(LDS, LDSM, SHFL, MUFU …)",
    "short_scoreboard.samples": "SSC stall samples",
    "short_scoreboard.share": "SSC share of all stall samples",
    "short_scoreboard.cycles_per_issue": "SSC warps stalled per issued instruction; null when merged",
    "short_scoreboard.by_class": "SSC samples per opcode class of the waiting instruction",
    "barriers": "barrier instructions (BAR, SYNCS/mbarrier, WARPGROUP.DEPBAR, DEPBAR, MEMBAR …)",
    "barriers.static": "instructions per barrier opcode in the kernel's SASS",
    "barriers.executed": "warp-level executions per barrier opcode (`inst_executed` per PC); null per opcode "
                         "without per-PC data",
    "tensor_pipe_pct": "tensor pipe busy, % of the tensor path's own peak (mma.sync HMMA or wgmma HGMMA)",
    "xu_pipe_pct": "XU (MUFU: ex2, rcp, …; also I2F, F2I, POPC, FLO) pipe busy, % of its peak over active cycles: "
                   "ncu's `sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active` (WhowaitsPipes, or ncu's "
                   "ComputeWorkloadAnalysis); null with a `missing` reason on reports that did not collect it. Above "
                   "`tensor_pipe_pct`: the exponential, not the tensor core, is the nearer roof",
    "xu_pipe_pct_sass": "the XU pipe's % from the SASS: executed MUFU, I2F, F2I, POPC and FLO warp instructions over "
                        "0.5 per SM per active cycle (`sm__cycles_active.avg`); equal to `xu_pipe_pct` on every "
                        "committed report with both (cc 8.0 and 9.0), null on other compute capabilities",
    "tensor_roof_pct": "achieved tensor FLOP rate, % of the GPU's dense tensor roof (wgmma on Hopper) at the "
                       "report's clock: compares versions on different tensor paths on one scale",
    "tensor_path": "`hmma` (mma.sync), `gmma` (wgmma), `mixed`, `none`; merged: `a+b`",
    "tensor_inst": "tensor instructions executed, by path",
    "tensor_inst.hmma": "HMMA (mma.sync) instructions executed",
    "tensor_inst.hgmma": "HGMMA (wgmma) instructions executed",
    "roofline": "the roofline: FLOPs, bytes and intensities per memory level, each pipe's roof with its clock",
    "roofline.flops": "FLOPs the counters saw (tensor + FP32 + FP16)",
    "roofline.flops_by_path": "FLOPs per pipe",
    "roofline.flops_by_path.tensor_hmma": "FLOPs on the mma.sync tensor path",
    "roofline.flops_by_path.tensor_hgmma": "FLOPs on the wgmma tensor path",
    "roofline.flops_by_path.fp32": "FP32 FLOPs (FFMA counts 2)",
    "roofline.flops_by_path.fp16": "FP16 FLOPs (non-tensor)",
    "roofline.bytes": "bytes moved at each level",
    "roofline.bytes.l1": "L1/TEX bytes (ncu's L1 roofline term)",
    "roofline.bytes.l2": "L2 bytes",
    "roofline.bytes.dram": "DRAM bytes",
    "roofline.bytes.smem": "shared-memory bytes: `sm__sass_data_bytes_mem_shared` plus the wgmma operand bytes "
                           "it leaves out (whowaits' fourth level)",
    "roofline.intensity": "total FLOPs / bytes at each level (FLOP/byte)",
    "roofline.intensity.l1": "FLOP/byte at L1",
    "roofline.intensity.l2": "FLOP/byte at L2",
    "roofline.intensity.dram": "FLOP/byte at DRAM",
    "roofline.intensity.smem": "FLOP/byte at shared memory",
    "roofline.achieved_tflops": "roofline.flops / duration, TFLOP/s",
    "roofline.flops_tensor": "tensor FLOPs only (either path)",
    "roofline.intensity_tensor": "tensor FLOPs / bytes at each level (ncu's own roofline intensity)",
    "roofline.intensity_tensor.l1": "tensor FLOP/byte at L1",
    "roofline.intensity_tensor.l2": "tensor FLOP/byte at L2",
    "roofline.intensity_tensor.dram": "tensor FLOP/byte at DRAM",
    "roofline.intensity_tensor.smem": "tensor FLOP/byte at shared memory",
    "roofline.achieved_tensor_tflops": "tensor FLOPs / duration, TFLOP/s",
    "roofline.attainable_tflops": "min(compute roof, intensity × bandwidth) at each level, TFLOP/s",
    "roofline.attainable_tflops.l1": "attainable TFLOP/s at L1",
    "roofline.attainable_tflops.l2": "attainable TFLOP/s at L2",
    "roofline.attainable_tflops.dram": "attainable TFLOP/s at DRAM",
    "roofline.attainable_tflops.smem": "attainable TFLOP/s at shared memory",
    "roofline.ceilings": "the roofs (profiler/data/gpus.toml), each at the clock the report ran at; "
                         "null for a GPU without ceilings",
    "roofline.ceilings.tensor_hmma_tflops": "dense mma.sync roof, TFLOP/s",
    "roofline.ceilings.tensor_hgmma_tflops": "dense wgmma roof, TFLOP/s (null before Hopper)",
    "roofline.ceilings.fp32_tflops": "FP32 roof, TFLOP/s",
    "roofline.ceilings.fp16_tflops": "FP16 (non-tensor) roof, TFLOP/s",
    "roofline.ceilings.bandwidth_bytes_per_s": "bandwidth roof of each level, bytes/s",
    "roofline.ceilings.bandwidth_bytes_per_s.l1": "L1 bandwidth, bytes/s",
    "roofline.ceilings.bandwidth_bytes_per_s.l2": "L2 bandwidth, bytes/s",
    "roofline.ceilings.bandwidth_bytes_per_s.dram": "DRAM bandwidth, bytes/s",
    "roofline.ceilings.bandwidth_bytes_per_s.smem": "shared-memory bandwidth (128 B/clk/SM), bytes/s",
    "roofline.ceilings.clock_hz.sm": "SM clock of the compute roofs, Hz",
    "roofline.ceilings.clock_hz.l1": "clock of the L1 roof, Hz",
    "roofline.ceilings.clock_hz.l2": "clock of the L2 roof, Hz",
    "roofline.ceilings.clock_hz.dram": "clock of the DRAM roof, Hz",
    "roofline.ceilings.clock_hz.smem": "clock of the shared-memory roof, Hz",
    "roofline.smem": "the shared-memory level in detail",
    "roofline.smem.bytes_by_op": "shared-memory bytes per instruction kind",
    "roofline.smem.bytes_by_op.ld": "LDS bytes",
    "roofline.smem.bytes_by_op.st": "STS bytes",
    "roofline.smem.bytes_by_op.ldsm": "LDSM (ldmatrix) bytes",
    "roofline.smem.bytes_by_op.stsm": "STSM (stmatrix) bytes",
    "roofline.smem.bytes_by_op.ldgsts": "LDGSTS (cp.async) bytes written to shared memory",
    "roofline.smem.bytes_by_op.gmma": "wgmma operand bytes read from shared memory",
    "roofline.smem.bytes_by_op.atom": "shared-memory atomics' bytes",
    "roofline.smem.ldsm": "LDSM bank conflicts",
    "roofline.smem.ldsm.wavefronts": "LDSM shared-memory wavefronts",
    "roofline.smem.ldsm.bank_conflicts": "LDSM bank conflicts (extra wavefronts)",
    "roofline.l2_reads": "the L2 read fan-out: how many SMs one L2 read for the SMs serves (many CTAs reading the same "
                         "tile at once share one read; `roofline.bytes.l2`, lts2xbar cycles × 32, counts the deliveries "
                         "and cannot tell). Every field null, each counter named in `missing` with its `reason`, on "
                         "reports that did not collect its counters (whowaits' WhowaitsRoofline section since commit "
                         "fa07923; ncu's full set has all but `multicast_bytes`): `show` says \"not collected\", and "
                         "the gap note and the gate's `no_missing` leave them out",
    "roofline.l2_reads.delivered_bytes": "bytes the SMs' L1TEX received from the crossbar, TMA included "
                                         "(`l1tex__m_xbar2l1tex_read_bytes.sum`)",
    "roofline.l2_reads.multicast_bytes": "of those, bytes delivered by TMA multicast "
                                         "(`l1tex__m_xbar2l1tex_read_bytes_mem_global_op_tma_ld_dest_multicast.sum`)",
    "roofline.l2_reads.sectors": "L2 sectors read for the SMs, LSU and TMA (`lts__t_sectors_srcunit_tex_op_read.sum`)",
    "roofline.l2_reads.requests": "L2 requests read for the SMs (`lts__t_requests_srcunit_tex_op_read.sum`)",
    "roofline.l2_reads.miss_sectors": "of those sectors, the ones that missed in L2 "
                                      "(`lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum`)",
    "roofline.l2_reads.bytes": "L2 bytes read for the SMs: sectors × 32 (profiler/data/gpus.toml `l2_sector_bytes`)",
    "roofline.l2_reads.fanout": "delivered_bytes / bytes: SMs served per L2 read (2.44 for v34 at "
                                "b4_h16_s4096_d128_fp16 on the H200, 1.74-1.85 for v36/v37); null where either is 0 "
                                "or unknown (the RTX 4070 report's counter delivers 0 bytes for the L2's reads)",
    "roofline.l2_reads.miss_share": "miss_sectors / sectors (fraction)",
    "roofline.l2_reads.multicast_share": "multicast_bytes / delivered_bytes (fraction)",
    "opcode_waits": "stall samples per opcode class of the waiting instruction, heaviest first",
    "opcode_waits[].class": "opcode class (profiler/data/opcode_classes.toml: HMMA, LDSM, SYNCS, …)",
    "opcode_waits[].samples": "stall samples on that class's instructions",
    "opcode_waits[].share": "their share of all stall samples",
    "opcode_waits[].top_reason": "the class's heaviest stall reason",
    "who_waits": "who waits on what: opcode class × stall reason cells, heaviest first",
    "who_waits[].class": "opcode class of the waiting instruction",
    "who_waits[].reason": "stall reason",
    "who_waits[].samples": "stall samples of the cell",
    "who_waits[].share": "share of all stall samples",
    "who_waits[].top_opcode": "the opcode most of the cell's samples sit on (e.g. `WARPGROUP.DEPBAR`)",
    "who_waits[].top_address": "address of the cell's heaviest instruction",
    "who_waits[].top_sass": "SASS text of the cell's heaviest instruction",
    "who_waits[].at_exit": "of the cell's samples, those on the kernel's exit path (the run of fences and last "
                           "barriers before an EXIT, data/opcode_classes.toml [exit_tail]): warps with no work "
                           "left waiting for the others; the top waiter leaves them out (absent from summaries written "
                           "before it existed: read as 0)",
    "waits_on": "waiter ← producer: for scoreboard stalls, the instruction each waiting one waits for "
                "(profiler/analyze/producers.py); every row, never truncated",
    "waits_on[].class": "opcode class of the waiter",
    "waits_on[].opcode": "opcode of the waiter",
    "waits_on[].reason": "`short_scoreboard` or `long_scoreboard`",
    "waits_on[].producer_class": "opcode class of the producer the waiter waits for; `MEMORY` for a memory fence "
                                 "(MEMBAR, FENCE, an acquire's CCTL: data/producers.toml [fences]), which waits "
                                 "for all the warp's memory operations in flight",
    "waits_on[].producer_opcode": "opcode of the producer (LDSM, LDG, SYNCS, …; `memory in flight` for a fence)",
    "waits_on[].samples": "stall samples attributed (shared among candidate producers, hence fractional)",
    "waits_on[].share": "share of all stall samples",
    "waits_on_unresolved": "scoreboard stall samples no producer could be traced for, per reason (never guessed)",
    "top_instructions": "the instructions holding the most stall samples, heaviest first",
    "top_instructions[].address": "the instruction's address",
    "top_instructions[].offset": "its offset in the kernel function",
    "top_instructions[].sass": "its SASS text",
    "top_instructions[].class": "its opcode class",
    "top_instructions[].samples": "its stall samples",
    "top_instructions[].top_reason": "its heaviest stall reason",
    "top_instructions[].kernel": "the kernel it belongs to (merged summaries of several kernels)",
    "launch": "launch shape; null when merged (launches may differ)",
    "launch.index": "launch index",
    "launch.grid": "grid size [x, y, z]",
    "launch.block": "block size [x, y, z]",
    "launch.cluster": "cluster size [x, y, z] (null or 0s: no cluster)",
    "launch.registers_per_thread": "registers per thread",
    "launch.shared_mem_bytes": "shared memory per block (static + dynamic), bytes",
    "launch.waves_per_sm": "waves per SM (ncu's occupancy section)",
    "launch.achieved_occupancy_pct": "achieved occupancy, % of the theoretical maximum warps",
    "device": "the GPU the report was taken on",
    "device.name": "GPU name (e.g. `NVIDIA H200`)",
    "device.cc": "compute capability (e.g. `9.0`)",
    "device.sm_count": "number of SMs",
    "regions": "stall samples and executed instructions per source region (profiler/data/regions.toml: "
               "`load_q, load_kv, qk, softmax, pv, epilogue, sync, other` for attention), summing exactly to the "
               "kernel's totals; [] without per-PC data; merged: by (name, source)",
    "regions[].name": "region name, from its vocabulary in profiler/data/regions.toml",
    "regions[].source": "`declared` (the kernel's `// @region` markers) or `inferred` (from the SASS)",
    "regions[].stall_samples": "stall samples per reason in the region",
    "regions[].samples": "all stall samples in the region",
    "regions[].share": "share of the kernel's samples",
    "regions[].inst_executed": "warp-level instructions executed in the region",
    "regions[].pcs": "instructions (PCs) in the region",
    "regions[].inherited_samples": "samples on shared helpers or unmarked lines that took the region of the code "
                                   "around them (0 when inferred)",
    "role_edges": "who waits on whom between warp roles (`whowaits roles`): one edge per waiter, barrier and "
                  "releaser, heaviest first",
    "role_edges[].waiter": "the waiting role (producer, consumer, cta, …)",
    "role_edges[].barrier": "the barrier waited on: `mbarrier@0x440`, a ring `mbarrier@0x400×2`, `bar 4`, "
                            "`wgmma group`, `SB0`, …",
    "role_edges[].releaser": "the role or engine that releases it (`TMA ← producer`, `tensor core (wgmma)`, …)",
    "role_edges[].samples": "stall samples of the edge's wait sites",
    "role_edges[].share": "share of all stall samples",
    "role_edges[].inferred": "true where the pairing rests on an assumption (an address under another guard, "
                             "displacement matching)",
    "timeline": "PM sampling in brief (what diff, migration and the HTML compare); null when merged",
    "timeline.phases": "ramp-up, steady state and tail found in the activity series; null without PM sampling",
    "timeline.phases[].name": "`ramp`, `steady` or `tail`",
    "timeline.phases[].share": "share of the kernel's time",
    "timeline.phases[].duration_ns": "duration, ns",
    "timeline.steady_tensor_pct": "tensor-pipe activity in the steady state, %",
    "timeline.tail_share": "the tail's share of the kernel's time",
    "timeline.ramp_share": "the ramp-up's share of the kernel's time",
    "timeline.duration_ns": "the sampled window, ns",
    "timeline.interval_ns": "median spacing of the samples, ns",
    "timeline.activity": "the series the phases come from (`tensor_pct`, else `issue_pct`)",
    "timeline.dip_share": "the steady state's dips: the activity they lost, as a share of the kernel's time "
                          "(optional: summaries made before dips lack it)",
    "timeline.dip_count": "how many dips the steady state has (optional, as dip_share)",
    "timeline.curve": "the series on 50 bins of normalised time: `x`, `tensor_pct`, `issue_pct`, "
                      "`warps` {reason: [share]}",
    "timeline.missing": "what the timeline lacks (as `missing` below)",
    "timeline.missing[].field": "the field left null",
    "timeline.missing[].section": "the ncu section that would supply it",
    "overlap": "async-group wait sites (wgmma / cp.async): what runs under the group each wait retires "
               "(profiler/analyze/overlap.py); null + `missing` when the SASS commits no group",
    "overlap[].group": "`wgmma` or `cp_async`",
    "overlap[].address": "the wait's address",
    "overlap[].offset": "the wait's offset in the kernel function",
    "overlap[].sass": "the wait's SASS text",
    "overlap[].samples": "stall samples on the wait",
    "overlap[].share": "share of all stall samples",
    "overlap[].top_reason": "the wait's heaviest stall reason",
    "overlap[].next_offsets": "offsets of the next wait of the same kind on every path",
    "overlap[].next_pending": "their N",
    "overlap[].between_static": "class -> instructions between this wait and the next one",
    "overlap[].between_executed": "class -> their executions",
    "overlap[].kernel": "the kernel the wait belongs to",
    "missing": "every field left null, with the ncu section that would supply it (`none`: no section would)",
    "missing[].field": "the field's path (`roofline.bytes.smem`, `stall_cycles_per_issue.gmma`, …)",
    "missing[].section": "the ncu section that would supply it, or `none`",
    "missing[].reason": "why, where whowaits can say more than the section (e.g. the SASS commits no group)",
}

# Keys a summary carries beyond the typed schema (the schema allows extra keys; these are printed today).
SUMMARY_EXTRA: dict[str, str] = {"missing[].reason": "str"}


# --- the other commands' JSON --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Output:
    """One command's JSON: where it comes from, its shape, and every field (path -> meaning). A path ending in
    ``.*`` is a map: its keys are names (series, reasons, classes), each value as the path says."""

    title: str
    command: str
    shape: str
    fields: dict[str, str]


_DIFF_ROW = {
    "samples_a": "samples in A", "samples_b": "samples in B",
    "share_a": "share of A's samples", "share_b": "share of B's samples",
    "lo_a": "Wilson 95% interval of share_a, low", "hi_a": "… high",
    "lo_b": "Wilson 95% interval of share_b, low", "hi_b": "… high",
    "delta": "share_b − share_a", "delta_lo": "Newcombe interval of the change, low", "delta_hi": "… high",
    "significant": "the interval excludes 0 (Bonferroni per table): a change, not noise",
}


_CONFOUNDS = {
    "warnings": "the confound guard: differences between the compared reports that are not the kernel "
                "(GPU, ncu version, clock control, section set, …; profiler/compare/confound.py)",
    "warnings[].field": "what differs (or `provenance`: reports without a sidecar)",
    "warnings[].values": "its value per label", "warnings[].values.*": "the value",
    "warnings[].message": "one line saying so",
}


def _diff_rows(table: str, keys: dict[str, str]) -> dict[str, str]:
    return {f"{table}[].{k}": v for k, v in {**keys, **_DIFF_ROW}.items()}


def _timeline_brief(prefix: str) -> dict[str, str]:
    return {f"{prefix}.{k}": v for k, v in {
        "activity": "the series the phases come from", "duration_ns": "sampled window, ns",
        "interval_ns": "sample spacing, ns", "ramp_share": "ramp-up share of the time",
        "steady_tensor_pct": "steady-state tensor activity, %", "tail_share": "tail share of the time",
        "dip_share": "the steady state's dips, share of the time (optional)",
        "dip_count": "dips in the steady state (optional)",
        "phases[].name": "ramp | steady | tail", "phases[].share": "share of the time",
        "phases[].duration_ns": "duration, ns", "curve": "binned series (null without PM sampling)",
        "curve.x": "normalised time of each bin", "curve.tensor_pct": "tensor-pipe activity per bin, %",
        "curve.issue_pct": "instruction issue per bin, %", "curve.warps": "warp-state shares per bin",
        "curve.warps.*": "one list per warp state (long_scoreboard, barrier, …)",
        "missing[].field": "field left null", "missing[].section": "section that would supply it",
    }.items()}


OUTPUTS: tuple[Output, ...] = (
    Output("Timeline", "whowaits timeline REPORT --format json", "a list, one object per launch", {
        "report": "the report's path", "launch_index": "launch index", "kernel": "demangled kernel name",
        "t_ns": "sample times from the kernel's start, ns (each sample covers the interval ending there)",
        "interval_ns": "median spacing of the samples, ns", "duration_ns": "the window: the last t_ns",
        "series": "one list of values per series, aligned with t_ns",
        "series.*": "tensor_pct, issue_pct, ipc, dram_pct, l2_pct, ctas_launched, sm_active_cycles, warps_<state>",
        "sources": "the ncu metric each series is read from", "sources.*": "the metric name",
        "activity": "the series the phases come from (tensor_pct when the kernel uses the tensor pipe)",
        "steady_level": "the activity's steady level (a sample is steady from 80% of it on)",
        "phases[].name": "ramp | steady | tail", "phases[].start_ns": "start, ns", "phases[].end_ns": "end, ns",
        "phases[].duration_ns": "duration, ns", "phases[].share": "share of the window",
        "phases[].samples": "samples in the phase",
        "steady_tensor_pct": "tensor-pipe activity in the steady state, %", "tail_share": "the tail's share",
        "ramp_share": "the ramp-up's share",
        "dips": "the steady state's dips: runs of samples under 90% of the activity around them, each widened by "
                "a sample (null without phases; [] when none)",
        "dips[].start_ns": "start, ns", "dips[].end_ns": "end, ns", "dips[].samples": "samples in the dip",
        "dips[].level": "the activity around the dip (median of the calm steady samples within 3 of it)",
        "dips[].min_pct": "the lowest activity sample in it",
        "dips[].deficit_ns": "the activity it lost, as time at its level, ns",
        "dips[].share": "deficit_ns over the window",
        "dips[].rose": "the series that rose in the dip: mean in it over the median of the rest of the steady "
                       "state, from 1.25x on, highest first (at most 4)",
        "dips[].rose.*": "the ratio",
        "dip_share": "the dips' deficits over the window (null without phases)",
        "dip_period_ns": "the median spacing of the dips' centres, from 3 dips on (else null)",
        "missing[].field": "field left null without PM sampling",
        "missing[].section": "the section that would supply it",
    }),
    Output("Roles", "whowaits roles REPORT --format json", "a list, one object per launch", {
        "kernel": "demangled kernel name", "launch_index": "launch index",
        "total_samples": "all stall samples of the launch (the denominator of every share)",
        "roles[].name": "role name: producer, consumer, … (split at setmaxnreg), or cta for one role",
        "roles[].source": "declared (setmaxnreg) or inferred",
        "roles[].setmaxnreg": "the role's register count, or null",
        "roles[].ranges": "the role's SASS offset ranges [[start, end], …]", "roles[].pcs": "its instructions",
        "roles[].samples": "its stall samples", "roles[].inst_executed": "its warp-level executions",
        "roles[].does": "what it does in words (MMA consumer, TMA producer, tile scheduler, epilogue, exit)",
        "roles[].warps": "the warps of a CTA that play it (empty when unknown)",
        "roles[].entry": "offset of its first instruction outside any loop",
        "roles[].entry_executed": "ncu's executed count there",
        "roles[].entry_expected": "what the warp split predicts there (its warps that reach it × the launch's CTAs)",
        "edges[].waiter": "waiting role", "edges[].barrier": "barrier name (mbarrier@0x440, bar 4, wgmma group, …)",
        "edges[].releaser": "releasing role or engine", "edges[].samples": "samples of the edge's wait sites",
        "edges[].share": "share of total_samples", "edges[].inferred": "the pairing rests on an assumption",
        "edges[].evidence": "what paired waiter and releaser", "edges[].pcs": "the wait sites' offsets",
        "edges[].partial": "[offset, reason, samples] taken from instructions shared with other work",
        "unresolved.samples": "samples of wait sites with no releaser",
        "unresolved.reasons": "why, per wait site", "unresolved.reasons.*": "samples",
        "missing[].field": "what needs per-PC stall samples the report lacks (`edges`, `roles[].samples`)",
        "missing[].section": "the ncu section that would supply them (SourceCounters)",
    }),
    Output("Diff", "whowaits diff A B --format json", "one object", {
        "a": "label of A (the baseline)", "b": "label of B", "speedup": "A's time / B's time",
        "verdict": "the verdict sentence: time change beside the stall changes, the region and phase that moved",
        "top_a": "A's top waiter", "top_b": "B's top waiter",
        "notes": "what could not be compared, one line each", **_CONFOUNDS,
        **{f"top_{s}.{k}": v for s in "ab" for k, v in {
            "class": "opcode class", "reason": "stall reason", "opcode": "opcode", "samples": "samples",
            "share": "share", "producer": "what it waits for (scoreboard stalls), or null",
            "tied_with": "the other class·reason cells within noise of it ([] when it stands alone)"}.items()},
        **_diff_rows("stalls", {"reason": "stall reason"}),
        **_diff_rows("classes", {"class": "opcode class", "top_reason_a": "its top reason in A",
                                 "top_reason_b": "in B"}),
        **_diff_rows("waits", {"class": "opcode class", "reason": "stall reason"}),
        **_diff_rows("waits_on", {"class": "waiter class", "reason": "stall reason", "producer": "producer opcode"}),
        **_diff_rows("ssc", {"class": "opcode class", "cycles_per_issue_a": "SSC cycles per issue in A",
                             "cycles_per_issue_b": "in B"}),
        **_diff_rows("regions", {"region": "region name", "source_a": "declared | inferred in A",
                                 "source_b": "in B"}),
        "barriers[].opcode": "barrier opcode", "barriers[].kind": "`static` (in the SASS) or `executed`",
        "barriers[].a": "count in A", "barriers[].b": "count in B", "barriers[].ratio": "b / a",
        "barriers[].significant": "the change is more than noise",
        "metrics[].metric": "a scalar: duration_ns, achieved_tflops, tensor_pipe_pct, xu_pipe_pct, xu_pipe_pct_sass, "
                            "tensor_roof_pct, bytes_<level>, intensity_<level>, ldsm_conflict_ways, l2_read_fanout, "
                            "l2_read_bytes, l2_read_delivered_bytes, l2_read_miss_share, l2_read_multicast_share, "
                            "registers_per_thread, waves_per_sm, …",
        "metrics[].a": "value in A", "metrics[].b": "value in B", "metrics[].ratio": "b / a",
        "metrics[].significant": "the change is more than noise",
        "phases[].phase": "ramp | steady | tail | dips (the steady state's dips: their lost activity, "
                          "timeline.dip_share)", "phases[].share_a": "share of A's time",
        "phases[].share_b": "share of B's time", "phases[].duration_ns_a": "duration in A, ns (dips: the time lost)",
        "phases[].duration_ns_b": "duration in B, ns", "phases[].delta": "share_b − share_a",
        "phases[].significant": "moved by more than two samples",
        **_timeline_brief("timeline_a"), **_timeline_brief("timeline_b"),
    }),
    Output("Migration", "whowaits migration --format json", "one object", {
        "versions": "the versions in order",
        "notes": "what was left out and what the reports lack, one line per group of reports", **_CONFOUNDS,
        "table[].version": "version (or label)",
        "table[].step": "the step sentence that leads to this row (empty for the first)",
        "table[].title": "title (sidecar)", "table[].kernel": "demangled kernel name",
        "table[].change": "the one-line change (version.toml or series file)",
        "table[].hypothesis": "the hypothesis written before measuring",
        "table[].verdict": "the verdict after", "table[].expected_bottleneck": "what the version expected to wait on",
        "table[].duration_ns": "time, ns", "table[].tflops": "problem FLOPs / time, TFLOP/s",
        "table[].tflops_counted": "counted FLOPs / time", "table[].gbps": "problem bytes / time (--problem-bytes)",
        "table[].speedup_prev": "speed-up over the row above (null for the first)",
        "table[].speedup_first": "speed-up over the first row",
        "table[].vs": "the row an external subject is compared with (the ladder's top rung), else null",
        "table[].top_class": "top waiter's opcode class", "table[].top_reason": "top waiter's reason",
        "table[].top_opcode": "top waiter's opcode", "table[].top_producer": "what it waits for",
        "table[].top_share": "top waiter's share", "table[].top_lo": "its 95% interval, low",
        "table[].top_tied_with": "the other class·reason cells within noise of the top one, comma-separated, or null",
        "table[].top_note": "why a version has no top waiter, or null",
        "table[].dram_pct_of_peak": "DRAM throughput, % of peak (the summary's throughput)",
        "table[].l2_pct_of_peak": "L2 throughput, % of peak", "table[].debug_build": "a -G build, from its SASS",
        "table[].l2_read_fanout": "SMs served per L2 read for the SMs (null without the counters)",
        "table[].l2_read_multicast_share": "share of the bytes delivered to the SMs that came by TMA multicast",
        "table[].top_hi": "… high", "table[].ssc_share": "SSC share",
        "table[].tensor_path": "hmma | gmma | mixed | none",
        "table[].tensor_pipe_pct": "tensor pipe, % of its path's peak",
        "table[].xu_pipe_pct": "XU (MUFU) pipe, % of its peak (ncu's counter; null where the report lacks it)",
        "table[].xu_pipe_pct_sass": "XU (MUFU) pipe, % of its peak, from the SASS's executed XU instructions",
        "table[].tensor_roof_pct": "tensor FLOP rate, % of the GPU's dense tensor roof",
        "table[].compute_roof_tflops": "the compute roof of the pipe carrying most FLOPs",
        **{f"table[].intensity_{lv}": f"FLOP/byte at {lv}" for lv in ("l1", "l2", "dram", "smem")},
        **{f"table[].intensity_tensor_{lv}": f"tensor FLOP/byte at {lv}" for lv in ("l1", "l2", "dram", "smem")},
        "table[].ramp_share": "ramp-up share of the time", "table[].steady_share": "steady-state share",
        "table[].tail_share": "tail share", "table[].steady_tensor_pct": "steady-state tensor activity, %",
        "table[].dip_share": "the steady state's dips, share of the time (null in summaries made before dips)",
        "table[].top_role_edge": "heaviest role edge (`waiter —[barrier]→ releaser`), or null",
        "table[].top_role_share": "its share",
        "steps[].step": "step number", "steps[].src": "version before", "steps[].dst": "version after",
        "steps[].speedup": "time(src) / time(dst)", "steps[].top_src": "top waiter before",
        "steps[].top_dst": "top waiter after", "steps[].moved": "the top waiter moved",
        "steps[].beside": "an external subject set beside the ladder, not chained",
        "steps[].sentence": "where the bottleneck went, in one sentence",
        "path[].version": "version", "path[].class": "top waiter's class", "path[].reason": "its reason",
        "path[].opcode": "its opcode", "path[].producer": "what it waits for", "path[].samples": "its samples",
        "path[].share": "its share", "path[].tied_with": "cells within noise of it",
        "waiters[].version": "version", "waiters[].class": "opcode class", "waiters[].reason": "stall reason",
        "waiters[].samples": "samples", "waiters[].share": "share",
        "stall_shares[].version": "version", "stall_shares[].reason": "stall reason",
        "stall_shares[].samples": "samples", "stall_shares[].share": "share",
        "stall_shares[].lo": "95% interval, low", "stall_shares[].hi": "… high",
        "regions[].version": "version", "regions[].region": "region", "regions[].source": "declared | inferred",
        "regions[].samples": "samples", "regions[].share": "share",
        "roofline[].version": "version", "roofline[].level": "l1 | l2 | dram | smem",
        "roofline[].intensity": "FLOP/byte", "roofline[].intensity_tensor": "tensor FLOP/byte",
        "roofline[].tflops": "achieved TFLOP/s", "roofline[].tflops_tensor": "achieved tensor TFLOP/s",
        "roofline[].path": "tensor path", "roofline[].compute_pipe": "pipe carrying most FLOPs",
        "roofs[].level": "memory level (l1, l2, dram, smem)", "roofs[].path": "tensor path whose compute roof it is",
        "roofs[].intensity": "a point of the roof line: intensity, FLOP/byte", "roofs[].tflops": "… and TFLOP/s",
        "timelines[].version": "version", "timelines[].series": "series name",
        "timelines[].x": "normalised time", "timelines[].value": "value",
    }),
    Output("Gate", "whowaits check --format json", "one object", {
        "policy": "the policy file", "baseline": "the baseline (bench file, folder or git revision), or null",
        "passed": "every rule held", "exit_code": "0 passed, 1 a rule failed, 2 a usage or input error",
        "counts.pass": "results that held", "counts.fail": "results that failed",
        "counts.error": "results that could not be judged",
        "results[].rule": "the rule's number in the policy (1-based)", "results[].line": "its line in the policy file",
        "results[].version": "version", "results[].subject": "`version @ shape`, as printed",
        "results[].shape": "shape key",
        "results[].check": "the check (min_tflops, max_share, no_regression, …)",
        "results[].field": "the field checked, by the names of this contract",
        "results[].value": "measured value", "results[].value_text": "measured value as printed",
        "results[].op": "comparison (<=, >=, ==)", "results[].limit": "the limit",
        "results[].limit_text": "the limit as printed",
        "results[].verdict": "pass | fail | error", "results[].message": "one line: rule, field, value, limit, verdict",
        "results[].source": "the file the value was read from",
    }),
)

SIDECAR_MEANINGS: dict[str, str] = {
    "version": "the subject (version id or ext-…)", "shape": "the shape key `b{B}_h{H}_s{S}_d{D}_{dtype}[_causal]`",
    "ncu_command": "the full ncu command line", "ncu_version": "ncu's version",
    "driver_version": "the driver's version",
    "gpu": "GPU name", "git_commit": "commit of the checkout (or `$WHOWAITS_GIT_COMMIT`)",
    "git_dirty": "the checkout had uncommitted changes", "clock_control": "ncu --clock-control (none)",
    "cache_control": "ncu --cache-control", "section_set": "ncu --set (whowaits, full, …)",
    "kernel_filter": "ncu --kernel-name", "launch_skip": "ncu --launch-skip", "launch_count": "ncu --launch-count",
    "nvtx_include": "ncu --nvtx-include ranges", "time": "ISO-8601 UTC time the profile finished",
    "tool_version": "whowaits' version", "report_sha256": "sha256 of the report file",
    "split_command": "the per-version command when one session profiled several, else null",
    "build_hash": "the rung's build cache key (kernels.build): sources, headers, nvcc version, flags",
    "problem_flops": "FLOPs of one call of the problem (fills the TFLOPS column)",
    "ladder_order": "position in the ladder (null for external subjects)", "title": "the version's title",
    "change": "the one-line change", "expected_bottleneck": "what the version expected to wait on",
}


# --- rendering -------------------------------------------------------------------------------------------------
def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def _unwrap(tp: Any) -> tuple[Any, bool]:
    """(type without None, nullable?)."""
    if typing.get_origin(tp) is Union:
        arms = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(arms) == 1:
            return arms[0], True
    return tp, False


def _type_text(tp: Any) -> str:
    tp, nullable = _unwrap(tp)
    origin = typing.get_origin(tp)
    if _is_typeddict(tp):
        text = "object"
    elif origin is list:
        text = "list of " + _inner_text(typing.get_args(tp)[0])
    elif origin is dict:
        text = "map of name → " + _inner_text(typing.get_args(tp)[1])
    elif origin is Union:
        text = " or ".join(_type_text(a) for a in typing.get_args(tp))
    else:
        text = {int: "integer", float: "number", str: "string", bool: "boolean", Any: "any"}.get(tp, str(tp))
    return text + ((", or null" if " " in text else " or null") if nullable else "")


def _inner_text(tp: Any) -> str:
    text = _type_text(tp)
    return f"({text})" if " or " in text else text


def _schema_comments() -> dict[tuple[str, str], str]:
    """(TypedDict name, field) -> the comment beside the field in profiler/schema.py."""
    out: dict[tuple[str, str], str] = {}
    current = None
    for line in (ROOT / "profiler" / "schema.py").read_text().splitlines():
        m = re.match(r"class (\w+)\(TypedDict\)", line) or re.match(r"(\w+) = TypedDict\(", line)
        if m:
            current = m.group(1)
            continue
        if current is None or "#" not in line:
            continue
        code, comment = line.split("#", 1)
        keys = re.findall(r'"(\w+)":', code) or re.findall(r"^\s+(\w+):", code)
        if keys:
            out[(current, keys[-1])] = comment.strip()
    return out


def summary_fields() -> list[tuple[str, str, str]]:
    """(path, type, meaning) of every field of :class:`profiler.schema.Summary`, in declaration order."""
    from profiler.schema import Summary  # noqa: PLC0415

    comments = _schema_comments()
    rows: list[tuple[str, str, str]] = []

    def walk(td: Any, prefix: str) -> None:
        for key, tp in typing.get_type_hints(td).items():
            path = f"{prefix}.{key}" if prefix else key
            meaning = SUMMARY_MEANINGS.get(path) or comments.get((td.__name__, key), "")
            rows.append((path, _type_text(tp), meaning))
            inner, _ = _unwrap(tp)
            if _is_typeddict(inner):
                walk(inner, path)
            elif typing.get_origin(inner) is list:
                item, _ = _unwrap(typing.get_args(inner)[0])
                if _is_typeddict(item):
                    walk(item, path + "[]")
    walk(Summary, "")
    # extra keys, placed after the record they belong to
    for extra, t in SUMMARY_EXTRA.items():
        parent = extra.rsplit(".", 1)[0]
        at = max(i for i, r in enumerate(rows) if r[0] == parent or r[0].startswith(parent + "."))
        rows.insert(at + 1, (extra, {"str": "string"}.get(t, t), SUMMARY_MEANINGS.get(extra, "")))
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return lines


def render() -> str:
    from profiler.provenance import SIDECAR_KEYS  # noqa: PLC0415
    from profiler.store.schema import columns  # noqa: PLC0415

    out = [
        "# The JSON contract",
        "",
        "<!-- generated by `python -m profiler.contract` from profiler/schema.py, profiler/contract.py,",
        "     profiler/provenance.py and profiler/store/schema.py; do not edit: tests/test_contract.py checks it -->",
        "",
        "What whowaits prints and writes, field by field: the views, the gate and the store read these names,",
        "and so can your scripts. Extend them, do not rename them.",
        "",
        "- A value a report cannot give is `null`, and the field is named in `missing` with the ncu section",
        "  that would supply it; never a silent 0.",
        "- Shares are fractions (0..1) of all stall samples of the launch; `_pct` fields are percentages.",
        "  Times are ns unless the name says otherwise.",
        "- Names come from one place: stall reasons are ncu's suffixes (`long_scoreboard`, `wait`, …),",
        "  opcode classes `profiler/data/opcode_classes.toml`, regions `load_q, load_kv, qk, softmax, pv,",
        "  epilogue, sync, other`.",
        "- Objects may carry keys beyond this list (views added later); every key listed is always present.",
        "",
        "Contents: [launch summary](#the-launch-summary-whowaits-show-report---format-json) ·",
        " · ".join(f"[{o.title.lower()}](#{_anchor(o)})" for o in OUTPUTS) + " ·",
        "[sidecar](#the-sidecar-reportsgpusubjectshapejson) · [store](#the-store-table-launches)",
        "",
        "## The launch summary: `whowaits show REPORT --format json`",
        "",
        "A list, one object per profiled launch (`profiler.analyze.summarize(path)` returns the same list;",
        "`profiler.compare.merge.merge_launches` gives the same object for several launches merged, with `null`",
        "where a per-launch value does not add up). Types from `profiler/schema.py` (`Summary`), which the",
        "summary cache validates every entry against.",
        "",
    ]
    out += _table(("field", "type", "meaning"), [(f"`{p}`", t, m) for p, t, m in summary_fields()])
    for o in OUTPUTS:
        out += ["", f"## {o.title}: `{o.command}`", "", f"{o.shape[0].upper()}{o.shape[1:]}. `[]` marks the items of "
                "a list, `*` the names of a map.", ""]
        out += _table(("field", "meaning"), [(f"`{p}`", m) for p, m in o.fields.items()])
    out += ["", "## The sidecar: `reports/<gpu>/<subject>/<shape>.json`", "",
            "Beside every report `whowaits profile` writes: what built and measured it. The views read these,",
            "never `kernels/`. Keys in `profiler.provenance.SIDECAR_KEYS`; a backfilled sidecar may add `note`.", ""]
    out += _table(("key", "meaning"), [(f"`{k}`", SIDECAR_MEANINGS.get(k, "")) for k in SIDECAR_KEYS])
    out += ["", "## The store table `launches`", "",
            "`whowaits index` writes one row per profiled launch (parquet parts + DuckDB); "
            "`whowaits query --schema`",
            "prints the same list. Columns from `profiler/store/schema.py`; shares are fractions, "
            "absent values null.", ""]
    out += _table(("column", "type", "meaning"), [(f"`{n}`", str(t), m) for n, t, m in columns()])
    return "\n".join(out) + "\n"


def _anchor(o: Output) -> str:
    text = f"{o.title}: {o.command}".lower()
    return re.sub(r"[^a-z0-9 _-]", "", text).replace(" ", "-")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = render()
    if argv == ["--check"]:
        if not DOC.is_file() or DOC.read_text() != text:
            print("profiler.contract: docs/contract.md is not the generated one: run python -m profiler.contract",
                  file=sys.stderr)
            return 1
        return 0
    if argv:
        print("usage: python -m profiler.contract [--check]", file=sys.stderr)
        return 2
    from profiler.io import write_atomic  # noqa: PLC0415

    DOC.parent.mkdir(exist_ok=True)
    write_atomic(DOC, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
