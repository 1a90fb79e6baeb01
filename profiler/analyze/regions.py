"""Where in the code: stall samples and executed instructions by source region, with names that stay the
same across versions (``data/regions.toml``): the attention vocabulary ``load_q, load_kv, qk, softmax, pv,
epilogue, sync, other`` where the kernel is attention, the neutral one ``global_load, shared_staging, mma,
elementwise, reduction, store, sync, other`` for every other kernel.

Declared regions (``source: "declared"``) come from markers in the kernel's own sources, read from the
report's copy of them (``Launch.sources``; kernels/CONTRACT.md "Source regions" has the convention): each
PC's line (``source_file``/``source_line`` of the sass frame, ncu's ``source_info``) falls in a marked
range, or in a shared helper / unmarked line, whose instructions take the region of the nearest earlier
instruction (address order) whose own line is declared — the code the helper was inlined into. A launch
whose sources hold no marker gets inferred regions (``source: "inferred"``) from its SASS alone, by the
rules of ``data/regions.toml`` (so does a launch whose kernel file has no markers although headers it includes
do): the attention rules only where :func:`attention_evidence` finds an exponential of one MMA's result
feeding another MMA, the neutral rules otherwise (cuBLAS/CUTLASS GEMMs, Triton matmuls, reductions,
elementwise kernels). One launch is either all declared or all inferred: the two are never
mixed. Every PC is in exactly one region, so the regions' stall samples, samples and executed
instructions sum exactly to the kernel's.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import pandas as pd

from profiler import metrics as M
from profiler.analyze import buildcache
from profiler.analyze._common import group_sum
from profiler.analyze.stalls import exit_tail_of
from profiler.sass import parse, register_mask

__all__ = ["attention_evidence", "declared_lines", "pc_regions", "regions", "region_names", "vocabulary_of"]


def region_names() -> list[str]:
    """Every region name (both vocabularies) in display order."""
    return list(M.region_config()["names"])


def vocabulary_of(names) -> str:
    """``attention`` when any of ``names`` is an attention-only region (``qk``, ``softmax`` …), else
    ``neutral``."""
    vocabs = M.region_config()["vocabularies"]
    only = set(vocabs["attention"]) - set(vocabs["neutral"])
    return "attention" if any(n in only for n in names) else "neutral"


def attention_evidence(texts: list[str]) -> dict | None:
    """Whether SASS ``texts`` (address order) compute attention: an exponential (``MUFU.EX2``) of one
    MMA's result feeds operand A or B of an MMA (``data/regions.toml`` [attention] says how).

    Returns ``{"index": i, "exp": n}`` (``i``: the first MMA found reading such an operand; ``n``: how
    many exponentials of an MMA result the walk saw) or None. A GEMM (accumulator chains only), a GEMM
    with an exp in its epilogue (stored, never multiplied again) and a softmax without MMAs all give
    None."""
    cfg = M.region_config()["attention"]
    mma = set(cfg["mma"])
    exp_base, exp_mod = cfg["exp"]
    stores = set(cfg["shared_stores"])
    tmem_mma, tmem_loads = set(cfg.get("tmem_mma", ())), set(cfg.get("tmem_loads", ()))
    parsed = [parse(t) for t in texts]
    tmem_acc = False  # a tensor-memory MMA has run: LDTM reads its result
    if not any(ins.base in mma for ins in parsed):
        return None
    acc = ex = 0  # register bit sets: derived from an MMA result / from an exponential of one
    ex_in_smem = False
    exps: set[int] = set()
    for walk in range(2):  # the second pass carries the state across the loop's back edge
        for i, ins in enumerate(parsed):
            if ins.base in mma:
                ab = ins.srcs[:2]
                m = 0
                for s in ab:
                    if s.kind == "reg" and s.regs:
                        m |= register_mask(s.regs)
                # through memory only ahead of the store in address order (first walk): across the back edge a
                # persistent GEMM's next tile would read the shared memory its exp epilogue (SiLU) staged
                if (m & ex) or (walk == 0 and ex_in_smem and any(s.kind == "mem" for s in ab)):
                    return {"index": i, "exp": len(exps)}
                acc |= ins.wmask
                ex &= ~ins.wmask
                tmem_acc = tmem_acc or ins.base in tmem_mma
                continue
            w = ins.wmask
            if tmem_acc and ins.base in tmem_loads and w:
                acc |= w
                ex &= ~w
                continue
            if not w:
                if ins.base in stores and ins.rmask & ex:
                    ex_in_smem = True
                continue
            from_acc = bool(ins.rmask & acc)
            from_exp = bool(ins.rmask & ex)
            if from_acc and ins.base == exp_base and exp_mod in ins.modifiers:
                from_exp = True
                exps.add(i)
            acc = (acc | w) if from_acc else (acc & ~w)
            ex = (ex | w) if from_exp else (ex & ~w)
    return None


@lru_cache(maxsize=None)
def _marker_res() -> tuple[re.Pattern, re.Pattern, re.Pattern]:
    mk = M.region_config()["markers"]
    return re.compile(mk["open"]), re.compile(mk["close"]), re.compile(mk["inline"])


def declared_lines(text: str) -> dict[int, str]:
    """Line number (1-based) -> region name (or ``inherit``) for every line a marker covers."""
    return {no: r for no, (r, _) in _line_table(text).items()}


def _line_table(text: str) -> dict[int, tuple[str, str | None]]:
    """Line -> (its region, the region of the block it sits in). A one-line marker (``code  // @region
    sync``) names its line's region but not the block's: the code around it keeps the block's region."""
    opener, closer, inline = _marker_res()
    out: dict[int, tuple[str, str | None]] = {}
    current: str | None = None
    for no, line in enumerate(text.splitlines(), start=1):
        m = opener.match(line)
        if m:
            current = m.group(1)
            continue
        if closer.match(line):
            current = None
            continue
        m = inline.match(line)
        if m:
            out[no] = (m.group(1), current)
        elif current is not None:
            out[no] = (current, current)
    return out


def line_tables(sources: dict) -> dict[str, dict[int, tuple[str, str | None]]]:
    """File -> line -> (region, block region) for source texts (file -> text); a value that is already a
    line table passes through (e.g. marked sources renumbered to a report taken before the markers)."""
    return {f: (t if isinstance(t, dict) else _line_table(t)) for f, t in sources.items()}


def _declared_by_pc(sass: pd.DataFrame, sources: dict) -> tuple[list[str | None], list[str | None]]:
    """(region of each PC by its own line, or None; the region of the block around that line, or None)."""
    inherit = M.region_config()["markers"]["inherit"]
    tables = line_tables(sources)
    own: list[str | None] = []
    ctx: list[str | None] = []
    for f, ln in zip(sass["source_file"].tolist(), sass["source_line"].tolist()):
        r = c = None
        if isinstance(f, str) and f in tables and ln is not pd.NA and ln is not None:
            r, c = tables[f].get(int(ln), (None, None))
        own.append(None if r == inherit else r)
        ctx.append(None if c == inherit else c)
    return own, ctx


def _kernel_is_marked(sources: dict) -> bool:
    """Whether the kernel's own source (a file defining a ``__global__`` function) declares regions; a line
    table (already parsed sources) counts as marked."""
    token = M.region_config()["markers"]["token"]
    return any(isinstance(t, dict) or ("__global__" in t and token in t) for t in sources.values())


def pc_regions(launch, sources: dict | None = None) -> tuple[list[str], str, list[bool]]:
    """(region of every PC of ``launch.sass``, ``"declared"``/``"inferred"``, inherited flags).

    ``sources`` overrides the report's own (file path -> text, or -> a :func:`line_tables` table, e.g.
    marked sources renumbered to the lines of a report profiled before the markers existed)."""
    sass = launch.sass
    sources = launch.sources if sources is None else sources
    names = set(region_names())
    if sources and not _kernel_is_marked(sources):
        sources = {}  # only shared headers carry markers (e.g. a new rung on marked helpers): infer instead
    if sources:
        own, ctx = _declared_by_pc(sass, sources)
        unknown = sorted({r for r in own if r is not None and r not in names})
        if unknown:
            from profiler.errors import WhowaitsError

            raise WhowaitsError(f"{launch.report}: unknown source region(s) {', '.join(unknown)} in its "
                                f"@region markers; known: {', '.join(region_names())} (data/regions.toml)")
        if any(r is not None for r in own):
            out, inherited = _inherit(sass, own, ctx)
            # The kernel's exit path (fences and the last barrier before EXIT: stalls.exit_tail) where no line
            # declares it: a barrier wait of warps with no work left, `sync`, not the region of the code before it
            # (v38's spare producer warps parked there for the whole kernel: 25% of its samples read as load_kv).
            for i in np.flatnonzero(exit_tail_of(launch)):
                if inherited[i]:
                    out[i] = "sync"
            return out, "declared", inherited
    return _infer_launch(launch), "inferred", [False] * len(sass)


def _inherit(sass: pd.DataFrame, own: list[str | None], ctx: list[str | None]) -> tuple[list[str], list[bool]]:
    """Regions for instructions whose own line declares none (``inherit`` lines, unmarked lines): a
    tensor instruction takes the region of the instruction that loaded its B operand (the K or the V
    fragment: what tells Q K^T from P V when the compiler interleaves them with the softmax); any other
    instruction, and a tensor instruction whose B operand has no known producer, takes the region of the
    nearest earlier instruction whose line is declared — the region of the block that line sits in, so a
    one-line ``sync`` marker does not capture the loads scheduled after it (``other`` before the first).
    A tensor instruction on a line declared outside ``tensor_regions`` (qk, pv) counts as inheriting too, and
    one whose B operand was not loaded by an LDSM/LDS counted in qk/pv (wgmma reads B through a descriptor;
    ptxas may put an ldmatrix on a neighbouring softmax line) takes the region of the inference's A-operand
    rule: A in shared memory (or loaded by LDSM/LDS) -> qk, A produced in registers (P) -> pv."""
    mk = M.region_config()["markers"]
    tensor = set(mk["tensor_opcodes"])
    producers = set(mk["operand_producers"])
    gemm = set(mk.get("tensor_regions", ()))
    by_a = [r for r in M.region_config()["infer"] if "a_operand" in r]  # the inference's operand-A rules
    writer: dict[str, str] = {}
    written = smem = 0  # register bit sets for the A-operand rule: written so far / last by an LDSM/LDS
    out: list[str] = []
    inherited: list[bool] = []
    last = "other"
    for r, c, b, t in zip(own, ctx, sass["base"].tolist(), sass["sass"].tolist()):
        if r is None or (gemm and b in tensor and r not in gemm):  # see tensor_regions in data/regions.toml
            region = last
            if b in tensor:
                ins = parse(t)
                b_region = writer.get(ins.srcs[1].regs[0]) if len(ins.srcs) > 1 and ins.srcs[1].regs else None
                if b_region is not None and (not gemm or b_region in gemm):
                    region = b_region
                elif gemm:  # no B fragment loaded in qk/pv (wgmma reads B through a descriptor; ptxas put the
                    # ldmatrix on a neighbouring line): the A operand decides
                    a = _a_operand(ins, written, smem)
                    region = next((r["region"] for r in by_a if b in r["opcodes"] and r["a_operand"] == a), last)
            out.append(region)
            inherited.append(True)
        else:
            last = c if c is not None else r
            region = r
            out.append(r)
            inherited.append(False)
        if b in producers:
            for reg in parse(t).writes:
                writer[reg] = region
        if gemm and b not in _NO_WRITES:
            w = parse(t).wmask
            if w:
                written |= w
                smem = (smem | w) if b in producers else (smem & ~w)
    _vote_groups(sass, out, set(mk["group_opcodes"]))
    return out, inherited


def _vote_groups(sass: pd.DataFrame, regions: list[str], group_ops: set) -> None:
    """The instructions of one asynchronous MMA group (the ``HGMMA`` s with one accumulator up to the one
    that commits the group, ``gsb0``) take the region most of them have: ptxas gives the committing
    instruction the line of whatever code follows it."""
    texts = sass["sass"].tolist()
    members = [i for i, b in enumerate(sass["base"].tolist()) if b in group_ops]
    group: list[int] = []
    acc = None
    for i in members + [None]:
        ins = parse(texts[i]) if i is not None else None
        if group and (ins is None or ins.dsts[:1] != acc):
            _vote(regions, group)
            group = []
        if ins is None:
            break
        group.append(i)
        acc = ins.dsts[:1]
        if "gsb0" in texts[i]:
            _vote(regions, group)
            group = []


def _vote(regions: list[str], group: list[int]) -> None:
    if len(group) < 2:
        return
    votes: dict[str, int] = {}
    for i in group:
        votes[regions[i]] = votes.get(regions[i], 0) + 1
    top = max(votes, key=lambda r: (votes[r], r in ("qk", "pv")))
    for i in group:
        regions[i] = top


def _main_loop(addresses, texts, bases, tensor, weight=None) -> tuple[int, int] | None:
    """(head index, back-edge branch index) of the loop whose body holds the most ``weight`` (per
    instruction; default the tensor instructions) (the smallest such loop on a tie); None without a loop.
    Back-edges: branches to an earlier address."""
    index = None
    best = None
    cum = np.concatenate([[0], np.cumsum(tensor if weight is None else weight)])
    for j, b in enumerate(bases):
        if b not in ("BRA", "JMP"):
            continue
        target = parse(texts[j]).target
        if target is None or target > addresses[j]:
            continue
        if index is None:
            index = {a: i for i, a in enumerate(addresses)}
        h = index.get(target)
        if h is None:
            continue
        key = (int(cum[j + 1] - cum[h]), -(j - h))
        if best is None or key > best[0]:
            best = (key, (h, j))
    return None if best is None else best[1]


@lru_cache(maxsize=65536)
def _wait_step_of(text: str) -> tuple[bool, frozenset, frozenset, bool] | None:
    """What :func:`mbarrier_wait_branches` needs of one SASS line: (a ``BRA``/``JMP``, the registers it reads,
    the predicates it writes, a ``SYNCS.PHASECHK``); None for a line that is neither a branch nor writes a
    predicate."""
    ins = parse(text)
    is_branch = ins.base in ("BRA", "JMP")
    preds = frozenset(w for w in ins.writes if w.startswith(("P", "UP")))
    if not is_branch and not preds:
        return None
    return is_branch, ins.reads, preds, ins.base == "SYNCS" and "PHASECHK" in ins.modifiers


def mbarrier_wait_branches(texts: list[str]) -> set[int]:
    """Indices of the branches that consume an mbarrier try-wait's predicate (``SYNCS.PHASECHK…`` writes
    ``P2``; ``@!P2 BRA`` or ``BRA !P2, …`` reads it, at any distance and across the loop's back edge: the walk
    runs twice). ncu samples a warp waiting on the mbarrier there, as ``long_scoreboard``: the wait is sync
    work, not the branch's."""
    # only branches and instructions that write a predicate take part: the others leave ``pending`` alone
    steps = [(i, st) for i, st in enumerate(map(_wait_step_of, texts)) if st is not None]
    pending: set[str] = set()
    out: set[int] = set()
    for _ in range(2):
        for i, (is_branch, reads, preds, phasechk) in steps:
            if is_branch and not pending.isdisjoint(reads):
                out.add(i)
            if preds:
                if phasechk:
                    pending |= preds
                else:
                    pending -= preds
    return out


def _infer(sass: pd.DataFrame) -> list[str]:
    return _from_static(sass, _infer_static(sass))


def _infer_static(sass: pd.DataFrame) -> dict:
    """What :func:`_infer` takes from the SASS alone: ``waits`` (the mbarrier wait branches) and, for an
    attention kernel, ``names`` (every PC's region); None there for a neutral one (its hottest loop is
    read from the executed counts)."""
    texts = sass["sass"].tolist()
    waits = mbarrier_wait_branches(texts)
    names = None
    if attention_evidence(texts) is not None:
        names = ["sync" if i in waits else n for i, n in enumerate(_infer_attention(sass))]
    return {"waits": sorted(waits), "names": names}


def _from_static(sass: pd.DataFrame, st: dict) -> list[str]:
    if st["names"] is not None:
        return list(st["names"])
    waits = set(st["waits"])
    return ["sync" if i in waits else n for i, n in enumerate(_infer_neutral(sass))]


def _infer_launch(launch) -> list[str]:
    """:func:`_infer` of the launch's SASS, its SASS-only part kept per build (:mod:`.buildcache`)."""
    sass = launch.sass
    n = len(sass)

    def check(st: dict) -> dict:
        names, waits = st["names"], st["waits"]
        if not isinstance(waits, list) or not all(isinstance(i, int) and 0 <= i < n for i in waits) or not (
                names is None or isinstance(names, list) and len(names) == n and all(isinstance(x, str) for x in names)):
            raise ValueError("regions.infer: not this frame's")
        return st

    return _from_static(sass, buildcache.part(launch, "regions.infer", lambda: _infer_static(sass), check))


def _infer_attention(sass: pd.DataFrame) -> list[str]:
    texts = sass["sass"].tolist()
    rules = M.region_config()["infer"]
    bases = sass["base"].tolist()
    addresses = [int(a) for a in sass["address"].tolist()]
    by_base: dict[str, list[dict]] = {}
    for r in rules:
        for op in r["opcodes"]:
            by_base.setdefault(op, []).append(r)
    tensor_ops = {op for r in rules if "a_operand" in r for op in r["opcodes"]}
    tensor = np.fromiter((b in tensor_ops for b in bases), dtype=np.int64, count=len(bases))
    loop = _main_loop(addresses, texts, bases, tensor)
    written = smem = 0  # register bit sets: written so far / last written by a shared-memory load
    out: list[str] = []
    for i, (t, b) in enumerate(zip(texts, bases)):
        region = "other"
        cands = by_base.get(b)
        if cands:
            where = "anywhere"
            if loop is not None:
                where = "before_loop" if i < loop[0] else ("after_loop" if i > loop[1] else "in_loop")
            for r in cands:
                if "where" in r and r["where"] != where:
                    continue
                if "a_operand" in r and _a_operand(parse(t), written, smem) != r["a_operand"]:
                    continue
                region = r["region"]
                break
        out.append(region)
        if b not in _NO_WRITES:
            w = parse(t).wmask
            if w:
                written |= w
                smem = (smem | w) if b in ("LDSM", "LDS") else (smem & ~w)
    return out


def _infer_neutral(sass: pd.DataFrame) -> list[str]:
    """Neutral regions by instruction kind (``data/regions.toml`` [[neutral]]), placed relative to the
    hottest loop: the back edge whose body executed the most instructions (ncu's ``inst_executed``);
    without executed counts, the one holding the most MMA instructions, then the most instructions."""
    cfg = M.region_config()
    texts = sass["sass"].tolist()
    bases = sass["base"].tolist()
    addresses = [int(a) for a in sass["address"].tolist()]
    mma = set(cfg["attention"]["mma"])
    by_base: dict[str, list[dict]] = {}
    for r in cfg["neutral"]:
        for op in r["opcodes"]:
            by_base.setdefault(op, []).append(r)
    n = len(bases)
    weight = None
    if "inst_executed" in sass.columns:
        ex = pd.to_numeric(sass["inst_executed"], errors="coerce").fillna(0).to_numpy(dtype=np.float64)
        if ex.sum() > 0:
            weight = ex
    if weight is None:  # most MMAs first, then the longest body
        weight = np.fromiter(((b in mma) * (n + 1) + 1 for b in bases), dtype=np.int64, count=n)
    loop = _main_loop(addresses, texts, bases, None, weight)
    out: list[str] = []
    for i, b in enumerate(bases):
        region = "other"
        where = "anywhere"
        if loop is not None:
            where = "before_loop" if i < loop[0] else ("after_loop" if i > loop[1] else "in_loop")
        for r in by_base.get(b, ()):
            if "where" in r and r["where"] != where:
                continue
            region = r["region"]
            break
        out.append(region)
    return out


#: opcodes that write no general register (skipped by the writer scan)
_NO_WRITES = frozenset(("BRA", "NOP", "BAR", "DEPBAR", "EXIT", "WARPGROUP", "SYNCS", "STG", "STS", "STSM",
                        "UTMASTG", "UTMALDG", "LDGSTS", "MEMBAR", "RET", "BSSY", "BSYNC", "WARPSYNC"))


def _a_operand(ins, written: int, smem: int) -> str:
    """``smem`` when a tensor instruction's A operand is a shared-memory descriptor or was loaded from
    shared memory (LDSM/LDS) or never written before (loaded earlier, e.g. resident Q), ``reg`` when it
    was last produced in registers (e.g. F2FP of the scores)."""
    if not ins.srcs:
        return "smem"
    a = ins.srcs[0]
    if a.kind == "mem" or not a.regs:
        return "smem"
    bit = register_mask(a.regs[:1])
    return "smem" if (not written & bit) or (smem & bit) else "reg"


def regions(launch, sources: dict | None = None) -> pd.DataFrame:
    """One row per region of the vocabulary that holds a PC, in vocabulary order: ``region``,
    ``source`` (declared | inferred), ``vocabulary`` (attention | neutral: :func:`vocabulary_of` the
    launch's names), ``samples`` (int, ``smsp__pcsamp_sample_count``), ``share`` (of
    the kernel's samples), ``inst_executed`` (int), ``pcs`` (int), ``inherited_samples`` (int: samples on
    instructions of shared helpers / unmarked lines that took the region of the code around them; 0 when
    inferred), and ``stall_<reason>`` (int) for every sampled reason. Empty (and ``attrs["missing"]``)
    without per-PC data."""
    data = _region_data(launch, sources)
    if data is None:
        frame = pd.DataFrame(columns=["region", "source", "vocabulary", "samples", "share", "inst_executed",
                                      "pcs", "inherited_samples"])
        frame.attrs["missing"] = [{"field": "regions", "section": M.stall_config()["per_pc_section"]}]
        return frame
    frame = pd.DataFrame(data)
    frame.attrs["missing"] = []
    return frame


def _region_data(launch, sources: dict | None = None) -> dict | None:
    """The columns of :func:`regions` (lists and arrays), or None without per-PC samples."""
    sass = launch.sass
    # per-PC samples ncu left as NaN (a launch it could not sample) are no samples, not -2**63 each
    if sass.empty or "samples" not in sass.columns or sass["samples"].isna().any():
        return None
    reasons, mat = launch.stall_matrix()
    names, source, inherited = pc_regions(launch, sources)
    vocab = region_names()
    order = {n: i for i, n in enumerate(vocab)}
    key = np.fromiter((order[n] for n in names), dtype=np.int64, count=len(names))
    k = len(vocab)
    samples = sass["samples"].to_numpy(dtype=np.int64)
    inst = (sass["inst_executed"].fillna(0).to_numpy(dtype=np.int64) if "inst_executed" in sass
            else np.zeros(len(sass), np.int64))
    inh = np.asarray(inherited, dtype=bool)
    s_sum = np.bincount(key, weights=samples, minlength=k).astype(np.int64)
    i_sum = np.bincount(key, weights=inst, minlength=k).astype(np.int64)
    pcs = np.bincount(key, minlength=k)
    inh_sum = np.bincount(key, weights=samples * inh, minlength=k).astype(np.int64)
    stalls = group_sum(key, mat, k)
    total = int(samples.sum())
    present = [j for j in range(k) if pcs[j]]
    data = {
        "region": [vocab[j] for j in present],
        "source": [source] * len(present),
        "vocabulary": [vocabulary_of(names)] * len(present),
        "samples": s_sum[present],
        "share": (s_sum[present] / total) if total else np.zeros(len(present)),
        "inst_executed": i_sum[present],
        "pcs": pcs[present],
        "inherited_samples": inh_sum[present],
    }
    for j, r in enumerate(reasons):
        data[f"stall_{r}"] = stalls[present, j]
    return data


def regions_json(launch, sources: dict | None = None) -> list[dict]:
    """The ``regions`` field of ``show --format json``: [{name, source, vocabulary, stall_samples {reason:
    int}, samples, share, inst_executed, pcs, inherited_samples}]."""
    data = _region_data(launch, sources)  # the columns themselves, not regions()' frame read back
    if data is None or not len(data["region"]):
        return []
    stall_cols = [c for c in data if c.startswith("stall_")]
    cols = {c: list(v) if isinstance(v, list) else np.asarray(v).tolist() for c, v in data.items()}
    out = []
    for i in range(len(cols["region"])):
        out.append({
            "name": cols["region"][i],
            "source": cols["source"][i],
            "vocabulary": cols["vocabulary"][i],
            "stall_samples": {c[len("stall_"):]: int(cols[c][i]) for c in stall_cols},
            "samples": int(cols["samples"][i]),
            "share": float(cols["share"][i]),
            "inst_executed": int(cols["inst_executed"][i]),
            "pcs": int(cols["pcs"][i]),
            "inherited_samples": int(cols["inherited_samples"][i]),
        })
    return out
