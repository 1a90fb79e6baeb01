"""The zoo's two Triton matmuls (fp16 in, fp32 accumulate, fp16 out), imported only where Triton is.

- :func:`zoo_matmul`: the tutorial-style tiled matmul (grouped tile order, pointer loads, ``tl.dot``):
  on Hopper Triton pipelines its loads with cp.async and issues wgmma.
- :func:`zoo_matmul_ws`: the same tile with TMA tensor descriptors and the K loop marked
  ``tl.range(..., warp_specialize=True)``. Triton 3.6 warp-specialises that loop on Blackwell; on
  Hopper (sm_90a, compiled here with no GPU, 2026-12-02) it keeps one role: TMA + mbarrier pipelining,
  4 HGMMA, no setmaxnreg (``cuobjdump -sass``: 6 UTMALDG.2D, 2 SYNCS.PHASECHK.TRANS64.TRYWAIT).

Fixed configuration (no autotuning, so one process compiles one kernel): BLOCK 128x256x64, group 8,
8 warps, 3 stages (the tutorial's first Hopper configuration).
"""

from __future__ import annotations

import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M = 128, 256, 64, 8
NUM_WARPS, NUM_STAGES = 8, 3


@triton.jit
def _tile(pid, M, N, BM: tl.constexpr, BN: tl.constexpr, GM: tl.constexpr):
    """(row tile, column tile) of program ``pid`` in grouped order (GM row tiles share a column sweep)."""
    npm = tl.cdiv(M, BM)
    npn = tl.cdiv(N, BN)
    in_group = GM * npn
    first_m = (pid // in_group) * GM
    group_m = min(npm - first_m, GM)
    pm = first_m + ((pid % in_group) % group_m)
    pn = (pid % in_group) // group_m
    return pm, pn


@triton.jit
def zoo_matmul(a_ptr, b_ptr, c_ptr, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GM: tl.constexpr):
    pm, pn = _tile(tl.program_id(0), M, N, BM, BN, GM)
    om = (pm * BM + tl.arange(0, BM)) % M
    on = (pn * BN + tl.arange(0, BN)) % N
    ok = tl.arange(0, BK)
    a_ptrs = a_ptr + om[:, None] * s_am + ok[None, :] * s_ak
    b_ptrs = b_ptr + ok[:, None] * s_bk + on[None, :] * s_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BK)):  # as profiled; K is a multiple of BK (checked)
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BK * s_ak
        b_ptrs += BK * s_bk
    cm = pm * BM + tl.arange(0, BM)
    cn = pn * BN + tl.arange(0, BN)
    mask = (cm[:, None] < M) & (cn[None, :] < N)
    tl.store(c_ptr + cm[:, None] * s_cm + cn[None, :] * s_cn, acc.to(tl.float16), mask=mask)


@triton.jit
def zoo_matmul_ws(a_desc, b_desc, c_desc, M, N, K,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GM: tl.constexpr):
    pm, pn = _tile(tl.program_id(0), M, N, BM, BN, GM)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BK), warp_specialize=True):
        a = a_desc.load([pm * BM, k * BK])
        b = b_desc.load([pn * BN, k * BK])  # B is stored N x K (row-major weights), read as its transpose
        acc = tl.dot(a, b.T, acc)
    c_desc.store([pm * BM, pn * BN], acc.to(tl.float16))


def matmul(a, b):
    """C = A @ B with :func:`zoo_matmul` (A: M x K, B: K x N, fp16 CUDA tensors)."""
    import torch

    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    zoo_matmul[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                     BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K, GM=GROUP_M, num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return c


def matmul_ws(a, w):
    """C = A @ W^T with :func:`zoo_matmul_ws` (A: M x K, W: N x K, fp16 CUDA tensors, host TMA descriptors)."""
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    M, K = a.shape
    N = w.shape[0]
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    a_desc = TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K])
    b_desc = TensorDescriptor.from_tensor(w, [BLOCK_N, BLOCK_K])
    c_desc = TensorDescriptor.from_tensor(c, [BLOCK_M, BLOCK_N])
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    zoo_matmul_ws[grid](a_desc, b_desc, c_desc, M, N, K, BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K, GM=GROUP_M,
                        num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return c
