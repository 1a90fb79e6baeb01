"""Provenance sidecars: the second-wave fields, and whether a committed report still describes its rung's
current build.

Decision: a report whose recorded ``build_hash`` differs from the rung's current build key
**fails** only when the current build's SASS differs from the profiled SASS (``stale``: the report and its
verdict describe code that no longer builds). A changed key with identical SASS (a comment edited in an
included header, a header renamed: ``kernels.build``'s key covers the rung's included files) only **warns**,
naming the fix (``scripts/backfill_provenance.py --restamp``): failing there would turn every unrelated
header into a red CI while the reports are still exact, and would teach people to re-stamp blindly.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import pytest

from kernels.config import Shape
from profiler import freshness
from profiler.provenance import SIDECAR_KEYS

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "reports" / "h200"
SHAPE = "b1_h64_s1024_d128_fp16"
NEW_KEYS = ("build_hash", "problem_flops", "ladder_order", "title", "change", "expected_bottleneck")



def _have_nvcc() -> bool:
    from kernels.build import find_nvcc
    from profiler.errors import WhowaitsError

    try:
        return bool(find_nvcc())
    except WhowaitsError:
        return False


HAVE_NVCC = _have_nvcc()
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# the build key covers `nvcc --version`: skipped only off CI without nvcc; in CI a missing nvcc fails
pytestmark = pytest.mark.skipif(not HAVE_NVCC and not IN_CI, reason="nvcc not on PATH (CI must have it)")


@pytest.fixture(scope="module", autouse=True)
def _build_dir(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    if "WHOWAITS_BUILD_DIR" not in os.environ:
        mp.setenv("WHOWAITS_BUILD_DIR", str(ROOT / ".cache" / "whowaits" / "build"))
    yield
    mp.undo()


def test_committed_sidecars_have_the_provenance_fields():
    sides = sorted(REPORTS.glob("*/*.json"))
    sides = [s for s in sides if s.with_suffix(".ncu-rep").exists()]
    assert len(sides) >= 11
    for s in sides:
        data = json.loads(s.read_text())
        assert set(NEW_KEYS) <= set(data), s
        assert set(SIDECAR_KEYS) <= set(data), s
        # problem FLOPs of the seed shape: 4·B·H·S²·D = 4·1·64·1024²·128, as ncu counted on SDPA flash (NCU-NOTES);
        # reports at other shapes (ladder IV: d64, b4, causal) carry their own shape's 4·B·H·S²·D (half when causal)
        if data["shape"] == "b1_h64_s1024_d128_fp16":
            assert data["problem_flops"] == 4 * 1 * 64 * 1024 ** 2 * 128 == 34359738368
        else:
            assert data["problem_flops"] == Shape.parse(data["shape"]).flops(), s
        assert data["title"], s
        if s.parent.name.startswith("ext-"):
            assert data["build_hash"] is None and data["ladder_order"] is None
        else:
            assert len(data["build_hash"]) == 24 and int(data["build_hash"], 16) >= 0
            assert data["ladder_order"] == int(s.parent.name[1:3])
            assert data.get("tool_version") or "backfilled" in data.get("note", "")


def test_committed_reports_match_their_rungs_current_build(ladder_built):
    found = freshness.check(REPORTS)
    assert {f.version for f in found} >= {"v01_naive", "v03_tensor_cores", "v07_tuned"}
    stale = [f"{f.report.relative_to(ROOT)}: {f.detail}" for f in found if f.status in ("stale", "unknown")]
    assert not stale, ("committed reports no longer describe their rung's current build (re-profile them with "
                       "`whowaits profile VERSION --force`, or restore the rung's sources):\n" + "\n".join(stale))
    restamp = [f"{f.report.relative_to(ROOT)} ({f.recorded} -> {f.current})" for f in found if f.status == "restamp"]
    if restamp:
        warnings.warn("build keys changed with identical SASS; run scripts/backfill_provenance.py --restamp: "
                      + ", ".join(restamp), stacklevel=1)


def _copy(tmp_path: Path, src_version: str, as_version: str, **side) -> Path:
    dst = tmp_path / as_version / f"{SHAPE}.ncu-rep"
    dst.parent.mkdir(parents=True)
    shutil.copy(REPORTS / src_version / f"{SHAPE}.ncu-rep", dst)
    data = json.loads((REPORTS / src_version / f"{SHAPE}.json").read_text()) | {"version": as_version} | side
    (dst.parent / f"{SHAPE}.json").write_text(json.dumps(data))
    return dst


def test_a_changed_build_is_told_apart_by_its_sass(tmp_path):
    # v03's report filed as v04 with a key that is not v04's: v04's current SASS differs -> stale
    _copy(tmp_path, "v03_tensor_cores", "v04_swizzle_cp_async", build_hash="0" * 24, ladder_order=4)
    # v03's report with an outdated key but the same code -> restamp (the SASS is the current build's)
    _copy(tmp_path, "v03_tensor_cores", "v03_tensor_cores", build_hash="f" * 24)
    # a ladder report without a recorded key -> unknown
    _copy(tmp_path, "v01_naive", "v01_naive", build_hash=None)
    got = {f.version: f for f in freshness.check(tmp_path)}
    assert got["v04_swizzle_cp_async"].status == "stale"
    assert "offset" in got["v04_swizzle_cp_async"].detail
    assert got["v03_tensor_cores"].status == "restamp"
    assert got["v03_tensor_cores"].current == freshness.check_report(REPORTS / "v03_tensor_cores" / f"{SHAPE}.ncu-rep").current
    assert got["v01_naive"].status == "unknown"


def test_compare_reads_sidecars_not_kernels():
    """compare/ never imports kernels: the ladder order, titles and TFLOPS come from the sidecars."""
    import ast

    for path in (ROOT / "profiler" / "compare").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "kernels" or n.startswith("kernels.") for n in names), path


# ------------------------------------------------------------------------------------------------ build key
def _keys(kernels_dir: Path | None = None) -> dict[str, str]:
    from kernels import build, registry
    from kernels.config import Shape

    s = Shape.parse(SHAPE)
    mp = pytest.MonkeyPatch()
    if kernels_dir is not None:
        mp.setattr(build, "KERNELS_DIR", kernels_dir)
    try:
        return {v.id: build._source_hash(v, v.config_for(s.head_dim, s.dtype, s.causal))
                for v in registry.versions() if v.id in ("v01_naive", "v03_tensor_cores", "v07_tuned", "v11_pingpong")}
    finally:
        mp.undo()


def test_build_key_is_the_rungs_own_includes_wherever_the_checkout_is(tmp_path):
    """The key covers the files the translation unit includes (by name relative to kernels/ and bytes), followed
    transitively: a checkout at another path keys the same, a header added beside the others changes no key,
    an edit reaches exactly the rungs that include the edited header (v03 through warp_gemm.cuh -> mma.cuh)."""
    from kernels import build

    here = _keys()
    copy = tmp_path / "elsewhere" / "kernels"
    shutil.copytree(build.KERNELS_DIR, copy, ignore=shutil.ignore_patterns("__pycache__", "wip"))
    assert _keys(copy) == here
    (copy / "common" / "sm90" / "a_new_header.cuh").write_text("#pragma once\n")
    assert _keys(copy) == here
    with open(copy / "common" / "sm80" / "mma.cuh", "a") as f:
        f.write("// an edit\n")
    edited = _keys(copy)
    assert edited["v01_naive"] == here["v01_naive"] and edited["v11_pingpong"] == here["v11_pingpong"]
    assert edited["v03_tensor_cores"] != here["v03_tensor_cores"] and edited["v07_tuned"] != here["v07_tuned"]
    names = [p.relative_to(build.KERNELS_DIR.resolve()).as_posix() for p in
             build.included_files('#include "v07_tuned/../v06_softmax_fusion/kernel.cu"\n')]
    assert names[0] == "v06_softmax_fusion/kernel.cu" and "common/sm80/mma.cuh" in names
