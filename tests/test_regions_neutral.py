"""Regions that do not assume attention: the attention names only where the SASS computes attention.

Property over every committed report (ours, cuDNN and FlashAttention-2 on the H200; CUTLASS int8 GEMMs and
a reference GEMM on an A100, elementwise kernels on an H800, an RTX 4070 kernel; the H200 zoo of production
kernels when present): a launch whose regions are inferred carries the attention names exactly when
:func:`attention_evidence` finds an exponential of one MMA's result feeding another MMA. The detector itself
is checked on hand-written SASS (a GEMM, a GEMM with an exp epilogue, Q K^T -> exp -> P V with P in registers
and through shared memory).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import pytest

from conftest import ROOT
from profiler import metrics as M
from profiler.analyze.regions import attention_evidence, pc_regions, regions_json, vocabulary_of
from profiler.report import load_report

STARTER = Path("/work/shared/starter-reports")


def every_report() -> list[Path]:
    """Every committed report: reports/h200/** (the zoo included once committed), tests/public-reports/**,
    and the shared starter reports where this machine has them."""
    found = sorted((ROOT / "reports").rglob("*.ncu-rep")) + sorted((ROOT / "tests/public-reports").rglob("*.ncu-rep"))
    if STARTER.is_dir():
        found += sorted(STARTER.glob("*.ncu-rep"))
    return [p for p in found if p.is_file()]


REPORTS = every_report()
ATTENTION_ONLY = set(M.region_config()["vocabularies"]["attention"]) - set(M.region_config()["vocabularies"]["neutral"])
#: kernels known to compute attention by their names (ours, cuDNN's SDPA, FlashAttention, FlexAttention)
ATTENTION_NAME = re.compile(r"flash|fmha|sdpa|attention|attn|flex", re.I)


@lru_cache(maxsize=None)
def _launches(path: Path):
    return load_report(path).launches


def _ids(p: Path) -> str:
    return str(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p.name)


def test_there_are_many_subjects():
    assert len(REPORTS) >= 30
    assert any("public-reports" in str(p) for p in REPORTS)


@pytest.mark.slow
@pytest.mark.parametrize("path", REPORTS, ids=_ids)
def test_attention_names_only_with_exp_between_chained_mmas(path):
    for la in _launches(path):
        if la.sass.empty:
            continue
        names, source, _ = pc_regions(la)
        evidence = attention_evidence(la.sass["sass"].tolist())
        attention = bool(ATTENTION_ONLY & set(names))
        if source == "inferred":
            assert attention == (evidence is not None), (path, la.index, evidence)
        else:  # declared: the kernel's own markers decide (our ladder)
            assert source == "declared"
        js = regions_json(la)
        if js:
            assert {r["vocabulary"] for r in js} == {vocabulary_of(names)}
        # what the names say agrees with what the kernel is (our rungs, cuDNN, FA2 are attention; GEMMs,
        # reductions, elementwise and search kernels are not)
        if source == "inferred" and any(b in set(M.region_config()["attention"]["mma"]) for b in la.sass["base"]):
            assert attention == bool(ATTENTION_NAME.search(str(la.kernel))), (path, la.index, la.kernel)
        if not ATTENTION_NAME.search(str(la.kernel)):
            assert not attention, (path, la.index, la.kernel)


def _first(glob: str) -> Path:
    hits = sorted((ROOT / "reports/h200").glob(glob)) + sorted((ROOT / "tests/public-reports").glob(glob))
    if not hits:
        pytest.skip(f"no report {glob}")
    return hits[0]


@pytest.mark.parametrize("glob,vocab", [
    ("ext-sdpa-cudnn/*.ncu-rep", "attention"),
    ("ext-sdpa-flash/*.ncu-rep", "attention"),
    ("cutlass-panjd123/report-s4.ncu-rep", "neutral"),
    ("sglang-flyinglandlord/*.ncu-rep", "neutral"),
])
def test_known_kernels_get_their_vocabulary(glob, vocab):
    la = _launches(_first(glob))[0]
    regs = regions_json(la)
    assert regs and {r["vocabulary"] for r in regs} == {vocab}
    if vocab == "neutral":
        assert not ATTENTION_ONLY & {r["name"] for r in regs}


def test_cutlass_gemm_regions_name_its_mmas_and_loads():
    """The A100 CUTLASS int8 GEMM (report-s4, launch 0): its 48 IMMA instructions (hand count of the SASS:
    `IMMA.16832.S8.S8.SAT`) are the mma region, its cp.async copies shared staging."""
    la = _launches(_first("cutlass-panjd123/report-s4.ncu-rep"))[0]
    names, source, _ = pc_regions(la)
    bases = la.sass["base"].tolist()
    assert source == "inferred"
    assert {n for n, b in zip(names, bases) if b == "IMMA"} == {"mma"}
    assert sum(b == "IMMA" for b in bases) == 48
    assert {n for n, b in zip(names, bases) if b == "LDGSTS"} == {"shared_staging"}
    assert {n for n, b in zip(names, bases) if b == "STG"} == {"store"}


# --- the detector on hand-written SASS --------------------------------------------------------------------

GEMM = [
    "LDSM.16.M88.4 R8, [R2]",
    "LDSM.16.M88.2 R12, [R3]",
    "HMMA.16816.F32 R4, R8, R12, R4",
    "HMMA.16816.F32 R4, R8, R12, R4",
    "BRA 0x0",
]
GEMM_EXP_EPILOGUE = GEMM + [
    "FMUL R20, R4, -1.4426950216293334961",
    "MUFU.EX2 R20, R20",
    "FADD R20, R20, 1",
    "MUFU.RCP R20, R20",
    "STG.E desc[UR4][R30.64], R20",
]
ATTENTION_REGS = [
    "HMMA.16816.F32 R4, R8, R12, RZ",  # S = Q K^T
    "FMNMX R16, R4, R5, !PT",
    "FFMA R17, R4, 0.088388346, -R16",
    "MUFU.EX2 R18, R17",  # P = exp(S - m)
    "MUFU.EX2 R19, R17",
    "F2FP.F16.F32.PACK_AB R40, R19, R18",
    "MOV R41, R40",
    "HMMA.16816.F32 R24, R40, R44, R24",  # O += P V
]
ATTENTION_SMEM = [
    "HGMMA.64x128x16.F32 R24, gdesc[UR4], RZ, !UPT, gsb0",
    "FMUL R100, R24, 0.088388346",
    "MUFU.EX2 R101, R100",
    "F2FP.F16.F32.PACK_AB R102, R101, R101",
    "STS [R200], R102",  # P staged through shared memory
    "BAR.SYNC.DEFER_BLOCKING 0x0",
    "HGMMA.64x128x16.F32 R24, gdesc[UR8], R24, gsb0",
]


def test_detector_on_hand_written_sass():
    assert attention_evidence(GEMM) is None  # accumulator chain: C operand, not A/B
    assert attention_evidence(GEMM_EXP_EPILOGUE) is None  # exp of an MMA result, stored, never multiplied
    assert attention_evidence(["MUFU.EX2 R1, R2", "FADD R3, R1, R1", "STG.E desc[UR4][R4.64], R3"]) is None
    assert attention_evidence(ATTENTION_REGS) == {"index": 7, "exp": 2}
    assert attention_evidence(ATTENTION_SMEM)["index"] == 6
    # exp of something that is not an MMA result feeding an MMA: no attention (e.g. a scaled input)
    assert attention_evidence(["LDG.E R40, desc[UR4][R2.64]", "MUFU.EX2 R40, R40",
                               "HMMA.16816.F32 R24, R40, R44, R24"]) is None
    # an overwrite in between kills the chain
    broken = ATTENTION_REGS[:6] + ["MOV R40, RZ", "HMMA.16816.F32 R24, R40, R44, R24"]
    assert attention_evidence(broken) is None


def test_detector_follows_the_back_edge():
    """Software-pipelined attention puts the next tile's Q K^T after P V in address order: the second walk
    carries the exponential across the back edge."""
    rotated = ["HMMA.16816.F32 R24, R40, R44, R24"] + ATTENTION_REGS[:-1] + ["BRA 0x0"]
    assert attention_evidence(rotated) is not None


def test_mbarrier_wait_branches_are_sync():
    """A branch consuming a try-wait's predicate is where ncu samples the mbarrier wait (long_scoreboard),
    at any distance and across the back edge (nvjet issues the try-wait of stage k+1 early and tests it at
    the top of the next iteration, at a lower address)."""
    from profiler.analyze.regions import mbarrier_wait_branches

    texts = [
        "@!P2 BRA 0x100",                                       # 0: top of the loop, reads P2 (back edge)
        "HGMMA.64x64x16.F32 R24, gdesc[UR4], R24, gsb0",
        "SYNCS.PHASECHK.TRANS64.TRYWAIT P2, [UR6+0x10], R3",   # 2: the next stage's try-wait
        "ISETP.NE.AND P3, PT, R1, RZ, PT",
        "BRA !P3, 0x200",                                       # 4: another predicate: not a wait
        "BRA 0x0",
    ]
    assert mbarrier_wait_branches(texts) == {0}
    # a predicate overwritten between the try-wait and the branch is no longer the wait's
    assert mbarrier_wait_branches(["SYNCS.PHASECHK.TRANS64.TRYWAIT P2, [UR6], R3",
                                   "ISETP.NE.AND P2, PT, R1, RZ, PT", "@P2 BRA 0x0"]) == set()


def test_nvjet_waits_land_in_sync():
    """cuBLAS fp16 8192³ (zoo): the mbarrier wait branches join the barrier waits in `sync` (the issue's
    hand count: mbarrier waits ~15% and the named barrier ~8% of samples), and no wait branch is `other`."""
    paths = sorted((ROOT / "reports/h200/zoo/cublas-gemm-fp16").glob("*.ncu-rep"))
    if not paths:
        pytest.skip("no zoo report")
    la = _launches(paths[0])[0]
    regs = {r["name"]: r for r in regions_json(la)}
    assert 0.15 <= regs["sync"]["share"] <= 0.30
    assert regs["mma"]["share"] > 0.5


def test_detector_on_blackwell_shaped_sass():
    """tcgen05: S = Q K^T lands in tensor memory (UTCHMMA writes no register), LDTM reads it back, exp, STTM
    puts P into tensor memory and the P V UTCHMMA reads its A operand from there (FlashAttention-4's shape).
    A tcgen05 GEMM whose epilogue takes an exp and stores it to global memory is no attention. (SASS forms as
    cuobjdump prints them for sm_100a: `UTCHMMA gdesc[UR4], gdesc[UR8], tmem[UR14], tmem[UR18], idesc[UR19]`,
    `LDTM.x32 R4, tmem[UR4]`.)"""
    qk = "UTCHMMA gdesc[UR4], gdesc[UR8], tmem[UR14], tmem[UR18], idesc[UR19]"
    attention = [qk, "LDTM.x32 R4, tmem[UR4]", "FMUL R40, R4, 0.088388346", "MUFU.EX2 R41, R40",
                 "F2FP.F16.F32.PACK_AB R42, R41, R41", "STTM.x8 tmem[UR20], R42",
                 "UTCHMMA tmem[UR20], gdesc[UR10], tmem[UR22], tmem[UR18], idesc[UR19]"]
    assert attention_evidence(attention) == {"index": 6, "exp": 1}
    gemm_exp = [qk, "LDTM.x32 R4, tmem[UR4]", "FMUL R40, R4, -1.4426950216293334961", "MUFU.EX2 R41, R40",
                "STG.E desc[UR4][R30.64], R41", qk]
    assert attention_evidence(gemm_exp) is None


def test_persistent_gemm_with_an_exp_epilogue_through_shared_memory_is_no_attention():
    """A persistent GEMM whose SiLU epilogue (exp, then STSM for a TMA store) is followed, across the outer
    back edge, by the next tile's wgmma reading shared memory: memory is not followed across the back edge."""
    persistent = [
        "HGMMA.64x128x16.F32 R24, gdesc[UR4], R24, gsb0",
        "FMUL R100, R24, -1.4426950216293334961",
        "MUFU.EX2 R101, R100",
        "FADD R102, R101, 1",
        "MUFU.RCP R103, R102",
        "FMUL R104, R24, R103",
        "F2FP.F16.F32.PACK_AB R105, R104, R104",
        "STSM.16.M88.4 [R200], R105",
        "UTMASTG.2D [UR8], [UR10]",
        "BRA 0x0",
    ]
    assert attention_evidence(persistent) is None
