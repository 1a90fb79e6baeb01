"""Blackwell's SASS, read statically: no sm_100 GPU is here, so the day a B200 report arrives its
instructions must already be known. kernels/sm100/tcgen05_gemm/kernel.cu (ours) is built here with nvcc
13.0 for sm_100a and sm_103a and read with cuobjdump (kernels.sm100); these tests hold the opcode data,
the parser, the CFG, the role split and the barrier families on that SASS.

Hand-checked on the SASS (nvcc 13.0, `-cubin -lineinfo -O3`, 2026-12-02; sm_103a's code is the same
instruction for instruction):

- tcgen05_gemm (192 threads): warp 0 `UTMALDG.2D` x10 after `SYNCS.PHASECHK.TRANS64.TRYWAIT` on the
  empty ring 0x20420..0x20438 (0x740, 0x8f0, 0xa90, 0xc30: the loop unrolled by 4) and an expect_tx
  `SYNCS.ARRIVE.TRANS64` on full[s] 0x20400..0x20418; warp 1 allocates TMEM
  (`UTCATOMSWS.FIND_AND_SET.ALIGN`, retried with NANOSLEEP), waits full[s] (0x16e0, 0x1c30, 0x2220),
  issues `UTCHMMA gdesc[..], gdesc[..], tmem[..], tmem[..], idesc[..]` x12 and commits each stage with
  `UTCBAR [UR4], URZ` at 0x1bb0 / 0x20e0 (UR4 = its full[s] + 0x20 = empty[s]) / 0x27f0, the accumulator
  with `UTCBAR` 0x2870 (UR4 = base + 0x20040 = tmem_full); warps 2..5 wait tmem_full
  (0x1170, `[R2+URZ+0x20040]`) and read TMEM with `LDTM.x32 R4, tmem[UR4]` (0x1360), then `STG.E.128`.
- tmem_roundtrip: `STTM.x8`, `FENCE.VIEW.ASYNC.T` (tcgen05.wait::st), `UTCCP.T.S`, `UTCSHIFT.DOWN`,
  `UTCBAR` on `copied`, `LDTM.x32`, `UTCATOMSWS.AND` (dealloc), `UVIRTCOUNT.DEALLOC.SMPOOL`
  (relinquish_alloc_permit).
- tcgen05_kinds: kind::f8f6f4 and kind::mxf8f6f4.block_scale -> `UTCQMMA` (the block-scaled one with a
  7th operand, the scale factors' `tmem[UR12]`), kind::i8 -> `UTCIMMA` (sm_100a only: ptxas refuses it
  for sm_103a), kind::mxf4.block_scale -> `UTCOMMA`, `.ws` kind::f16 -> `UTCHMMA.WS`.
- tcgen05_pair (cluster 2): `UTCATOMSWS.2CTA.FIND_AND_SET.ALIGN`, `UTMALDG.2D.2CTA`, `UTCHMMA.2CTA` x4,
  `UTCBAR.2CTA.MULTICAST [UR7], URZ, UR8`, cluster barriers `UCGABAR_ARV`/`UCGABAR_WAIT`, and the peer's
  barrier address by `PRMT R9, R5, 0x654, R12` (mapa).
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pandas as pd
import pytest
from conftest import needs_nvcc

from kernels import sm100

pytestmark = needs_nvcc
ARCHS = sm100.ARCHS
KERNELS = ("tcgen05_gemm", "tmem_roundtrip", "tcgen05_pair", "tcgen05_kinds")


@cache
def sass(arch: str) -> dict[str, list[tuple[int, str]]]:
    return sm100.functions(sm100.build("tcgen05_gemm", arch))


def _full(text: str) -> str:
    from profiler import metrics as M

    return M.full_opcode(text)


def _static_launch(name: str, ins: list[tuple[int, str]]):
    """A :class:`profiler.report.Launch` of SASS with no measurement: one sample per instruction (every
    wait site weighs the same), no executed counts, the CTA shape the kernel is launched with."""
    from profiler import metrics as M
    from profiler.report import Launch

    addr = np.array([o for o, _ in ins], dtype=np.uint64)
    texts = [t for _, t in ins]
    opcodes = [M.full_opcode(t) for t in texts]
    bases = [o.split(".", 1)[0] for o in opcodes]
    frame = pd.DataFrame({
        "launch": 0, "address": addr, "offset": addr.astype(np.int64), "sass": pd.Series(texts, dtype=object),
        "opcode": pd.Series(opcodes, dtype=object), "base": pd.Series(bases, dtype=object),
        "opcode_class": pd.Series([M.classify_opcode(b) for b in bases], dtype=object),
        "samples": np.ones(len(texts), dtype=np.int64), "inst_executed": np.zeros(len(texts), dtype=np.int64)})
    metrics = pd.DataFrame([(0, f"launch__block_dim_{c}", None, float(v), None)
                            for c, v in zip("xyz", sm100.BLOCK_DIM.get(name, (128, 1, 1)))],
                           columns=["launch", "metric", "instance", "value", "text"])
    return Launch("static", 0, name, metrics, frame)


@cache
def graph(arch: str, name: str):
    from profiler.analyze.roles import role_graph

    return role_graph(_static_launch(name, sass(arch)[name]))


# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ARCHS)
def test_builds_every_kernel_for_both_archs(arch):
    fns = sass(arch)
    assert sorted(fns) == sorted(KERNELS)
    assert all(len(ins) > 16 for ins in fns.values())


def test_sm103a_code_is_sm100a_code():
    """Instruction for instruction, but for the integer MMA sm_103a does not have."""
    a, b = sass("sm_100a"), sass("sm_103a")
    for name in KERNELS:
        ta, tb = [t for _, t in a[name]], [t for _, t in b[name]]
        if name == "tcgen05_kinds":
            ta = [t for t in ta if not t.startswith("UTCIMMA")]
            tb = [t for t in tb if not t.startswith("UTCIMMA")]
            assert [_full(t) for t in ta if t.startswith("UTC")] == [_full(t) for t in tb if t.startswith("UTC")]
            continue
        assert ta == tb, name


@pytest.mark.parametrize("arch", ARCHS)
def test_opcode_classes_cover_every_instruction(arch):
    """Every base opcode nvcc emits for these kernels is named in opcode_classes.toml; OTHER holds only
    NOP and setmaxnreg."""
    from profiler import metrics as M

    known = M.known_base_opcodes()
    other = set(M.opcode_classes()["OTHER"]["opcodes"])
    for name, ins in sass(arch).items():
        bases = {M.base_opcode(t) for _, t in ins}
        assert bases <= known, (name, sorted(bases - known))
        assert {b for b in bases if M.classify_opcode(b) == "OTHER"} <= other <= {"NOP", "USETMAXREG"}


# the tcgen05 forms of each kernel (full opcodes, hand-read above) and the class each belongs to
FORMS = {
    "tcgen05_gemm": {"UTCHMMA": "UTCMMA", "UTCBAR": "SYNCS", "LDTM.x32": "TMEM",
                     "UTCATOMSWS.FIND_AND_SET.ALIGN": "TMEM", "UTCATOMSWS.AND": "TMEM",
                     "UVIRTCOUNT.DEALLOC.SMPOOL": "TMEM", "UTMALDG.2D": "UTMA",
                     "SYNCS.PHASECHK.TRANS64.TRYWAIT": "SYNCS", "LDCU.64": "CONST"},
    "tmem_roundtrip": {"STTM.x8": "TMEM", "FENCE.VIEW.ASYNC.T": "MEMBAR", "UTCCP.T.S": "TMEM",
                       "UTCSHIFT.DOWN": "TMEM", "UTCBAR": "SYNCS", "LDTM.x32": "TMEM"},
    "tcgen05_kinds": {"UTCQMMA": "UTCMMA", "UTCOMMA": "UTCMMA", "UTCHMMA.WS": "UTCMMA"},
    "tcgen05_pair": {"UTCHMMA.2CTA": "UTCMMA", "UTCBAR.2CTA.MULTICAST": "SYNCS", "UTMALDG.2D.2CTA": "UTMA",
                     "UTCATOMSWS.2CTA.FIND_AND_SET.ALIGN": "TMEM", "UCGABAR_ARV": "BAR", "UCGABAR_WAIT": "BAR"},
}
COUNTS = {("tcgen05_gemm", "UTCHMMA"): 12, ("tcgen05_gemm", "UTCBAR"): 4, ("tcgen05_gemm", "UTMALDG.2D"): 10,
          ("tcgen05_pair", "UTCHMMA.2CTA"): 4, ("tcgen05_pair", "UTCBAR.2CTA.MULTICAST"): 1,
          ("tcgen05_kinds", "UTCQMMA"): 2, ("tcgen05_kinds", "UTCOMMA"): 1}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", KERNELS)
def test_tcgen05_forms_and_their_classes(arch, name):
    from profiler import metrics as M

    ops = [_full(t) for _, t in sass(arch)[name]]
    for op, cls in FORMS[name].items():
        assert op in ops, op
        assert M.classify_opcode(op) == cls, op
    for (kernel, op), n in COUNTS.items():
        if kernel == name:
            assert ops.count(op) == n, op
    assert {"UTCBAR", "UCGABAR_ARV", "UCGABAR_WAIT"} <= M.barrier_opcodes()
    if name == "tcgen05_kinds":  # kind::i8 exists on sm_100a only
        assert ops.count("UTCIMMA") == (1 if arch == "sm_100a" else 0)


def test_parser_reads_tensor_memory_and_commits():
    """LDTM/STTM move `.xN` registers; UTCHMMA writes no register (its D is tensor memory); UTCBAR
    (with or without .2CTA.MULTICAST) names the mbarrier it arrives on, never a byte count."""
    from profiler.sass.instruction import parse

    gemm = dict(sass("sm_100a")["tcgen05_gemm"])
    ld = parse(gemm[0x1360])
    assert ld.base == "LDTM" and ld.writes == {f"R{i}" for i in range(4, 36)}
    rt = [t for _, t in sass("sm_100a")["tmem_roundtrip"]]
    st = parse(next(t for t in rt if t.startswith("STTM")))
    assert len([r for r in st.reads if r.startswith("R")]) == 8 and not st.writes
    mma = parse(next(t for t in gemm.values() if t.startswith("UTCHMMA")))
    assert not {r for r in mma.writes if not r.startswith("P")}
    for t in ("UTCBAR [UR4], URZ", "UTCBAR.2CTA.MULTICAST [UR7], URZ, UR8"):
        (b,) = parse(t).barriers
        assert b.kind == "mbarrier"
    assert parse(gemm[0x2870]).barriers[0].id == "[UR4]"


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", KERNELS)
def test_every_instruction_is_reachable_from_the_entry(arch, name):
    """With branches' predicate operands (`BRA.U !UP0, …`, nvcc's `@P0 BRA.U.ANY` election loops) every
    instruction but the closing self-branch and its NOP padding is reachable from instruction 0."""
    from profiler.sass import build_cfg

    ins = sass(arch)[name]
    offs, texts = [o for o, _ in ins], [t for _, t in ins]
    cfg = build_cfg(offs, texts)
    seen, stack = {0}, [0]
    while stack:
        for s in cfg.succs[stack.pop()]:
            if s not in seen:
                seen.add(s)
                stack.append(s)
    unreachable = [i for i in range(len(texts)) if i not in seen]
    last_exit = max(i for i, t in enumerate(texts) if t.endswith("EXIT"))
    tail = unreachable[0]
    assert tail > last_exit and texts[tail] == f"BRA {offs[tail]:#x}", (hex(offs[tail]), texts[tail])
    assert unreachable == list(range(tail, len(texts)))
    assert all(t == "NOP" for t in texts[tail + 1:])


@pytest.mark.parametrize("arch", ARCHS)
def test_role_split_is_producer_mma_epilogue(arch):
    """Thread-index branches decided warp by warp: warp 0 is the TMA producer, warp 1 the MMA issuer,
    warps 2..5 the epilogue; every UTCHMMA is the consumer's, every UTMALDG the producer's, every LDTM
    and STG the epilogue's."""
    g = graph(arch, "tcgen05_gemm")
    roles = {r.name: r for r in g.roles}
    assert roles["producer"].warps == [0] and roles["producer"].does == "TMA producer"
    assert roles["consumer"].warps == [1] and roles["consumer"].does == "MMA consumer"
    assert roles["epilogue"].warps == [2, 3, 4, 5] and roles["epilogue"].does == "epilogue"
    def owner_of(prefix: str) -> set[str]:
        out = set()
        for r in g.roles:
            for lo, hi in r.ranges:
                out |= {r.name for o, t in sass(arch)["tcgen05_gemm"] if lo <= o <= hi and t.startswith(prefix)}
        return out

    assert owner_of("UTCHMMA") == {"consumer"}
    assert owner_of("UTMALDG") == {"producer"}
    assert owner_of("LDTM") == owner_of("STG") == {"epilogue"}


@pytest.mark.parametrize("arch", ARCHS)
def test_barrier_families_pair_commits_with_their_waiters(arch):
    """The MMA warp waits on full[s], released by the TMA its producer issues; the producer waits on
    empty[s], released by the MMA warp's tcgen05.commit; the epilogue waits on tmem_full, released by
    the MMA warp's last commit. The waits are the PCs hand-read above."""
    g = graph(arch, "tcgen05_gemm")
    edges = {(e.waiter, e.releaser): e for e in g.edges}
    full = edges[("consumer", "TMA ← producer")]
    empty = edges[("producer", "consumer")]
    tmem_full = edges[("epilogue", "consumer")]
    assert full.barrier == "mbarrier@0x20400×4"
    assert {0x16E0, 0x1C30, 0x2220} <= set(full.pcs)
    assert {0x740, 0x8F0, 0xA90, 0xC30} <= set(empty.pcs)
    assert empty.barrier.startswith("mbarrier@0x20420×")
    assert 0x1170 in tmem_full.pcs
    assert "UTCBAR (tcgen05 commit) at" in empty.evidence and "UTCBAR (tcgen05 commit) at" in tmem_full.evidence
    assert not any(e.waiter == "consumer" and e.releaser == "consumer" for e in g.edges)


@pytest.mark.parametrize("arch", ARCHS)
def test_commit_addresses_resolve_to_the_empty_ring(arch):
    """UTCBAR's address resolves like a SYNCS operand: the per-stage commits land on empty[s] =
    full[s] + 0x20 (0x20420 + stage·8 above the window base)."""
    from profiler.sass import build_cfg
    from profiler.sass.instruction import parse
    from profiler.sass.values import Resolver

    ins = sass(arch)["tcgen05_gemm"]
    offs, texts = [o for o, _ in ins], [t for _, t in ins]
    parsed = [parse(t) for t in texts]
    res = Resolver(parsed, build_cfg(offs, texts), offs)
    for pc in (0x1BB0, 0x20E0):
        i = offs.index(pc)
        v, anchored = res.address(i, "UR4")
        assert anchored and v.const == 0x20420, (hex(pc), v)


@pytest.mark.parametrize("arch", ARCHS)
def test_last_commit_is_tmem_full(arch):
    """nvcc issues a uniform op from divergent code as an election loop (`@P0 ELECT P1` /
    `@P1 R2UR.BROADCAST UR4, R2` / UTCBAR / `@P0 BRA.U.ANY`): one lane is elected whenever the body
    runs, so the guarded broadcast defines UR4 for the warp and the last commit (0x2870) names
    tmem_full (0x20440)."""
    from profiler.sass import build_cfg
    from profiler.sass.instruction import parse
    from profiler.sass.values import Resolver

    ins = sass(arch)["tcgen05_gemm"]
    offs, texts = [o for o, _ in ins], [t for _, t in ins]
    res = Resolver([parse(t) for t in texts], build_cfg(offs, texts), offs)
    v, anchored = res.address(offs.index(0x2870), "UR4")
    assert anchored and v.exact and v.const == 0x20440
