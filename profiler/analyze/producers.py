"""Who waits on WHOM: the producer instruction a scoreboard stall waits for.

ncu samples a stalled warp at the instruction it is trying to issue (the consumer). A
``short_scoreboard`` / ``long_scoreboard`` stall there means the consumer waits for an earlier
variable-latency instruction (the producer: LDSM, LDS, SHFL, MUFU … on the short scoreboard; LDG,
LDGSTS, global atomics … on the long one) that

* writes one of the consumer's source registers or predicates (read after write, ``raw``),
* writes one of its destination registers (write after write, ``waw``), or
* still has to read a register the consumer overwrites (write after read, ``war``: stores and
  other variable-latency instructions read their operands late).

The SASS text in a report carries no control codes (scoreboard bits), so the producer is found
from the register dataflow. From the consumer, the walk goes backwards over the control-flow
graph of the SASS (fall-through plus branch targets), nearest instruction first, preferring the
loop's own previous iteration to the way into the loop (an edge into the target of a backward
branch from before it costs one "loop entry"; candidates are taken from the fewest entries, i.e.
the steady state), up to ``max_walk`` instructions. A register is settled by the first
instruction that writes it (the producer when it is a variable-latency instruction of the stall's
scoreboard, otherwise there is none), and a source register also by an instruction that reads it
in between (that reader already waited for its value). Destination registers (``waw``/``war``)
are followed only ``dest_window`` instructions back. A stall right after ``DEPBAR.LE SBn, k``
(cp.async ``wait_group``; ncu samples it on the next instruction) waits for the LDGSTS of the
group committed by the (k+1)-th most recent ``LDGDEPBAR`` (dependency ``depbar``).
The candidates found share the consumer's samples equally. A consumer with none is
``unresolved``: its samples are reported, never given to an invented producer (e.g. waits on a
TMA store or fence, which have no register to follow).

Which opcodes set which scoreboard and how many registers an operand spans (``LDSM….4`` writes 4,
``LDS.128`` 4, ``HMMA.16816.F32 R4, R8, R12, R4`` reads R8..R11, R12..R13, R4..R7) live in
``data/producers.toml``.

Pure functions of a :class:`~profiler.report.Launch` (its ``sass`` frame) or of SASS text.
"""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from profiler import metrics as M
from profiler.analyze._common import missing, with_missing

__all__ = [
    "Operands",
    "parse_operands",
    "producer_pcs",
    "waits_on",
    "waits_on_unresolved",
    "SCOREBOARD_REASONS",
]

#: stall reason -> the scoreboard (``data/producers.toml`` [scoreboard] key) its producers set
SCOREBOARD_REASONS = {"short_scoreboard": "short", "long_scoreboard": "long"}

_GUARD = re.compile(r"^\s*@(!?)(U?P[0-6T])\s+")
_PRED = re.compile(r"(?<![A-Za-z0-9_])(UP|P)([0-6]|T)(?![A-Za-z0-9_])")
_HEX = re.compile(r"0x[0-9a-fA-F]+")


@dataclass(frozen=True)
class Operands:
    """Registers of one SASS instruction: ``reads`` / ``writes`` are frozensets of names (``R8``,
    ``UR4``, ``P0``, ``UP1``; ``RZ``/``URZ``/``PT``/``UPT`` left out), ``scoreboard`` is
    ``"short"``/``"long"`` for a variable-latency opcode, else None."""

    opcode: str
    base: str
    reads: frozenset
    writes: frozenset
    scoreboard: str | None
    rmask: int = 0  # the same registers as bits (see _bit), for the walk
    wmask: int = 0


@lru_cache(maxsize=1)
def _cfg() -> dict:
    d = M._load("producers.toml")
    w = d["widths"]
    sb = {op: kind for kind, ops in d["scoreboard"].items() for op in ops}
    return {
        "version": d["version"],
        "max_walk": int(d["max_walk"]),
        "dest_window": int(d["dest_window"]),
        "scoreboard": sb,
        "dests": dict(d.get("dest_operands", {})),
        "vec": {k: int(v) for k, v in w["vector_modifiers"].items()},
        "loads": frozenset(w["loads"]),
        "stores": frozenset(w["stores"]),
        "matrix": frozenset(w["matrix_count"]),
        "pair_dest": frozenset(w["pair_dest"]),
        "wide": frozenset(w["wide"]),
        "fp64": frozenset(w["fp64"]),
        "pair64": frozenset(w["pair_dest_with_64"]),
        "mma": frozenset(d["mma"]["opcodes"]),
        "mma_shapes": {k: (int(v["a"]), int(v["b"])) for k, v in d["mma"]["shapes"].items()},
        "mma_acc": (int(d["mma"]["acc_32bit"]), int(d["mma"]["acc_16bit"])),
        "gmma": frozenset(d["gmma"]["opcodes"]),
        "gmma_acc": (float(d["gmma"]["acc_per_n_32bit"]), float(d["gmma"]["acc_per_n_16bit"])),
        "gmma_a": int(d["gmma"]["a_regs"]),
    }


def data_version() -> int:
    """``version`` of ``data/producers.toml``."""
    return int(_cfg()["version"])


def _split_operands(text: str) -> list[str]:
    return [o for o in map(str.strip, text.split(",")) if o]


_TOK = re.compile(r"(?<![A-Za-z0-9_])(?:(UR|R)(\d+|Z)(\.64)?|(UP|P)([0-6]|T)(?![A-Za-z0-9_]))")


def _regs(operand: str, width: int | None, out: list) -> None:
    """Append the register names an operand names to ``out``; ``width`` (if given) widens its
    first vector register."""
    first = True
    for kind, num, pair, pkind, pnum in _TOK.findall(operand):
        if kind:
            if num == "Z":
                first = False
                continue
            k = 2 if pair else 1
            if first and width is not None and width > k:
                k = width
            first = False
            if k == 1:
                out.append(kind + num)
            else:
                n = int(num)
                out.extend(f"{kind}{n + i}" for i in range(k))
        elif pnum != "T":
            out.append(pkind + pnum)


def _is_memory_or_imm(operand: str) -> bool:
    o = operand.lstrip("-!~|")
    return "[" in o or o.startswith("0x") or o[:1].isdigit() or o.startswith("gsb") or o.startswith("SB")


@lru_cache(maxsize=65536)
def parse_operands(sass: str) -> Operands:
    """The registers one SASS line reads and writes (see :class:`Operands`).

    ``'LDSM.16.M88.4 R8, [R2]'`` writes R8..R11 and reads R2; ``'@P0 LDG.E.128 R4,
    desc[UR4][R2.64]'`` writes R4..R7, reads P0, UR4, R2, R3; ``'HMMA.16816.F32 R4, R8, R12, R4'``
    writes R4..R7 and reads R8..R11, R12..R13, R4..R7.

    A kernel's lines repeat the same opcodes and operands with other registers: the widths of an
    opcode (:func:`_widths`) and the registers of an operand (:func:`_operand_regs`) are parsed
    once each and cached.
    """
    reads: list[str] = []
    text = sass.strip().rstrip(";")
    g = _GUARD.match(text)
    if g:
        if g.group(2) not in ("PT", "UPT"):
            reads.append(g.group(2))
        text = text[g.end():]
    parts = text.split(None, 1)
    if not parts:
        return Operands("", "", frozenset(), frozenset(), None)
    opcode = parts[0]
    ops = _split_operands(parts[1]) if len(parts) > 1 else []
    ops = [o.replace(".reuse", "") for o in ops]
    base, n_dest_rule, scoreboard = _opcode_info(opcode)

    # how many leading operands are destinations
    if not ops or _is_memory_or_imm(ops[0]):
        n_dest = 0
    elif n_dest_rule is not None:
        n_dest = n_dest_rule
    else:
        n_dest = 1
        while n_dest < len(ops) and _PRED.fullmatch(ops[n_dest].lstrip("!")):
            n_dest += 1
    n_dest = min(n_dest, len(ops))
    dest_w, src_w = _widths(opcode, len(ops) - n_dest)

    writes: list[str] = []
    for i, o in enumerate(ops[:n_dest]):
        writes += _operand_regs(o, dest_w if i == 0 else None)
    for i, o in enumerate(ops[n_dest:]):
        reads += _operand_regs(o, src_w.get(i))
    return Operands(opcode, base, frozenset(reads), frozenset(writes), scoreboard,
                    _mask(reads), _mask(writes))


@lru_cache(maxsize=4096)
def _opcode_info(opcode: str) -> tuple[str, int | None, str | None]:
    """(base, number of destination operands from ``dest_operands`` or None, scoreboard)."""
    cfg = _cfg()
    base = opcode.split(".", 1)[0]
    n = cfg["dests"].get(base)
    return base, (int(n) if n is not None else None), cfg["scoreboard"].get(base)


_OPERAND_REGS: dict[tuple[str, int | None], tuple[str, ...]] = {}


def _operand_regs(operand: str, width: int | None) -> tuple[str, ...]:
    """The register names one operand names (see :func:`_regs`), cached by (operand, width)."""
    cache = _OPERAND_REGS
    key = (operand, width)
    names = cache.get(key)
    if names is None:
        out: list[str] = []
        _regs(operand, width, out)
        names = cache[key] = tuple(out)
        if len(cache) > 65536:
            cache.clear()
            cache[key] = names
    return names


@lru_cache(maxsize=8192)
def _widths(opcode: str, n_src: int) -> tuple[int | None, dict[int, int]]:
    """(width of the first destination operand or None, {source index: width} where not 1) of
    an opcode with modifiers that has ``n_src`` source operands."""
    cfg = _cfg()
    mods = opcode.split(".")
    base = mods[0]
    dest_w: int | None = None
    src_w: dict[int, int] = {}
    vec = next((cfg["vec"][m] for m in mods[1:] if m in cfg["vec"]), None)
    if base in cfg["matrix"]:
        try:
            k = int(mods[-1])
        except ValueError:
            k = 1
        if base == "LDSM":
            dest_w = k
        else:  # STSM [addr], Rdata
            src_w[n_src - 1] = k
    elif base in cfg["loads"] and vec:
        dest_w = vec
    elif base in cfg["stores"] and vec:
        src_w[n_src - 1] = vec
    elif base in cfg["pair_dest"]:
        dest_w = 1 if "32" in mods[1:] else 2
    elif base in cfg["wide"] and "WIDE" in mods:
        dest_w = 2
        src_w[2] = 2
    elif base in cfg["fp64"]:
        dest_w = 2 if base != "DSETP" else None
        src_w = {i: 2 for i in range(n_src)}
    elif base in cfg["mma"]:
        shape = next((cfg["mma_shapes"][m] for m in mods[1:] if m in cfg["mma_shapes"]), None)
        acc32, acc16 = cfg["mma_acc"]
        acc = acc16 if (len(mods) > 2 and mods[2] == "F16") else acc32
        dest_w = acc
        if shape:
            src_w = {0: shape[0], 1: shape[1], 2: acc}
    elif base in cfg["gmma"]:
        m = re.match(r"(\d+)x(\d+)x(\d+)", mods[1]) if len(mods) > 1 else None
        if m:
            n = int(m.group(2))
            per32, per16 = cfg["gmma_acc"]
            acc = int(n * (per16 if (len(mods) > 2 and mods[2] == "F16") else per32))
            dest_w = acc
            src_w = {0: cfg["gmma_a"], 2: acc}  # A (when a register), C (when a register)
    elif "64" in mods[1:] and base in cfg["pair64"]:
        dest_w = 2
    return dest_w, src_w


_BIT_BASE = {"R": 0, "UR": 256, "P": 320, "UP": 330}


_BITS: dict[str, int] = {}


def _mask(names) -> int:
    m = 0
    bits = _BITS
    for n in names:
        b = bits.get(n)
        if b is None:
            k = 2 if n[0] == "U" else 1
            b = bits[n] = 1 << (_BIT_BASE[n[:k]] + int(n[k:]))
        m |= b
    return m


_UNCOND_END = ("EXIT", "RET", "BRX", "JMX", "KILL")
_CONTROL = frozenset(("BRA", "JMP") + _UNCOND_END)


def _branch_target(sass: str) -> int | None:
    text = _GUARD.sub("", sass.strip(), count=1)
    if not (text.startswith("BRA") or text.startswith("JMP")):
        return None
    hexes = _HEX.findall(text)
    return int(hexes[-1], 16) if hexes else None


def _cfg_preds(addresses: np.ndarray, texts, bases=None) -> tuple[list[list[tuple[int, int]]], set]:
    """Predecessors of every instruction as (index, loop_entry) pairs, and the loop heads.

    The fall-through predecessor (the instruction before, unless it is an unguarded branch or
    exit) and every branch that targets the instruction. ``loop_entry`` is 1 for an edge that
    enters a loop from outside (into the target of a backward branch from an earlier address),
    so the walk prefers the loop's own previous iteration (the steady state) over the first.
    """
    n = len(texts)
    index = None
    targets: list[tuple[int, int]] = []  # (branch index, target index)
    unguarded_end = [False] * n
    if bases is None:
        bases = [M.base_opcode(t) for t in texts]
    for j, (t, b) in enumerate(zip(texts, bases)):
        if b not in _CONTROL:
            continue
        if index is None:
            index = {int(a): i for i, a in enumerate(addresses)}
        guarded = bool(_GUARD.match(t)) and not _GUARD.match(t).group(2).endswith("PT")
        body = _GUARD.sub("", t.strip(), count=1)
        if "BRA" in t or "JMP" in t:
            target = _branch_target(t)
            if target is not None and target in index:
                targets.append((j, index[target]))
            if not guarded and not body.startswith("BRA.DIV"):
                unguarded_end[j] = True
        elif body.startswith(_UNCOND_END) and not guarded:
            unguarded_end[j] = True
    heads = {s for j, s in targets if s <= j}
    preds: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for i in range(1, n):
        if not unguarded_end[i - 1]:
            preds[i].append((i - 1, 1 if i in heads else 0))
    for j, s in targets:
        preds[s].append((j, 1 if (s in heads and j < s) else 0))
    return preds, heads


_DEPBAR = re.compile(r"^DEPBAR\.LE\s+SB(\d+)\s*,\s*(0x[0-9a-fA-F]+|\d+)")


def _walk(c: int, preds):
    """Instructions before ``c`` in execution, as (index, level, distance, via), by (loop
    entries, distance); each instruction visited once, ``via`` the instruction it was reached
    from."""
    heap = [(0, 0, c, -1)]
    seen = {c}
    while heap:
        level, dist, i, via = heapq.heappop(heap)
        if i != c:
            yield i, level, dist, via
        for p, entry in preds[i]:
            if p not in seen:
                seen.add(p)
                heapq.heappush(heap, (level + entry, dist + 1, p, i))


def _find(c: int, kind: str, parsed: list, preds, texts, max_walk: int, dest_window: int = 1 << 30
          ) -> list[tuple[int, str]]:
    """Candidate producers (index, dependency) of consumer ``c`` on scoreboard ``kind``.
    ``parsed[i]`` is :func:`parse_operands` of ``texts[i]``, or None until first needed (filled
    in here)."""
    me = parsed[c]
    if me is None:
        me = parsed[c] = parse_operands(texts[c])
    found: dict[int, tuple[int, str]] = {}  # index -> (level, dependency)
    # an explicit scoreboard wait (cp.async wait_group: DEPBAR.LE SBn, k) at or just before c
    for d in (c, c - 1):
        m = _DEPBAR.match(_GUARD.sub("", texts[d].strip(), count=1)) if d >= 0 else None
        if m and kind == "long":
            dep = _depbar_group(d, int(m.group(2), 0), preds, texts, max_walk)
            if dep:
                return [(k, "depbar") for k in dep]
    if not me.rmask and not me.wmask:
        return []
    heap = [(0, 0, c, me.rmask, me.wmask)]
    seen = {c}
    steps = 0
    best = None
    push, pop = heapq.heappush, heapq.heappop
    while heap:
        level, dist, i, open_raw, open_dst = pop(heap)
        while True:  # follow a straight line without the heap while it has one predecessor
            if best is not None and level > best:
                heap = []
                break
            if i != c:
                steps += 1
                if steps > max_walk:
                    heap = []
                    break
                p = parsed[i]
                if p is None:
                    p = parsed[i] = parse_operands(texts[i])
                is_prod = p.scoreboard == kind
                if open_raw:
                    hit = open_raw & p.wmask
                    if hit:
                        if is_prod:
                            found.setdefault(i, (level, "raw"))
                            best = level if best is None else min(best, level)
                        open_raw &= ~hit
                    # an instruction in between already waited for these values
                    open_raw &= ~p.rmask
                if open_dst and dist > dest_window:
                    open_dst = 0
                if open_dst:
                    hit = open_dst & p.wmask
                    if hit:
                        if is_prod:
                            found.setdefault(i, (level, "waw"))
                            best = level if best is None else min(best, level)
                        open_dst &= ~hit
                    elif is_prod and open_dst & p.rmask:  # a late operand read still pending
                        found.setdefault(i, (level, "war"))
                        best = level if best is None else min(best, level)
                if not open_raw and not open_dst:
                    break  # this path is settled: do not walk further along it
            pr = preds[i]
            if len(pr) == 1:
                q, entry = pr[0]
                if q in seen:
                    break
                seen.add(q)
                if not entry and (not heap or heap[0][0] >= level):
                    i, dist = q, dist + 1
                    continue
                push(heap, (level + entry, dist + 1, q, open_raw, open_dst))
                break
            for q, entry in pr:
                if q not in seen:
                    seen.add(q)
                    push(heap, (level + entry, dist + 1, q, open_raw, open_dst))
            break
    return sorted((k, dep) for k, (lv, dep) in found.items() if lv == best)


def _depbar_group(d: int, pending: int, preds, texts, max_walk: int) -> list[int]:
    """The LDGSTS of the cp.async group that ``DEPBAR.LE SBn, pending`` at ``d`` waits for: walking
    back, the group committed by the (pending+1)-th most recent LDGDEPBAR."""
    commits = 0
    out = []
    steps = 0
    for k, level, _dist, _via in _walk(d, preds):
        steps += 1
        if steps > max_walk or level > 0 and commits == 0:
            break
        body = _GUARD.sub("", texts[k].strip(), count=1)
        if body.startswith("LDGDEPBAR"):
            commits += 1
            if commits > pending + 1:
                break
        elif body.startswith("LDGSTS") and commits == pending + 1:
            out.append(k)
    return sorted(out)


_PC_COLS = [
    "address", "offset", "sass", "opcode_class", "opcode", "reason", "samples", "weight",
    "producer_address", "producer_offset", "producer_sass", "producer_class", "producer_opcode",
    "dependency",
]


def producer_pcs(launch, reasons=tuple(SCOREBOARD_REASONS)) -> pd.DataFrame:
    """Per stalled PC and reason, the producer instruction(s) it waits on.

    One row per (consumer PC, reason, candidate producer) for every PC with samples of a
    scoreboard reason in ``reasons``; a consumer with no producer found has one row with null
    producer fields (unresolved). Rows are in consumer address order.

    Columns: ``address`` (uint64, the consumer's PC), ``offset`` (int64), ``sass`` (str),
    ``opcode_class`` (str), ``opcode`` (str, with modifiers), ``reason`` (str),
    ``samples`` (float64: the consumer's samples of ``reason`` times ``weight``),
    ``weight`` (float64: 1 / number of candidate producers; 1 when unresolved),
    ``producer_address`` (UInt64, <NA> when unresolved), ``producer_offset`` (Int64),
    ``producer_sass`` / ``producer_class`` / ``producer_opcode`` (str: SASS text, opcode class,
    base opcode; None when unresolved), ``dependency`` ("raw" / "waw" / "war"; None when
    unresolved).
    ``attrs["missing"]`` names SourceCounters when the report has no per-PC samples.
    """
    sass = launch.sass
    cols = [f"stall_{r}" for r in reasons if f"stall_{r}" in sass.columns]
    if len(sass) == 0 or not cols:
        return with_missing(
            pd.DataFrame(columns=_PC_COLS), [missing("waits_on", M.stall_config()["per_pc_section"])]
        )
    cfg = _cfg()
    texts = sass["sass"].to_numpy(dtype=object)
    addresses = sass["address"].to_numpy()
    offsets = sass["offset"].to_numpy()
    classes = sass["opcode_class"].to_numpy(dtype=object)
    opcodes = sass["opcode"].to_numpy(dtype=object)
    parsed: list[Operands | None] = [None] * len(texts)  # filled as the walks reach them

    bases = sass["base"].to_numpy(dtype=object) if "base" in sass.columns else None
    preds, _heads = _cfg_preds(addresses, texts, bases)
    rows = []
    for col in cols:
        reason = col[len("stall_"):]
        kind = SCOREBOARD_REASONS[reason]
        vals = sass[col].to_numpy()
        for c in np.nonzero(vals)[0]:
            n = float(vals[c])
            cands = _find(int(c), kind, parsed, preds, texts, cfg["max_walk"], cfg["dest_window"])
            head = (addresses[c], offsets[c], texts[c], classes[c], opcodes[c], reason)
            if not cands:
                rows.append(head + (n, 1.0, None, None, None, None, None, None))
                continue
            w = 1.0 / len(cands)
            for k, dep in cands:
                rows.append(
                    head + (n * w, w, addresses[k], offsets[k], texts[k], classes[k],
                            (parsed[k] or parse_operands(texts[k])).base, dep)
                )
    df = pd.DataFrame(rows, columns=_PC_COLS)
    df["address"] = df["address"].astype(np.uint64)
    df["offset"] = df["offset"].astype(np.int64)
    df["samples"] = df["samples"].astype(np.float64)
    df["weight"] = df["weight"].astype(np.float64)
    df["producer_address"] = pd.array(
        [None if v is None or pd.isna(v) else int(v) for v in df["producer_address"]], dtype="UInt64"
    )
    df["producer_offset"] = pd.array(
        [None if v is None or pd.isna(v) else int(v) for v in df["producer_offset"]], dtype="Int64"
    )
    df = df.sort_values(["address", "reason"], kind="stable").reset_index(drop=True)
    return with_missing(df, [])


_WO_COLS = ["class", "opcode", "reason", "producer_class", "producer_opcode", "samples", "share"]


def waits_on(launch, _pcs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Who waits on whom: scoreboard stall samples by consumer class x reason x producer,
    resolved producers only, sorted by samples (descending).

    Columns: ``class`` (str: the waiting instruction's opcode class), ``opcode`` (str: the
    consumer opcode with modifiers carrying most of the row's samples), ``reason`` (str),
    ``producer_class`` (str), ``producer_opcode`` (str: base opcode, e.g. ``LDSM``),
    ``samples`` (float64: split equally among candidate producers, so possibly fractional),
    ``share`` (float64: of ALL stall samples of the launch, every reason).
    ``attrs["unresolved"]``: {reason: samples} of consumers with no producer found;
    ``attrs["scoreboard_samples"]``: {reason: samples} of all stalls of those reasons (resolved +
    unresolved); ``attrs["missing"]`` as :func:`producer_pcs`.
    """
    pcs = producer_pcs(launch) if _pcs is None else _pcs
    df = pd.DataFrame(columns=_WO_COLS)
    if pcs.empty:
        df.attrs["unresolved"] = {}
        df.attrs["scoreboard_samples"] = {}
        return with_missing(df, pcs.attrs.get("missing", []))
    _, mat = launch.stall_matrix()
    total = float(mat.sum())
    cells: dict[tuple, float] = {}
    ops: dict[tuple, dict[str, float]] = {}
    unresolved: dict[str, float] = {}
    per_reason: dict[str, float] = {}
    for cls, op, reason, pcls, pop, n in zip(
        pcs["opcode_class"], pcs["opcode"], pcs["reason"], pcs["producer_class"],
        pcs["producer_opcode"], pcs["samples"].to_numpy(),
    ):
        n = float(n)
        per_reason[reason] = per_reason.get(reason, 0.0) + n
        if not isinstance(pcls, str):
            unresolved[reason] = unresolved.get(reason, 0.0) + n
            continue
        key = (cls, reason, pcls, pop)
        cells[key] = cells.get(key, 0.0) + n
        by_op = ops.setdefault(key, {})
        by_op[op] = by_op.get(op, 0.0) + n
    rows = [
        (k[0], max(ops[k].items(), key=lambda kv: (kv[1], kv[0]))[0], k[1], k[2], k[3], v,
         v / total if total else np.nan)
        for k, v in cells.items()
    ]
    rows.sort(key=lambda r: (-r[5], r[0], r[2], r[3], r[4]))
    df = pd.DataFrame(rows, columns=_WO_COLS)
    df["samples"] = df["samples"].astype(np.float64)
    df["share"] = df["share"].astype(np.float64)
    df.attrs["unresolved"] = {r: unresolved.get(r, 0.0) for r in sorted(per_reason)}
    df.attrs["scoreboard_samples"] = {r: per_reason[r] for r in sorted(per_reason)}
    return with_missing(df, [])


def waits_on_unresolved(waits: pd.DataFrame) -> dict[str, float]:
    """{reason: samples} that :func:`waits_on` could not give to a producer."""
    return dict(waits.attrs.get("unresolved", {}))
