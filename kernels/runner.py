"""One process that launches implementations for a profiler to catch: ``python -m kernels.runner``.

Usage::

    python -m kernels.runner VERSION_OR_BACKEND... --shape KEY [--warmup N] [--seed S]

Each positional is a ladder version (``v02_smem_tiling`` or ``v02``) or a torch SDPA backend
(``sdpa-flash``, ``sdpa-cudnn``, ``sdpa-efficient``, ``sdpa-math``, ``sdpa-auto``). For each, in the
order given: ``warmup`` launches (default 3; builds, module loads and library handles stay out of the
measured launch), a device synchronize, then exactly ONE launch inside the NVTX push/pop range
``whowaits:<name>`` (``<name>`` = the full version id or the backend name), then a synchronize.
Under Nsight Compute catch exactly that launch with::

    ncu --nvtx --nvtx-include "whowaits:v02_smem_tiling/" ... python -m kernels.runner v02 --shape b1_h64_s1024_d128_fp16

(or a kernel-name regex with ``--launch-skip N --launch-count 1`` where N = warmup). Inputs are fresh
random normal q, k, v of the shape (seed ``--seed``, default 0, so runs are repeatable); the output
of each measured launch is checked against nothing here (``kernels.correctness`` does correctness).
Prints one line per implementation: name, the NVTX range, the kernel it runs. Exit 2 on a usage error.
"""

from __future__ import annotations

import argparse
import sys

from kernels.config import Shape
from profiler import settings
from profiler.errors import WhowaitsError

SDPA_BACKENDS = ("sdpa-auto", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math")


def sdpa_callable(name: str):
    """A function (q, k, v, causal) -> o running torch SDPA pinned to one backend (or auto)."""
    import torch.nn.functional as F

    if name not in SDPA_BACKENDS:
        raise WhowaitsError(f"unknown SDPA backend {name!r}; known: {', '.join(SDPA_BACKENDS)}")
    if name == "sdpa-auto":
        return lambda q, k, v, causal: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = {
        "sdpa-flash": SDPBackend.FLASH_ATTENTION,
        "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
        "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION,
        "sdpa-math": SDPBackend.MATH,
    }[name]

    def run(q, k, v, causal):
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return run


def implementation(name: str):
    """(display name, fn(q, k, v, causal) -> o) for a version id or a backend name."""
    if name.startswith("sdpa-"):
        return name, sdpa_callable(name)
    from kernels import registry
    from kernels.launch import forward

    ver = registry.get(name)
    spec = settings.text("WHOWAITS_TRACED_BUILD")
    if not spec:
        return ver.id, lambda q, k, v, causal: forward(q, k, v, causal, version=ver.id)
    from kernels.launch import problem_of, use_build
    from kernels.tracebuild import check_diagnostic, diagnostic_build

    check_diagnostic(ver, spec)  # a bad spec fails before any GPU work

    def run_diagnostic(q, k, v, causal):
        _, _, _, d, dtype = problem_of(q, k, v)
        config = ver.config_for(d, dtype, causal)
        use_build(ver.id, config, diagnostic_build(ver, config, spec))
        return forward(q, k, v, causal, version=ver.id, config=config)

    return ver.id, run_diagnostic


def run(names: list[str], shape: Shape, warmup: int = 3, seed: int = 0) -> list[str]:
    """Warm up then launch each implementation once inside NVTX range ``whowaits:<name>``."""
    from kernels.reference import random_qkv

    from kernels.launch import require_cuda_torch

    impls = [implementation(n) for n in names]  # resolve every name before any GPU work
    require_cuda_torch()
    import torch

    q, k, v = random_qkv(shape, seed=seed)
    done = []
    for display, fn in impls:
        for _ in range(warmup):
            fn(q, k, v, shape.causal)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(f"whowaits:{display}")
        fn(q, k, v, shape.causal)
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        done.append(display)
        print(f"ran {display}: {warmup} warm-up + 1 launch in NVTX range whowaits:{display} ({shape.key})", flush=True)
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernels.runner", description="Launch implementations once each inside NVTX ranges.")
    parser.add_argument("names", nargs="+", help="version ids and/or sdpa-* backends")
    parser.add_argument("--shape", required=True, help="shape key, e.g. b1_h64_s1024_d128_fp16")
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured launches before the one in the range")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        if args.warmup < 0:
            raise WhowaitsError("--warmup must be >= 0")
        run(args.names, Shape.parse(args.shape), args.warmup, args.seed)
    except WhowaitsError as err:
        print(f"kernels.runner: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
