"""The zoo: production kernels nobody here wrote, one subject per process, for ``whowaits profile --cmd``.

    python scripts/zoo_subjects.py NAME [--warmup N]     # run one subject (needs torch and a GPU)
    python scripts/zoo_subjects.py --plan                 # one tab-separated line per subject (no torch)
    python scripts/zoo_subjects.py --list                 # names and what each is

A subject prepares its inputs, calls its operation ``--warmup`` times (default 3: compilation, autotuning
and library handles stay out of the measured launch), synchronises, calls it once more inside the NVTX
push/pop range ``whowaits:zoo-NAME``, synchronises, and checks a slice of the result against float32
math (exit 1 when it is wrong, so a broken subject is never profiled silently). Under Nsight Compute::

    whowaits profile --cmd "python3 scripts/zoo_subjects.py NAME" --nvtx whowaits:zoo-NAME \\
        --kernel REGEX --name NAME --shape SHAPE --problem-flops F

with REGEX, SHAPE and F from ``--plan`` (``scripts/device/h200_zoo.sh`` runs them all). The regex names
the library's kernel family; the NVTX range pins the one measured launch, so helper kernels a call may
launch (CUTLASS's grouped-GEMM argument preparation, cuBLAS's split-K reduction) are not taken.

Inputs are random normal (seed 0), never zeros: the tensor pipe's power and clock depend on the data.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

NVTX_PREFIX = "whowaits:zoo-"


@dataclass(frozen=True)
class Subject:
    """One zoo subject: what it runs, how ncu recognises its kernel, and the problem's size."""

    name: str  # report folder under reports/h200/zoo/
    shape: str  # the report's file name (a plain key of the problem)
    kernel_regex: str  # on the demangled kernel name, inside the subject's NVTX range
    what: str  # one line: library, operation, data type
    flops: float | None = None  # FLOPs of one call (None for a memory-bound subject)
    bytes: float | None = None  # bytes one call must move (for memory-bound subjects)

    @property
    def nvtx_range(self) -> str:
        return NVTX_PREFIX + self.name


def _mm_flops(m: int, n: int, k: int, groups: int = 1) -> float:
    return 2.0 * m * n * k * groups


_GEMM = r"nvjet|gemm|xmma|cutlass::device_kernel<"
SUBJECTS: tuple[Subject, ...] = (
    Subject("cublas-gemm-fp16", "m8192_n8192_k8192_fp16", _GEMM,
            "cuBLAS through torch.matmul, fp16 (A row-major, B row-major)", _mm_flops(8192, 8192, 8192)),
    Subject("cublas-gemm-bf16", "m8192_n8192_k8192_bf16", _GEMM,
            "cuBLAS through torch.matmul, bf16", _mm_flops(8192, 8192, 8192)),
    Subject("cublas-gemm-fp8", "m8192_n8192_k8192_e4m3", _GEMM,
            "cuBLASLt through torch._scaled_mm, fp8 e4m3 x e4m3 -> bf16, per-tensor scales",
            _mm_flops(8192, 8192, 8192)),
    Subject("cublas-gemm-skinny", "m128_n8192_k8192_fp16", _GEMM,
            "cuBLAS through torch.matmul, fp16, skinny M=128 (a decode-like GEMM)", _mm_flops(128, 8192, 8192)),
    Subject("cutlass-grouped-mm", "g8_m2048_n4096_k4096_bf16", r"cutlass::device_kernel<",
            "CUTLASS 3.x grouped GEMM through torch._grouped_mm (8 groups of 2048 rows, bf16, ptr-array TMA ws)",
            _mm_flops(2048, 4096, 4096, groups=8)),
    Subject("scaled-mm-fp8-rowwise", "m8192_n8192_k8192_e4m3_rowwise", _GEMM,
            "torch._scaled_mm with row-wise scales (fp8 e4m3 -> bf16): CUTLASS 3.x on sm_90",
            _mm_flops(8192, 8192, 8192)),
    Subject("triton-matmul", "m8192_n8192_k8192_fp16", r"zoo_matmul",
            "Triton tiled matmul of ours (scripts/zoo_triton.py), fp16, 128x256x64, 8 warps, 3 stages",
            _mm_flops(8192, 8192, 8192)),
    Subject("triton-matmul-ws", "m8192_n8192_k8192_fp16", r"zoo_matmul_ws",
            "Triton TMA matmul with tl.range(..., warp_specialize=True), fp16", _mm_flops(8192, 8192, 8192)),
    Subject("flex-attention", "b4_h16_s4096_d128_fp16_causal", r"triton_tem_",
            "FlexAttention (torch.compile of flex_attention), causal block mask, fp16",
            4.0 * 4 * 16 * 4096 * 4096 * 128 / 2),
    Subject("inductor-softmax", "r16384_c8192_fp32", r"triton_(red|per)_",
            "torch.compile of softmax(x, -1) over 16384 x 8192 fp32 (an inductor reduction kernel)",
            None, 2.0 * 16384 * 8192 * 4),
    Subject("cudnn-sdpa-d64", "b4_h32_s4096_d64_fp16", r"cudnn",
            "cuDNN attention through F.scaled_dot_product_attention (CUDNN_ATTENTION), head_dim 64, fp16",
            4.0 * 4 * 32 * 4096 * 4096 * 64),
)
BY_NAME = {s.name: s for s in SUBJECTS}


# ----------------------------------------------------------------------------------------------------
# the subjects: each returns (call, check); call() runs the operation once, check(out) -> relative error
_SEED = [0]


def _randn(torch: Any, *shape: int, dtype: Any) -> Any:
    """Random normal values (each tensor of a subject its own seed: 0, 1, 2 …), cast to ``dtype``."""
    gen = torch.Generator(device="cuda").manual_seed(_SEED[0])
    _SEED[0] += 1
    return torch.randn(*shape, device="cuda", dtype=torch.float32, generator=gen).to(dtype)


def _rel(torch: Any, got: Any, ref: Any) -> float:
    return float((got.float() - ref).norm() / ref.norm())


def _gemm(torch: Any, m: int, n: int, k: int, dtype: Any) -> tuple[Callable, Callable]:
    a, b = _randn(torch, m, k, dtype=dtype), _randn(torch, k, n, dtype=dtype)
    return (lambda: a @ b), (lambda out: _rel(torch, out[:64], a[:64].float() @ b.float()))


def _fp8(torch: Any, rowwise: bool) -> tuple[Callable, Callable]:
    m = n = k = 8192
    f8 = torch.float8_e4m3fn
    a = _randn(torch, m, k, dtype=torch.float32).to(f8)
    w = _randn(torch, n, k, dtype=torch.float32).to(f8)  # weights N x K; B = w.t() is column-major, as cuBLASLt wants
    if rowwise:
        sa = torch.full((m, 1), 0.5, device="cuda", dtype=torch.float32)
        sb = torch.full((1, n), 0.25, device="cuda", dtype=torch.float32)
    else:
        sa = torch.tensor(0.5, device="cuda")
        sb = torch.tensor(0.25, device="cuda")

    def call() -> Any:
        return torch._scaled_mm(a, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

    def check(out: Any) -> float:
        return _rel(torch, out[:64], (a[:64].float() @ w.float().t()) * 0.125)

    return call, check


def _grouped(torch: Any) -> tuple[Callable, Callable]:
    g, m, n, k = 8, 2048, 4096, 4096
    x = _randn(torch, g * m, k, dtype=torch.bfloat16)
    w = _randn(torch, g, n, k, dtype=torch.bfloat16)  # expert weights N x K, used transposed (MoE layout)
    offs = torch.arange(m, g * m + 1, m, device="cuda", dtype=torch.int32)

    def call() -> Any:
        return torch._grouped_mm(x, w.transpose(-2, -1), offs=offs, out_dtype=torch.bfloat16)

    def check(out: Any) -> float:  # rows of group 0 and of group 5
        r0 = x[:32].float() @ w[0].float().t()
        r5 = x[5 * m:5 * m + 32].float() @ w[5].float().t()
        return max(_rel(torch, out[:32], r0), _rel(torch, out[5 * m:5 * m + 32], r5))

    return call, check


def _triton(torch: Any, ws: bool) -> tuple[Callable, Callable]:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import zoo_triton

    m = n = k = 8192
    assert k % zoo_triton.BLOCK_K == 0
    a = _randn(torch, m, k, dtype=torch.float16)
    if ws:
        w = _randn(torch, n, k, dtype=torch.float16)
        return (lambda: zoo_triton.matmul_ws(a, w)), (lambda out: _rel(torch, out[:64], a[:64].float() @ w.float().t()))
    b = _randn(torch, k, n, dtype=torch.float16)
    return (lambda: zoo_triton.matmul(a, b)), (lambda out: _rel(torch, out[:64], a[:64].float() @ b.float()))


def _flex(torch: Any) -> tuple[Callable, Callable]:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    b, h, s, d = 4, 16, 4096, 128
    q, k, v = (_randn(torch, b, h, s, d, dtype=torch.float16) for _ in range(3))

    def causal(b_, h_, q_idx, kv_idx):
        return q_idx >= kv_idx

    mask = create_block_mask(causal, B=None, H=None, Q_LEN=s, KV_LEN=s, device="cuda")
    flex = torch.compile(flex_attention)

    def check(out: Any) -> float:
        import torch.nn.functional as F

        ref = F.scaled_dot_product_attention(q[:1, :2].float(), k[:1, :2].float(), v[:1, :2].float(), is_causal=True)
        return _rel(torch, out[:1, :2], ref)

    return (lambda: flex(q, k, v, block_mask=mask)), check


def _softmax(torch: Any) -> tuple[Callable, Callable]:
    x = _randn(torch, 16384, 8192, dtype=torch.float32)
    fn = torch.compile(lambda t: torch.softmax(t, dim=-1))
    return (lambda: fn(x)), (lambda out: _rel(torch, out[:64], torch.softmax(x[:64].double(), -1).float()))


def _cudnn(torch: Any) -> tuple[Callable, Callable]:
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    b, h, s, d = 4, 32, 4096, 64
    q, k, v = (_randn(torch, b, h, s, d, dtype=torch.float16) for _ in range(3))

    def call() -> Any:
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return F.scaled_dot_product_attention(q, k, v)

    def check(out: Any) -> float:
        ref = F.scaled_dot_product_attention(q[:1, :2].float(), k[:1, :2].float(), v[:1, :2].float())
        return _rel(torch, out[:1, :2], ref)

    return call, check


def _build(name: str, torch: Any) -> tuple[Callable, Callable]:
    if name == "cublas-gemm-fp16":
        return _gemm(torch, 8192, 8192, 8192, torch.float16)
    if name == "cublas-gemm-bf16":
        return _gemm(torch, 8192, 8192, 8192, torch.bfloat16)
    if name == "cublas-gemm-skinny":
        return _gemm(torch, 128, 8192, 8192, torch.float16)
    if name == "cublas-gemm-fp8":
        return _fp8(torch, rowwise=False)
    if name == "scaled-mm-fp8-rowwise":
        return _fp8(torch, rowwise=True)
    if name == "cutlass-grouped-mm":
        return _grouped(torch)
    if name in ("triton-matmul", "triton-matmul-ws"):
        return _triton(torch, ws=name.endswith("-ws"))
    if name == "flex-attention":
        return _flex(torch)
    if name == "inductor-softmax":
        return _softmax(torch)
    if name == "cudnn-sdpa-d64":
        return _cudnn(torch)
    raise KeyError(name)


# relative error a correct call stays under (fp8 inputs are coarse; softmax is fp32 all through)
TOLERANCE = {"cublas-gemm-fp8": 0.08, "scaled-mm-fp8-rowwise": 0.08}


def run(name: str, warmup: int) -> int:
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # no compile-worker processes under ncu
    import torch

    if not torch.cuda.is_available():
        print("zoo: no CUDA device available to torch", file=sys.stderr)
        return 3
    torch.backends.cuda.matmul.allow_tf32 = False
    call, check = _build(name, torch)
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(BY_NAME[name].nvtx_range)
    out = call()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    err = check(out)
    ok = err < TOLERANCE.get(name, 0.02)
    print(f"zoo {name}: rel_err={err:.2e} torch={torch.__version__} "
          f"{'ok' if ok else 'WRONG'}", file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


def plan_lines() -> list[str]:
    """``name<TAB>shape<TAB>regex<TAB>nvtx range<TAB>flops<TAB>bytes`` per subject ('-' for none)."""
    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:.0f}"

    return ["\t".join((s.name, s.shape, s.kernel_regex, s.nvtx_range, num(s.flops), num(s.bytes)))
            for s in SUBJECTS]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("name", nargs="?", choices=sorted(BY_NAME), help="the subject to run")
    ap.add_argument("--warmup", type=int, default=3, help="calls before the measured one (default 3)")
    ap.add_argument("--plan", action="store_true", help="print every subject's profile parameters, tab-separated")
    ap.add_argument("--list", action="store_true", help="print every subject's name and what it is")
    args = ap.parse_args(argv)
    if args.plan or args.list:
        lines = plan_lines() if args.plan else [f"{s.name:22s} {s.what}" for s in SUBJECTS]
        print("\n".join(lines))
        return 0
    if args.name is None:
        ap.error("give a subject NAME, --plan or --list")
    if args.warmup < 1:
        ap.error("--warmup must be >= 1 (the first call compiles)")
    return run(args.name, args.warmup)


if __name__ == "__main__":
    sys.exit(main())
