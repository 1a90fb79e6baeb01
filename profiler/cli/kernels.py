"""`whowaits kernels list|build`, `whowaits bench`, `whowaits tune`: thin wrappers over ``kernels.*``."""

from __future__ import annotations

import csv
import io
import json
from typing import Optional

import typer

from profiler.cli._app import FORMAT_OPTION, Format, app

kernels_app = typer.Typer(help="The kernel ladder: list versions, build cubins (no GPU needed).", no_args_is_help=True)
app.add_typer(kernels_app, name="kernels")


def _emit(rows: list[dict], fmt: Format, columns: list[str], title: str) -> None:
    """Print rows as a rich table, JSON (full rows) or CSV (the listed columns)."""
    if fmt == Format.json:
        typer.echo(json.dumps(rows, indent=1))
        return
    if fmt == Format.csv:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({c: row.get(c) for c in columns})
        typer.echo(buf.getvalue().rstrip("\n"))
        return
    from rich.console import Console
    from rich.table import Table

    import sys

    table = Table(title=title)
    for c in columns:
        table.add_column(c, overflow="fold")
    for row in rows:
        table.add_row(*["" if row.get(c) is None else str(row.get(c)) for c in columns])
    Console(width=None if sys.stdout.isatty() else 200).print(table)


@kernels_app.command("list")
def list_cmd(fmt: Format = FORMAT_OPTION) -> None:
    """List the ladder's versions in order: id, title, the one change, default config."""
    from kernels import registry

    rows = [
        {
            "id": v.id,
            "parent": v.parent,
            "title": v.title,
            "change": v.change,
            "config": v.config.short_form(),
            "supports": v.supports_text(),
            "hypothesis": v.hypothesis,
            "expected_bottleneck": v.expected_bottleneck,
            "verdict": v.verdict,
        }
        for v in registry.versions()
    ]
    _emit(rows, fmt, ["id", "title", "change", "config"], "kernel ladder")


@kernels_app.command("build")
def build_cmd(
    versions: Optional[list[str]] = typer.Argument(None, help="version ids (v01 or v01_naive); default: all"),
    all_: bool = typer.Option(False, "--all", help="build every version"),
    head_dim: Optional[int] = typer.Option(None, "--head-dim", help="build for this head dim (default: the version's)"),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="fp16 or bf16 (default: the version's)"),
    causal: bool = typer.Option(False, "--causal", help="build the causal instantiation"),
    force: bool = typer.Option(False, "--force", help="rebuild even when cached"),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Compile each version's cubin with nvcc and report ptxas resources and static SASS opcode counts."""
    from kernels import build, registry

    from profiler.cli._progress import steps

    vers = registry.resolve(versions, all_)
    results = []
    with steps("building", total=len(vers)) as bar:
        for v in vers:
            bar.advance(f"nvcc {v.id}", n=0)
            cfg = v.config_for(head_dim or v.config.head_dim, dtype or v.config.dtype, causal)
            results.append(build.build(v, cfg, force=force))
            bar.advance()
    rows = [r.as_json() for r in results]
    if fmt == Format.table:
        for row in rows:
            top = sorted(row["sass_opcodes"].items(), key=lambda kv: -kv[1])[:8]
            row["top_sass"] = " ".join(f"{k}:{n}" for k, n in top)
    _emit(
        rows,
        fmt,
        ["version", "config_short", "registers", "smem_bytes", "stack_bytes", "spill_bytes", "top_sass"]
        if fmt == Format.table
        else ["version", "config_short", "registers", "smem_bytes", "stack_bytes", "spill_bytes", "barriers", "entry", "cubin"],
        "kernels build (ptxas -v, cuobjdump -sass)",
    )


@app.command("bench")
def bench_cmd(
    names: Optional[list[str]] = typer.Argument(None, help="versions (default: all) and/or baseline names"),
    shape: list[str] = typer.Option(["b1_h64_s1024_d128_fp16"], "--shape", "-s", help="shape key(s)"),
    baselines: bool = typer.Option(True, "--baselines/--no-baselines", help="add the torch SDPA / unfused rows"),
    reps: int = typer.Option(50, "--reps", help="timed calls per row (median; >= 30)"),
    warmup: int = typer.Option(5, "--warmup", help="untimed calls first"),
    out: Optional[str] = typer.Option(None, "--out", help="folder for the JSON/CSV (default reports/<gpu>/bench)"),
    force: bool = typer.Option(False, "--force", help="overwrite an existing result file"),
    repeat: int = typer.Option(1, "--repeat", help="rounds of timing, interleaved over the rows; N >= 2 measures "
                                                   "the run-to-run spread (ms_runs) that --compare and check use"),
    gemm: bool = typer.Option(True, "--gemm/--no-gemm", help="also time the dense fp16 GEMM (torch.matmul 8192^3) "
                                                            "per shape: pct_gemm, summary"),
    compare: Optional[list[str]] = typer.Option(None, "--compare", help="earlier bench .json (one per shape): "
                                                "noise-aware verdict per row (slower / faster / within noise)"),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Time versions and torch baselines in one run (GPU); save reports/<gpu>/bench/<date>-<shape>.json + .csv."""
    from pathlib import Path

    from kernels import bench
    from profiler.check import inputs as check_inputs
    from profiler.check import timing

    from profiler.errors import WhowaitsError

    prev = {}
    for path in compare or []:  # read before any GPU time: a missing file is an error, not a pass
        b = check_inputs.read_bench(path)
        if b.shape not in shape:
            raise WhowaitsError(f"--compare {path} holds shape {b.shape}, which this run does not bench "
                                f"(--shape {' --shape '.join(shape)})")
        prev[b.shape] = b
    from profiler.cli._progress import steps

    quiet = fmt != Format.table
    with steps("timing", echo=None if quiet else typer.echo) as bar:
        def log(line: str) -> None:  # each row line is a step done; the bar pulses (rows per shape vary)
            bar.log(line)
            if line.startswith("  ") and not line.startswith("  round"):
                bar.advance(line.split()[0])

        results = bench.run(names, shape, baselines=baselines, reps=reps, warmup=warmup,
                            out_dir=Path(out) if out else None, force=force, log=log, repeat=repeat,
                            gemm=gemm)
    rows = []
    for _shape, shape_rows, path in results:
        for r in shape_rows:
            rows.append(bench._finite(bench.asdict(r)))
        if not quiet:
            typer.echo(f"wrote {path} (+ .csv)")
    # the seed's columns: ms, TFLOPS, SNR, error against the reference (max_err), ratio to our best version
    columns = ["implementation", "shape", "ms", "tflops", "snr_db", "max_err", "rel_err", "best_vs", "pct_sdpa_cudnn",
               "pct_gemm", "note"]
    if compare:
        for key, b in prev.items():
            cur = [r for r in rows if r["shape"] == key]
            for res in timing.compare_bench(list(b.rows.values()), cur):
                for r in cur:
                    if r["implementation"] == res["implementation"]:
                        r["vs_prev"] = res if fmt == Format.json else timing.verdict_text(res)
        columns.append("vs_prev")
    if fmt == Format.table:
        for r in rows:
            for key, digits in (("ms", 4), ("tflops", 1), ("snr_db", 1), ("pct_sdpa_flash", 1), ("pct_sdpa_cudnn", 1),
                                ("best_vs", 3), ("pct_gemm", 1)):
                if r.get(key) is not None:
                    r[key] = round(r[key], digits)
            for key in ("rel_err", "max_err"):
                if r.get(key) is not None:
                    r[key] = f"{r[key]:.2e}"
    _emit(rows, fmt, columns, "whowaits bench")


@app.command("tune")
def tune_cmd(
    version: str = typer.Argument(..., help="version id (v02 or v02_smem_tiling)"),
    shape: str = typer.Option("b1_h64_s1024_d128_fp16", "--shape", "-s", help="shape key"),
    space: Optional[str] = typer.Option(None, "--space", help='narrow the space, e.g. "block_m=64,128;warps=4,8"'),
    build_only: bool = typer.Option(False, "--build-only", help="build and filter only (no GPU); saves nothing"),
    reps: int = typer.Option(30, "--reps", help="timed calls per config (median; >= 30)"),
    out: Optional[str] = typer.Option(None, "--out", help="folder for the JSON/CSV (default reports/<gpu>/tune)"),
    force: bool = typer.Option(False, "--force", help="overwrite an existing result file"),
    workers: Optional[int] = typer.Option(None, "--jobs", "-j", help="parallel nvcc builds (default: CPU count)"),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Auto-tune a version: build the config space, drop infeasible/spilling configs, time the rest (GPU)."""
    from dataclasses import asdict
    from pathlib import Path

    from kernels import bench, tune

    import re

    from profiler.cli._progress import steps

    quiet = fmt != Format.table
    with steps(f"tuning {version}", echo=None if quiet else typer.echo) as bar:
        def log(line: str) -> None:  # 'N configs, M dropped …, K to time' sets the total; each timed config is a step
            bar.log(line)
            if (m := re.search(r"(\d+) to time$", line)) is not None:
                bar.set_total(int(m.group(1)))
            elif line.startswith("  "):
                bar.advance(line.split()[0])

        rows, path = tune.tune(version, shape, space_text=space, build_only=build_only, reps=reps,
                               out_dir=Path(out) if out else None, force=force, workers=workers, log=log)
    data = [bench._finite(asdict(r)) for r in rows]
    if fmt == Format.table:
        for r in data:
            for key, digits in (("ms", 4), ("tflops", 1)):
                if r.get(key) is not None:
                    r[key] = round(r[key], digits)
            if r.get("rel_err") is not None:
                r["rel_err"] = f"{r['rel_err']:.2e}"
    _emit(data, fmt, ["config", "status", "reason", "registers", "smem_bytes", "spill_bytes", "ms", "tflops", "rel_err"],
          f"whowaits tune {version} {shape}")
    if path is not None and not quiet:
        typer.echo(f"wrote {path} (+ .csv)")
