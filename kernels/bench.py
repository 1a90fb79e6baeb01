"""Same-run benchmark of ladder versions against torch's attention backends: ``whowaits bench``.

Method (also stored in every result file's provenance):

- Implementations: the listed ladder versions (launched through ``kernels.launch.forward``, default
  config) and the baselines ``sdpa-auto``, ``sdpa-cudnn``, ``sdpa-flash``, ``sdpa-efficient``,
  ``sdpa-math`` (``torch.nn.functional.scaled_dot_product_attention`` pinned with ``sdpa_kernel``) and
  ``torch-unfused`` (``softmax(q kᵀ · scale) v`` as three plain torch ops in the input dtype), all timed in
  the same process on the same inputs, one after another.
- Inputs: fresh ``randn`` q, k, v of the shape (never zeros), one set per shape.
- Correctness: each implementation's output against the float64 reference (``kernels.reference``):
  ``rel_err`` = ‖out − ref‖ / ‖ref‖, ``snr_db``.
- Timing: ``warmup`` untimed calls (default 5), then ``reps`` (default 50, at least 30) timed calls; before
  each timed call a 256 MB device buffer is overwritten (``zero_()``), which flushes the 60 MB L2, then
  CUDA events are recorded around the call alone on the current stream. ``ms`` is the median of the reps;
  ``ms_min`` and ``ms_p90`` show the spread. ``tflops`` = 4·B·H·S²·D (half when causal) / median time.
- Run-to-run spread (``repeat`` N > 1, ``whowaits bench --repeat N``): after the first round, N − 1 more
  rounds time every implementation again, interleaved (round 2 times all rows, then round 3 …), so slow
  drift of the card hits every row alike. ``ms_runs`` holds each round's median; ``ms``, ``ms_min`` and
  ``ms_p90`` are then taken over the reps of all rounds pooled. ``profiler.check.timing`` turns
  ``ms_runs`` into noise-aware verdicts (``whowaits bench --compare PREV.json``, ``whowaits check``).
- A backend that raises (no kernel for this shape, out of memory, an unsupported version) gets a row
  with ``ms = null`` and the first line of the error in ``note``; the run goes on.

Results per shape go to ``<out>/<YYYY-MM-DD>-<shape>.json`` = ``{"provenance": {...}, "rows": [...]}`` and a
CSV beside it (written to a temporary file and renamed; an existing file is kept unless ``force``).
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import math
import os
import statistics
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from kernels.config import Shape
from profiler.errors import WhowaitsError
from profiler.paths import reports_root
from profiler.provenance import git_state, gpu_slug

BASELINES = ("sdpa-auto", "sdpa-cudnn", "sdpa-flash", "sdpa-efficient", "sdpa-math", "torch-unfused")
FLUSH_BYTES = 256 * 1024 * 1024
REPO = Path(__file__).resolve().parent.parent
METHOD = (
    "same process and inputs for all rows; randn inputs; warm-up then median of timed reps; CUDA events around "
    "the call alone; 256 MB buffer overwritten before every timed rep (L2 flush); rel_err and SNR vs float64 reference"
)
CSV_COLUMNS = ("implementation", "shape", "ms", "tflops", "rel_err", "snr_db", "ms_min", "ms_p90", "reps",
               "pct_sdpa_flash", "pct_sdpa_cudnn", "config", "note")


@dataclass
class BenchRow:
    implementation: str
    shape: str
    ms: float | None
    tflops: float | None
    rel_err: float | None
    snr_db: float | None
    ms_min: float | None = None
    ms_p90: float | None = None
    reps: int = 0
    pct_sdpa_flash: float | None = None
    pct_sdpa_cudnn: float | None = None
    config: str = ""
    note: str = ""
    ms_runs: list[float] | None = None  # one median per round with repeat > 1 (module docstring)


def torch_unfused(q, k, v, causal: bool):
    """softmax(q kᵀ / sqrt(D) [+ causal mask]) v as plain torch ops in the input dtype."""
    import torch

    s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones((n, n), dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def implementation(name: str, config=None):
    """(display name, config short form, fn(q, k, v, causal) -> o)."""
    if name == "torch-unfused":
        return name, "", torch_unfused
    if name.startswith("sdpa-"):
        from kernels.runner import sdpa_callable

        return name, "", sdpa_callable(name)
    from kernels import registry
    from kernels.launch import forward

    ver = registry.get(name)
    return ver.id, (config.short_form() if config else ""), (
        lambda q, k, v, causal: forward(q, k, v, causal, version=ver.id, config=config)
    )


def time_fn(fn, args, *, reps: int = 50, warmup: int = 5, flush=None) -> list[float]:
    """Milliseconds of ``reps`` timed calls of ``fn(*args)`` (CUDA events, L2 flushed before each)."""
    import torch

    if reps < 30:
        raise WhowaitsError(f"reps must be >= 30 for a stable median, got {reps}")
    if flush is None:
        flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn(*args)
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        flush.zero_()
        starts[i].record()
        fn(*args)
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:200]


def bench_shape(names: list[str], shape: Shape, *, reps: int = 50, warmup: int = 5, seed: int | None = None,
                configs: dict | None = None, log=print, repeat: int = 1) -> list[BenchRow]:
    """Benchmark every implementation on one shape, in the order given; see the module docstring."""
    import torch

    from kernels.reference import attention_ref, random_qkv, rel_err, snr_db

    impls = [implementation(n, (configs or {}).get(n)) for n in names]  # unknown names fail before GPU work
    q, k, v = random_qkv(shape, seed=seed)
    ref = attention_ref(q, k, v, shape.causal)
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    rows = []
    rounds: dict = {}  # display -> (fn, [sorted times of each round]) when repeat > 1
    for display, cfg, fn in impls:
        try:
            out = fn(q, k, v, shape.causal)
            torch.cuda.synchronize()
            err, snr = rel_err(out, ref), snr_db(out, ref)
            del out
            times = sorted(time_fn(fn, (q, k, v, shape.causal), reps=reps, warmup=warmup, flush=flush))
            ms = statistics.median(times)
            row = BenchRow(display, shape.key, ms, shape.flops() / (ms * 1e-3) / 1e12, err, snr,
                           times[0], times[min(len(times) - 1, int(0.9 * len(times)))], reps, config=cfg)
        except Exception as exc:  # a backend without a kernel for this shape, OOM, ...: note it, go on
            if isinstance(exc, torch.cuda.OutOfMemoryError):
                torch.cuda.empty_cache()
            row = BenchRow(display, shape.key, None, None, None, None, config=cfg, note=_first_line(exc))
        rows.append(row)
        log(f"  {display:24s} " + (f"{row.ms:9.4f} ms {row.tflops:7.1f} TFLOPS rel_err {row.rel_err:.2e}"
                                    if row.ms is not None else f"skipped: {row.note}"))
        if row.ms is not None and repeat > 1:
            rounds[display] = (fn, [times])
    for i in range(1, repeat):  # more rounds, interleaved over the rows (module docstring)
        log(f"  round {i + 1} of {repeat}")
        for fn, runs in rounds.values():
            runs.append(sorted(time_fn(fn, (q, k, v, shape.causal), reps=reps, warmup=warmup, flush=flush)))
    for r in rows:
        if r.implementation in rounds:
            apply_rounds(r, rounds[r.implementation][1], shape)
    by_name = {r.implementation: r for r in rows}
    for r in rows:
        for base, attr in (("sdpa-flash", "pct_sdpa_flash"), ("sdpa-cudnn", "pct_sdpa_cudnn")):
            b = by_name.get(base)
            if r.tflops is not None and b is not None and b.tflops:
                setattr(r, attr, 100.0 * r.tflops / b.tflops)
    return rows


def apply_rounds(row: BenchRow, runs: list[list[float]], shape: Shape) -> None:
    """Set ``ms_runs`` (each round's median) and the pooled ``ms``/``ms_min``/``ms_p90``/``tflops``/``reps``."""
    pooled = sorted(t for run in runs for t in run)
    row.ms_runs = [statistics.median(run) for run in runs]
    row.ms = statistics.median(pooled)
    row.ms_min, row.ms_p90 = pooled[0], pooled[min(len(pooled) - 1, int(0.9 * len(pooled)))]
    row.reps = len(pooled)
    row.tflops = shape.flops() / (row.ms * 1e-3) / 1e12


def provenance(reps: int, warmup: int) -> dict:
    import torch

    driver = None
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        driver = smi.stdout.strip().splitlines()[0] if smi.returncode == 0 and smi.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        pass
    props = torch.cuda.get_device_properties(0)
    commit, dirty = git_state(REPO)
    return {
        "gpu": torch.cuda.get_device_name(0),
        "sm_count": props.multi_processor_count,
        "driver": driver,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "git_commit": commit,
        "git_dirty": dirty,
        "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "method": METHOD,
        "reps": reps,
        "warmup": warmup,
        "l2_flush_bytes": FLUSH_BYTES,
    }


def _atomic_write(path: Path, text: str, force: bool) -> None:
    if path.exists() and not force:
        raise WhowaitsError(f"{path} exists; pass --force to overwrite it")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def rows_csv(rows: list[dict], columns=CSV_COLUMNS) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow(r)
    return buf.getvalue()


def write_result(out_dir: Path, stem: str, prov: dict, rows: list[dict], force: bool = False,
                 columns=CSV_COLUMNS) -> tuple[Path, Path]:
    """Write ``<stem>.json`` and ``<stem>.csv`` atomically; refuse to overwrite unless ``force``."""
    jpath, cpath = out_dir / f"{stem}.json", out_dir / f"{stem}.csv"
    if not force:
        for p in (jpath, cpath):
            if p.exists():
                raise WhowaitsError(f"{p} exists; pass --force to overwrite it")
    _atomic_write(jpath, json.dumps({"provenance": prov, "rows": rows}, indent=1, allow_nan=False) + "\n", force=True)
    _atomic_write(cpath, rows_csv(rows, columns), force=True)
    return jpath, cpath


def _finite(d: dict) -> dict:
    """JSON has no inf/nan: store them as null (rel_err of NaN output is +inf in memory)."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def run(names: list[str] | None, shapes: list[str], *, baselines: bool = True, reps: int = 50, warmup: int = 5,
        out_dir: Path | None = None, force: bool = False, log=print, repeat: int = 1,
        ) -> list[tuple[Shape, list[BenchRow], Path | None]]:
    """Benchmark ``names`` (default: every version) plus the baselines on each shape and save each table."""
    from kernels import registry
    from kernels.launch import require_cuda_torch

    if repeat < 1:
        raise WhowaitsError(f"--repeat must be >= 1, got {repeat}")
    require_cuda_torch()
    if reps < 30:
        raise WhowaitsError(f"--reps must be >= 30, got {reps}")
    parsed = [Shape.parse(s) for s in shapes]
    if not names:
        names = [v.id for v in registry.versions()]
    names = [n if (n in BASELINES) else registry.get(n).id for n in names]
    if baselines:
        names += [b for b in BASELINES if b not in names]
    prov = provenance(reps, warmup)
    prov["repeat"] = repeat
    out_dir = out_dir or reports_root() / gpu_slug(prov["gpu"]) / "bench"  # never inside site-packages
    date = prov["time"][:10]
    results = []
    for shape in parsed:
        stem = f"{date}-{shape.key}"
        if not force and ((out_dir / f"{stem}.json").exists() or (out_dir / f"{stem}.csv").exists()):
            raise WhowaitsError(f"{out_dir / stem}.json exists; pass --force to overwrite it")
        log(f"bench {shape.key} ({prov['gpu']}, reps {reps})")
        rows = bench_shape(names, shape, reps=reps, warmup=warmup, log=log, repeat=repeat)
        path, _ = write_result(out_dir, stem, prov, [_finite(asdict(r)) for r in rows], force=force)
        results.append((shape, rows, path))
    return results
