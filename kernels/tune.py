"""Auto-tuner (seed 001, kernel 7): ``whowaits tune VERSION [--shape KEY] [--space …] [--build-only]``.

1. Space: the product of the tunable fields of the version's config family (``fwd``: ``block_m, block_n,
   warps, stages``; ``wg``: ``block_m, block_n, warpgroups, stages``), each from ``DEFAULT_SPACE``, narrowed
   by the version's ``[tune]`` table and then by ``--space`` (``"block_m=64,128;warps=4,8"``); head_dim,
   dtype and causal come from the shape.
2. Drop before any build what cannot launch: more than 1024 threads, dynamic shared memory over 227 KB.
3. Build every remaining config with nvcc, in parallel (no GPU needed), and drop what does not compile
   (the kernel's ``static_assert`` says why), what spills (unless the version allows spills), what needs
   registers × threads > 65536 or static + dynamic shared memory > 227 KB.
4. On the GPU (skipped with ``build_only``): time each survivor as ``kernels.bench`` does (median of
   ``reps`` with L2 flushed) and check it against the float64 reference; a wrong result is dropped too.

The table (every config, kept or dropped, with the reason) is saved to
``reports/<gpu>/tune/<version>-<shape>.json`` and ``.csv`` when the GPU step ran.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from kernels import registry
from kernels.build import BuildResult, build_many
from kernels.config import TUNABLE_FIELDS, FwdConfig, Shape
from profiler.errors import WhowaitsError
from profiler.paths import reports_root
from profiler.provenance import gpu_slug

DEFAULT_SPACE: dict[str, list[int]] = {
    "block_m": [16, 32, 64, 128],
    "block_n": [16, 32, 64, 128],
    "warps": [1, 2, 4, 8],
    "warpgroups": [1, 2, 3],
    "stages": [1, 2, 3],
}
MAX_THREADS = 1024
MAX_SMEM = 227 * 1024
MAX_REGS_PER_SM = 65536
COLUMNS = ("config", "block_m", "block_n", "warps", "stages", "status", "reason", "registers", "smem_bytes",
           "spill_bytes", "ms", "tflops", "rel_err")


@dataclass
class TuneRow:
    config: str
    block_m: int
    block_n: int
    warps: int
    stages: int
    status: str  # "dropped" | "built" | "ok"
    reason: str = ""
    registers: int | None = None
    smem_bytes: int | None = None
    spill_bytes: int | None = None
    ms: float | None = None
    tflops: float | None = None
    rel_err: float | None = None


def parse_space(text: str | None, fields: tuple[str, ...] = TUNABLE_FIELDS) -> dict[str, list[int]]:
    """``"block_m=64,128;warps=4"`` -> {"block_m": [64, 128], "warps": [4]} (``fields``: the family's)."""
    if not text:
        return {}
    out: dict[str, list[int]] = {}
    for part in re.split(r"[;\s]+", text.strip()):
        if not part:
            continue
        name, _, values = part.partition("=")
        if name not in fields or not values:
            raise WhowaitsError(f"bad --space item {part!r}: use field=v1,v2 with field in {', '.join(fields)}")
        try:
            out[name] = sorted({int(v) for v in values.split(",") if v})
        except ValueError:
            raise WhowaitsError(f"bad --space item {part!r}: values must be integers") from None
    return out


def space(version: registry.Version, shape: Shape, override: dict[str, list[int]] | None = None) -> list[FwdConfig]:
    """Every config of the space, for the shape's head_dim/dtype/causal."""
    version.check_supports(shape.head_dim, shape.dtype, shape.causal)
    axes = {**DEFAULT_SPACE, **version.tune_space, **(override or {})}
    base = version.config_for(shape.head_dim, shape.dtype, shape.causal)
    fields = version.tunable_fields
    return [base.replace(**dict(zip(fields, values))) for values in itertools.product(*(axes[f] for f in fields))]


def prefilter(version: registry.Version, cfg: FwdConfig) -> str:
    """Why a config cannot launch at all (empty string: it may)."""
    if cfg.threads > MAX_THREADS:
        return f"{cfg.threads} threads > {MAX_THREADS}"
    smem = cfg.smem_bytes(version.smem_layout)
    if smem > MAX_SMEM:
        return f"dynamic smem {smem} B > {MAX_SMEM} B"
    return ""


def postfilter(version: registry.Version, res: BuildResult) -> str:
    """Why a built config is not worth GPU time (empty string: keep it)."""
    if res.spill_bytes and not version.allow_spills:
        return f"spills {res.spill_store_bytes} B stores / {res.spill_load_bytes} B loads"
    if res.registers * res.config.threads > MAX_REGS_PER_SM:
        return f"{res.registers} registers x {res.config.threads} threads > {MAX_REGS_PER_SM}"
    if res.smem_bytes > MAX_SMEM:
        return f"smem {res.smem_bytes} B (static + dynamic) > {MAX_SMEM} B"
    return ""


def _row(cfg: FwdConfig, status: str, reason: str = "", res: BuildResult | None = None) -> TuneRow:
    row = TuneRow(cfg.short_form(), cfg.block_m, cfg.block_n, cfg.warp_count, cfg.stages, status, reason)
    if res is not None:
        row.registers, row.smem_bytes, row.spill_bytes = res.registers, res.smem_bytes, res.spill_bytes
    return row


def build_step(version: registry.Version, shape: Shape, override=None, workers: int | None = None
               ) -> tuple[list[TuneRow], list[tuple[TuneRow, FwdConfig]]]:
    """Steps 1-3 (no GPU): all rows, and the survivors with their configs."""
    rows: list[TuneRow] = []
    todo: list[FwdConfig] = []
    for cfg in space(version, shape, override):
        reason = prefilter(version, cfg)
        if reason:
            rows.append(_row(cfg, "dropped", reason))
        else:
            todo.append(cfg)
    survivors = []
    for cfg, res in zip(todo, build_many([(version, c) for c in todo], workers=workers)):
        if isinstance(res, WhowaitsError):
            detail = str(res).split("does not compile: ", 1)[-1]
            detail = detail.split("error: ", 1)[-1]  # drop the file path nvcc puts first
            rows.append(_row(cfg, "dropped", f"does not compile: {detail[:160]}"))
            continue
        reason = postfilter(version, res)
        row = _row(cfg, "dropped" if reason else "built", reason, res)
        rows.append(row)
        if not reason:
            survivors.append((row, cfg))
    return rows, survivors


def gpu_step(version: registry.Version, shape: Shape, survivors, *, reps: int = 30, warmup: int = 3, log=print) -> None:
    """Step 4: time and check each survivor in place (GPU)."""
    import torch

    from kernels.bench import time_fn
    from kernels.config import FLUSH_BYTES
    from kernels.launch import forward
    from kernels.reference import TOLERANCE, attention_ref, random_qkv, rel_err

    q, k, v = random_qkv(shape)
    ref = attention_ref(q, k, v, shape.causal)
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    for row, cfg in survivors:
        try:
            out = torch.full_like(q, float("nan"))
            forward(q, k, v, shape.causal, version=version.id, config=cfg, out=out)
            torch.cuda.synchronize()
            row.rel_err = rel_err(out, ref)
            if not row.rel_err <= TOLERANCE[shape.dtype]:
                row.status, row.reason = "dropped", f"wrong result: rel_err {row.rel_err:.2e}"
                row.rel_err = None if row.rel_err == float("inf") else row.rel_err
                continue
            fn = lambda: forward(q, k, v, shape.causal, version=version.id, config=cfg, out=out)  # noqa: E731
            times = sorted(time_fn(fn, (), reps=reps, warmup=warmup, flush=flush))
            row.ms = times[len(times) // 2] if len(times) % 2 else 0.5 * (times[len(times) // 2 - 1] + times[len(times) // 2])
            row.tflops = shape.flops() / (row.ms * 1e-3) / 1e12
            row.status = "ok"
            log(f"  {row.config:32s} {row.ms:8.4f} ms {row.tflops:7.1f} TFLOPS")
        except Exception as exc:  # noqa: BLE001 — a config that fails to launch is dropped, the run goes on
            row.status, row.reason = "dropped", f"launch failed: {str(exc).splitlines()[0][:160]}"


def sort_rows(rows: list[TuneRow]) -> list[TuneRow]:
    order = {"ok": 0, "built": 1, "dropped": 2}
    return sorted(rows, key=lambda r: (order[r.status], r.ms if r.ms is not None else 0.0, r.config))


def tune(version_id: str, shape_key: str, *, space_text: str | None = None, build_only: bool = False,
         reps: int = 30, out_dir: Path | None = None, force: bool = False, workers: int | None = None,
         log=print) -> tuple[list[TuneRow], Path | None]:
    """Run the tuner; returns the sorted table and the JSON path written (None with ``build_only``)."""
    from kernels import bench
    from kernels.launch import require_cuda_torch

    version = registry.get(version_id)
    shape = Shape.parse(shape_key)
    override = parse_space(space_text, version.tunable_fields)
    if not build_only:  # fail before minutes of nvcc, not after
        try:
            require_cuda_torch()
        except WhowaitsError as err:
            raise WhowaitsError(f"{err}; use --build-only to build and filter the space without a GPU") from None
    rows, survivors = build_step(version, shape, override, workers)
    dropped = [r for r in rows if r.status == "dropped"]
    log(f"{version.id} {shape.key}: {len(rows)} configs, {len(dropped)} dropped before the GPU, {len(survivors)} to time")
    if build_only:
        return sort_rows(rows), None
    gpu_step(version, shape, survivors, reps=reps, log=log)
    rows = sort_rows(rows)
    prov = bench.provenance(reps, 3)
    prov["version"], prov["shape"] = version.id, shape.key
    out_dir = out_dir or reports_root() / gpu_slug(prov["gpu"]) / "tune"  # never inside site-packages
    path, _ = bench.write_result(out_dir, f"{version.id}-{shape.key}", prov,
                                 [bench._finite(asdict(r)) for r in rows], force=force, columns=COLUMNS)
    return rows, path
