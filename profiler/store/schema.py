"""The store's one table, ``launches``: one row per profiled launch, its columns declared once here.

A row is built from a launch summary (docs/contract.md's launch summary, :func:`profiler.analyze.summarize`)
and the report's provenance sidecar by :func:`launch_row`; :data:`COLUMNS` is the documented schema
(name, Arrow type, meaning) and :func:`arrow_schema` the Arrow schema every parquet part and the DuckDB
table are written with. Absent values are null, never 0. Shares are fractions (0..1), not percent.

``gpu``, ``subject`` and ``shape`` are the hive partition keys (``gpu=h200/subject=v07_tuned/shape=…``):
the report's place under the reports root (``<gpu>/<subject>/<shape>.ncu-rep``).
"""

from __future__ import annotations

from functools import lru_cache

import pyarrow as pa

from profiler.names import NO_SECTION

#: bump when a column is added, removed or changes meaning: every part is rebuilt on the next index
SCHEMA_VERSION = 3

PARTITION_KEYS = ("gpu", "subject", "shape")
LEVELS = ("l1", "l2", "dram", "smem")

_REGION = pa.struct([("name", pa.string()), ("source", pa.string()), ("samples", pa.int64()),
                     ("share", pa.float64())])
_OPCODE_WAIT = pa.struct([("class", pa.string()), ("samples", pa.int64()), ("share", pa.float64()),
                          ("top_reason", pa.string())])


def _base_columns() -> list[tuple[str, pa.DataType, str]]:
    return [
        ("gpu", pa.string(), "GPU folder of the report (reports/<gpu>/…), e.g. h200; partition key"),
        ("subject", pa.string(), "version id or external subject (ext-sdpa-cudnn); partition key"),
        ("shape", pa.string(), "shape key b{B}_h{H}_s{S}_d{D}_{dtype}[_causal]; partition key"),
        ("report", pa.string(), "path of the .ncu-rep file as indexed"),
        ("report_sha256", pa.string(), "sha256 of the report file"),
        ("launch_index", pa.int64(), "index of the launch in the report"),
        ("kernel", pa.string(), "demangled kernel name"),
        ("section_set", pa.string(), "ncu --set the report was taken with (sidecar)"),
        ("build_hash", pa.string(), "build cache key of the rung that was profiled (sidecar; null for external programs)"),
        ("ladder_order", pa.int64(), "position in the ladder (sidecar; null for external subjects)"),
        ("title", pa.string(), "the version's title (sidecar)"),
        ("git_commit", pa.string(), "commit the profile was taken at (sidecar)"),
        ("ncu_version", pa.string(), "ncu version (sidecar)"),
        ("gpu_name", pa.string(), "GPU name as the report's device says it, e.g. NVIDIA H200"),
        ("profiled_at", pa.string(), "ISO-8601 UTC time the profile finished (sidecar 'time')"),
        ("duration_ns", pa.float64(), "gpu__time_duration of the launch, ns"),
        ("samples_total", pa.int64(), "all stall samples of the launch (the denominator of every share)"),
    ]


def _tail_columns() -> list[tuple[str, pa.DataType, str]]:
    cols = [
        ("stall_other", pa.float64(), "share of samples on reasons not listed as columns (newer chips' reasons)"),
        ("top_waiter", pa.string(), "the top waiter as CLASS·reason (selected/not_selected aside), e.g. HMMA·wait"),
        ("top_class", pa.string(), "opcode class of the top waiter"),
        ("top_reason", pa.string(), "stall reason of the top waiter"),
        ("top_share", pa.float64(), "its share of all stall samples"),
        ("top_samples", pa.int64(), "its stall samples"),
        ("top_opcode", pa.string(), "the opcode most of its samples sit on"),
        ("top_producer", pa.string(), "for a scoreboard stall: the opcode most of its samples wait on (e.g. LDSM)"),
        ("ssc_share", pa.float64(), "short-scoreboard share of all stall samples"),
        ("tensor_path", pa.string(), "hmma | gmma | mixed | none"),
        ("tensor_pipe_pct", pa.float64(), "tensor pipe busy, % of the path's own peak"),
        ("xu_pipe_pct", pa.float64(), "XU (MUFU) pipe busy, % of its peak: ncu's counter (null where the report lacks it)"),
        ("xu_pipe_pct_sass", pa.float64(), "XU (MUFU) pipe busy, % of its peak, from the SASS's executed XU instructions"),
        ("tensor_roof_pct", pa.float64(), "achieved tensor FLOP rate, % of the GPU's dense tensor roof (null where the summary lacks it)"),
        ("flops", pa.float64(), "FLOPs the counters saw (tensor + FP32 + FP16)"),
        ("achieved_tflops", pa.float64(), "flops / duration, TFLOP/s"),
        ("compute_ceiling_tflops", pa.float64(), "dense compute ceiling of the path used, TFLOP/s at the report's clock"),
    ]
    for lv in LEVELS:
        cols.append((f"bytes_{lv}", pa.float64(), f"roofline bytes at {lv}"))
    for lv in LEVELS:
        cols.append((f"intensity_{lv}", pa.float64(), f"FLOP/byte at {lv}"))
    cols += [
        ("l2_read_fanout", pa.float64(), "L2 read fan-out: bytes the SMs received / L2 bytes read for them (SMs served "
                                         "per L2 read; null where the report lacks the counters)"),
        ("l2_read_bytes", pa.float64(), "L2 bytes read for the SMs (lts__t_sectors_srcunit_tex_op_read x 32)"),
        ("l2_read_miss_share", pa.float64(), "share of those L2 sectors that missed"),
        ("l2_read_multicast_share", pa.float64(), "share of the delivered bytes TMA multicast delivered"),
    ]
    cols += [
        ("grid_x", pa.int64(), "grid size x"), ("grid_y", pa.int64(), "grid size y"), ("grid_z", pa.int64(), "grid size z"),
        ("block_x", pa.int64(), "block size x"), ("block_y", pa.int64(), "block size y"),
        ("block_z", pa.int64(), "block size z"),
        ("cluster_x", pa.int64(), "cluster size x (0: no cluster)"), ("cluster_y", pa.int64(), "cluster size y"),
        ("cluster_z", pa.int64(), "cluster size z"),
        ("registers_per_thread", pa.int64(), "registers per thread"),
        ("shared_mem_bytes", pa.int64(), "shared memory per block, bytes"),
        ("waves_per_sm", pa.float64(), "waves per SM"),
        ("achieved_occupancy_pct", pa.float64(), "achieved occupancy, %"),
        ("regions", pa.list_(_REGION), "source regions [{name, source, samples, share}] (null without regions)"),
        ("opcode_waits", pa.list_(_OPCODE_WAIT), "stall samples by opcode class [{class, samples, share, top_reason}]"),
        ("missing", pa.list_(pa.string()), "summary fields the report could not supply"),
    ]
    return cols


@lru_cache(maxsize=1)
def stall_reason_columns() -> tuple[str, ...]:
    """The reasons that get a ``stall_<reason>`` share column: metrics.toml's list, in its order."""
    from profiler import metrics

    return tuple(metrics.stall_reasons())


@lru_cache(maxsize=1)
def columns() -> tuple[tuple[str, pa.DataType, str], ...]:
    """Every column of ``launches``: (name, Arrow type, meaning), in table order."""
    stall = [(f"stall_{r}", pa.float64(), f"share of stall samples on {r}") for r in stall_reason_columns()]
    return tuple(_base_columns() + stall + _tail_columns())


@lru_cache(maxsize=1)
def arrow_schema() -> pa.Schema:
    return pa.schema([pa.field(n, t) for n, t, _ in columns()])


def describe() -> list[dict]:
    """The documented schema as rows (``whowaits query --schema``)."""
    return [{"column": n, "type": str(t), "meaning": d} for n, t, d in columns()]


def _get(d, *keys):
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _int(v):
    return None if v is None else int(v)


def _xyz(v) -> list:
    v = list(v) if isinstance(v, (list, tuple)) else []
    return [_int(x) for x in (v + [None, None, None])[:3]]


def launch_row(summary: dict, sidecar: dict | None, *, gpu: str, subject: str, shape: str, report: str,
               report_sha256: str | None) -> dict:
    """One row of ``launches`` from a launch summary and its report's sidecar (None: no sidecar)."""
    from profiler.compare.diff import top_waiter, total_samples

    side = sidecar or {}
    total = total_samples(summary)
    shares = summary.get("stall_share") or {}
    listed = stall_reason_columns()
    top = top_waiter(summary)
    roof = summary.get("roofline") or {}
    launch = summary.get("launch") or {}
    row = {
        "gpu": gpu, "subject": subject, "shape": shape, "report": report, "report_sha256": report_sha256,
        "launch_index": _int(summary.get("launch_index")), "kernel": summary.get("kernel"),
        "section_set": side.get("section_set"), "build_hash": side.get("build_hash"),
        "ladder_order": _int(side.get("ladder_order")), "title": side.get("title"),
        "git_commit": side.get("git_commit"), "ncu_version": side.get("ncu_version"),
        "gpu_name": _get(summary, "device", "name") or side.get("gpu"), "profiled_at": side.get("time"),
        "duration_ns": summary.get("duration_ns"), "samples_total": total if total else None,
    }
    for r in listed:
        row[f"stall_{r}"] = shares.get(r)
    other = sum(v or 0.0 for k, v in shares.items() if k not in listed)
    row["stall_other"] = other if shares else None
    row.update({
        "top_waiter": f"{top['class']}·{top['reason']}" if top else None,
        "top_class": top["class"] if top else None, "top_reason": top["reason"] if top else None,
        "top_share": top["share"] if top else None, "top_samples": top["samples"] if top else None,
        "top_opcode": top.get("opcode") if top else None, "top_producer": top.get("producer") if top else None,
        "ssc_share": _get(summary, "short_scoreboard", "share"),
        "tensor_path": summary.get("tensor_path"), "tensor_pipe_pct": summary.get("tensor_pipe_pct"),
        "xu_pipe_pct": summary.get("xu_pipe_pct"), "xu_pipe_pct_sass": summary.get("xu_pipe_pct_sass"),
        "tensor_roof_pct": summary.get("tensor_roof_pct"),
        "flops": roof.get("flops"), "achieved_tflops": roof.get("achieved_tflops"),
        "compute_ceiling_tflops": _get(roof, "ceilings", "compute_tflops"),
    })
    for lv in LEVELS:
        row[f"bytes_{lv}"] = _get(roof, "bytes", lv)
        row[f"intensity_{lv}"] = _get(roof, "intensity", lv)
    for k in ("fanout", "bytes", "miss_share", "multicast_share"):
        row[f"l2_read_{k}"] = _get(roof, "l2_reads", k)
    for name, key in (("grid", "grid"), ("block", "block"), ("cluster", "cluster")):
        for axis, v in zip("xyz", _xyz(launch.get(key))):
            row[f"{name}_{axis}"] = v
    row.update({
        "registers_per_thread": _int(launch.get("registers_per_thread")),
        "shared_mem_bytes": _int(launch.get("shared_mem_bytes")),
        "waves_per_sm": launch.get("waves_per_sm"), "achieved_occupancy_pct": launch.get("achieved_occupancy_pct"),
        "regions": [{"name": r.get("name"), "source": r.get("source"), "samples": _int(r.get("samples")),
                     "share": r.get("share")} for r in summary["regions"]] if summary.get("regions") is not None else None,
        "opcode_waits": [{"class": w.get("class"), "samples": _int(w.get("samples")), "share": w.get("share"),
                          "top_reason": w.get("top_reason")} for w in summary.get("opcode_waits") or []],
        # a NO_SECTION entry is a kernel without the thing (no async group), not a field its report lacks
        "missing": [m.get("field") if isinstance(m, dict) else str(m) for m in summary.get("missing") or []
                    if not (isinstance(m, dict) and m.get("section") == NO_SECTION)],
    })
    return row
