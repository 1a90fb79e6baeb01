"""Host time of one attention call with the GPU kept busy: ``python3 scripts/device/host_us.py OUT.json``.

Method: per shape, every row gets 10 untimed warm-up calls (build, module load, first plan); then ROUNDS rounds,
each timing every row once, the rows interleaved (round r starts at another row), so a slow stretch of the host
lands on every row alike (the host's own speed moved SDPA from 19 to 31 µs between runs). One timing: synchronize;
``torch.cuda._sleep(SPIN_CYCLES)`` (the GPU spins ~50 ms, so no call below waits for the GPU and the launch queue
never fills); ``time.perf_counter`` around CALLS back-to-back calls; synchronize. ``host_us`` = the median over
the rounds of (elapsed / CALLS) in microseconds, ``min_us`` the fastest round; ``rounds_us`` holds every round,
and ``vs_sdpa_auto`` the median over the rounds of the row's time over sdpa-auto's in the same round. Before
timing a version, eight calls (two input sets, two new q pointers, two on a second stream) check that the plan
path's output is bit-equal to the full path's (``<version> plan==full``), and per shape nine tensor maps encoded
through ctypes are compared byte for byte with cuda.bindings' (``tensor maps ctypes==bindings``), and six maps made by
replacing a template's address with fresh encodes (``tensor maps rebased==encoded``).
Rows:
- ``<version>``: ``kernels.launch.forward`` as a model would call it (out allocated by forward, the same q, k, v
  every call: the launch plan and its packed arguments are reused);
- ``<version> no-plan``: the same with ``kernels.launch.LAUNCH_CACHE = False`` (the full path every call: the
  launcher before plans);
- ``<version> 2-sets``: calls alternate between two input sets (a plan with two pointer sets);
- ``<version> new-ptrs``: every call gets a q never seen before (a slice of a larger buffer at the next of 8,192
  offsets, more than the plans and the map cache keep): the plan is reused, q's tensor map and the arguments are
  built anew each call (before 2026-12-03T0730 the offsets cycled over 256, which a plan of 256 pointer sets keeps
  after the first round: T0708's rounds after the first timed the cached path);
- ``<version> layers``: 32 input sets in turn, as a model's layers call one problem, each its own q, k, v;
- ``sdpa-auto``: ``F.scaled_dot_product_attention`` (cuDNN on the H200); ``sdpa-cudnn``: the same inside
  ``sdpa_kernel([CUDNN_ATTENTION])`` (the bench's row, context manager included).
"""

from __future__ import annotations

import ctypes
import itertools
import json
import os
import statistics
import sys
import time

CALLS = 200
NEW_OFFSETS = 8192  # distinct q offsets of the new-ptrs row: more than launch.TMAPS_MAX and POINTER_SETS_MAX
LAYERS = 32  # input sets of the layers row
ROUNDS = 11
SPIN_CYCLES = 100_000_000  # ~50 ms at 1.98 GHz: longer than CALLS x ~70 us of host time
# the versions timed at each shape: $WHOWAITS_HOST_VERSIONS (space-separated) or v18 and v21
_VERSIONS = tuple(os.environ.get("WHOWAITS_HOST_VERSIONS", "v18_desc_iterator_o v21_causal_pairs").split())
SHAPES = {"b1_h64_s1024_d128_fp16": _VERSIONS, "b4_h32_s4096_d64_fp16": _VERSIONS}


def _timed_round(fn, make_args) -> float:
    import torch

    arg_list = [make_args(i) for i in range(CALLS)]  # built before timing
    torch.cuda.synchronize()
    torch.cuda._sleep(SPIN_CYCLES)
    t0 = time.perf_counter()
    for a in arg_list:
        fn(*a)
    dt = time.perf_counter() - t0
    torch.cuda.synchronize()
    return dt / CALLS * 1e6


def host_rounds(rows: dict) -> dict[str, list[float]]:
    """label -> (fn, make_args, launch plans on?) timed over ROUNDS interleaved rounds (module docstring): label ->
    the round times in µs; a row that raises is timed no more and gets the error's text instead."""
    from kernels import launch

    times: dict = {}
    for label, (fn, make, cache) in rows.items():
        launch.LAUNCH_CACHE = cache
        try:
            for i in range(10):
                fn(*make(i))
            times[label] = []
        except Exception as exc:  # noqa: BLE001 - a rung that does not build or run here: say so, go on
            times[label] = f"{type(exc).__name__}: {str(exc)[:200]}"
        finally:
            launch.LAUNCH_CACHE = True
    labels = [lb for lb in rows if isinstance(times[lb], list)]
    for r in range(ROUNDS):
        k = r * len(labels) // ROUNDS
        for label in labels[k:] + labels[:k]:
            fn, make, cache = rows[label]
            launch.LAUNCH_CACHE = cache
            try:
                times[label].append(_timed_round(fn, make))
            finally:
                launch.LAUNCH_CACHE = True
    return times


def main(out_path: str) -> int:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from kernels import launch
    from kernels.config import Shape
    from kernels.reference import random_qkv
    from profiler.io import write_atomic

    results: dict = {"method": __doc__.split("\n\n", 1)[1].strip(), "calls": CALLS, "rounds": ROUNDS,
                     "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "shapes": {}}
    for key, versions in SHAPES.items():
        shape = Shape.parse(key)
        q, k, v = random_qkv(shape, seed=1)
        q2, k2, v2 = random_qkv(shape, seed=2)
        big = torch.randn((q.numel() + 64 * NEW_OFFSETS,), device=q.device).to(q.dtype)
        layer_sets = [random_qkv(shape, seed=10 + j) for j in range(LAYERS)]
        counter = itertools.count()
        rows: dict = {}

        def same(i, q=q, k=k, v=v, shape=shape):
            return (q, k, v, shape.causal)

        def two(i, q=q, k=k, v=v, q2=q2, k2=k2, v2=v2, shape=shape):
            return (q, k, v, shape.causal) if i % 2 else (q2, k2, v2, shape.causal)

        def fresh(i, big=big, q=q, k=k, v=v, shape=shape, counter=counter):
            off = 64 * (next(counter) % NEW_OFFSETS)  # the next 128-byte aligned offset: never a cached pointer set
            return (big[off:off + q.numel()].view(q.shape), k, v, shape.causal)

        def layers(i, sets=layer_sets, shape=shape):
            return (*sets[i % LAYERS], shape.causal)

        # the ctypes encoder's maps are byte for byte cuda.bindings' (launch.TensorMap vs launch.tensor_map_bindings)
        same_maps = []
        for t in (q, k2, big[64:64 + q.numel()].view(q.shape)):
            for box in (64, 128, 192):
                ours = launch.TensorMap.encode(t.data_ptr(), tuple(t.shape), t.element_size(),
                                               t.dtype == torch.bfloat16, box)
                ref = launch.tensor_map_bindings(t, box)
                same_maps.append(ours.raw() == ctypes.string_at(int(ref.getPtr()), launch.TMAP_BYTES))
        rows["tensor maps ctypes==bindings"] = {"host_us": None, "bit_equal": same_maps}
        print(f"{key} tensor maps, ctypes encoder == cuda.bindings (9 maps): {same_maps}", flush=True)
        # a plan's later maps: its first map with the address replaced, byte for byte a fresh encode
        rebased = []
        for box in (64, 128):
            template = launch.TensorMap.encode(q.data_ptr(), tuple(q.shape), q.element_size(),
                                               q.dtype == torch.bfloat16, box)
            for t in (k2, big[128:128 + q.numel()].view(q.shape), q2):
                fresh_map = launch.TensorMap.encode(t.data_ptr(), tuple(t.shape), t.element_size(),
                                                    t.dtype == torch.bfloat16, box)
                rebased.append(launch.TensorMap.rebased(template, t.data_ptr()).raw() == fresh_map.raw())
        rows["tensor maps rebased==encoded"] = {"host_us": None, "bit_equal": rebased}
        print(f"{key} tensor maps, rebased == encoded (6 maps): {rebased}", flush=True)
        side = torch.cuda.Stream()
        timed: dict = {}
        for vid in versions:
            def call(q_, k_, v_, causal, vid=vid):
                return launch.forward(q_, k_, v_, causal, version=vid)
            # the plan path computes what the full path computes, also when the pointers or the stream change
            # (same kernel: bit-equal outputs), for the input sets the timing below uses
            agree = []
            for i in (0, 1, 2, 3, 300, 301, 0, 301):
                args = two(i) if i < 4 else fresh(i)
                on_side = len(agree) >= 6
                with torch.cuda.stream(side if on_side else torch.cuda.current_stream()):
                    launch.LAUNCH_CACHE = True
                    o_plan = call(*args)
                    launch.LAUNCH_CACHE = False
                    o_full = call(*args)
                    launch.LAUNCH_CACHE = True
                torch.cuda.synchronize()
                agree.append(bool(torch.equal(o_plan, o_full)))
            rows[f"{vid} plan==full"] = {"host_us": None, "bit_equal": agree}
            print(f"{key} {vid} plan == full path (8 calls: 2 input sets, new pointers, a second stream): {agree}",
                  flush=True)
            for label, make, cache in ((vid, same, True), (f"{vid} no-plan", same, False),
                                       (f"{vid} 2-sets", two, True), (f"{vid} layers", layers, True),
                                       (f"{vid} new-ptrs", fresh, True)):
                timed[label] = (call, make, cache)

        def auto(q_, k_, v_, causal):
            return F.scaled_dot_product_attention(q_, k_, v_, is_causal=causal)

        def cudnn(q_, k_, v_, causal):
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return F.scaled_dot_product_attention(q_, k_, v_, is_causal=causal)

        timed["sdpa-auto"] = (auto, same, True)
        timed["sdpa-cudnn"] = (cudnn, same, True)
        times = host_rounds(timed)
        ref = times.get("sdpa-auto")
        for label, rs in times.items():
            if isinstance(rs, str):
                rows[label] = {"host_us": None, "note": rs}
            else:
                rows[label] = {"host_us": round(statistics.median(rs), 2), "min_us": round(min(rs), 2),
                               "rounds_us": [round(r, 2) for r in rs]}
                if isinstance(ref, list) and label != "sdpa-auto":
                    rows[label]["vs_sdpa_auto"] = round(statistics.median(a / b for a, b in zip(rs, ref)), 3)
            print(f"{key} {label:36s} {rows[label]['host_us']} {rows[label].get('vs_sdpa_auto', '')}", flush=True)
        results["shapes"][key] = rows
    write_atomic(out_path, json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
