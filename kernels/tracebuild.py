"""Run one ladder version with the measured role trace on (docs/trace.md): the GPU side of ``whowaits trace``.

The trace is a compile-time switch of the device headers (``kernels/common/sm90/trace.cuh``): this module
builds the version's translation unit with ``#define WHOWAITS_TRACE 1`` in front (``build.translation_unit``,
``build.NVCC_FLAGS``: the same flags as every build, cached under ``<build cache>/../trace/``), loads the
traced cubin, points its ``__device__`` global ``whowaits_trace`` at a buffer (``cuModuleGetGlobal`` + a
copy; the launch ABI is unchanged: ``kernels/launch.py`` launches it like the untraced one), and runs:

* correctness: the traced output against the untraced one on the same inputs (the trace must not change
  the result);
* the overhead, in the same run: ``rounds`` rounds of ``reps`` timed launches of the untraced and the traced
  cubin, interleaved (CUDA events, L2 flushed before each), medians compared; the traced launch asks for
  ``TAIL_BYTES`` of dynamic shared memory more (per slot a 16-byte cursor and a parking area of ``PARK``
  events, ``trace.cuh``);
* the persistent rungs (ABI ``tensor_maps_persistent``: v13, v14) launch one CTA per SM, as ``kernels.launch``
  does, each CTA walking several tiles: a slot then holds several tiles' events (``CAPACITY_PERSISTENT``);
* one traced launch kept: the raw events (``numpy`` arrays: per slot = (CTA, warpgroup) its count and events)
  written as ``<out>/<shape>.trace-raw.npz`` beside a ``meta`` JSON (version, config, shape, clock rate,
  timings). :mod:`profiler.analyze.event_trace` turns that into the Perfetto JSON and the summary, on any machine.

torch and cuda.bindings are imported lazily.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import math
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from kernels import build as B
from kernels import registry
from kernels.config import Shape
from profiler.traceformat import WAIT_CLASSES, waits_name
from profiler.errors import WhowaitsError
from profiler import settings
from profiler.io import write_atomic

SLOTS = 4  # WHOWAITS_TRACE_SLOTS: warpgroups per CTA with a slot
PARK = 16  # WHOWAITS_TRACE_PARK: parked events per warpgroup (trace.cuh, format 2)
TAIL_BYTES = SLOTS * (16 + PARK * 16)  # kTraceTailBytes: the cursors and the parking areas, after the kernel's own
TRACE_FORMAT = 2  # 1: every stamp ordinary (the committed traces, e303d95); 2: parked stamps in wgmma windows
PARK_DROPPED = 12  # kTraceParkDropped: arg = parked events lost
CAPACITY = 1024  # events per slot (16 bytes each)
CAPACITY_PERSISTENT = 4096  # a persistent CTA walks ceil(tiles / SMs) tiles
WAIT_CAPACITY = 2048  # the wait log: 8-byte records per slot (b1_h64_s1024, one tile a CTA: ~80 for a consumer)
WAIT_CAPACITY_PERSISTENT = 16384  # b4_h16_s4096 on 132 SMs: ~16 tiles of 32 key blocks, ~9 records each
EVENT_DTYPE = [("t", "<u8"), ("kind", "<u4"), ("arg", "<u4")]


MODES = {"events": "WHOWAITS_TRACE", "waits": "WHOWAITS_TRACE_WAITS"}  # the switch of each mode (trace.cuh)


def traced_unit(version, config, mode: str = "events", classes: str = "all", per_warp: bool = False) -> str:
    """The build's translation unit with the trace switched on (``mode`` "waits": the wait log, logging the
    record ``classes`` of :data:`WAIT_CLASSES`, one row per warp with ``per_warp``)."""
    extra = (f"#define WHOWAITS_TRACE_WAITS_CLASSES {WAIT_CLASSES[classes]}u\n"
             if mode == "waits" and classes != "all" else "")
    extra += "#define WHOWAITS_TRACE_WAITS_PER_WARP 1\n" if mode == "waits" and per_warp else ""
    return f"#define {MODES[mode]} 1\n" + extra + B.translation_unit(version, config)


def build_traced(version, config, mode: str = "events", classes: str = "all",
                 per_warp: bool = False) -> B.BuildResult:
    """Compile (or fetch) the traced cubin of ``version`` at ``config``: the event trace, or (``mode`` "waits")
    the wait-log build. Cached under ``<build cache>/../trace[-waits]/`` by a key of the unit, the flags, nvcc's
    version and the sources (by their path below kernels/, so a build made here is found on the GPU host)."""
    h = hashlib.sha256()
    h.update(B.nvcc_version().encode() + " ".join(B.NVCC_FLAGS).encode()
             + traced_unit(version, config, mode, classes, per_warp).encode())
    # the rung's own source, every kernel.cu it includes (v34's includes v27's: an edit there must rebuild v28-v46's
    # traced cubins too), and the shared headers
    rungs = B.included_files(version.source.read_text(), version.source)
    for path in dict.fromkeys([version.source, *rungs, *sorted((B.KERNELS_DIR / "common").glob("**/*"))]):
        if path.is_file():
            h.update(str(_rel(path)).encode() + path.read_bytes())
    folder = "trace" if mode == "events" else f"trace-{mode}"
    tag = ("" if classes == "all" else f"-{classes}") + ("-warps" if per_warp else "")
    out = B.cache_dir().parent / folder / f"{version.id}-{config.short_form()}{tag}-{h.hexdigest()[:20]}"
    meta_path = out / "meta.json"
    if not meta_path.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{version.id}-", dir=out.parent))
        try:
            tu = tmp / "tu.cu"
            tu.write_text(traced_unit(version, config, mode, classes, per_warp))
            cmd = [B.find_nvcc(), *B.NVCC_FLAGS, "-I", str(B.KERNELS_DIR), "-o", str(tmp / "kernel.cubin"), str(tu)]
            env = {**os.environ, "TMPDIR": str(tmp), "TEMP": str(tmp), "TMP": str(tmp)}
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            log = proc.stdout + proc.stderr
            if proc.returncode != 0:
                raise WhowaitsError(f"traced {version.id} does not compile: {B._first_error(log)}")
            # C7519 (warpgroup.arrive injected) is the trace's own perturbation of the wgmma pipeline on
            # v11/v13: allowed here, but recorded in the build's meta so the summary can name it
            fatal = B.fatal_warnings(log, allow=("C7519", *version.allow_ptxas))
            if fatal:
                raise WhowaitsError(f"traced {version.id}: ptxas warning treated as error: {fatal[0]}")
            meta = B.parse_ptxas(log)
            meta["ptxas_injected_arrive"] = [ln for ln in B.fatal_warnings(log) if "(C7519)" in ln]
            meta["ptxas_log"] = log.strip()
            (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
            if out.exists():
                shutil.rmtree(out)
            os.replace(tmp, out)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    meta = json.loads(meta_path.read_text())
    return B._result(version, config, out, meta, cached=True)


_diagnostic: dict = {}


def diagnostic_build(ver, config, spec: str):
    """The build ``WHOWAITS_TRACED_BUILD=spec`` asks the runner to launch in place of the rung's own:
    ``waits[:CLASS]``, a warp-specialised rung's wait-log build with no buffer set (the same instructions, no
    record stored), so ncu can profile the traced binary itself (the runner hands it to
    ``kernels.launch.use_build``). Built once per (rung, config, spec)."""
    classes = check_diagnostic(ver, spec)
    key = (ver.id, config, spec)
    if key not in _diagnostic:
        _diagnostic[key] = build_traced(ver, config, "waits", classes)
    return _diagnostic[key]


def check_diagnostic(ver, spec: str) -> str:
    """The record class of a ``WHOWAITS_TRACED_BUILD`` spec for rung ``ver``; a WhowaitsError when the spec
    is not ``waits[:CLASS]`` or the rung is not warp-specialised."""
    mode, _, classes = spec.partition(":")
    if mode != "waits" or ver.family != "ws" or (classes or "all") not in WAIT_CLASSES:
        raise WhowaitsError(f"WHOWAITS_TRACED_BUILD={spec!r}: only waits[:CLASS] of a warp-specialised rung "
                            f"(v10 on) can be launched this way; unset it for {ver.id}")
    return classes or "all"


def _savez(path: Path, **arrays) -> None:
    """``np.savez_compressed`` through :func:`profiler.io.write_atomic` (a file object, so no ``.npz`` is
    appended to the temporary name)."""
    import numpy as np  # noqa: PLC0415

    def save(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            np.savez_compressed(f, **arrays)

    write_atomic(path, save)


def _rel(path: Path) -> Path:
    """``path`` below kernels/ where it is (a rung moved into a copy of the tree keeps its key), else as is."""
    try:
        return path.resolve().relative_to(B.KERNELS_DIR.resolve())
    except ValueError:
        return path


def _set_global(driver, L, gptr, host) -> None:
    """Copy ``host`` (a ctypes array) into the device global at ``gptr`` and read it back."""
    import torch

    n = ctypes.sizeof(host)
    err = None
    for src in (host, ctypes.addressof(host)):
        try:
            L._call(driver.cuMemcpyHtoD(gptr, src, n), "cuMemcpyHtoD(whowaits_trace)")
            break
        except Exception as exc:  # noqa: BLE001 - cuda.bindings versions differ in what srcHost takes
            err = exc
    else:
        staged = torch.tensor(list(host), dtype=torch.int64, device="cuda")
        L._call(driver.cuMemcpyDtoD(gptr, driver.CUdeviceptr(staged.data_ptr()), n), "cuMemcpyDtoD(whowaits_trace)")
        torch.cuda.synchronize()
    back = (ctypes.c_uint64 * (n // 8))()
    try:
        L._call(driver.cuMemcpyDtoH(back, gptr, n), "cuMemcpyDtoH(whowaits_trace)")
    except Exception:  # noqa: BLE001 - the events themselves show whether the kernel saw the buffer
        return
    if list(back) != list(host):
        raise WhowaitsError(f"whowaits_trace reads back {list(back)}, expected {list(host)} ({err})")


def _timed(fn, reps: int, flush, before=None) -> list[float]:
    import torch

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        flush.zero_()
        if before is not None:
            before()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def run(version_name: str, shape_key: str = "b1_h64_s1024_d128_fp16", out_dir: Path | str = ".", *,
        reps: int = 30, rounds: int = 3, seed: int = 0, log=print, mode: str = "events",
        classes: str = "all", per_warp: bool = False) -> dict:
    """Trace one version on the GPU; returns the meta dict (also written beside the raw events). ``mode``
    "waits": the wait-log build instead (``<shape>.trace-waits[-<class>][-warps].npz``: one record per wait and
    arrive, no timeline; trace.cuh, :mod:`profiler.analyze.trace_waits`), logging the record ``classes`` alone
    (:data:`WAIT_CLASSES`), one row per warp with ``per_warp``."""
    if mode not in MODES:
        raise WhowaitsError(f"unknown trace mode {mode!r}: one of {', '.join(MODES)}")
    if classes not in WAIT_CLASSES or (classes != "all" and mode != "waits"):
        raise WhowaitsError(f"unknown record class {classes!r} (the wait log's: {', '.join(WAIT_CLASSES)})")
    import numpy as np
    import torch

    from kernels import launch as L
    from kernels.config import FLUSH_BYTES
    from kernels.reference import random_qkv

    ver = registry.get(version_name)
    if ver.abi not in registry.TMA_ABIS or ver.family != "ws":
        raise WhowaitsError(f"whowaits trace runs the warp-specialised rungs (family ws, ABI one of "
                            f"{', '.join(registry.TMA_ABIS)}); {ver.id} is family {ver.family}, ABI {ver.abi}")
    persistent = ver.abi in registry.PERSISTENT_ABIS
    shape = Shape.parse(shape_key)
    q, k, v = random_qkv(shape, seed=seed)
    b, h, s, d, dtype = L.problem_of(q, k, v)
    config = ver.config_for(d, dtype, shape.causal)
    traced = build_traced(ver, config, mode, classes, per_warp)
    rows_per_slot = 4 if (mode == "waits" and per_warp) else 1
    driver = L._driver()
    dev = q.device.index if q.device.index is not None else torch.cuda.current_device()
    L._ensure_context(dev)
    module = L._call(driver.cuModuleLoad(str(traced.cubin).encode()), "cuModuleLoad(traced)")
    fn = L._call(driver.cuModuleGetFunction(module, traced.entry.encode()), "cuModuleGetFunction(traced)")
    waits = mode == "waits"
    # the event trace: + cursors and parking areas (trace.cuh: end of the dynamic smem); the wait log: nothing
    dyn = traced.smem_dynamic_bytes + (0 if waits else TAIL_BYTES)
    if dyn > 48 * 1024:
        attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        L._call(driver.cuFuncSetAttribute(fn, attr, dyn), "cuFuncSetAttribute(max dynamic smem)")
    symbol = "whowaits_waits" if waits else "whowaits_trace"
    gptr, gsize = L._call(driver.cuModuleGetGlobal(module, symbol.encode()), f"cuModuleGetGlobal({symbol})")
    grid = (math.ceil(s / config.block_m), h, b)
    capacity = WAIT_CAPACITY if waits else CAPACITY
    if persistent:  # as kernels.launch.forward: one CTA per SM (at most one per tile), B·H as an argument
        width = L.cluster_width(fn)
        grid = L.persistent_grid(grid[0] * h * b, q.device, width,
                                 L.resident_clusters(fn, config.threads, dyn, width), policy=ver.grid,
                                 m_blocks=grid[0], causal=config.causal)
        capacity = WAIT_CAPACITY_PERSISTENT if waits else CAPACITY_PERSISTENT
    ctas = grid[0] * grid[1] * grid[2]
    if waits:  # WhowaitsWaitBuffer: records, max_ctas | capacity << 32; one 8-byte record each
        events = torch.zeros((ctas * SLOTS * rows_per_slot, capacity), dtype=torch.int64, device=q.device)
        host = (ctypes.c_uint64 * 2)(events.data_ptr(), ctas | (capacity << 32))
    else:  # WhowaitsTraceBuffer: events, counts, capacity | max_ctas << 32; 16 B an event
        events = torch.zeros((ctas * SLOTS, capacity, 2), dtype=torch.int64, device=q.device)
        counts = torch.zeros(ctas * SLOTS, dtype=torch.int32, device=q.device)
        host = (ctypes.c_uint64 * 3)(events.data_ptr(), counts.data_ptr(), capacity | (ctas << 32))
    if int(gsize) != ctypes.sizeof(host):
        raise WhowaitsError(f"{symbol} is {gsize} bytes on the device, expected {ctypes.sizeof(host)}")
    _set_global(driver, L, gptr, host)

    scale = 1.0 / math.sqrt(d)
    o_plain = torch.empty_like(q)
    o_traced = torch.empty_like(q)
    maps = L.tensor_maps(ver, config, q, k, v, o_traced, L.cluster_width(fn) if persistent else 1)  # a TMA-store epilogue's O map names o_traced

    def plain():
        L.forward(q, k, v, shape.causal, version=ver.id, config=config, out=o_plain)

    def traced_launch():
        ws = L.workspace(grid[0], config, q.device) if ver.abi in registry.WORKSPACE_ABIS else None
        L.launch_tma(fn, grid, config.threads, dyn, maps, o_traced, s, scale, b * h if persistent else None, ws)

    def clear():  # the device keeps no counters: a slot's count is its number of non-zero stamps
        events.zero_()

    for _ in range(3):
        plain()
        clear()
        traced_launch()
    torch.cuda.synchronize()
    diff = (o_plain.float() - o_traced.float()).abs().max().item()
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=q.device)
    plain_ms: list[float] = []
    traced_ms: list[float] = []
    for _ in range(rounds):
        plain_ms += _timed(plain, reps, flush)
        traced_ms += _timed(traced_launch, reps, flush)
    clear()
    traced_launch()
    torch.cuda.synchronize()
    try:
        clock_khz = L._call(driver.cuDeviceGetAttribute(driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_CLOCK_RATE,
                                                        driver.CUdevice(dev)), "cuDeviceGetAttribute(clock rate)")
    except Exception:  # noqa: BLE001 - only a fallback for the clock fit
        clock_khz = 1_980_000
    pm, tm = statistics.median(plain_ms), statistics.median(traced_ms)
    common = {
        "version": ver.id, "shape": shape.key, "config": config.short_form(), "grid": list(grid),
        "threads": config.threads, "slots_per_cta": SLOTS, "capacity": capacity, "ctas": ctas, "abi": ver.abi,
        "kernel": traced.entry, "registers_traced": traced.registers, "gpu": torch.cuda.get_device_name(dev),
        "clock_rate_khz": int(clock_khz), "max_abs_diff_traced_vs_untraced": diff,
        "untraced_ms": pm, "traced_ms": tm, "overhead_pct": 100.0 * (tm - pm) / pm, "reps": reps, "rounds": rounds,
        "git_commit": settings.text("WHOWAITS_GIT_COMMIT") or "",
    }
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if waits:
        rec = events.cpu().numpy().view(np.uint64)
        cnt = (rec != 0).sum(axis=1).astype(np.int64)  # a row's records are contiguous from its start
        meta = {**common, "trace_format": "waits", "classes": classes, "full_slots": int((cnt >= capacity).sum()),
                "slots_per_cta": SLOTS * rows_per_slot, "rows_per_warpgroup": rows_per_slot}
        keep = max(1, int(min(cnt.max(), capacity)))
        _savez(out / waits_name(shape.key, classes, per_warp), counts=cnt, records=rec[:, :keep],
               meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
        log(f"{ver.id} {shape.key} (wait log, {classes}): untraced {pm * 1e3:.1f} us, traced {tm * 1e3:.1f} us "
            f"({meta['overhead_pct']:+.1f}%), max |traced - untraced| {diff:.3g}, {int(cnt.sum())} records")
        return meta
    ev = events.cpu().numpy().view(np.uint64).reshape(ctas * SLOTS, capacity, 2)
    cnt = (ev[:, :, 0] != 0).sum(axis=1).astype(np.int64)  # a slot's events are contiguous from its start
    t = ev[:, :, 0].copy()
    kind = (ev[:, :, 1] & 0xFFFFFFFF).astype(np.uint32)
    arg = (ev[:, :, 1] >> np.uint64(32)).astype(np.uint32)
    meta = {
        **common, "trace_format": TRACE_FORMAT, "park": PARK, "tail_bytes": TAIL_BYTES,
        # a full slot drops what follows (counted as full_slots); a full parking area writes a PARK_DROPPED
        # event whose arg counts the parked events it lost (profiler.analyze.event_trace adds those to the summary)
        "dropped_events": 0, "parked_dropped_events": int(arg[kind == PARK_DROPPED].astype(np.int64).sum()),
        "full_slots": int((cnt >= capacity).sum()),
    }
    keep = max(1, int(min(cnt.max(), capacity)))
    _savez(out / f"{shape.key}.trace-raw.npz", counts=cnt, t=t[:, :keep], kind=kind[:, :keep],
           arg=arg[:, :keep], meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
    log(f"{ver.id} {shape.key}: untraced {pm * 1e3:.1f} us, traced {tm * 1e3:.1f} us "
        f"({meta['overhead_pct']:+.1f}%), max |traced - untraced| {diff:.3g}, {int(cnt.sum())} events")
    return meta
