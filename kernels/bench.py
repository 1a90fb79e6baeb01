"""Same-run benchmark of ladder versions against torch's attention backends: ``whowaits bench``.

Method (also stored in every result file's provenance):

- Implementations: the listed ladder versions (launched through ``kernels.launch.forward``, default
  config) and the baselines ``sdpa-auto``, ``sdpa-cudnn``, ``sdpa-flash``, ``sdpa-efficient``,
  ``sdpa-math`` (``torch.nn.functional.scaled_dot_product_attention`` pinned with ``sdpa_kernel``) and
  ``torch-unfused`` (``softmax(q kᵀ · scale) v`` as three plain torch ops in the input dtype),
  ``flex-attention`` (``torch.compile(flex_attention)``; causal through a block mask built once per shape,
  outside the timing; the compile happens in the first, untimed call) and, when ``flashinfer-python`` is
  importable (the optional extra ``.[flashinfer]``), ``flashinfer`` (its prefill kernel; skipped otherwise),
  all timed in the same process on the same inputs, one after another.
- Dense GEMM rate (``dense_gemm`` in each result file, unless ``--no-gemm``): ``torch.matmul`` of two
  8192 × 8192 fp16 matrices into a preallocated output, timed the same way in the same run;
  ``tflops`` = 2·8192³ / median time. ``pct_gemm`` of a row is its TFLOPS as a percentage of it.
- Inputs: fresh ``randn`` q, k, v of the shape (never zeros), one set per shape.
- Correctness: each implementation's output against the float64 reference (``kernels.reference``):
  ``rel_err`` = ‖out − ref‖ / ‖ref‖, ``snr_db``, ``max_err`` = max |out − ref|.
- Ratio to our best version: ``best_vs`` of a row = the TFLOPS of the fastest ladder version in the run
  divided by the row's (≥ 1: our best is that much faster); ``summary`` in each file names that version
  and its ratios to the baselines and its percentage of the dense GEMM rate.
- cuDNN at its best: on the H200 ``sdpa-auto`` dispatches to the same cuDNN kernel as ``sdpa-cudnn``, so the
  run times one kernel twice, and the two rows have differed by up to 13% (2026-12-01, b4: 498 and 561
  TFLOPS) when one of them met a slow stretch of the card. ``summary.cudnn_best`` names the faster of the two
  rows (``CUDNN_ROWS``) and ``summary.best_vs_cudnn`` is our best version over it, so a slow cuDNN row never
  flatters a ratio; the gate's rules name it ``cudnn-best``. Rounds guard the rest: with ``--repeat N`` each
  row's time pools N interleaved rounds, each starting at another row (below), so a drift of the card's
  clock lands on every row alike instead of on whichever row ran during it.
- Timing: ``warmup`` untimed calls (default 5), then ``reps`` (default 50, at least 30) timed calls; before
  each timed call a 256 MB device buffer is overwritten (``zero_()``), which flushes the 60 MB L2, then
  CUDA events are recorded around the call alone on the current stream, after a GPU-side spin
  (``HOST_LEAD_CYCLES``) that lets the host enqueue the call before the start event fires. ``ms`` is the median of the reps;
  ``ms_min`` and ``ms_p90`` show the spread. ``tflops`` = 4·B·H·S²·D (half when causal) / median time.
- Run-to-run spread (``repeat`` N > 1, ``whowaits bench --repeat N``): after the first round, N − 1 more
  rounds time every implementation again, interleaved (round 2 times all rows, then round 3 …), so slow
  drift of the card hits every row alike; round r starts at row r·n/N of the n rows (``round_order``), so no
  row always runs at the same place in a round (the H200, reports/h200/bench/2026-12-02T0002-b4_h16_s4096*,
  the same order every round: the round medians of the tensor-core rows after the first grew 2-10% from round
  1 to round 3, v18 0.875 -> 0.925 ms, cuDNN 0.908 -> 0.948, while v12's, timed first each round, fell 3%).
  ``ms_runs`` holds each round's median; ``ms``, ``ms_min`` and ``ms_p90`` are then taken over the reps of
  all rounds pooled. ``profiler.check.timing`` turns
  ``ms_runs`` into noise-aware verdicts (``whowaits bench --compare PREV.json``, ``whowaits check``).
- Suspect rows: a fused baseline timed at under 1/10 of the run's fastest row ran a fallback, not its kernel
  (:func:`suspect_rows`); ``summary.suspect`` names it with the reason, ``best_vs`` and ``cudnn_best`` leave it
  out, and the gate reads it as absent. FlexAttention is compiled with dynamo's recompile limit raised to
  ``FLEX_RECOMPILE_LIMIT`` and, where torch allows, a fallback made an error (``_no_silent_eager_fallback``).
- A backend that raises (no kernel for this shape, out of memory, an unsupported version) gets a row
  with ``ms = null`` and the first line of the error in ``note``; the run goes on.

Results per shape go to ``<out>/<YYYY-MM-DD>-<shape>.json`` = ``{"provenance": {...}, "rows": [...],
"dense_gemm": {...}, "summary": {...}}`` (the last two since 2026-12-01 ladder III; older files lack them) and a
CSV beside it (written to a temporary file and renamed; an existing file is kept unless ``force``).
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import math
import statistics
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from kernels.config import FLUSH_BYTES, Shape
from profiler.errors import WhowaitsError
from profiler.io import write_atomic
from profiler.paths import reports_root
from profiler.provenance import git_state, gpu_slug

BASELINES = ("sdpa-auto", "sdpa-cudnn", "sdpa-flash", "sdpa-efficient", "sdpa-math", "torch-unfused", "flex-attention")
BASELINES_BEFORE_FLEX = BASELINES[:6]  # what result files written before flex-attention joined hold
OPTIONAL_BASELINES = ("flashinfer",)  # added only when importable (module docstring)
GEMM_N = 8192  # the dense fp16 GEMM's M = N = K
CUDNN_ROWS = ("sdpa-cudnn", "sdpa-auto")  # one cuDNN kernel on the H200, timed as two rows (module docstring)
# The baselines a race against the fastest libraries needs (ladder IV's device script benches these with
# --no-baselines: sdpa-efficient, sdpa-math and torch-unfused are slow at the long shapes and no target names them).
RACE_BASELINES = CUDNN_ROWS + ("sdpa-flash", "flex-attention")
REPO = Path(__file__).resolve().parent.parent
METHOD = (
    "same process and inputs for all rows; randn inputs; warm-up then median of timed reps; CUDA events around "
    "the call alone, started after a GPU-side spin so the launch's host time is not timed; 256 MB buffer overwritten "
    "before every timed rep (L2 flush); rounds rotated; rel_err and SNR vs float64 reference"
)
CSV_COLUMNS = ("implementation", "shape", "ms", "tflops", "rel_err", "snr_db", "ms_min", "ms_p90", "reps",
               "pct_sdpa_flash", "pct_sdpa_cudnn", "config", "note", "max_err", "best_vs", "pct_gemm")


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
    max_err: float | None = None  # max |out - ref|
    best_vs: float | None = None  # best ladder version's TFLOPS / this row's
    pct_gemm: float | None = None  # 100 * TFLOPS / the same run's dense fp16 GEMM TFLOPS


def torch_unfused(q, k, v, causal: bool):
    """softmax(q kᵀ / sqrt(D) [+ causal mask]) v as plain torch ops in the input dtype."""
    import torch

    s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones((n, n), dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def flex_attention_callable():
    """fn(q, k, v, causal) -> o through ``torch.compile(flex_attention)`` (scale 1/sqrt(D), its default);
    causal through a block mask built on the first call of a shape and reused (not timed after that)."""
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    _no_silent_eager_fallback(torch)
    compiled = torch.compile(flex_attention, dynamic=False)
    masks: dict = {}

    def causal_mod(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    def run(q, k, v, causal):
        block_mask = None
        if causal:
            key = (int(q.shape[-2]), str(q.device))
            block_mask = masks.get(key)
            if block_mask is None:
                block_mask = masks[key] = create_block_mask(causal_mod, None, None, key[0], key[0], device=q.device)
        return compiled(q, k, v, block_mask=block_mask)

    return run


FLEX_RECOMPILE_LIMIT = 64  # compiled variants of flex_attention one process may keep (dynamo's default: 8)


def _no_silent_eager_fallback(torch) -> None:
    """Let one process compile flex_attention for every shape of a bench run, and make a fallback an error.

    Dynamo keeps at most ``recompile_limit`` (``cache_size_limit`` before torch 2.6) compiled variants per code
    object, and ``dynamic=False`` makes each shape, dtype and mask a variant: past the limit (8 by default)
    dynamo warns once and runs flex_attention *eagerly*, a math path that materialises the scores. The bench
    then timed that path as FlexAttention: 61.3 ms, 4.5 TFLOPS at b4_h32_s4096_d64_fp16_causal, the ninth
    shape of the 2026-12-03 T0414 and T0519 runs (reports/h200/bench/, max_err 0.0016 against the compiled
    kernel's 0.0011). Raising the limit keeps every shape compiled; where torch has
    ``fail_on_recompile_limit_hit``, a fallback raises instead, so the row gets a note, not a wrong time."""
    try:
        import torch._dynamo
    except ImportError:  # a torch without dynamo has no torch.compile either: the row then gets a note
        return
    cfg = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(cfg, name) and getattr(cfg, name) < FLEX_RECOMPILE_LIMIT:
            setattr(cfg, name, FLEX_RECOMPILE_LIMIT)
    if hasattr(cfg, "fail_on_recompile_limit_hit"):
        cfg.fail_on_recompile_limit_hit = True


def flashinfer_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("flashinfer") is not None


def flashinfer_callable():
    """fn(q, k, v, causal) -> o through FlashInfer's ragged batch prefill (``flashinfer-python``).

    FlashInfer takes tokens-major (B·S, H, D) tensors: the (B, H, S, D) inputs are copied to that layout once
    per input tensor (cached by pointer, outside the timing after the first call), the planned wrapper is
    cached per shape, and the output comes back as a (B, H, S, D) view. Raises when it is not installed.
    """
    import torch

    try:
        import flashinfer
    except ImportError as err:
        raise WhowaitsError("flashinfer-python is not installed (pip install '.[flashinfer]')") from err
    nhd: dict = {}
    plans: dict = {}

    def tokens_major(t):
        key = (t.data_ptr(), tuple(t.shape), str(t.dtype))
        if key not in nhd:
            b, h, s, d = t.shape
            if len(nhd) > 6:  # a long-lived process with many tensors: start over
                nhd.clear()
            nhd[key] = t.transpose(1, 2).reshape(b * s, h, d).contiguous()
        return nhd[key]

    def run(q, k, v, causal):
        b, h, s, d = (int(x) for x in q.shape)
        key = (b, h, s, d, str(q.dtype), bool(causal))
        wrapper = plans.get(key)
        if wrapper is None:
            workspace = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device=q.device)
            wrapper = flashinfer.BatchPrefillWithRaggedKVCacheWrapper(workspace, kv_layout="NHD")
            indptr = torch.arange(0, (b + 1) * s, s, dtype=torch.int32, device=q.device)
            wrapper.plan(indptr, indptr, h, h, d, causal=bool(causal), q_data_type=q.dtype)
            plans[key] = wrapper
        out = wrapper.run(tokens_major(q), tokens_major(k), tokens_major(v))
        return out.reshape(b, s, h, d).transpose(1, 2)

    return run


def implementation(name: str, config=None):
    """(display name, config short form, fn(q, k, v, causal) -> o)."""
    if name == "torch-unfused":
        return name, "", torch_unfused
    if name == "flex-attention":
        return name, "", flex_attention_callable()
    if name == "flashinfer":
        return name, "", flashinfer_callable()
    if name.startswith("sdpa-"):
        from kernels.runner import sdpa_callable

        return name, "", sdpa_callable(name)
    from kernels import registry
    from kernels.launch import forward

    ver = registry.get(name)
    return ver.id, (config.short_form() if config else ""), (
        lambda q, k, v, causal: forward(q, k, v, causal, version=ver.id, config=config)
    )


# GPU cycles of torch.cuda._sleep between the L2 flush and each timed call's start event (~100 us at 1.98 GHz): the
# host enqueues the start event, the call and the end event while the GPU spins, so a launcher's host time (the
# ladder's Python launcher: registry lookups, tensor maps, ctypes arguments; torch's dispatcher for the baselines)
# is not timed as an idle gap. Without it, short kernels measured the host: v17/v18 at b1_h64_s1024 (62 us) had
# round medians of 0.085 / 0.080 ms beside a minimum of 0.061 ms (reports/h200/bench/2026-12-02T0005-*).
HOST_LEAD_CYCLES = 200_000


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
    sleep = getattr(torch.cuda, "_sleep", None)
    for i in range(reps):
        flush.zero_()
        if sleep is not None:  # keep the GPU busy while the host enqueues the timed call (HOST_LEAD_CYCLES)
            sleep(HOST_LEAD_CYCLES)
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

    from kernels.reference import attention_ref, max_err, random_qkv, rel_err, snr_db

    impls = []  # unknown names fail before GPU work; a baseline whose library is missing gets a noted row
    for n in names:
        try:
            impls.append(implementation(n, (configs or {}).get(n)))
        except (ImportError, WhowaitsError) as exc:
            if n not in BASELINES + OPTIONAL_BASELINES:
                raise
            impls.append((n, "", _raiser(exc)))
    q, k, v = random_qkv(shape, seed=seed)
    ref = attention_ref(q, k, v, shape.causal)
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    rows = []
    rounds: dict = {}  # display -> (fn, [sorted times of each round]) when repeat > 1
    for display, cfg, fn in impls:
        try:
            out = fn(q, k, v, shape.causal)
            torch.cuda.synchronize()
            err, snr, mx = rel_err(out, ref), snr_db(out, ref), max_err(out, ref)
            del out
            times = sorted(time_fn(fn, (q, k, v, shape.causal), reps=reps, warmup=warmup, flush=flush))
            ms = statistics.median(times)
            row = BenchRow(display, shape.key, ms, shape.flops() / (ms * 1e-3) / 1e12, err, snr,
                           times[0], times[min(len(times) - 1, int(0.9 * len(times)))], reps, config=cfg,
                           max_err=mx)
        except Exception as exc:  # a backend without a kernel for this shape, OOM, ...: note it, go on
            if isinstance(exc, torch.cuda.OutOfMemoryError):
                torch.cuda.empty_cache()
            row = BenchRow(display, shape.key, None, None, None, None, config=cfg, note=_first_line(exc))
        rows.append(row)
        log(f"  {display:24s} " + (f"{row.ms:9.4f} ms {row.tflops:7.1f} TFLOPS rel_err {row.rel_err:.2e}"
                                    if row.ms is not None else f"skipped: {row.note}"))
        if row.ms is not None and repeat > 1:
            rounds[display] = (fn, [times])
    for i in range(1, repeat):  # more rounds, interleaved over the rows, each from another start (docstring)
        log(f"  round {i + 1} of {repeat}")
        for name in round_order(list(rounds), i, repeat):
            fn, runs = rounds[name]
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


def round_order(names: list[str], i: int, repeat: int) -> list[str]:
    """The rows of round ``i`` (0-based) of ``repeat``: ``names`` rotated to start at row i·n/repeat, so over
    the rounds each row runs early, in the middle and late in a round about equally often."""
    if not names:
        return []
    k = (i * len(names) // repeat) % len(names)
    return names[k:] + names[:k]


def _raiser(exc: BaseException):
    def run(q, k, v, causal):
        raise exc

    return run


def time_dense_gemm(*, reps: int = 50, warmup: int = 5, repeat: int = 1, flush=None) -> dict:
    """The dense fp16 GEMM rate of this GPU in this run: ``torch.matmul`` of two GEMM_N² fp16 matrices into a
    preallocated output, timed like the attention rows (``repeat`` rounds pooled); module docstring."""
    import torch

    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    a, b = (torch.randn((GEMM_N, GEMM_N), generator=gen, device="cuda", dtype=torch.float32).half() for _ in range(2))
    c = torch.empty((GEMM_N, GEMM_N), device="cuda", dtype=torch.float16)
    runs = [sorted(time_fn(lambda: torch.matmul(a, b, out=c), (), reps=reps, warmup=warmup, flush=flush))
            for _ in range(repeat)]
    pooled = sorted(t for run in runs for t in run)
    ms = statistics.median(pooled)
    del a, b, c
    return {"implementation": "torch-matmul", "m": GEMM_N, "n": GEMM_N, "k": GEMM_N, "dtype": "fp16", "ms": ms,
            "tflops": 2.0 * GEMM_N**3 / (ms * 1e-3) / 1e12, "ms_min": pooled[0],
            "ms_runs": [statistics.median(r) for r in runs], "reps": len(pooled)}


def is_ladder(name: str) -> bool:
    return len(name) > 4 and name[0] == "v" and name[1:3].isdigit() and name[3] == "_"


SUSPECT_FACTOR = 10.0  # a fused baseline this many times slower than the run's fastest row is not its kernel
FUSED_BASELINES = ("sdpa-auto", "sdpa-cudnn", "sdpa-flash", "sdpa-efficient", "flex-attention", "flashinfer")


def suspect_rows(tflops: dict[str, float | None]) -> dict[str, str]:
    """The fused baselines of one shape's run (name -> TFLOPS) that ran at under 1/SUSPECT_FACTOR of the run's
    fastest row, each with the reason: such a row timed a fallback, not the library's kernel (FlexAttention past
    dynamo's recompile limit runs an unfused math path: 4.5 TFLOPS beside 440, ``_no_silent_eager_fallback``).
    The summary lists them, ``whowaits bench`` prints them, and the gate reads them as absent
    (``profiler.check.inputs.read_bench``), so no ratio is ever taken against one. Ladder rows and the unfused
    baselines (sdpa-math, torch-unfused) may be that slow by design and are never suspect."""
    timed = {n: t for n, t in tflops.items() if t}
    if not timed:
        return {}
    top = max(timed, key=lambda n: timed[n])
    return {n: f"{t:.1f} TFLOPS, 1/{timed[top] / t:.0f} of {top}'s {timed[top]:.1f}: a fallback path, not its kernel"
            for n, t in timed.items() if n in FUSED_BASELINES and t * SUSPECT_FACTOR < timed[top]}


def summarize(rows: list[BenchRow], gemm: dict | None) -> dict:
    """Set each row's ``best_vs`` and ``pct_gemm``; return the file's ``summary``: the fastest ladder version,
    its ratio to every baseline row and its percentage of the dense GEMM rate (module docstring)."""
    timed = [r for r in rows if r.tflops]
    ladder = [r for r in timed if is_ladder(r.implementation)]
    best = max(ladder, key=lambda r: r.tflops) if ladder else None
    gemm_tflops = gemm["tflops"] if gemm else None
    for r in timed:
        if best is not None:
            r.best_vs = best.tflops / r.tflops
        if gemm_tflops:
            r.pct_gemm = 100.0 * r.tflops / gemm_tflops
    summary: dict = {"best_version": best.implementation if best else None,
                     "best_tflops": best.tflops if best else None,
                     "dense_gemm_tflops": gemm_tflops,
                     "best_pct_gemm": best.pct_gemm if best else None,
                     "best_vs": {r.implementation: r.best_vs for r in timed
                                 if best is not None and not is_ladder(r.implementation)}}
    suspect = suspect_rows({r.implementation: r.tflops for r in timed})
    if suspect:
        summary["suspect"] = suspect
        summary["best_vs"] = {n: x for n, x in summary["best_vs"].items() if n not in suspect}
    cudnn = [r for r in timed if r.implementation in CUDNN_ROWS and r.implementation not in suspect]
    if cudnn:
        fastest = max(cudnn, key=lambda r: r.tflops)
        summary["cudnn_best"] = {"implementation": fastest.implementation, "tflops": fastest.tflops}
        summary["best_vs_cudnn"] = best.tflops / fastest.tflops if best is not None else None
    return summary


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
    write_atomic(path, text)


def rows_csv(rows: list[dict], columns=CSV_COLUMNS) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow(r)
    return buf.getvalue()


def write_result(out_dir: Path, stem: str, prov: dict, rows: list[dict], force: bool = False,
                 columns=CSV_COLUMNS, extra: dict | None = None) -> tuple[Path, Path]:
    """Write ``<stem>.json`` and ``<stem>.csv`` atomically; refuse to overwrite unless ``force``. ``extra``
    adds top-level keys after ``rows`` (``dense_gemm``, ``summary``)."""
    jpath, cpath = out_dir / f"{stem}.json", out_dir / f"{stem}.csv"
    if not force:
        for p in (jpath, cpath):
            if p.exists():
                raise WhowaitsError(f"{p} exists; pass --force to overwrite it")
    doc = {"provenance": prov, "rows": rows, **(extra or {})}
    _atomic_write(jpath, json.dumps(doc, indent=1, allow_nan=False) + "\n", force=True)
    _atomic_write(cpath, rows_csv(rows, columns), force=True)
    return jpath, cpath


def _finite(d: dict) -> dict:
    """JSON has no inf/nan: store them as null (rel_err of NaN output is +inf in memory)."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def _finite_deep(d: dict) -> dict:
    return {k: (_finite_deep(v) if isinstance(v, dict) else v) for k, v in _finite(d).items()}


def run(names: list[str] | None, shapes: list[str], *, baselines: bool = True, reps: int = 50, warmup: int = 5,
        out_dir: Path | None = None, force: bool = False, log=print, repeat: int = 1, gemm: bool = True,
        ) -> list[tuple[Shape, list[BenchRow], Path | None]]:
    """Benchmark ``names`` (default: every version) plus the baselines on each shape and save each table
    (with the dense GEMM rate and the summary, measured per shape in the same run unless ``gemm`` is off)."""
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
    names = [n if (n in BASELINES + OPTIONAL_BASELINES) else registry.get(n).id for n in names]
    if baselines:
        names += [b for b in BASELINES if b not in names]
        if flashinfer_available():
            names += [b for b in OPTIONAL_BASELINES if b not in names]
        else:
            log("flashinfer: not installed, no row (pip install '.[flashinfer]')")
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
        dense = None
        if gemm:
            dense = time_dense_gemm(reps=reps, warmup=warmup, repeat=repeat)
            log(f"  {'torch-matmul 8192^3 fp16':24s} {dense['ms']:9.4f} ms {dense['tflops']:7.1f} TFLOPS (dense GEMM)")
        summary = summarize(rows, dense)
        if summary["best_version"]:
            log(f"  best version {summary['best_version']}: {summary['best_tflops']:.1f} TFLOPS"
                + (f", {summary['best_pct_gemm']:.1f}% of the dense GEMM" if dense else "")
                + "".join(f", {v:.3f}x {k}" for k, v in summary["best_vs"].items() if k in ("sdpa-cudnn", "flex-attention", "flashinfer"))
                + (f", {summary['best_vs_cudnn']:.3f}x cuDNN at its best ({summary['cudnn_best']['implementation']})"
                   if summary.get("best_vs_cudnn") else ""))
        for name, why in summary.get("suspect", {}).items():
            log(f"  suspect row {name}: {why} (no ratio is taken against it)")
        extra = {"summary": _finite_deep(summary)}
        if dense:
            extra = {"dense_gemm": dense, **extra}
        path, _ = write_result(out_dir, stem, prov, [_finite(asdict(r)) for r in rows], force=force, extra=extra)
        results.append((shape, rows, path))
    return results
