"""A profiling subject: torch SDPA's flash or cuDNN attention kernel, N warm-up calls then one measured call.

    python scripts/sdpa_subject.py --backend flash [--shape b1_h64_s1024_d128_fp16] [--warmup 3]
    python scripts/sdpa_subject.py --backend flash --backend cudnn     # both, in that order, one process

Each backend runs ``--warmup`` times, then once inside the NVTX push/pop range ``whowaits:ext-sdpa-<backend>``,
so ncu can take exactly that launch either with ``--launch-skip N`` on the kernel name or with
``--nvtx-include whowaits:ext-sdpa-<backend>/``. Inputs are random (never zeros); the output of the measured
call is checked against float32 math so a broken backend does not pass silently. Needs torch and a GPU.
"""

from __future__ import annotations

import argparse
import re
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", action="append", choices=["flash", "cudnn"], required=True)
    ap.add_argument("--shape", default="b1_h64_s1024_d128_fp16")
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args(argv)
    m = re.match(r"^b(\d+)_h(\d+)_s(\d+)_d(\d+)_(fp16|bf16)(_causal)?$", args.shape)
    if not m:
        print(f"bad shape {args.shape!r}", file=sys.stderr)
        return 2
    b, h, s, d = (int(x) for x in m.group(1, 2, 3, 4))
    causal = m.group(6) is not None

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if not torch.cuda.is_available():
        print("no CUDA device available to torch", file=sys.stderr)
        return 3
    dtype = torch.float16 if m.group(5) == "fp16" else torch.bfloat16
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dtype, generator=gen) for _ in range(3))
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    for name in args.backend:
        with sdpa_kernel(backends[name]):
            for _ in range(args.warmup):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push(f"whowaits:ext-sdpa-{name}")
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
        ref = F.scaled_dot_product_attention(q[:, :2].float(), k[:, :2].float(), v[:, :2].float(), is_causal=causal)
        err = ((out[:, :2].float() - ref).norm() / ref.norm()).item()
        print(f"sdpa {name}: {args.shape} rel_err={err:.2e}")
        if not err < 1e-2:
            print(f"sdpa {name}: wrong result (rel_err={err})", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
