"""Correctness of ladder versions on the GPU: ``python -m kernels.correctness [VERSION…] [--shapes KEY…]``.

For each version and shape: fresh random q, k, v (``randn``, a new seed per run), the output buffer
poisoned with NaN before the launch (an element the kernel forgets to write stays NaN and fails), the
result compared with the float64 reference (``kernels.reference``): relative error
‖out − ref‖ / ‖ref‖ must be ≤ 5e-3 for fp16 and ≤ 1e-2 for bf16; NaN never passes; SNR in dB is shown.
The default shapes cover both head dims, both dtypes, causal, S = 1, S not a multiple of any tile, and two
shapes with more tiles than SMs (persistent grids).
A shape a version does not support is listed as ``skip`` with the reason. Exit status 1 if anything failed,
2 on a usage error.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from kernels import registry
from kernels.config import Shape
from kernels.reference import TOLERANCE, attention_ref, random_qkv, rel_err, snr_db
from profiler.errors import WhowaitsError

DEFAULT_SHAPES = (
    "b1_h2_s128_d64_fp16",
    "b2_h3_s200_d128_fp16",
    "b1_h4_s1_d128_fp16",
    "b1_h2_s77_d64_bf16",
    "b2_h2_s333_d128_fp16_causal",
    "b1_h3_s190_d64_bf16_causal",
    "b1_h8_s1024_d128_fp16",
    "b1_h4_s515_d128_bf16",
    # more tiles than the H200's 132 SMs, so a persistent grid (v13) walks several tiles per CTA: 512 tiles
    # of 8 key blocks; and 480 causal ragged tiles (S = 700: 6 query blocks per head, the last one partial)
    "b1_h64_s1024_d128_fp16",
    "b2_h40_s700_d64_bf16_causal",
)


@dataclass
class CheckRow:
    version: str
    shape: str
    status: str  # pass / FAIL / skip
    rel_err: float | None = None
    snr_db: float | None = None
    tolerance: float | None = None
    note: str = ""


def check_one(version: str, shape: Shape, *, seed: int | None = None) -> CheckRow:
    """Run one version on one shape against the float64 reference."""
    import torch

    from kernels.launch import forward

    ver = registry.get(version)
    try:
        ver.check_supports(shape.head_dim, shape.dtype, shape.causal)
    except WhowaitsError as err:
        return CheckRow(ver.id, shape.key, "skip", note=str(err))
    q, k, v = random_qkv(shape, seed=seed)
    out = torch.full_like(q, float("nan"))
    forward(q, k, v, shape.causal, version=ver.id, out=out)
    torch.cuda.synchronize()
    ref = attention_ref(q, k, v, shape.causal)
    err, snr = rel_err(out, ref), snr_db(out, ref)
    tol = TOLERANCE[shape.dtype]
    nan = int(torch.isnan(out).sum())
    ok = err <= tol and nan == 0
    note = f"{nan} NaN outputs" if nan else ""
    return CheckRow(ver.id, shape.key, "pass" if ok else "FAIL", err, snr, tol, note)


def check(versions: list[str] | None = None, shapes: list[str] | None = None) -> list[CheckRow]:
    """Check every listed version (default: all) on every shape (default: ``DEFAULT_SHAPES``)."""
    from kernels.launch import require_cuda_torch

    vers = registry.resolve(versions)
    parsed = [Shape.parse(s) for s in (shapes or DEFAULT_SHAPES)]
    require_cuda_torch()
    rows = []
    for ver in vers:
        for shape in parsed:
            try:
                rows.append(check_one(ver.id, shape))
            except WhowaitsError as err:
                rows.append(CheckRow(ver.id, shape.key, "FAIL", note=str(err)))
    return rows


def print_table(rows: list[CheckRow]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="kernels.correctness: rel err vs float64 reference")
    for col in ("version", "shape", "status", "rel_err", "tol", "snr_db", "note"):
        table.add_column(col, justify="right" if col in ("rel_err", "tol", "snr_db") else "left")
    for r in rows:
        style = {"pass": "green", "FAIL": "bold red", "skip": "yellow"}[r.status]
        table.add_row(
            r.version,
            r.shape,
            f"[{style}]{r.status}[/]",
            "" if r.rel_err is None else f"{r.rel_err:.2e}",
            "" if r.tolerance is None else f"{r.tolerance:.0e}",
            "" if r.snr_db is None else f"{r.snr_db:.1f}",
            r.note,
        )
    Console(width=160).print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernels.correctness", description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="*", help="version ids (default: all)")
    parser.add_argument("--shapes", nargs="+", help="shape keys, e.g. b1_h8_s1000_d128_fp16_causal")
    args = parser.parse_args(argv)
    try:
        rows = check(args.versions, args.shapes)
    except WhowaitsError as err:
        print(f"kernels.correctness: error: {err}", file=sys.stderr)
        return 2
    print_table(rows)
    failed = [r for r in rows if r.status == "FAIL"]
    print(f"{len(rows) - len(failed)} ok / {len(failed)} failed of {len(rows)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
