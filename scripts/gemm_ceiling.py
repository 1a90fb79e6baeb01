"""The ladder's fastest rows against the dense fp16 GEMM measured in the same bench run.

Every ``whowaits bench`` result file since ladder III times ``torch.matmul`` of two 8192^2 fp16 matrices in the
same process, with the same L2 flush and GPU-side spin as the attention rows (``kernels.bench.time_dense_gemm``,
``dense_gemm`` in the file). An attention forward is two GEMMs per tile plus a softmax between them, so the
dense GEMM's rate in that run is what the tensor pipe delivers there with nothing else to do: the row that asks
an attention kernel to run faster than it asks it to beat cuBLAS's own GEMM.

    python scripts/gemm_ceiling.py [SHAPE ...] [--version V] [--since YYYY-MM-DD] [--ratio 1.10]

prints, per committed run of each shape: the GEMM's TFLOPS, the version's, cuDNN at its best in that run (the
faster of ``sdpa-cudnn`` and ``sdpa-auto``), the version as a share of the GEMM, and what ``--ratio`` x cuDNN
would be as a share of the GEMM. No GPU needed: it reads ``reports/h200/bench/``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "reports" / "h200" / "bench"
CUDNN = ("sdpa-cudnn", "sdpa-auto")


def rows(shape: str, version: str, since: str) -> list[dict]:
    out = []
    for f in sorted(BENCH.glob(f"*-{shape}.json")):
        stamp = f.name[: -len(f"-{shape}.json")]
        if stamp[:10] < since:
            continue
        d = json.loads(f.read_text())
        gemm = (d.get("dense_gemm") or {}).get("tflops")
        by = {r["implementation"]: r.get("tflops") for r in d.get("rows", [])}
        cudnn = max((by[c] for c in CUDNN if by.get(c)), default=None)
        if gemm and by.get(version) and cudnn:
            out.append({"run": stamp, "gemm": gemm, "version": by[version], "cudnn": cudnn})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shapes", nargs="*", default=["b4_h16_s4096_d128_fp16", "b4_h16_s4096_d128_bf16",
                                                  "b1_h64_s1024_d128_fp16"])
    ap.add_argument("--version", default="v34_q_regs")
    ap.add_argument("--since", default="2026-12-03")
    ap.add_argument("--ratio", type=float, default=1.10, help="the target, x cuDNN at its best")
    a = ap.parse_args(argv)
    for shape in a.shapes:
        got = rows(shape, a.version, a.since)
        if not got:
            print(f"{shape}: no run with {a.version}, cuDNN and the dense GEMM since {a.since}", file=sys.stderr)
            continue
        print(f"{shape} ({len(got)} runs since {a.since}; TFLOPS)")
        print(f"  {'run':<17} {'GEMM':>6} {a.version:>12} {'cuDNN best':>10} {'v / GEMM':>9} "
              f"{a.ratio:.2f}x cuDNN / GEMM")
        for r in got:
            print(f"  {r['run']:<17} {r['gemm']:6.1f} {r['version']:12.1f} {r['cudnn']:10.1f} "
                  f"{r['version'] / r['gemm']:9.3f} {a.ratio * r['cudnn'] / r['gemm']:9.3f}")
        med = {k: statistics.median(r[k] for r in got) for k in ("gemm", "version", "cudnn")}
        share = [r["version"] / r["gemm"] for r in got]
        need = [a.ratio * r["cudnn"] / r["gemm"] for r in got]
        print(f"  median GEMM {med['gemm']:.1f}, {a.version} {med['version']:.1f} ({min(share):.3f}-{max(share):.3f} "
              f"of the GEMM), {a.ratio:.2f}x cuDNN = {min(need):.3f}-{max(need):.3f} of the GEMM")
    return 0


if __name__ == "__main__":
    sys.exit(main())
