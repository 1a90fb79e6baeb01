"""Where a kernel's warps wait on a barrier, and which of ncu's samples are that wait's.

ncu samples a waiting warp on the instruction it cannot issue, which is not always the barrier
instruction (checked on cuBLAS nvjet, cuDNN and our ladder on the H200):

* **mbarrier**: a ``SYNCS.PHASECHK.TRANS64.TRYWAIT P, [addr]`` sets ``P`` through the long
  scoreboard; the warp waits where ``P`` is *read*. Its site is the try-wait, every reader of ``P``
  that the try-wait's definition reaches (any distance, across back edges: nvjet issues the
  try-wait for the next stage early and consumes ``P`` at the top of the next iteration, a
  ``BRA !P2`` at a lower address with thousands of ``long_scoreboard`` samples), and the retry loop
  (the instructions guarded by ``P``, the out-of-line ``NANOSLEEP`` + ``PHASECHK`` block a negated
  branch on ``P`` jumps to). A reader that is a branch or in the retry loop is the wait's whole;
  another reader only with its ``long_scoreboard`` samples (``data/roles.toml`` [wait]
  ``reader_reasons``). A reader two try-waits reach belongs to the nearer.
* **named barrier**: ``BAR.SYNC``/``BAR.RED`` and the ``barrier`` samples of the instruction after
  it (ncu puts them there).
* **wgmma group**: ``WARPGROUP.DEPBAR``; **wgmma operands** (``warpgroup_arrive``): the
  ``warpgroup_arrive`` samples of an ``HGMMA`` (it waits for the previous wgmma to free its
  operands); **cp.async / TMA-store groups**: ``DEPBAR``.

Each sample is given to at most one site: named barriers first, then wgmma waits, scoreboard
waits, mbarrier waits, wgmma operand waits. :func:`find_sites` returns :class:`WaitSite` s whose
``pcs`` are the instructions wholly theirs and ``partial`` the (offset, reason, samples) taken from
instructions shared with other work.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from profiler.analyze._common import OpcodeMatch
from profiler.sass import CFG, Instruction

__all__ = ["WaitSite", "claim_sites", "find_sites", "site_plan"]


@dataclass(frozen=True)
class WaitSite:
    """One place where a role waits: ``kind`` (mbarrier, named_barrier, wgmma_group,
    warpgroup_arrive, scoreboard), ``barrier`` (its label), ``role``, ``pcs`` (offsets of the
    instructions whose samples are all the wait's), ``partial`` ((offset, reason, samples) taken
    from other instructions) and ``samples`` (the total)."""

    kind: str
    barrier: str
    role: str
    pcs: tuple
    samples: int
    partial: tuple = field(default=())


@lru_cache(maxsize=16384)
def _match(opcode: str, prefixes: tuple) -> bool:
    return any(opcode == p or opcode.startswith(p + ".") for p in prefixes)


class _Claims:
    """Samples not yet given to a site: all of a PC's, or one reason's."""

    def __init__(self, samples: np.ndarray, stalls: dict[str, np.ndarray]) -> None:
        self.left = samples.astype(np.int64).copy()
        self.by = {r: v.astype(np.int64).copy() for r, v in stalls.items()}

    def all(self, i: int) -> int:
        n = int(self.left[i])
        self.left[i] = 0
        for v in self.by.values():
            v[i] = 0
        return n

    def reason(self, i: int, r: str) -> int:
        v = self.by.get(r)
        if v is None:
            return 0
        n = int(min(v[i], self.left[i]))
        v[i] -= n
        self.left[i] -= n
        return n


def _readers(ins: Sequence[Instruction], cfg: CFG, i: int, pred: str) -> dict[int, int]:
    """Instructions reading ``pred`` that the definition at ``i`` reaches: {index: distance}."""
    out: dict[int, int] = {}
    seen = bytearray(len(ins))
    seen[i] = 1
    succs = cfg.succs
    todo = deque((j, 1) for j in succs[i])
    pop, push = todo.popleft, todo.append
    while todo:
        j, d = pop()
        if seen[j]:
            continue
        seen[j] = 1
        p = ins[j]
        if pred in p.reads:
            out[j] = d
        if p.guard is None and pred in p.writes:
            continue  # redefined on this path
        d += 1
        for k in succs[j]:
            if not seen[k]:
                push((k, d))
    return out


def _retry_region(ins: Sequence[Instruction], addr_index: dict[int, int], j: int, pred: str) -> list[int]:
    """The out-of-line retry loop a branch ``j`` on ``not pred`` jumps forward to (up to its branch
    back), or []."""
    q = ins[j]
    if not q.is_branch or q.target is None:
        return []
    neg = next((n for r, n in q.decided_by() if r == pred), None)
    tgt = addr_index.get(q.target)
    if not neg or tgt is None or tgt <= j:
        return []
    out = []
    for k in range(tgt, min(len(ins), tgt + 16)):
        out.append(k)
        if ins[k].is_branch and not ins[k].conditional:
            break
    return out


def find_sites(ins: Sequence[Instruction], cfg: CFG, addr_index: dict[int, int], roles: Sequence[str],
               offsets, samples: np.ndarray, stalls: dict[str, np.ndarray], rules: dict,
               mbar_label: Callable[[int], str | None], bar_label: Callable[[Instruction], str | None]
               ) -> list[WaitSite]:
    """Every wait site of a kernel (see the module docstring). ``stalls``: reason -> samples per
    instruction; ``mbar_label(i)`` the label of the mbarrier instruction ``i`` names (None: skip);
    ``bar_label(p)`` the label of a named-barrier wait."""
    return claim_sites(site_plan(ins, cfg, addr_index, roles, rules, mbar_label, bar_label), offsets, samples,
                       stalls)


def claim_sites(plan: Sequence[tuple[tuple, int, str | None]], offsets, samples: np.ndarray,
                stalls: dict[str, np.ndarray]) -> list[WaitSite]:
    """The wait sites of a :func:`site_plan`: its claims made in order on the samples (all of an
    instruction's, or one reason's), each sample given to the first site that claims it."""
    claims = _Claims(samples, stalls)
    whole: dict[tuple, list[int]] = {}
    part: dict[tuple, list[tuple[int, str, int]]] = {}
    for key, i, reason in plan:
        if reason is None:
            full = int(claims.left[i]) == int(samples[i])
            got = claims.all(i)
            if full:
                whole.setdefault(key, []).append(i)
            elif got:  # what another site left of it
                part.setdefault(key, []).append((i, "rest", got))
            continue
        n = claims.reason(i, reason)
        if n:
            part.setdefault(key, []).append((i, reason, n))
        else:
            whole.setdefault(key, [])
    out = []
    for key in dict.fromkeys([*whole, *part]):
        kind, label, role = key
        idx = sorted(set(whole.get(key, [])))
        pr = tuple((int(offsets[i]), r, c) for i, r, c in part.get(key, []))
        total = int(samples[idx].sum()) + sum(c for _, _, c in pr)
        out.append(WaitSite(kind, label, role, tuple(int(offsets[k]) for k in idx), int(total), pr))
    return out


def site_plan(ins: Sequence[Instruction], cfg: CFG, addr_index: dict[int, int], roles: Sequence[str],
              rules: dict, mbar_label: Callable[[int], str | None], bar_label: Callable[[Instruction], str | None]
              ) -> list[tuple[tuple, int, str | None]]:
    """The claims of every wait site, in the order they are made: ((kind, label, role), instruction,
    reason or None for all its samples). A function of the SASS and the roles alone (see
    :func:`find_sites` for the arguments)."""
    w = rules["wait"]
    plan: list[tuple[tuple, int, str | None]] = []

    def take(key: tuple, i: int, reason: str | None = None) -> None:
        plan.append((key, i, reason))
    n = len(ins)
    is_named, is_group = OpcodeMatch(w["named_barrier"]), OpcodeMatch(w["wgmma_group"])
    is_sb, is_mbar = OpcodeMatch(w["scoreboard"]), OpcodeMatch(w["mbarrier"])
    is_operands = OpcodeMatch(w["warpgroup_arrive"])
    # named barriers, with the barrier samples of the next instruction
    for i, p in enumerate(ins):
        if is_named[p.opcode]:
            label = bar_label(p)
            if label is None:
                continue
            key = ("named_barrier", label, roles[i])
            take(key, i)
            if i + 1 < n and i + 1 in cfg.succs[i]:
                for r in w["next_pc_reasons"]:
                    take(key, i + 1, r)
        elif is_group[p.opcode]:
            take(("wgmma_group", "wgmma group", roles[i]), i)
        elif p.base == "DEPBAR" and is_sb[p.opcode]:
            sb = next((b for b in p.barriers if b.kind == "sb"), None)
            take(("scoreboard", f"SB{sb.id}" if sb else "SB?", roles[i]), i)
    # mbarrier try-waits: the try-wait, its retry loop, the readers of its predicate
    waits = [i for i, p in enumerate(ins) if is_mbar[p.opcode] and "TRYWAIT" in p.modifiers]
    loop_of: dict[int, set[int]] = {}
    nearest: dict[int, tuple[int, int]] = {}  # reader -> (distance, try-wait)
    reads: dict[int, dict[int, int]] = {}
    for i in waits:
        pred = ins[i].dsts[0].text.lstrip("!") if ins[i].dsts else None
        if pred is None:
            continue
        rd = _readers(ins, cfg, i, pred)
        reads[i] = rd
        loop: set[int] = set()
        for j in rd:
            if (ins[j].guard == pred) or pred in ins[j].writes:
                loop.add(j)
            loop.update(_retry_region(ins, addr_index, j, pred))
        loop_of[i] = loop
        for j, d in rd.items():
            if j not in nearest or d < nearest[j][0]:
                nearest[j] = (d, i)
    in_loops = {k for lp in loop_of.values() for k in lp}
    for i in waits:
        if i in in_loops or i not in reads:
            continue  # the try-wait of an out-of-line retry loop: counted with the one that jumps there
        label = mbar_label(i)
        if label is None:
            continue
        key = ("mbarrier", label, roles[i])
        take(key, i)
        for k in sorted(loop_of[i]):
            take(key, k)
        for j in sorted(reads[i]):
            if j in loop_of[i] or nearest[j][1] != i:
                continue
            if ins[j].is_branch:
                take(key, j)
            else:
                for r in w["reader_reasons"]:
                    take(key, j, r)
    # wgmma operand waits
    for i, p in enumerate(ins):
        if is_operands[p.opcode]:
            take(("warpgroup_arrive", "wgmma operands", roles[i]), i, "warpgroup_arrive")
    return plan
