"""Which warps play which role, and which code is each role's: the split behind the role graph.

1. **From warps** (:mod:`profiler.sass.warps`): every warp of a CTA walks the CFG with its
   thread-index branches decided; warps that reach the same code form a group. A group whose own
   code does no work (``data/roles.toml`` [names] ``idle``: only ``EXIT``, ``WARPSYNC``,
   ``USETMAXREG`` …) joins a working group of its warpgroup (setmaxnreg is per warpgroup: cuDNN's
   and our producer warpgroups keep one TMA warp and let three exit), or else is the role
   ``exit``. The kernel is warp-specialised when two working groups each reach code the other
   does not; then an instruction reached by every role is ``common``, by one role that role's, by
   several ``shared``.
2. **From setmaxnreg** (fallback, when no thread-index branch splits the warps): the code reached
   from one ``USETMAXREG`` register count is one role's (dominance of the split points).
3. Otherwise one role, ``cta``.

Roles are named by what their code does (``data/roles.toml`` [names]): MMAs make a ``consumer``
(``consumer0``, ``consumer1`` when several), copies into shared memory without MMAs a ``producer``,
global atomics with no MMA or copy a ``scheduler`` (a tile scheduler's ``ATOMG`` and
``NANOSLEEP`` loop), stores only an ``epilogue``; each role also says what it does in words
(``TMA producer``, ``MMA consumer``, ``tile scheduler``, ``epilogue``, ``exit``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from profiler.analyze._common import OpcodeMatch
from profiler.sass import CFG, Instruction
from profiler.sass.values import Resolver
from profiler.sass.warps import warp_reach

__all__ = ["RoleSplit", "SplitRole", "split_roles"]

_HEX = re.compile(r"^-?0x[0-9a-fA-F]+$|^-?\d+$")


@dataclass
class SplitRole:
    """One role of the split: ``name``, ``does`` (in words), ``warps`` (indices in a CTA; empty
    without the warp analysis), ``setmaxnreg`` (the register count its code asks for, None
    without), ``entry`` (index of its first instruction outside any loop, for the warp-count
    check; None for ``common``/``shared``)."""

    name: str
    does: str
    warps: tuple[int, ...] = ()
    setmaxnreg: int | None = None
    entry: int | None = None
    entry_warps: int = 0


@dataclass
class RoleSplit:
    """``owner[i]`` the role of instruction ``i``; ``roles`` by name; ``method`` ``warps`` /
    ``setmaxnreg`` / ``none``; ``warps`` the warp count of a CTA (0 when unknown)."""

    owner: list[str]
    roles: dict[str, SplitRole]
    method: str
    warps: int = 0
    notes: list[str] = field(default_factory=list)


def _match(opcode: str, prefixes) -> bool:
    return any(opcode == p or opcode.startswith(p + ".") for p in prefixes)


def _setmaxnreg(ins: Sequence[Instruction], idx, rules: dict) -> int | None:
    for i in sorted(idx):
        p = ins[i]
        if _match(p.opcode, rules["split"]["opcodes"]):
            imm = [int(o.text, 0) for o in (*p.dsts, *p.srcs) if o.kind == "imm" and _HEX.match(o.text)]
            if imm:
                return imm[-1]
    return None


def _does(bases: set[str], rules: dict) -> str:
    n = rules["names"]
    if bases & set(n["mma"]):
        return "MMA consumer"
    if bases & set(n["load"]):
        return "TMA producer" if bases & set(n["tma"]) else "copy producer"
    if bases & set(n["scheduler"]):
        return "tile scheduler"
    if bases & set(n["store"]):
        return "epilogue"
    if bases <= set(n["idle"]):
        return "exit"
    return "other"


_NAME = {"MMA consumer": "consumer", "TMA producer": "producer", "copy producer": "producer",
         "tile scheduler": "scheduler", "epilogue": "epilogue", "exit": "exit", "other": "role"}


def _in_loop(cfg: CFG) -> set[int]:
    out: set[int] = set()
    for j, h in cfg.back_edges:
        out.update(range(h, j + 1))
    return out


def _defining(rules: dict) -> dict[str, frozenset]:
    n = rules["names"]
    return {"MMA consumer": frozenset(n["mma"]), "TMA producer": frozenset(n["load"]),
            "copy producer": frozenset(n["load"]), "tile scheduler": frozenset(n["scheduler"]),
            "epilogue": frozenset(n["store"])}


def _by_warps(ins, cfg, res, block_dim, addr_index, rules) -> RoleSplit | None:
    wr = warp_reach(ins, cfg, res, block_dim, addr_index)
    if wr is None:
        return None
    groups: dict[frozenset, list[int]] = {}
    for w, r in enumerate(wr.reach):
        groups.setdefault(r, []).append(w)
    if len(groups) < 2:
        return None
    keys = list(groups)
    bases = [p.base for p in ins]
    own = {}
    for k in keys:
        others = frozenset().union(*(o for o in keys if o is not k))
        own[k] = k - others
    idle = set(rules["names"]["idle"])
    working = sorted((k for k in keys if own[k] and not {bases[i] for i in own[k]} <= idle),
                     key=lambda k: min(groups[k]))
    if not any(own[a] and own[b] for a in working for b in working if a is not b):
        return None  # no two working groups each with code of their own: not warp-specialised
    # what each group does: its code beyond what every group runs
    common = frozenset.intersection(*keys)
    kind = {k: _does({bases[i] for i in k - common}, rules) for k in keys}
    defining = _defining(rules)
    # groups of one kind that run the same defining instructions (MMAs, TMA loads, atomics, stores)
    # are one role: cooperative consumer warpgroups whose leader warps differ by a few instructions
    parent = {k: k for k in keys}

    def find(k: frozenset) -> frozenset:
        while parent[k] is not k:
            k = parent[k]
        return k

    order = sorted(keys, key=lambda k: min(groups[k]))
    for x, a in enumerate(order):
        for b in order[x + 1:]:
            if kind[a] == kind[b] and kind[a] not in ("exit", "other"):
                ops = defining.get(kind[a], frozenset())
                if any(bases[i] in ops for i in a & b - common):
                    parent[find(b)] = find(a)
    members: dict[frozenset, list[int]] = {}
    reach: dict[frozenset, set[int]] = {}
    fold = ("exit", "other")  # warps that do nothing a role is named for
    if all(kind[k] in fold for k in order):
        return None
    for k in order:
        if kind[k] in fold:
            continue
        r = find(k)
        members.setdefault(r, []).extend(groups[k])
        reach.setdefault(r, set()).update(k)
    # idle groups (and groups whose code is no role's kind) join a role of their warpgroup
    # (setmaxnreg is per warpgroup), else are "exit"
    exit_warps: list[int] = []
    exit_reach: set[int] = set()
    for k in order:
        if kind[k] not in fold:
            continue
        for w in groups[k]:
            host = next((h for h in members if any(x // 4 == w // 4 for x in members[h])), None)
            if host is None:
                exit_warps.append(w)
                exit_reach |= k
            else:
                members[host].append(w)
                reach[host] |= k
    heads = sorted(members, key=lambda k: min(members[k]))
    does = {k: kind[k] for k in heads}
    names: dict[frozenset, str] = {}
    for what in dict.fromkeys(does.values()):
        ks = [k for k in heads if does[k] == what]
        base = _NAME[what]
        for j, k in enumerate(ks):
            names[k] = base if len(ks) == 1 and base != "role" else f"{base}{j}"
    roles = [(names[k], does[k], reach[k], sorted(members[k])) for k in heads]
    if exit_warps:
        roles.append(("exit", "exit", exit_reach, sorted(exit_warps)))
    n = len(ins)
    owner: list[str] = []
    for i in range(n):
        who = [r[0] for r in roles if i in r[2]]
        owner.append("common" if len(who) == len(roles) else who[0] if len(who) == 1
                     else "shared" if who else "common")
    loops = _in_loop(cfg)
    out: dict[str, SplitRole] = {}
    for name, what, rch, ws in roles:
        idx = [i for i in range(n) if owner[i] == name]
        entry = next((i for i in idx if i not in loops), idx[0] if idx else None)
        ew = sum(1 for w in ws if entry is not None and entry in wr.reach[w])
        smr = _setmaxnreg(ins, idx, rules)
        if smr is None:  # executed before a further split of its warpgroup: shared with a sibling role
            smr = _setmaxnreg(ins, [i for i in rch if owner[i] != "common"], rules)
        out[name] = SplitRole(name, what, tuple(ws), smr, entry, ew)
    return RoleSplit(owner, out, "warps", wr.warps)


def _by_setmaxnreg(ins, cfg, rules) -> RoleSplit | None:
    n = len(ins)
    groups: dict[tuple[str, int | None], list[int]] = {}
    is_split = OpcodeMatch(rules["split"]["opcodes"])
    for i, p in enumerate(ins):
        if is_split[p.opcode]:
            mods = set(p.modifiers)
            kind = ("grow" if mods & set(rules["split"]["grow"])
                    else "shrink" if mods & set(rules["split"]["shrink"]) else "set")
            imm = [int(o.text, 0) for o in (*p.dsts, *p.srcs) if o.kind == "imm" and _HEX.match(o.text)]
            starts = groups.setdefault((kind, imm[-1] if imm else None), [])
            starts.append(i)
            if i and ins[i - 1].base == "WARPSYNC":  # setmaxnreg's own warp-convergence prefix
                starts.append(i - 1)
    if not groups:
        return None
    all_splits = {i for v in groups.values() for i in v}
    owner_sets: list[set] = [set() for _ in range(n)]
    succs = cfg.succs
    for g, starts in groups.items():
        stops = all_splits - set(starts)
        seen: set[int] = set()
        todo = list(starts)
        while todo:
            i = todo.pop()
            if i in seen:
                continue
            seen.add(i)
            todo.extend(j for j in succs[i] if j not in seen and j not in stops)
        for i in seen:
            owner_sets[i].add(g)
    bases = [p.base for p in ins]
    content = {g: {bases[i] for i in range(n) if g in owner_sets[i]} for g in groups}
    does = {g: _does(content[g], rules) for g in groups}
    first = {g: groups[g][0] for g in groups}
    names: dict[tuple, str] = {}
    order = sorted(groups, key=lambda g: first[g])
    for kind in dict.fromkeys(does[g] for g in order):
        gs = [g for g in order if does[g] == kind]
        base = _NAME[kind]
        for j, g in enumerate(gs):
            names[g] = base if len(gs) == 1 and base != "role" else f"{base}{j}"
    owner = [names[next(iter(o))] if len(o) == 1 else ("shared" if o else "common") for o in owner_sets]
    roles = {names[g]: SplitRole(names[g], does[g], (), g[1], min(groups[g])) for g in groups}
    return RoleSplit(owner, roles, "setmaxnreg")


def split_roles(ins: Sequence[Instruction], cfg: CFG, res: Resolver, block_dim: tuple[int, int, int] | None,
                addr_index: dict[int, int], rules: dict) -> RoleSplit:
    """The roles of a kernel (see the module docstring). ``block_dim`` None (a report without launch
    statistics) skips the warp analysis."""
    if block_dim is not None:
        got = _by_warps(ins, cfg, res, block_dim, addr_index, rules)
        if got is not None:
            return got
    got = _by_setmaxnreg(ins, cfg, rules)
    if got is not None:
        return got
    return RoleSplit(["cta"] * len(ins), {"cta": SplitRole("cta", "every warp")}, "none")
