"""Kernel ladder on a GPU: every version correct against float64, launcher errors. Skipped without a GPU."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

from kernels import check, registry  # noqa: E402
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
