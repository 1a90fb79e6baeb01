"""The float64 reference every correctness number is measured against, and the error measures.

``attention_ref(q, k, v, causal)`` upcasts to float64 and computes softmax(q kᵀ / sqrt(D) [+ mask]) v on
the tensors' device, one (batch, head) slab group at a time to bound memory. ``rel_err`` is
‖out − ref‖₂ / ‖ref‖₂ (NaN/Inf anywhere in ``out`` gives ``inf``, so it never passes), ``snr_db`` is
10·log10(‖ref‖² / ‖out − ref‖²), ``max_err`` is max |out − ref| (the seed's "error against the reference").
torch is imported lazily.
"""

from __future__ import annotations

import math

TOLERANCE = {"fp16": 5e-3, "bf16": 1e-2}  # rel_err: fp16 well under 1e-2; bf16 (3 fewer mantissa bits) twice that


def random_qkv(shape, *, seed: int | None = None, device: str = "cuda"):
    """Fresh random q, k, v (standard normal, never zeros) for a :class:`kernels.config.Shape`."""
    import torch

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[shape.dtype]
    gen = torch.Generator(device=device)
    gen.manual_seed(seed if seed is not None else torch.seed() % (2**63))
    dims = (shape.batch, shape.heads, shape.seqlen, shape.head_dim)
    return tuple(torch.randn(dims, generator=gen, device=device, dtype=torch.float32).to(dtype) for _ in range(3))


def attention_ref(q, k, v, causal: bool = False, *, max_elems: int = 1 << 28):
    """softmax(q kᵀ / sqrt(D) [+ causal mask]) v in float64, shape (B, H, S, D)."""
    import torch

    b, h, s, d = q.shape
    scale = 1.0 / math.sqrt(d)
    qf, kf, vf = (t.reshape(b * h, s, d) for t in (q, k, v))
    out = torch.empty((b * h, s, d), dtype=torch.float64, device=q.device)
    group = max(1, max_elems // (s * s))
    mask = None
    if causal:
        mask = torch.ones((s, s), dtype=torch.bool, device=q.device).triu(1)
    for i in range(0, b * h, group):
        sl = slice(i, i + group)
        scores = qf[sl].double() @ kf[sl].double().transpose(-1, -2) * scale
        if mask is not None:
            scores.masked_fill_(mask, float("-inf"))
        out[sl] = torch.softmax(scores, dim=-1) @ vf[sl].double()
    return out.reshape(b, h, s, d)


def rel_err(out, ref) -> float:
    """‖out − ref‖ / ‖ref‖ in float64; ``inf`` when out holds NaN or Inf."""
    import torch

    o = out.double()
    if not torch.isfinite(o).all():
        return math.inf
    return float(torch.linalg.vector_norm(o - ref) / torch.linalg.vector_norm(ref))


def snr_db(out, ref) -> float:
    """Signal-to-noise ratio of ``out`` against ``ref`` in dB (``-inf`` for non-finite output)."""
    import torch

    o = out.double()
    if not torch.isfinite(o).all():
        return -math.inf
    noise = float(torch.linalg.vector_norm(o - ref) ** 2)
    signal = float(torch.linalg.vector_norm(ref) ** 2)
    return math.inf if noise == 0 else 10.0 * math.log10(signal / noise)


def max_err(out, ref) -> float:
    """max |out − ref| over all elements in float64; ``inf`` when out holds NaN or Inf."""
    import torch

    o = out.double()
    if not torch.isfinite(o).all():
        return math.inf
    return float((o - ref).abs().max())
