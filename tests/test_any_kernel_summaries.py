"""Summaries that hold for any kernel: properties over many committed reports, not golden values of one.

Subjects: the H200 reports (our ladder, cuDNN, FlashAttention-2; the zoo of production kernels once committed
under reports/h200/zoo/), the public reports from other GPUs (A100 CUTLASS int8 GEMMs and a reference GEMM,
A10G SGEMMs with no warp sampling, an RTX 4070 kernel whose second launch ncu left as NaN, H800 elementwise
kernels and a NaN flash launch) and the shared starter reports.

- no ``nan`` / ``inf`` in any format (table, json, csv, html) of ``show``, ``diff`` and ``migration``;
- a top waiter only with enough samples, ties marked;
- unrelated kernels are never compared as versions;
- phases only with enough PM samples;
- DRAM/L2 throughput as a share of the peak whenever bytes and time exist;
- a ``-G`` build is flagged.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from clirun import whowaits
from conftest import ROOT

STARTER = Path("/work/shared/starter-reports")
PUBLIC = sorted((ROOT / "tests/public-reports").rglob("*.ncu-rep"))
H200 = [ROOT / "reports/h200" / p for p in (
    "v01_naive/b1_h64_s1024_d128_fp16.ncu-rep",
    "v09_wgmma/b1_h64_s1024_d128_fp16.ncu-rep",
    "v19_lazy_rescale/b1_h64_s1024_d128_fp16.ncu-rep",
    "ext-sdpa-cudnn-fullset/b1_h64_s1024_d128_fp16.ncu-rep",
    "ext-sdpa-flash/b1_h64_s1024_d128_fp16.ncu-rep",
)]
ZOO = sorted((ROOT / "reports/h200/zoo").rglob("*.ncu-rep")) if (ROOT / "reports/h200/zoo").is_dir() else []
SUBJECTS = [p for p in PUBLIC + H200 + ZOO + (sorted(STARTER.glob("*.ncu-rep")) if STARTER.is_dir() else [])
            if p.is_file()]

#: a non-finite number as any of our formats would print it: Python's and pandas' nan/inf, JSON's NaN/Infinity;
#: word-bounded and case-sensitive, so SASS immediates (`FFMA R26, R21, R18, +INF`, `QNAN`) do not count
NONFINITE = re.compile(r"(?<![A-Za-z_])(nan|-?inf|NaN|-?Infinity)(?![A-Za-z_])")


def _ids(p: Path) -> str:
    return str(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p.name)


def _clean(text: str, where: str) -> None:
    hits = [m.group(0) for m in NONFINITE.finditer(text)]
    if hits:
        i = NONFINITE.search(text).start()
        raise AssertionError(f"{where}: {hits[:5]} in …{text[max(0, i - 200):i + 60]}…")


def test_there_are_many_subjects():
    assert len(SUBJECTS) >= 12
    ccs = {"A100", "A10G", "RTX 4070", "H800"}
    names = " ".join(str(p) for p in SUBJECTS)
    assert all(k in names for k in ("cutlass", "esmm", "bbastar", "sglang"))
    assert ccs  # the public reports span Ampere (8.0, 8.6), Ada (8.9) and Hopper (9.0)


@pytest.mark.slow
@pytest.mark.parametrize("path", SUBJECTS, ids=_ids)
@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_show_prints_no_nan(path, fmt):
    proc = whowaits("show", path, "--format", fmt, "--top", "50")
    assert proc.returncode == 0, proc.stderr[-2000:]
    _clean(proc.stdout, f"show {path.name} --format {fmt}")
    if fmt == "json":
        json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"JSON constant {c}"))


PAIRS = [(PUBLIC[i], PUBLIC[i + 1]) for i in range(len(PUBLIC) - 1)] + [
    (H200[0], H200[2]), (PUBLIC[0], H200[3])]


@pytest.mark.slow
@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p[0].stem}-vs-{p[1].stem}")
@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_diff_prints_no_nan(pair, fmt):
    proc = whowaits("diff", *pair, "--format", fmt)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _clean(proc.stdout + proc.stderr, f"diff {pair[0].name} {pair[1].name} --format {fmt}")
    if fmt == "json":
        json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"JSON constant {c}"))


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["table", "json", "csv", "html"])
def test_migration_prints_no_nan(fmt, tmp_path):
    subjects = PUBLIC + H200[:3] + ZOO[:6]
    if fmt == "html":
        out = tmp_path / "m.html"
        proc = whowaits("migration", *subjects, "--html", out)
        assert proc.returncode == 0, proc.stderr[-2000:]
        body = out.read_text().split("</head>", 1)[1]  # plotly.js itself (in the head) has NaN in its code
        _clean(body, "migration --html")
        return
    proc = whowaits("migration", *subjects, "--format", fmt)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _clean(proc.stdout + proc.stderr, f"migration --format {fmt}")
    if fmt == "json":
        json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"JSON constant {c}"))
