"""Which code each warp of a CTA reaches: thread-index branches decided warp by warp.

Warp-specialised kernels split their warps by thread index before anything else (cuBLAS' nvjet:
``S2R R0, SR_TID.X`` · ``ISETP.LT.AND P0, PT, R0, 0x100, PT`` · ``BRA !P0, T``; cuDNN:
``SHF.R.U32.HI R3, RZ, 0x7, R0`` · ``ISETP.NE.AND P0, PT, R3, RZ, PT`` · ``@!P0 BRA``; then
``LOP3.LUT P0, RZ, R0, 0x60, RZ, 0xc0, !PT`` for the warps of a warpgroup). For each warp ``w`` of a
CTA of ``block_dim`` threads, this module evaluates the registers such a branch reads lane by lane
(thread ``32 w + lane``, x fastest) through their single reaching definitions
(:class:`~profiler.sass.values.Resolver`), and walks the CFG from instruction 0 taking a branch
only where some lane takes it, falling through only where some lane does not. A value it cannot
evaluate (a kernel parameter, a loaded value, a loop counter) decides nothing: the warp may go
both ways. What it evaluates is data (``data/sass.toml`` [warps]): the thread-index special
registers, moves, adds, multiplies, shifts, logic, permutes, lane shuffles and compares.

:func:`warp_reach` -> :class:`WarpReach`: per warp, the instruction indices it reaches; the
branches decided by thread index (index -> per-warp outcome).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from profiler import metrics as M
from profiler.sass.cfg import CFG
from profiler.sass.instruction import Instruction
from profiler.sass.values import Resolver

__all__ = ["WarpReach", "warp_reach"]

_LANES = 32
_MASK = 0xFFFFFFFF
_CMP = {"LT": operator.lt, "LE": operator.le, "GT": operator.gt, "GE": operator.ge,
        "EQ": operator.eq, "NE": operator.ne}


@dataclass(frozen=True)
class WarpReach:
    """``reach[w]``: the instruction indices warp ``w`` can reach (sorted tuple); ``decided``:
    {branch or guarded-exit index: per-warp outcome, ``"taken"`` / ``"not"`` / ``"both"``} for the
    instructions whose predicate depends on the thread index; ``warps`` the warp count of a CTA."""

    warps: int
    reach: tuple[frozenset, ...]
    decided: dict


@lru_cache(maxsize=1)
def _rules() -> dict:
    return dict(M._load("sass.toml")["warps"])


class _Lanes:
    """Lane values of registers for one warp: 32 int64 (registers, masked to 32 bits) or bool
    (predicates) per query, None when not evaluable."""

    def __init__(self, ins: Sequence[Instruction], res: Resolver, tid: dict[str, np.ndarray]) -> None:
        self.ins = ins
        self.res = res
        self.tid = tid
        self.memo: dict[tuple[int, str], np.ndarray | None] = {}

    def operand(self, i: int, text: str, depth: int) -> np.ndarray | None:
        t = text.strip().replace(".reuse", "")
        neg = t.startswith("-")
        inv = t.startswith("!")
        t = t.lstrip("-!|")
        if t in ("RZ", "URZ"):
            return np.zeros(_LANES, dtype=np.int64)
        if t in ("PT", "UPT"):
            v = np.ones(_LANES, dtype=bool)
            return ~v if inv else v
        if t[:2] == "0x" or t[:1].isdigit():
            try:
                v = np.full(_LANES, int(t, 0) & _MASK, dtype=np.int64)
            except ValueError:
                return None
            return (-v) & _MASK if neg else v
        if t.startswith("SR_"):
            return self.tid.get(t)
        head = t.split(".")[0]
        if not head or head[0] not in "RUP":
            return None
        got = self.value(i, head, depth)
        if got is None:
            return None
        v = got
        if inv:
            return ~v
        return (-v) & _MASK if neg else v

    def value(self, i: int, reg: str, depth: int = 0) -> np.ndarray | None:
        key = (i, reg)
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = None  # a cycle through a loop evaluates to nothing
        out = None
        if depth < 24:
            defs = self.res.reaching(i, reg)
            if defs:
                got = [self._eval(d, reg, depth + 1) for d in defs]
                vals = [v for v in got if v is not None]
                if len(vals) == len(got) and all(np.array_equal(vals[0], v) for v in vals[1:]):
                    out = vals[0]
                if out is not None and any(self.ins[d].guard is not None for d in defs):
                    out = None  # a guarded definition may not happen: the value before it also reaches
        self.memo[key] = out
        return out

    def _eval(self, d: int, reg: str, depth: int) -> np.ndarray | None:
        p = self.ins[d]
        base, mods = p.base, set(p.modifiers)
        ops = [o.text for o in (*p.dsts, *p.srcs)]
        nd = len(p.dsts)
        src = ops[nd:]
        dst = [o.text.lstrip("!") for o in p.dsts]
        if reg not in dst:
            return None
        slot = dst.index(reg)

        def o(k: int) -> np.ndarray | None:
            return self.operand(d, src[k], depth) if k < len(src) else None

        if base in ("S2R", "S2UR", "CS2R") and src:
            return self.tid.get(src[0])
        if base in ("MOV", "UMOV", "R2UR", "IMAD") and (base != "IMAD" or "MOV" in mods):
            v = o(len(src) - 1 if base == "IMAD" else 0)
            if v is not None and base == "R2UR":
                v = np.full(_LANES, v[0])  # one lane's value for the whole warp
            return v
        if base in ("IADD3", "UIADD3", "VIADD", "IADD") and "X" not in mods:
            got = [o(k) for k, s in enumerate(src) if not _is_pred(s)]
            terms = [v for v in got if v is not None]
            if len(terms) != len(got) or not terms:
                return None
            total = np.zeros(_LANES, dtype=np.int64)
            for v in terms:
                total = total + v
            return total & _MASK
        if base in ("IMAD", "UIMAD") and not ({"X", "HI", "WIDE"} & mods) and len(src) == 3:
            a, b, c = o(0), o(1), o(2)
            return None if a is None or b is None or c is None else (a * b + c) & _MASK
        if base in ("SHF", "USHF") and len(src) == 3:
            lo, sh, hi = o(0), o(1), o(2)
            if sh is None or (sh < 0).any() or (sh > 31).any():
                return None
            if "R" in mods and "HI" in mods and hi is not None and _zero(src[0]):
                signed = "S32" in mods
                h = np.where(hi >= 1 << 31, hi - (1 << 32), hi) if signed else hi
                return (h >> sh) & _MASK
            if "L" in mods and lo is not None and _zero(src[2]):
                return (lo << sh) & _MASK
            if "R" in mods and lo is not None and _zero(src[2]) and "HI" not in mods:
                return (lo >> sh) & _MASK
            return None
        if base in ("LEA", "ULEA") and not ({"HI", "X"} & mods) and len(src) >= 3:
            a, b, sh = o(0), o(1), o(2)
            if a is None or b is None or sh is None or (sh < 0).any() or (sh > 31).any():
                return None
            return ((a << sh) + b) & _MASK
        if base in ("LOP3", "ULOP3"):
            k0 = 1 if _is_pred(reg) else 0  # LOP3.LUT P0, RZ, a, b, c, lut, Pc: P0 = (result != 0)
            if len(src) < k0 + 4 or not src[k0 + 3].startswith("0x"):
                return None
            a, b, c = o(k0), o(k0 + 1), o(k0 + 2)
            if a is None or b is None or c is None:
                return None
            r = _lut(int(src[k0 + 3], 16), a, b, c)
            return (r != 0) if k0 else r
        if base in ("VOTE", "VOTEU") and ({"ALL", "ANY"} & mods) and _is_pred(reg) and src:
            v = o(len(src) - 1)
            if v is None:
                return None
            return np.full(_LANES, bool(v.all() if "ALL" in mods else v.any()))
        if base in ("ISETP", "UISETP") and len(src) >= 3:
            cmp = next((_CMP[m] for m in p.modifiers if m in _CMP), None)
            a, b, c = o(0), o(1), o(2)
            if cmp is None or a is None or b is None or c is None:
                return None
            if "U32" not in mods:
                a = np.where(a >= 1 << 31, a - (1 << 32), a)
                b = np.where(b >= 1 << 31, b - (1 << 32), b)
            r = cmp(a, b)
            if slot == 1:
                r = ~r
            if "AND" in mods:
                return r & c
            if "OR" in mods:
                return r | c
            return r if "XOR" not in mods else r ^ c
        if base in ("PLOP3", "UPLOP3") and len(src) >= 4 and slot == 0:
            a, b, c = o(0), o(1), o(2)
            if a is None or b is None or c is None or not src[3].startswith("0x"):
                return None
            return _lut(int(src[3], 16), a.astype(np.int64), b.astype(np.int64), c.astype(np.int64)) & 1 == 1
        if base == "SHFL" and "IDX" in mods and len(src) >= 2 and slot == 1:
            v, lane = o(0), o(1)
            if v is None or lane is None:
                return None
            return v[lane % _LANES]
        if base == "ELECT" and slot == 0:
            v = np.zeros(_LANES, dtype=bool)
            v[0] = True  # elect.sync: one lane, the lowest active (every lane of a full warp is)
            return v
        return None


def _is_pred(text: str) -> bool:
    t = text.lstrip("!")
    return t[:1] == "P" or t[:2] == "UP"


def _zero(text: str) -> bool:
    return text in ("RZ", "URZ")


def _lut(lut: int, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """LOP3's 3-input truth table ``lut`` (bit ``4a + 2b + c`` of it) applied bitwise."""
    a, b, c = a.astype(np.int64), b.astype(np.int64), c.astype(np.int64)
    r = np.zeros_like(a)
    for k in range(8):
        if lut >> k & 1:
            r |= (a if k & 4 else ~a) & (b if k & 2 else ~b) & (c if k & 1 else ~c)
    return r & _MASK


def _tid(warp: int, block_dim: tuple[int, int, int]) -> dict[str, np.ndarray]:
    lin = np.arange(warp * _LANES, (warp + 1) * _LANES, dtype=np.int64)
    dx, dy, _ = block_dim
    return {"SR_TID.X": lin % dx, "SR_TID.Y": (lin // dx) % dy, "SR_TID.Z": lin // (dx * dy),
            "SR_LANEID": lin % _LANES}


def _outcome(decide: list[np.ndarray | None], lanes_alive: np.ndarray) -> str | None:
    """``taken`` when every live lane takes it, ``not`` when none, ``both`` when some do; None
    when a predicate is not evaluable."""
    v = np.ones(_LANES, dtype=bool)
    for x in decide:
        if x is None:
            return None
        v &= x
    v = v[lanes_alive]
    if not len(v):
        return "not"
    return "taken" if v.all() else ("not" if not v.any() else "both")


def _pred(lanes: _Lanes, i: int, p: Instruction) -> list[np.ndarray | None]:
    out: list[np.ndarray | None] = []
    for reg, neg in p.decided_by():
        if reg == "!PT":
            out.append(np.zeros(_LANES, dtype=bool))
            continue
        v = lanes.value(i, reg)
        out.append(None if v is None else (~v if neg else v))
    return out


def warp_reach(ins: Sequence[Instruction], cfg: CFG, res: Resolver, block_dim: tuple[int, int, int],
               addr_index: dict[int, int]) -> WarpReach | None:
    """Per-warp reachable code of a CTA of ``block_dim`` threads (see the module docstring); None
    when the block is empty or too large to enumerate."""
    threads = block_dim[0] * block_dim[1] * block_dim[2]
    warps = (threads + _LANES - 1) // _LANES
    if warps < 1 or warps > int(_rules()["max_warps"]):
        return None
    tid_reads = frozenset(_rules()["thread_index"])
    if not any(p.base in ("S2R", "S2UR", "CS2R") and any(o.text in tid_reads for o in p.srcs) for p in ins):
        return WarpReach(warps, tuple(frozenset(range(len(ins))) for _ in range(warps)), {})
    decisive = [i for i, p in enumerate(ins) if p.base in ("BRA", "JMP", "EXIT") and p.decided_by()]
    decided: dict[int, list[str]] = {}
    reach: list[frozenset] = []
    blocks = cfg.blocks
    spans: dict[frozenset, frozenset] = {}
    for w in range(warps):
        lanes = _Lanes(ins, res, _tid(w, block_dim))
        alive = np.arange(w * _LANES, (w + 1) * _LANES) < threads
        outcome: dict[int, str] = {}
        for i in decisive:
            o = _outcome(_pred(lanes, i, ins[i]), alive)
            if o is not None:
                outcome[i] = o
                decided.setdefault(i, ["both"] * warps)[w] = o
        if w == 0:  # what warp 0 cannot evaluate no warp can (the same definitions, another thread index)
            decisive = list(outcome)
        seen = {0}  # blocks: a decided instruction (a branch, an exit) ends its block
        todo = [0]
        while todo:
            b = blocks[todo.pop()]
            i = b.end
            p = ins[i]
            o = outcome.get(i)
            nxt = list(b.succs)
            if o is not None and o != "both":
                tgt = addr_index.get(p.target) if p.is_branch and p.target is not None else None
                if p.base == "EXIT":
                    nxt = [] if o == "taken" else nxt
                elif o == "taken":
                    nxt = [cfg.block_of(tgt)] if tgt is not None else nxt
                else:
                    nxt = [k for k in nxt if blocks[k].start == i + 1]
            for k in nxt:
                if k not in seen:
                    seen.add(k)
                    todo.append(k)
        key = frozenset(seen)
        if key not in spans:
            spans[key] = frozenset(j for k in seen for j in range(blocks[k].start, blocks[k].end + 1))
        reach.append(spans[key])
    return WarpReach(warps, tuple(reach), {i: tuple(v) for i, v in decided.items()})
