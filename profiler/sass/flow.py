"""Executed counts against the control-flow graph: what ncu's per-PC ``inst_executed`` (warp-level
executions) says about a :class:`~profiler.sass.CFG`, as checks a front end must pass.

A warp that executes a block's last instruction goes on to a successor's first one (unless it
exits), and a warp that starts a block came from one of its predecessors (or is a new warp at
instruction 0). Counts are per warp, not per thread, so divergence and reconvergence make only
inequalities exact:

* **inside a block** every instruction has the same count (no edge enters or leaves it between
  them; a predicated-off instruction is still executed by the warp), except a reconvergence
  instruction (``BSYNC``, ``WARPSYNC``: ``data/sass.toml`` [flow]): each diverged part of a warp
  executes it once, then the warp goes on as one, so the block is cut after it and its count is
  the parts' (cuDNN 0x4970 ``BSYNC B0``: 1,024 executions, 512 before and after);
* **inflow**: a block's count is at most the sum of its predecessors' counts (a diverged warp's
  two halves each execute their own predecessor and reconverge into one execution of the join).
  Where a predecessor ends in a branch that can diverge (a per-thread predicate), parts of a warp
  that never reconverge each execute the block, so the bound is 32× (a warp has 32 lanes) and
  what it still catches is a block with no executed predecessor: cuBLAS nvjet 0x50f0 ``BRA`` to the
  exit runs 396 times after 266 executions of its two predecessors, both lane-dependent branches
  (lanes 0-2 poll one mbarrier each, the others skip);
* **outflow**: a block's count is at most the sum of its successors' counts, unless it ends in an
  ``EXIT``/``RET``/``KILL`` (warps leave) or a reconvergence — a divergent branch sends parts of one
  warp both ways;
* **uniform branches** (``BRA.U``, a uniform predicate ``UPn``, or unconditional) cannot diverge: a
  block whose only successor has it as its only predecessor passes its count on exactly.

:func:`flow_violations` lists every place where a CFG breaks one of these: a missing edge (a
branch form read as unconditional drops its fall-through, whose executed code then has no inflow)
or a missing block boundary shows up here. :func:`unreachable_executed` lists executed instructions
no path from instruction 0 reaches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from profiler import metrics as M
from profiler.sass.cfg import CFG
from profiler.sass.instruction import Instruction

__all__ = ["FlowViolation", "flow_violations", "reachable", "unreachable_executed"]

_LEAVE = ("EXIT", "RET", "KILL", "BRX", "JMX")
_LANES = 32


@dataclass(frozen=True)
class FlowViolation:
    """``kind`` (``block``, ``inflow``, ``outflow``, ``uniform``), the block's first instruction
    ``start`` (an index), its count and the bound it broke."""

    kind: str
    start: int
    count: int
    bound: int


def reachable(cfg: CFG) -> set[int]:
    """Indices reached from instruction 0 along the CFG's edges."""
    if cfg.n == 0:
        return set()
    seen = {0}
    todo = [0]
    succs = cfg.succs
    while todo:
        i = todo.pop()
        for j in succs[i]:
            if j not in seen:
                seen.add(j)
                todo.append(j)
    return seen


def unreachable_executed(cfg: CFG, executed: Sequence[int]) -> list[int]:
    """Indices with ``executed > 0`` that no path from instruction 0 reaches."""
    r = reachable(cfg)
    return [i for i in range(cfg.n) if executed[i] > 0 and i not in r]


def _pieces(cfg: CFG, bases: Sequence[str], reconverge: frozenset) -> list[tuple[int, int, list, list]]:
    """The CFG's blocks cut after each reconvergence instruction: (start, end, successor pieces,
    predecessor pieces)."""
    pieces: list[list] = []
    first: dict[int, int] = {}  # block id -> its first piece
    last: dict[int, int] = {}
    for b in cfg.blocks:
        s = b.start
        first[b.id] = len(pieces)
        for i in range(b.start, b.end):
            if bases[i] in reconverge:
                pieces.append([s, i, [len(pieces) + 1], []])
                s = i + 1
        pieces.append([s, b.end, [], []])
        last[b.id] = len(pieces) - 1
    for b in cfg.blocks:
        pieces[last[b.id]][2] = [first[t] for t in b.succs]
    for k, pc in enumerate(pieces):
        for t in pc[2]:
            pieces[t][3].append(k)
    return [(a, e, su, pr) for a, e, su, pr in pieces]


def _divergent(p: Instruction) -> bool:
    """Whether a control instruction can send the lanes of one warp different ways: a branch on a
    per-thread predicate (not a uniform ``UPn``, not ``BRA.U``), ``BRA.DIV``, a collective."""
    if p.base not in ("BRA", "JMP", "WARPSYNC", "EXIT"):
        return False
    if "COLLECTIVE" in p.modifiers or "DIV" in p.modifiers:
        return True
    if "U" in p.modifiers:
        return False
    return any(not reg.startswith("UP") and reg != "!PT" for reg, _ in p.decided_by())


def flow_violations(cfg: CFG, executed: Sequence[int], ins: Sequence[Instruction]) -> list[FlowViolation]:
    """Every block where ``executed`` (warp-level counts per instruction) breaks a rule of the module
    docstring; [] for a CFG that agrees with the counts."""
    conv = reconverging()
    bases = [p.base for p in ins]
    out: list[FlowViolation] = []
    pieces = _pieces(cfg, bases, conv)
    cnt = [int(executed[a]) for a, _, _, _ in pieces]
    diverges = [_divergent(ins[e]) for _, e, _, _ in pieces]
    for k, (a, e, succ, pred) in enumerate(pieces):
        c = cnt[k]
        body = [i for i in range(a, e + 1) if bases[i] not in conv]
        ref = int(executed[body[0]]) if body else c
        for i in body:
            if int(executed[i]) != ref:
                out.append(FlowViolation("block", a, int(executed[i]), ref))
                break
        inflow = sum(cnt[p] for p in pred)
        if a and c > inflow * (_LANES if any(diverges[p] for p in pred) else 1):
            out.append(FlowViolation("inflow", a, c, inflow))
        ends = bases[e] in _LEAVE or bases[e] in conv
        if not ends and ref > sum(cnt[s] for s in succ):
            out.append(FlowViolation("outflow", a, ref, sum(cnt[s] for s in succ)))
        if len(succ) == 1 and len(pieces[succ[0]][3]) == 1 and not ends and bases[succ[0]] not in conv \
                and cnt[succ[0]] != ref:
            out.append(FlowViolation("uniform", a, ref, cnt[succ[0]]))
    return out


@lru_cache(maxsize=1)
def reconverging() -> frozenset:
    """Base opcodes that each diverged part of a warp executes once before the warp goes on as one
    (``data/sass.toml`` [flow] reconverge)."""
    return frozenset(M._load("sass.toml").get("flow", {}).get("reconverge", ()))
