"""Merging launches (a kernel filter matching several) and the confound guard, on real summaries."""

from __future__ import annotations

import copy

import pytest

try:
    from test_compare_helpers import CUDNN, FLASH
except ImportError:  # tests/ imported as a package
    from tests.test_compare_helpers import CUDNN, FLASH

from profiler.analyze import summarize
from profiler.compare import Profiled, Subject, confounds, diff
from profiler.compare.merge import merge_launches


@pytest.fixture(scope="module")
def fa_cu():
    return summarize(str(FLASH))[0], summarize(str(CUDNN))[0]


def test_one_launch_is_unchanged(fa_cu):
    assert merge_launches([fa_cu[0]]) is fa_cu[0]


def test_two_kernels_add_up(fa_cu):
    a, b = fa_cu
    m = merge_launches([a, b])
    assert m["duration_ns"] == a["duration_ns"] + b["duration_ns"]
    for r in a["stall_samples"]:
        assert m["stall_samples"][r] == (a["stall_samples"][r] or 0) + (b["stall_samples"].get(r) or 0)
    n = sum(m["stall_samples"].values())
    assert sum(m["stall_share"].values()) == pytest.approx(1.0)
    assert sum(w["samples"] for w in m["who_waits"]) == sum(w["samples"] for w in a["who_waits"] + b["who_waits"])
    hmma = next(o for o in m["opcode_waits"] if o["class"] == "HMMA")
    assert hmma["samples"] == next(o for o in a["opcode_waits"] if o["class"] == "HMMA")["samples"]
    assert hmma["share"] == pytest.approx(hmma["samples"] / n)
    r = m["roofline"]
    assert r["flops"] == a["roofline"]["flops"] + b["roofline"]["flops"]
    assert r["achieved_tflops"] == pytest.approx(r["flops"] / m["duration_ns"] / 1e3)
    assert r["intensity"]["dram"] == pytest.approx(r["flops"] / r["bytes"]["dram"])
    lo, hi = sorted([a["tensor_pipe_pct"], b["tensor_pipe_pct"]])
    assert lo < m["tensor_pipe_pct"] < hi
    # the XU pipe like the tensor pipe: the duration-weighted mean; null where a launch lacks it (neither report
    # holds ncu's XU counter, both have the SASS-derived figure)
    x = "xu_pipe_pct_sass"
    assert m[x] == pytest.approx((a[x] * a["duration_ns"] + b[x] * b["duration_ns"]) / m["duration_ns"])
    assert min(a[x], b[x]) < m[x] < max(a[x], b[x])
    assert a["xu_pipe_pct"] is None and m["xu_pipe_pct"] is None
    assert merge_launches([a, {**b, x: None}])[x] is None
    assert m["tensor_path"] == "hmma+gmma"
    assert m["short_scoreboard"]["samples"] == a["short_scoreboard"]["samples"] + b["short_scoreboard"]["samples"]
    # a merged summary diffs like any other
    d = diff(a, m, "flash", "both")
    assert d.speedup == pytest.approx(a["duration_ns"] / m["duration_ns"])


def test_static_barriers_count_each_kernel_once(fa_cu):
    a, _ = fa_cu
    m = merge_launches([a, copy.deepcopy(a)])
    assert m["barriers"]["static"] == a["barriers"]["static"]
    assert m["barriers"]["executed"] == {k: 2 * v for k, v in a["barriers"]["executed"].items()}
    assert m["kernel"] == a["kernel"]


def _profiled(label, summary, sidecar=None, shape="b1_h64_s1024_d128_fp16"):
    return Profiled(subject=Subject(label=label, path=FLASH, version=label, shape=shape), summary=summary,
                    sidecar=sidecar)


def test_confounds_from_the_reports_themselves(fa_cu):
    a, b = fa_cu
    assert [w["field"] for w in confounds([_profiled("a", a), _profiled("b", b)])] == ["provenance"]
    other_gpu = copy.deepcopy(b)
    other_gpu["device"]["name"] = "NVIDIA A100-SXM4-80GB"
    found = confounds([_profiled("a", a), _profiled("b", other_gpu, shape="b1_h64_s2048_d128_fp16")])
    assert [w["field"] for w in found] == ["gpu", "shape", "provenance"]
    assert "A100" in found[0]["message"] and "H200" in found[0]["message"]
    side = {"gpu": "NVIDIA H200", "ncu_version": "2025.3.1.0", "clock_control": "none", "section_set": "whowaits",
            "shape": "b1_h64_s1024_d128_fp16"}
    full = dict(side, section_set="full")
    found = confounds([_profiled("a", a, side), _profiled("b", b, full)])
    assert [w["field"] for w in found] == ["section_set"]
    assert confounds([_profiled("a", a, side), _profiled("b", b, dict(side))]) == []
    assert confounds([_profiled("a", a)]) == []
