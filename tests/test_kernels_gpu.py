"""Kernel ladder on a GPU: every version correct against float64, launcher errors. Skipped without a GPU."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

from kernels import correctness as check, registry  # noqa: E402
from kernels.launch import forward  # noqa: E402
from profiler.errors import WhowaitsError  # noqa: E402

SHAPES = ["b1_h2_s128_d64_fp16", "b2_h2_s333_d128_fp16_causal", "b1_h3_s77_d64_bf16", "b1_h2_s1_d128_bf16_causal"]


@pytest.mark.parametrize("vid", [v.id for v in registry.versions()])
def test_version_correct(vid):
    rows = check.check([vid], SHAPES)
    bad = [r for r in rows if r.status == "FAIL"]
    assert not bad, bad
    assert any(r.status == "pass" for r in rows)


def test_forward_rejects_bad_input():
    q = torch.randn(1, 2, 64, 128, device="cuda", dtype=torch.float16)
    with pytest.raises(WhowaitsError, match="contiguous"):
        forward(q.transpose(1, 2), q.transpose(1, 2), q.transpose(1, 2), version="v01")
    with pytest.raises(WhowaitsError, match="float16 or torch.bfloat16"):
        forward(q.float(), q.float(), q.float(), version="v01")
    q96 = torch.randn(1, 2, 64, 96, device="cuda", dtype=torch.float16)
    with pytest.raises(WhowaitsError, match="supports head_dim 64/128"):
        forward(q96, q96, q96, version="v01")
    with pytest.raises(WhowaitsError, match="unknown kernel version"):
        forward(q, q, q, version="v99")


def test_runner_launches(capsys):
    from kernels import runner
    from kernels.config import Shape

    assert runner.run(["v01", "sdpa-math"], Shape.parse("b1_h2_s64_d64_fp16"), warmup=1) == ["v01_naive", "sdpa-math"]


def test_persistent_grid_walks_many_tiles(monkeypatch):
    # v13 with its grid capped to 1 and 3 CTAs: every CTA walks several tiles (ring, q_empty and scheduler
    # barriers cross tile boundaries); more tiles than SMs without the cap
    for cap in ("1", "3"):
        monkeypatch.setenv("WHOWAITS_MAX_CTAS", cap)
        rows = check.check(["v13"], ["b2_h3_s200_d128_fp16", "b1_h3_s190_d64_bf16_causal"])
        assert all(r.status == "pass" for r in rows), rows
    monkeypatch.delenv("WHOWAITS_MAX_CTAS")
    rows = check.check(["v13"], ["b1_h64_s1024_d128_fp16"])
    assert all(r.status == "pass" for r in rows), rows


def test_bench_seed_columns_flex_and_gemm(tmp_path):
    # the seed's table on a small shape: flex-attention always (causal through its block mask), FlashInfer
    # only when importable, the dense GEMM and the summary in the same file
    import json

    from kernels import bench

    (shape, rows, path), = bench.run(["v12"], ["b1_h4_s256_d64_fp16_causal"], reps=30, warmup=1, out_dir=tmp_path,
                                     log=lambda line: None)
    names = [r.implementation for r in rows]
    assert "flex-attention" in names and ("flashinfer" in names) == bench.flashinfer_available()
    by = {r.implementation: r for r in rows}
    for n in ("v12_intra_wg_overlap", "flex-attention", "sdpa-cudnn"):
        r = by[n]
        assert r.ms and r.rel_err < 5e-3 and r.max_err < 0.05 and r.snr_db > 40, r
    assert by["v12_intra_wg_overlap"].best_vs == 1.0
    data = json.loads(path.read_text())
    assert data["dense_gemm"]["tflops"] > 100 and data["summary"]["best_version"] == "v12_intra_wg_overlap"
    assert 0 < data["summary"]["best_pct_gemm"] < 150
