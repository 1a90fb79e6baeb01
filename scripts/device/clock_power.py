"""SM clock and board power while one attention kernel runs back to back:
``python3 scripts/device/clock_power.py OUT.json SHAPE[,SHAPE...] IMPL[,IMPL...] [SECONDS] [--flush]``.

Why: `whowaits profile` measures one launch at ncu's locked base clock, the bench times launches at whatever clock
the card runs; where the two disagree on which of two kernels is faster (v25 vs v21, ladder IV), the card's clock
under each kernel is the suspect. Method: `nvidia-smi -lms 50` samples the SM clock, the power draw, the
temperature and the active clock-event reasons into a log for the whole run; per (implementation, shape) segment
the script runs the kernel back to back for SECONDS (default 3; no L2 flush, so this is the sustained regime, not
the bench's), times the segment with CUDA events and averages the samples whose timestamps fall inside it. The
order is A B ... then reversed, twice, so a drift of the card shows as a difference between the two passes.
IMPL is a ladder version id or `sdpa-cudnn` (F.scaled_dot_product_attention inside sdpa_kernel([CUDNN_ATTENTION])).
--flush: the bench's regime instead: 256 MB written before every call (kernels.config.FLUSH_BYTES) and each call
timed alone with CUDA events (`ms` = the median); the clock and power samples then cover the flushes too.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
import subprocess
import sys
import time

FIELDS = ["timestamp", "clocks.sm", "power.draw", "temperature.gpu", "clocks_event_reasons.active"]


def _query(fields: list[str], extra: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits", *extra],
                          capture_output=True, text=True, timeout=30)


def _caller(impl: str, shape):
    """One call of IMPL on fresh inputs of SHAPE, as a function of no arguments."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from kernels.launch import forward
    from kernels.reference import random_qkv

    q, k, v = random_qkv(shape, seed=0)
    if impl == "sdpa-cudnn":
        def call():
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=shape.causal)
        return call
    out_t = torch.empty_like(q)
    return lambda: forward(q, k, v, shape.causal, version=impl, out=out_t)


def main(out: str, shapes: list[str], impls: list[str], seconds: float, flush: bool = False) -> None:
    import torch

    from kernels.config import FLUSH_BYTES, Shape

    scratch = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda") if flush else None

    fields = FIELDS if _query(FIELDS, []).returncode == 0 else FIELDS[:-1]
    limits = _query(["power.limit", "enforced.power.limit", "clocks.max.sm", "clocks.applications.graphics"], [])
    log = open(out + ".smi.csv", "w")
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits",
                            "-lms", "50"], stdout=log, stderr=subprocess.STDOUT, text=True)
    segments = []
    try:
        time.sleep(1.0)
        order = [(i, s) for s in shapes for i in impls]
        for rep in range(2):
            for impl, key in (order if rep == 0 else order[::-1]):
                shape = Shape.parse(key)
                call = _caller(impl, shape)
                for _ in range(10):
                    call()
                torch.cuda.synchronize()
                t = time.perf_counter()
                for _ in range(10):
                    call()
                torch.cuda.synchronize()
                n = max(20, int(seconds / ((time.perf_counter() - t) / 10)))
                w0 = dt.datetime.now()
                if scratch is None:
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                    for _ in range(n):
                        call()
                    e1.record()
                    torch.cuda.synchronize()
                    ms = e0.elapsed_time(e1) / n
                else:
                    n = max(20, n // 2)  # a flush costs about as much as a call
                    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                              for _ in range(n)]
                    for a, b in events:
                        scratch.fill_(1)
                        a.record()
                        call()
                        b.record()
                    torch.cuda.synchronize()
                    ms = statistics.median(a.elapsed_time(b) for a, b in events)
                w1 = dt.datetime.now()
                segments.append({"impl": impl, "shape": key, "pass": rep, "calls": n, "ms": ms,
                                 "tflops": shape.flops() / (ms * 1e-3) / 1e12,
                                 "t0": w0.isoformat(), "t1": w1.isoformat()})
                print(f"{impl:18s} {key:28s} pass {rep}: {ms:.4f} ms, {segments[-1]['tflops']:.1f} TFLOPS", flush=True)
                time.sleep(0.5)
    finally:
        time.sleep(0.3)
        smi.terminate()
        smi.wait(timeout=10)
        log.close()
    samples = []
    for line in open(out + ".smi.csv"):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4:
            continue
        try:
            ts = dt.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f")
            samples.append((ts, float(parts[1]), float(parts[2]), float(parts[3]), parts[4] if len(parts) > 4 else ""))
        except ValueError:
            continue
    for seg in segments:
        t0, t1 = dt.datetime.fromisoformat(seg["t0"]), dt.datetime.fromisoformat(seg["t1"])
        # leave out the first 0.3 s of a segment: the clock settles
        inside = [s for s in samples if t0 + dt.timedelta(seconds=0.3) <= s[0] <= t1]
        seg["samples"] = len(inside)
        if inside:
            seg["sm_mhz"] = statistics.mean(s[1] for s in inside)
            seg["sm_mhz_min"] = min(s[1] for s in inside)
            seg["power_w"] = statistics.mean(s[2] for s in inside)
            seg["power_w_max"] = max(s[2] for s in inside)
            seg["temp_c"] = statistics.mean(s[3] for s in inside)
            seg["reasons"] = sorted({s[4] for s in inside})
            # FLOPs per clock: the kernel's work per SM cycle, whatever the clock was
            seg["tflops_per_ghz"] = seg["tflops"] / (seg["sm_mhz"] / 1000.0)
        print(f"{seg['impl']:18s} {seg['shape']:28s} pass {seg['pass']}: {seg['tflops']:6.1f} TFLOPS at "
              f"{seg.get('sm_mhz', 0):6.0f} MHz (min {seg.get('sm_mhz_min', 0):.0f}), {seg.get('power_w', 0):5.0f} W "
              f"(max {seg.get('power_w_max', 0):.0f}), {seg.get('tflops_per_ghz', 0):6.1f} TFLOPS/GHz, "
              f"reasons {seg.get('reasons')}", flush=True)
    json.dump({"limits": limits.stdout.strip(), "fields": fields, "flush": flush, "segments": segments},
              open(out, "w"), indent=1)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--flush"]
    main(args[0], args[1].split(","), args[2].split(","), float(args[3]) if len(args) > 3 else 3.0,
         flush="--flush" in sys.argv)
