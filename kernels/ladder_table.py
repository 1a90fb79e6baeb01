"""Regenerate the ladder table of docs/ladder.md from one bench run: ``python -m kernels.ladder_table DATE``,
and ladder IV's targets table of docs/ladder-iv.md: ``python -m kernels.ladder_table --ladder-iv DATE``.

Reads ``reports/h200/bench/<DATE>-<shape>.json`` for the two target shapes and rewrites the block between
``<!-- ladder-table`` and ``<!-- /ladder-table -->`` in docs/ladder.md (tests/test_docs.py checks it against
the same JSON): one row per ladder version in the run, then the SDPA flash and cuDNN baselines; the best
ladder version of each column in bold. The one-line change of each row is ``CHANGES`` below.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from profiler.io import write_atomic

ROOT = Path(__file__).resolve().parents[1]
SHAPES = ("b1_h64_s1024_d128_fp16", "b4_h16_s4096_d128_fp16")
CHANGES = {
    "v01_naive": "CUDA cores, global memory, online softmax",
    "v02_smem_tiling": "K/V tiles in shared memory (CUDA cores)",
    "v03_tensor_cores": "mma.sync m16n8k16 + ldmatrix, FA2 warp layout",
    "v04_swizzle_cp_async": "XOR-swizzled shared memory + cp.async",
    "v05_double_buffer": "K/V double buffering, eager loads",
    "v06_softmax_fusion": "exp2 with the scale in one FFMA, 1/l at the end, first rescale skipped",
    "v07_tuned": "the auto-tuner's best config of v06 (128×64 tiles, 4 warps, 2 stages)",
    "v08_tma_mbarrier": "TMA loads into a 2-stage mbarrier ring (full/empty barriers), mma.sync unchanged",
    "v09_wgmma": "wgmma: QKᵀ SS + PV RS, 2 warpgroups × 64 rows, 128×128 tiles",
    "v10_warp_specialized": "warp specialisation: TMA producer warpgroup (setmaxnreg 24) + 2 consumers (240)",
    "v11_pingpong": "pingpong: named barriers order the consumers' PV[n-1]+QKᵀ[n] batches; split K/V ring",
    "v12_intra_wg_overlap": "intra-warpgroup overlap: softmax[n] under its own PV[n-1] (wait_group 1)",
    "v13_persistent": "persistent CTAs: grid = SMs, static tile scheduler, K/V ring and producer across tiles",
    "v14_cross_tile_qk": "the next tile's QKᵀ[0] under the current tile's last PV (two Q buffers)",
    "v15_softmax_under_pv": "softmax[n] really under its own PV[n-1]: a V-barrier re-check pins wait_group 0 below it",
    "v16_desc_iterator": "one wgmma descriptor per operand and batch, + offset per k16 step (220 -> 157 instructions issued per batch)",
    "v17_tma_store_o": "the epilogue through shared memory and a TMA store (no STG; 4th tensor map)",
    "v18_desc_iterator_o": "v17 + v16's descriptor iterator (219 -> 155 instructions issued per batch)",
    "v19_lazy_rescale": "v18 + FA4's lazy max: O rescaled only when a row's max grew by > 2^8",
    "v20_three_consumers": "a pingpong ring of 2 or 3 consumers: 192 x 128 tiles, 3 consumers at d64 (shared headers)",
    "v21_causal_pairs": "causal tiles in heavy/light pairs of one head: every CTA the same share of key blocks",
    "v22_d64_stages4": "v21 with 4 K/V stages at d64 (refuted)",
    "v23_exp2_poly": "v21 with 1 in 8 exponentials on the FMA pipe at d64 (refuted: C7511, wgmma serialised)",
    "v24_d64_stages3": "v21 with 3 K/V stages at d64 (+0.2%, noise)",
    "v25_wide_kv": "v21 with 128 x 160 tiles at d128 non-causal, O staged in the finished tile's Q rows",
    "sdpa-flash": "torch SDPA, FlashAttention-2 backend",
    "sdpa-cudnn": "torch SDPA, cuDNN backend (wgmma)",
    "flex-attention": "torch.compile(flex_attention) (Triton)",
    "flashinfer": "FlashInfer prefill (flashinfer-python)",
}
BASELINE_ROWS = ("sdpa-flash", "sdpa-cudnn", "flex-attention", "flashinfer")  # those present in every file

# Ladder IV's targets (docs/ladder-iv.md): shape -> (reference, minimum ratio of the best version to it);
# "cudnn-best" is the faster of the sdpa-cudnn and sdpa-auto rows of the run (the bench summary's cudnn_best), as in
# whowaits.toml's rules. Shapes with no target are reported beside them (and against flex, which is >= 1.3x everywhere).
TARGETS_IV: dict[str, tuple[tuple[str, float], ...]] = {
    "b4_h16_s4096_d128_fp16": (("cudnn-best", 1.10), ("flex-attention", 1.3)),
    "b4_h16_s4096_d128_bf16": (("cudnn-best", 1.10), ("flex-attention", 1.3)),
    "b4_h32_s4096_d64_fp16": (("cudnn-best", 1.05), ("flex-attention", 1.3)),
    "b4_h16_s4096_d128_fp16_causal": (("cudnn-best", 1.05), ("flex-attention", 1.3)),
    "b1_h64_s1024_d128_fp16": (("cudnn-best", 1.05), ("flex-attention", 1.3)),
    "b1_h16_s16384_d128_fp16": (("flex-attention", 1.3),),
    "b4_h16_s4096_d128_bf16_causal": (("flex-attention", 1.3),),
    "b4_h32_s4096_d64_bf16": (("flex-attention", 1.3),),
    "b4_h32_s4096_d64_fp16_causal": (("flex-attention", 1.3),),
}
LADDER_IV_DOC = ROOT / "docs" / "ladder-iv.md"


def table(date: str) -> str:
    benches, files = [], []
    for shape in SHAPES:
        data = json.loads((ROOT / "reports/h200/bench" / f"{date}-{shape}.json").read_text())
        files.append(data)
        benches.append({r["implementation"]: r for r in data["rows"] if r.get("tflops")})
    versions = sorted(v for v in benches[0] if re.match(r"v\d\d_", v))
    names = versions + [b for b in BASELINE_ROWS if all(b in bench for bench in benches)]
    cells: dict[str, list] = {n: [] for n in names}
    for bench in benches:
        flash, cudnn = bench["sdpa-flash"]["tflops"], bench["sdpa-cudnn"]["tflops"]
        for n in names:
            t = bench[n]["tflops"]
            cells[n].append([t, 100 * t / flash, 100 * t / cudnn])
    best = [max(cells[v][s][c] for v in versions) for s in range(len(SHAPES)) for c in range(3)]
    lines = [
        f"<!-- ladder-table: generated from reports/h200/bench/{date}-*.json by python -m kernels.ladder_table "
        f"{date}; tests/test_docs.py checks it -->",
        "| version | change | TFLOPS b1_h64_s1024 | % SDPA flash | % cuDNN | TFLOPS b4_h16_s4096 | % SDPA flash | % cuDNN |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in names:
        row = []
        for s in range(len(SHAPES)):
            for c in range(3):
                v = cells[n][s][c]
                text = f"{v:.1f}"
                row.append(f"**{text}**" if n in versions and v == best[3 * s + c] and (c < 2 or v > 100) else text)
        lines.append(f"| {n} | {CHANGES.get(n, '')} | " + " | ".join(row) + " |")
    gemm = [f.get("dense_gemm") for f in files]
    if all(gemm):
        best = [max(bench[v]["tflops"] for v in versions) for bench in benches]
        lines.append("")
        lines.append("Dense fp16 GEMM (`torch.matmul`, 8192³) in the same runs: "
                     + " / ".join(f"{g['tflops']:.1f}" for g in gemm)
                     + " TFLOPS; the best version reaches "
                     + " / ".join(f"{100 * b / g['tflops']:.1f}%" for b, g in zip(best, gemm)) + " of it.")
    return "\n".join(lines) + "\n"


def _reference(data: dict, name: str) -> tuple[str, float] | None:
    """(row, TFLOPS) of a target's reference in one bench file: cudnn-best from the summary (suspect rows left out),
    else the named row; None where the run has no usable row."""
    if name == "cudnn-best":
        best = (data.get("summary") or {}).get("cudnn_best")
        return (best["implementation"], best["tflops"]) if best else None
    suspect = set((data.get("summary") or {}).get("suspect") or ())
    row = next((r for r in data["rows"] if r["implementation"] == name and r.get("tflops")), None)
    return (name, row["tflops"]) if row and name not in suspect else None


def table_iv(date: str) -> str:
    """Ladder IV's targets from one bench run: per shape, every ladder version's TFLOPS and its ratio to cuDNN at its
    best, the references, and each target's ratio for the run's best version with its verdict."""
    files = {}
    for shape in TARGETS_IV:
        path = ROOT / "reports/h200/bench" / f"{date}-{shape}.json"
        if path.exists():
            files[shape] = json.loads(path.read_text())
    if not files:
        raise FileNotFoundError(2, "no bench file", str(ROOT / "reports/h200/bench" / f"{date}-<shape>.json"))
    versions = sorted({r["implementation"] for d in files.values() for r in d["rows"]
                       if re.match(r"v\d\d_", r["implementation"]) and r.get("tflops")})
    short = [v.split("_", 1)[0] for v in versions]
    lines = [
        f"<!-- ladder-iv-table: generated from reports/h200/bench/{date}-*.json by python -m kernels.ladder_table "
        f"--ladder-iv {date}; tests/test_docs.py checks it -->",
        "| shape | " + " | ".join(f"{s} TFLOPS (× cuDNN)" for s in short)
        + " | cuDNN at its best | flex | target: best version / reference | held |",
        "| --- | " + " | ".join("---:" for _ in versions) + " | ---: | ---: | --- | --- |",
    ]
    for shape, data in files.items():
        rows = {r["implementation"]: r["tflops"] for r in data["rows"] if r.get("tflops")}
        refs = {ref: _reference(data, ref) for ref in {"cudnn-best", "flex-attention", *(r for r, _ in TARGETS_IV[shape])}}
        cudnn, flex = refs["cudnn-best"], refs["flex-attention"]
        present = [v for v in versions if v in rows]
        best = max(present, key=lambda v: rows[v]) if present else None
        cells = []
        for v in versions:
            if v not in rows:
                cells.append("—")
                continue
            text = f"{rows[v]:.1f}" + (f" ({rows[v] / cudnn[1]:.3f}×)" if cudnn else "")
            cells.append(f"**{text}**" if v == best else text)
        targets, held = [], []
        for ref, ratio in TARGETS_IV[shape]:
            got = refs[ref]
            if best is None or got is None:
                targets.append(f"{ref} ≥ {ratio:.2f}×: no row")
                held.append("—")
                continue
            r = rows[best] / got[1]
            targets.append(f"{best.split('_', 1)[0]} / {got[0]} {r:.3f}× (≥ {ratio:.2f}×)")
            held.append("yes" if r >= ratio else "no")
        lines.append(f"| {shape} | " + " | ".join(cells)
                     + f" | {f'{cudnn[1]:.1f} ({cudnn[0]})' if cudnn else '—'} | {f'{flex[1]:.1f}' if flex else '—'}"
                     + f" | {'; '.join(targets)} | {' / '.join(held)} |")
    return "\n".join(lines) + "\n"


def _rewrite(doc: Path, marker: str, block: str) -> None:
    text = doc.read_text()
    head, rest = text.split(f"<!-- {marker}", 1)
    _, tail = rest.split(f"<!-- /{marker} -->", 1)
    write_atomic(doc, head + block + f"<!-- /{marker} -->" + tail)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    iv = bool(argv) and argv[0] == "--ladder-iv"
    args = argv[1:] if iv else argv
    if len(args) != 1 or not re.fullmatch(r"\d{4}-\d\d-\d\d(T\d{4})?", args[0]):
        print("usage: python -m kernels.ladder_table [--ladder-iv] YYYY-MM-DD[THHMM] (the bench run's name prefix)",
              file=sys.stderr)
        return 2
    try:
        if iv:
            _rewrite(LADDER_IV_DOC, "ladder-iv-table", table_iv(args[0]))
        else:
            _rewrite(ROOT / "docs" / "ladder.md", "ladder-table", table(args[0]))
    except FileNotFoundError as err:
        print(f"kernels.ladder_table: error: no bench file {err.filename}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
