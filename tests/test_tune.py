"""Auto-tuner without a GPU: space generation, feasibility filters, real nvcc builds, the committed table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernels import registry, tune
from kernels.config import TUNABLE_FIELDS, Shape
from conftest import needs_nvcc
from profiler.errors import WhowaitsError

REPO = Path(__file__).resolve().parent.parent


def test_parse_space():
    assert tune.parse_space("block_m=128,64;warps=4") == {"block_m": [64, 128], "warps": [4]}
    assert tune.parse_space(None) == {}
    for bad in ("head_dim=64", "block_m=", "block_m=a"):
        with pytest.raises(WhowaitsError):
            tune.parse_space(bad)


def test_space_from_dataclass_fields_and_version_table():
    v02 = registry.get("v02")
    shape = Shape.parse("b1_h4_s256_d64_bf16_causal")
    cfgs = tune.space(v02, shape)
    axes = {**tune.DEFAULT_SPACE, **v02.tune_space}
    expected = 1
    for f in TUNABLE_FIELDS:
        expected *= len(axes[f])
    assert len(cfgs) == len(set(cfgs)) == expected
    assert {(c.head_dim, c.dtype, c.causal) for c in cfgs} == {(64, "bf16", True)}
    assert {c.block_n for c in cfgs} == set(v02.tune_space["block_n"])
    narrowed = tune.space(v02, shape, tune.parse_space("block_m=16;block_n=8;warps=4"))
    assert [c.short_form() for c in narrowed] == ["d64_m16_n8_w4_s1_bf16_causal"]


def test_prefilter_reasons():
    v02 = registry.get("v02")
    base = v02.config
    assert tune.prefilter(v02, base) == ""
    assert "threads" in tune.prefilter(v02, base.replace(warps=64))
    assert "smem" in tune.prefilter(v02, base.replace(block_n=512))  # 2*512*128*2 B = 256 KB


@needs_nvcc
def test_build_step_drops_with_reasons():
    v02 = registry.get("v02")
    shape = Shape.parse("b1_h64_s1024_d128_fp16")
    rows, survivors = tune.build_step(v02, shape, tune.parse_space("block_m=16,64,6;block_n=8;warps=4"))
    by = {r.config: r for r in rows}
    assert by["d128_m16_n8_w4_s1_fp16"].status == "built" and by["d128_m16_n8_w4_s1_fp16"].spill_bytes == 0
    assert by["d128_m64_n8_w4_s1_fp16"].status == "dropped" and by["d128_m64_n8_w4_s1_fp16"].reason.startswith("spills")
    assert by["d128_m6_n8_w4_s1_fp16"].status == "dropped"
    assert "does not compile" in by["d128_m6_n8_w4_s1_fp16"].reason
    assert "block_m must be a multiple of warps" in by["d128_m6_n8_w4_s1_fp16"].reason
    assert [r.config for r, _ in survivors] == ["d128_m16_n8_w4_s1_fp16"]


def test_committed_tune_table():
    paths = sorted((REPO / "reports" / "h200" / "tune").glob("*.json"))
    assert paths
    for path in paths:
        data = json.loads(path.read_text())
        rows = data["rows"]
        ok = [r for r in rows if r["status"] == "ok"]
        assert ok and all(r["status"] in ("ok", "dropped") for r in rows)
        assert [r["ms"] for r in ok] == sorted(r["ms"] for r in ok)
        assert all(r["reason"] for r in rows if r["status"] == "dropped")
        assert all(r["spill_bytes"] == 0 and r["rel_err"] < 5e-3 for r in ok)
        assert data["provenance"]["version"] in {v.id for v in registry.versions()}


def test_cli_tune_without_gpu_says_build_only():
    pytest.importorskip("typer")
    try:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU")
    except ImportError:
        pass
    from clirun import whowaits

    proc = whowaits("tune", "v02")
    assert proc.returncode == 2
    assert "--build-only" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
