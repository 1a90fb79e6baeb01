"""The control-flow graph of a kernel's SASS: :func:`build_cfg` -> :class:`CFG`.

Edges: the fall-through from each instruction to the next (unless it is an unconditional branch,
exit, return or kill) and every ``BRA``/``JMP``/``CALL`` to its target address. A branch is
conditional when it is guarded (``@!P0 BRA``) or names a predicate operand (``BRA !P0, T``,
``BRA.U UP1, T``, ``@!P0 BRA P1, T``: cuBLAS' and other compilers' form; ``BRA !PT, T`` is never
taken); ``BRA.DIV`` (taken only when the warp diverged) falls through too; an ``EXIT``/``RET``
with a guard falls through. A ``CALL`` goes to its target and returns to the next instruction
(its ``RET`` ends the callee's block). ``WARPSYNC.COLLECTIVE R3, T`` (CUTLASS around an
``ELECT``) sends the lanes outside the collective to ``T`` and the others on: both edges. Instruction 0 is the only entry: code that no edge reaches
from it is unreachable (a reaching-definitions walk never starts there). A back-edge is a branch to an instruction at or before
itself (compilers lay loops out so that the loop's latch branches backwards to its head, which is
then a loop head); an edge into a loop head from an earlier instruction is a loop entry.

Instructions are numbered in address order (index 0 = the first line of the ``sass`` frame);
basic blocks (:attr:`CFG.blocks`) are built on first use.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from profiler import metrics as M
from profiler.sass.instruction import parse

__all__ = ["CFG", "Block", "build_cfg"]

_UNCOND_END = ("EXIT", "RET", "BRX", "JMX", "KILL")
_TARGETED = frozenset(("BRA", "JMP", "CALL"))
_CONTROL = frozenset(_TARGETED | set(_UNCOND_END) | {"WARPSYNC"})


@dataclass(frozen=True)
class Block:
    """A basic block: instructions ``start`` .. ``end`` (indices, inclusive); ``succs`` /
    ``preds`` are block ids."""

    id: int
    start: int
    end: int
    succs: tuple[int, ...]
    preds: tuple[int, ...]


class CFG:
    """Control flow of ``n`` instructions.

    ``preds[i]``: the predecessors of instruction ``i`` as (index, loop_entry) pairs, loop_entry 1
    for an edge that enters a loop from outside (from an earlier address into a loop head), else 0.
    ``succs[i]``: the successor indices of instruction ``i``. ``loop_heads``: indices that a
    back-edge targets; ``back_edges``: (branch index, head index) pairs.
    """

    def __init__(self, n: int, preds: list[list[tuple[int, int]]], back_edges: frozenset,
                 control: tuple[int, ...] = ()) -> None:
        self.n = n
        self.preds = preds
        self.control = control  # indices of branches, exits, returns: each ends a block
        self.back_edges = back_edges
        self.loop_heads = frozenset(h for _, h in back_edges)

    @cached_property
    def succs(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in range(self.n)]
        for i, pr in enumerate(self.preds):
            for p, _ in pr:
                out[p].append(i)
        for s in out:
            s.sort()
        return out

    @cached_property
    def blocks(self) -> list[Block]:
        """The basic blocks in address order."""
        n = self.n
        if n == 0:
            return []
        leader = [False] * n
        leader[0] = True
        for i, pr in enumerate(self.preds):
            if len(pr) != 1 or pr[0][0] != i - 1:
                leader[i] = True  # a branch target, a join, or unreachable by fall-through
        for j in self.control:
            if j + 1 < n:
                leader[j + 1] = True  # after a branch or exit
        starts = [i for i in range(n) if leader[i]]
        ends = [s - 1 for s in starts[1:]] + [n - 1]
        block_of = [0] * n
        for b, (s, e) in enumerate(zip(starts, ends)):
            for i in range(s, e + 1):
                block_of[i] = b
        succ = [sorted({block_of[q] for q in self.succs[e]}) for e in ends]
        pred: list[list[int]] = [[] for _ in starts]
        for b, ss in enumerate(succ):
            for s in ss:
                pred[s].append(b)
        self._block_of = block_of
        return [Block(b, s, e, tuple(succ[b]), tuple(sorted(pred[b]))) for b, (s, e) in enumerate(zip(starts, ends))]

    def block_of(self, i: int) -> int:
        """The id of the block that holds instruction ``i``."""
        self.blocks  # noqa: B018 - builds _block_of
        return self._block_of[i]

    @cached_property
    def block_back_edges(self) -> frozenset:
        """Back-edges as (block id, block id) pairs."""
        return frozenset((self.block_of(j), self.block_of(h)) for j, h in self.back_edges)


def build_cfg(addresses, texts, bases=None) -> CFG:
    """The :class:`CFG` of instructions with ``addresses`` (ints, in order) and SASS ``texts``;
    ``bases`` (their base opcodes, e.g. the ``sass`` frame's ``base`` column) saves parsing lines
    that are not control flow."""
    n = len(texts)
    index = None
    targets: list[tuple[int, int]] = []  # (branch index, target index)
    unguarded_end = [False] * n
    control: list[int] = []
    if bases is None:
        bases = [M.base_opcode(t) for t in texts]
    for j, (t, b) in enumerate(zip(texts, bases)):
        if b not in _CONTROL:
            continue
        p = parse(t)
        if b == "WARPSYNC" and p.target is None:
            continue  # WARPSYNC.ALL, WARPSYNC mask: no control flow
        control.append(j)
        if index is None:
            index = {int(a): i for i, a in enumerate(addresses)}
        if b in _TARGETED or b == "WARPSYNC":
            never = p.cond == "!PT"
            if p.target is not None and p.target in index and not never:
                targets.append((j, index[p.target]))
            if b in ("BRA", "JMP") and not p.conditional and "DIV" not in p.modifiers:
                unguarded_end[j] = True
        elif p.guard is None:
            unguarded_end[j] = True
    back = frozenset((j, s) for j, s in targets if s <= j)
    heads = {s for _, s in back}
    preds: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for i in range(1, n):
        if not unguarded_end[i - 1]:
            preds[i].append((i - 1, 1 if i in heads else 0))
    for j, s in targets:
        preds[s].append((j, 1 if (s in heads and j < s) else 0))
    return CFG(n, preds, back, tuple(control))
