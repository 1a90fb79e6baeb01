"""Who waits on whom between warp roles: the static barrier wait graph of one launch.

A pure function of a launch's per-PC SASS frame (``address``, ``offset``, ``sass``, ``base``,
``inst_executed``, ``samples``, ``stall_*``) -> :class:`RoleGraph`. The opcodes it looks for are data
(``profiler/data/roles.toml``).

1. **Roles.** A warp-specialised kernel splits its warps with ``setmaxnreg`` (SASS
   ``USETMAXREG.TRY_ALLOC`` / ``.DEALLOC``): the code reached (through the control-flow graph of
   :mod:`profiler.sass`) from one register count is one role's code. A role whose code issues
   tensor-core MMAs is a ``consumer``, one that only issues copies (TMA, cp.async) a ``producer``.
   Code reached from no split point (the prologue, padding) is ``common``; code reached from several
   is ``shared``. A kernel with no split point has one role, ``cta``. Roles found this way are
   ``source = "inferred"``.
2. **Wait sites.** An mbarrier wait is a ``SYNCS.PHASECHK…TRYWAIT`` together with the branches on its
   predicate right after it and the out-of-line retry loop (``NANOSLEEP`` + ``PHASECHK``) they jump
   to: ncu gives such a loop no stall reason of its own (its samples land as selected / branch /
   long-scoreboard on any of those instructions), so every sample on any of them counts for the wait.
   A named-barrier wait is a ``BAR.SYNC``/``BAR.RED`` with its id; a wgmma wait a
   ``WARPGROUP.DEPBAR``; an asynchronous-copy group wait a ``DEPBAR``.
3. **Releasers.** An mbarrier is named by its shared-memory address: the address operand's registers
   are resolved to their definitions (:mod:`profiler.sass.values`: ``[UR12]`` with
   ``UR12 = ULEA(SR_CgaCtaId, UMOV 0x400 + 0x40, 0x18)`` -> ``0x440``), only where one definition
   reaches (or all reaching ones agree); a stage index held in a register (``[R11+UR11]``) stays a
   runtime term, so the site names a *ring* by its base. Rings take their extent from the
   ``mbarrier.init`` s (``SYNCS.EXCH.64``) the kernel performs: consecutive 8-byte barriers from a
   ring's base with the same init word, up to the next ring's base (``mbarrier@0x400×2``); a single
   barrier is ``mbarrier@0x440``. The same barrier's ``SYNCS.ARRIVE`` in a role releases it — an
   arrive that carries a transaction count (``SYNCS.ARRIVE.TRANS64 RZ, [UR31+0x10], R4``:
   ``expect_tx``) hands the release to the TMA engine, which completes it when the bytes of that
   role's ``UTMALDG`` land (its barrier register resolved the same way). A wait whose address does not
   resolve is unresolved, with the reason. Only in a kernel where *no* mbarrier address resolves do
   sites fall back to their operand's displacement (``[R20+URZ+0x10]`` -> ``mbarrier+0x10``), matched
   across base registers: those edges are ``inferred``, as are edges that rest on a guarded
   definition paired with a differently guarded use (:attr:`profiler.sass.values.Value.assumed`). A named barrier
   is released by the roles that ``BAR.ARV`` (or ``BAR.SYNC``) on the same id; a wgmma group by the
   tensor core; a ``DEPBAR`` by the role's cp.async or TMA-store copies.
4. **Edges** ``waiter —[barrier]→ releaser`` weighted by all samples of their wait sites, as a share
   of the launch's samples. A wait whose releaser is not in the SASS is ``unresolved``, with the
   reason; nothing is guessed.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from functools import lru_cache

import numpy as np

from profiler import metrics as M
from profiler.analyze._common import shared_cfg
from profiler.sass import build_cfg, parse
from profiler.sass.values import Resolver, Value

__all__ = ["Edge", "Role", "RoleGraph", "WaitSite", "mbarrier_labels", "role_edges_json", "role_graph"]

_HEX = re.compile(r"^-?0x[0-9a-fA-F]+$|^-?\d+$")


def _tuples(d):
    if isinstance(d, dict):
        return {k: _tuples(v) for k, v in d.items()}
    return tuple(d) if isinstance(d, list) else d


@lru_cache(maxsize=1)
def _rules() -> dict:
    """roles.toml with its lists as tuples (hashable: :func:`_match` is cached on them)."""
    return _tuples(M._load("roles.toml"))


@lru_cache(maxsize=16384)
def _match(opcode: str, prefixes: tuple) -> bool:
    return any(opcode == p or opcode.startswith(p + ".") for p in prefixes)


@dataclass(frozen=True)
class Role:
    """A role: ``name``; ``source`` (``inferred`` from setmaxnreg, or ``declared``); ``pcs`` how
    many instruction slots its code holds and ``ranges`` their offsets as [first, last] pairs
    (contiguous runs); ``setmaxnreg`` the register count it asks for (None without one);
    ``inst_executed`` and ``samples`` over its code."""

    name: str
    source: str
    pcs: int
    ranges: list
    setmaxnreg: int | None
    inst_executed: int
    samples: int


@dataclass(frozen=True)
class WaitSite:
    """One place where a role waits: ``kind`` (mbarrier, named_barrier, wgmma_group, scoreboard),
    ``barrier`` (its label), ``role``, ``pcs`` (offsets of every instruction counted for it) and
    ``samples``."""

    kind: str
    barrier: str
    role: str
    pcs: tuple
    samples: int


@dataclass(frozen=True)
class Edge:
    """``waiter`` —[``barrier``]→ ``releaser``: ``samples`` of the waiter's wait sites on that
    barrier, ``share`` of the launch's samples; ``inferred`` when the pairing rests on an inference
    (mbarrier offsets across base registers); ``evidence`` what paired them; ``pcs`` the wait sites."""

    waiter: str
    barrier: str
    releaser: str
    samples: int
    share: float
    inferred: bool
    evidence: str
    pcs: list


@dataclass
class RoleGraph:
    """The wait graph of one launch: ``roles``, ``edges`` (heaviest first), ``unresolved``
    {samples, reasons {reason: samples}}, ``total_samples`` of the launch."""

    kernel: str
    launch_index: int
    roles: list[Role]
    edges: list[Edge]
    unresolved: dict
    total_samples: int
    sites: list[WaitSite] = field(default_factory=list)

    def to_dict(self) -> dict:
        """The JSON contract of ``whowaits roles --format json`` (one object per launch)."""
        return {
            "kernel": self.kernel,
            "launch_index": self.launch_index,
            "total_samples": self.total_samples,
            "roles": [asdict(r) for r in self.roles],
            "edges": [asdict(e) for e in self.edges],
            "unresolved": self.unresolved,
        }

    def heaviest(self) -> Edge | None:
        """The edge with the most samples (None without edges)."""
        return self.edges[0] if self.edges else None


# --- operands ------------------------------------------------------------------------------------


def _mem_operand(text: str) -> str | None:
    m = re.search(r"\[([^\]]*)\]", text)
    return m.group(1) if m else None


def _base_offset(inner: str) -> tuple[str | None, int]:
    """``R20+URZ+0x10`` -> ("R20", 16); ``UR17`` -> ("UR17", 0)."""
    base, off = None, 0
    for tok in inner.replace("-", "+-").split("+"):
        tok = tok.strip()
        if not tok or tok in ("RZ", "URZ"):
            continue
        if _HEX.match(tok):
            off += int(tok, 0)
        elif base is None:
            base = tok.split(".")[0]
    return base, off


_RUNTIME = "runtime"


def _bar_key(bid) -> int | str:
    """A named barrier's id, or ``"runtime"`` when the SASS names a register (``BAR.SYNC R2``)."""
    return _RUNTIME if isinstance(bid, str) else int(bid)


def _bar_label(bid, count: int | None = None) -> str:
    """``bar N``; ``bar (runtime id)`` for a register id; ``bar (runtime id, C threads)`` for a register-id
    ``BAR.SYNC`` whose thread count C no register-id ``BAR.ARV`` of the kernel has (so no arrive can release
    it: its C threads all sync, e.g. one warpgroup's own barrier around a TMA store, v17 on)."""
    if not isinstance(bid, str):
        return f"bar {bid}"
    return "bar (runtime id)" if count is None else f"bar (runtime id, {count} threads)"


_OWN_COUNT = re.compile(r"^bar \(runtime id, (\d+) threads\)$")


def _label(offset: int) -> str:
    return f"mbarrier+{offset:#x}"


# --- roles ---------------------------------------------------------------------------------------


def _reach(cfg, starts: list[int], stops: set[int]) -> set[int]:
    seen: set[int] = set()
    todo = list(starts)
    succs = cfg.succs
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        for j in succs[i]:
            if j not in seen and j not in stops:
                todo.append(j)
    return seen


def _ranges(indices, offsets) -> list:
    out: list = []
    for i in sorted(indices):
        if out and out[-1][2] == i - 1:
            out[-1][1], out[-1][2] = int(offsets[i]), i
        else:
            out.append([int(offsets[i]), int(offsets[i]), i])
    return [[a, b] for a, b, _ in out]


def _assign_roles(ins, cfg, bases) -> tuple[list[str], dict[str, int | None]]:
    rules = _rules()
    n = len(ins)
    groups: dict[tuple[str, int | None], list[int]] = {}
    for i, p in enumerate(ins):
        if _match(p.opcode, rules["split"]["opcodes"]):
            mods = set(p.modifiers)
            kind = ("grow" if mods & set(rules["split"]["grow"])
                    else "shrink" if mods & set(rules["split"]["shrink"]) else "set")
            imm = [int(o.text, 0) for o in (*p.dsts, *p.srcs) if o.kind == "imm" and _HEX.match(o.text)]
            starts = groups.setdefault((kind, imm[-1] if imm else None), [])
            starts.append(i)
            if i and ins[i - 1].base == "WARPSYNC":  # setmaxnreg's own warp-convergence prefix
                starts.append(i - 1)
    if not groups:
        return ["cta"] * n, {"cta": None}
    all_splits = {i for v in groups.values() for i in v}
    owner: list[set] = [set() for _ in range(n)]
    for g, starts in groups.items():
        for i in _reach(cfg, starts, all_splits - set(starts)):
            owner[i].add(g)
    # name each group by what its code does
    names: dict[tuple, str] = {}
    mma, load = rules["names"]["mma"], rules["names"]["load"]
    content = {g: {bases[i] for i in range(n) if g in owner[i]} for g in groups}
    consumers = [g for g in groups if content[g] & set(mma)]
    producers = [g for g in groups if g not in consumers and content[g] & set(load)]
    for k, g in enumerate(sorted(consumers, key=lambda g: groups[g][0])):
        names[g] = "consumer" if len(consumers) == 1 else f"consumer{k}"
    for k, g in enumerate(sorted(producers, key=lambda g: groups[g][0])):
        names[g] = "producer" if len(producers) == 1 else f"producer{k}"
    for k, g in enumerate(sorted((g for g in groups if g not in names), key=lambda g: groups[g][0])):
        names[g] = f"role{k}"
    out = []
    for i in range(n):
        o = owner[i]
        out.append(names[next(iter(o))] if len(o) == 1 else ("shared" if o else "common"))
    regs = {names[g]: g[1] for g in groups}
    return out, regs


# --- mbarrier identity ----------------------------------------------------------------------------

_MBAR_SIZE = 8


@dataclass
class _Mbar:
    """A resolved mbarrier reference: ``label`` (or None, then ``why``), ``assumed`` notes."""

    label: str | None
    why: str = ""
    assumed: tuple = ()


class _MbarIndex:
    """Every mbarrier address of a kernel (inits, waits, arrives, TMA loads' barrier registers)
    resolved through :class:`~profiler.sass.values.Resolver`, grouped into rings, labelled."""

    def __init__(self, ins, cfg, offsets) -> None:
        rules = _rules()
        self.ins = ins
        self.offsets = [int(o) for o in offsets]
        self.R = Resolver(ins, cfg, offsets)
        self.vals: dict[int, tuple[Value, bool]] = {}
        inits: dict[int, int | None] = {}
        for i, p in enumerate(ins):
            if p.base == "SYNCS" or _match(p.opcode, rules["release"]["tma_load"]):
                v = self._resolve(i)
                if v is None:
                    continue
                self.vals[i] = v
                if _match(p.opcode, rules["release"]["mbarrier_init"]) and v[1] and v[0].exact:
                    data = [o.text for o in p.srcs if o.kind == "reg"]
                    word = self.R.operand(i, data[-1]) if data else None
                    inits[v[0].const] = word.const if word is not None and word.exact else None
        self.inits = inits
        self.anchored = any(a for _, a in self.vals.values())
        bases = sorted({v.const for v, a in self.vals.values() if a and not v.exact})
        self.rings: dict[int, list[int]] = {}
        for b in bases:
            members = [b]
            a = b + _MBAR_SIZE
            while b in inits and a in inits and inits[a] == inits[b] and a not in bases:
                members.append(a)
                a += _MBAR_SIZE
            self.rings[b] = members
        self.ring_of = {a: b for b, ms in self.rings.items() for a in ms}

    def _resolve(self, i: int) -> tuple[Value, bool] | None:
        p = self.ins[i]
        inner = _mem_operand(p.text)
        if inner is None:
            return None
        if p.base == "SYNCS":
            return self.R.address(i, inner)
        m = re.match(r"^UR(\d+)$", inner.strip())  # UTMALDG [URn]: URn+1 holds the mbarrier address
        if not m:
            return None
        v = self.R.value(i, f"UR{int(m.group(1)) + 1}")
        return v, v.const != 0

    def _ring_label(self, b: int) -> str:
        n = len(self.rings.get(b, [b]))
        return f"mbarrier@{b:#x}×{n}" if b in self.inits else f"mbarrier@{b:#x}[i]"

    def at(self, i: int) -> _Mbar:
        """The barrier instruction ``i`` names."""
        got = self.vals.get(i)
        pc = self.offsets[i]
        if got is None:
            return _Mbar(None, f"no address operand at {pc:#x}")
        v, anchored = got
        if not anchored:
            why = "; ".join(v.runtime) or "no register defines a base address"
            return _Mbar(None, f"address at {pc:#x} does not resolve to a base ({why})")
        if v.exact:
            a = v.const
            if self.inits and a not in self.inits:
                return _Mbar(None, f"address {a:#x} at {pc:#x} is no mbarrier the kernel initialises")
            b = self.ring_of.get(a)
            return _Mbar(self._ring_label(b) if b is not None else f"mbarrier@{a:#x}", "", v.assumed)
        b = v.const
        if self.inits and b not in self.inits:
            return _Mbar(None, f"ring base {b:#x} at {pc:#x} is no mbarrier the kernel initialises")
        return _Mbar(self._ring_label(b), "", v.assumed)


# --- wait sites ----------------------------------------------------------------------------------


def _tma_barrier_offsets(ins, i: int) -> set[int]:
    """The mbarrier offsets a ``UTMALDG [URn]`` at ``i`` signals: the odd register of the pair
    (URn+1) holds the mbarrier address; follow ``UIADD3 URx, URy, imm`` / ``UMOV URx, URy`` back
    through straight-line code (at most 48 instructions) to a base + constant."""
    inner = _mem_operand(ins[i].text)
    if inner is None:
        return set()
    m = re.match(r"^UR(\d+)$", inner.strip())
    if not m:
        return set()
    reg, off = f"UR{int(m.group(1)) + 1}", 0
    for j in range(i - 1, max(-1, i - 48), -1):
        p = ins[j]
        if p.is_branch or p.base in ("EXIT", "BRA"):
            break
        if reg not in p.writes:
            continue
        ops = [o.text for o in p.srcs]
        if p.base == "UMOV" and ops and re.match(r"^UR\d+$", ops[0]):
            reg = ops[0]
            continue
        if p.base == "UIADD3" and len(ops) >= 2:
            consts = [int(o, 0) for o in ops if _HEX.match(o)]
            regs_ = [o for o in ops if re.match(r"^UR\d+$", o)]
            if len(regs_) == 1 and consts:
                return {off + sum(consts)}
        return set()
    return set()


def _mbar_key(ins, i: int, mb: _MbarIndex | None, notes: dict) -> str | None:
    """The label of the mbarrier instruction ``i`` names: resolved through ``mb``, or by displacement
    when ``mb`` is None (fallback); None when unresolved (reason in ``notes[label]``)."""
    if mb is None:
        inner = _mem_operand(ins[i].text)
        return None if inner is None else _label(_base_offset(inner)[1])
    m = mb.at(i)
    if m.label is None:
        lab = f"mbarrier (unresolved at {mb.offsets[i]:#x})"
        notes[lab] = m.why
        return lab
    if m.assumed:
        notes.setdefault(("assumed", m.label), set()).update(m.assumed)
    return m.label


def _retry_loops(ins, addr_index: dict, window: int, w) -> set[int]:
    """Indices of the out-of-line retry loops that an inline try-wait jumps to."""
    n = len(ins)
    out: set[int] = set()
    for i, p in enumerate(ins):
        if not (_match(p.opcode, w["mbarrier"]) and "TRYWAIT" in p.modifiers) or i in out:
            continue
        pred = p.dsts[0].text.lstrip("!") if p.dsts else None
        for j in range(i + 1, min(n, i + 1 + window)):
            q = ins[j]
            if pred and pred in q.writes:
                break
            if q.is_branch and q.guard == pred:
                tgt = addr_index.get(q.target) if q.target is not None else None
                if tgt is not None and tgt > j and q.guard_negated:
                    for k in range(tgt, min(n, tgt + 16)):
                        out.add(k)
                        if ins[k].is_branch and ins[k].guard is None:
                            break
                if not q.guard_negated:
                    continue
                break
    return out


def _sites(ins, addr_index: dict, roles, offsets, samples, mb: _MbarIndex | None = None,
           notes: dict | None = None) -> list[WaitSite]:
    rules = _rules()
    w = rules["wait"]
    window = int(w["branch_window"])
    n = len(ins)
    arv_counts = {b.count for p in ins if _match(p.opcode, rules["release"]["named_barrier_arrive"])
                  for b in p.barriers if b.kind == "cta" and isinstance(b.id, str)}  # register-id arrives' counts
    members: dict[tuple, list[int]] = {}
    notes = {} if notes is None else notes
    loops = _retry_loops(ins, addr_index, window, w)

    def add(key, idx):
        members.setdefault(key, []).append(idx)

    for i, p in enumerate(ins):
        op = p.opcode
        if _match(op, w["mbarrier"]) and "TRYWAIT" in p.modifiers:
            if i in loops:
                continue  # an out-of-line retry loop: counted with the try-wait that jumps to it
            label = _mbar_key(ins, i, mb, notes)
            if label is None:
                continue
            key = ("mbarrier", label, roles[i])
            add(key, i)
            pred = p.dsts[0].text.lstrip("!") if p.dsts else None
            for j in range(i + 1, min(n, i + 1 + window)):
                q = ins[j]
                if pred and pred in q.writes:
                    break
                if q.is_branch and q.guard == pred:
                    add(key, j)
                    tgt = addr_index.get(q.target) if q.target is not None else None
                    if tgt is not None and tgt > j and q.guard_negated:
                        # out-of-line retry loop: up to its unconditional branch back
                        for k in range(tgt, min(n, tgt + 16)):
                            add(key, k)
                            if ins[k].is_branch and ins[k].guard is None:
                                break
                    if not q.guard_negated:
                        continue
                    break
        elif _match(op, w["named_barrier"]):
            bid = next((b for b in p.barriers if b.kind == "cta"), None)
            if bid is not None:
                own = isinstance(bid.id, str) and bid.count is not None and bid.count not in arv_counts
                add(("named_barrier", _bar_label(bid.id, bid.count if own else None), roles[i]), i)
        elif _match(op, w["wgmma_group"]):
            add(("wgmma_group", "wgmma group", roles[i]), i)
        elif p.base == "DEPBAR" and _match(op, w["scoreboard"]):
            sb = next((b for b in p.barriers if b.kind == "sb"), None)
            add(("scoreboard", f"SB{sb.id}" if sb else "SB?", roles[i]), i)
    out = []
    for (kind, label, role), idx in members.items():
        idx = sorted(set(idx))
        out.append(WaitSite(kind, label, role, tuple(int(offsets[k]) for k in idx),
                            int(samples[idx].sum())))
    return out


# --- releasers -----------------------------------------------------------------------------------


def _releasers(ins, roles, bases, mb: _MbarIndex | None = None, notes: dict | None = None) -> dict:
    rules = _rules()
    notes = {} if notes is None else notes
    r = rules["release"]
    names = rules["names"]
    arrives: dict[int, dict[str, set]] = {}   # offset -> role -> {"arrive", "expect_tx"}
    tma: dict[int, set] = {}                 # offset -> roles whose UTMALDG signals it
    bar_arv: dict[int, set] = {}             # named barrier id -> roles arriving
    bar_sync: dict[int, set] = {}
    role_ops: dict[str, set] = {}
    for i, p in enumerate(ins):
        role_ops.setdefault(roles[i], set()).add(bases[i])
        if _match(p.opcode, r["mbarrier_arrive"]):
            off = _mbar_key(ins, i, mb, notes)
            if off is None:
                continue
            regs_ = [o for o in p.srcs if o.kind == "reg"]
            tx = bool(regs_) and regs_[-1].text not in ("RZ", "URZ")
            arrives.setdefault(off, {}).setdefault(roles[i], set()).add("expect_tx" if tx else "arrive")
        elif _match(p.opcode, r["tma_load"]):
            if mb is None:
                labels = {_label(o) for o in _tma_barrier_offsets(ins, i)}
            else:
                labels = {_mbar_key(ins, i, mb, notes)}
            for off in labels:
                tma.setdefault(off, set()).add(roles[i])
        elif _match(p.opcode, r["named_barrier_arrive"]):
            b = next((b for b in p.barriers if b.kind == "cta"), None)
            if b is not None:
                bar_arv.setdefault(_bar_key(b.id), set()).add(roles[i])
        elif _match(p.opcode, rules["wait"]["named_barrier"]):
            b = next((b for b in p.barriers if b.kind == "cta"), None)
            if b is not None:
                bar_sync.setdefault(_bar_key(b.id), set()).add(roles[i])
    return {"arrives": arrives, "tma": tma, "bar_arv": bar_arv, "bar_sync": bar_sync,
            "role_ops": role_ops, "names": names, "rules": r, "notes": notes, "resolved": mb is not None}


def _pair(site: WaitSite, rel: dict) -> tuple[str | None, bool, str]:
    """(releaser, inferred, evidence) of a wait site; releaser None when unresolved (evidence then
    says why)."""
    names = rel["names"]
    if site.kind == "mbarrier":
        off = site.barrier
        notes = rel["notes"]
        if off in notes:
            return None, False, notes[off]
        at = off if rel["resolved"] else f"+{int(off.split('+')[1], 16):#x}"
        by_role = rel["arrives"].get(off, {})
        tma_roles = rel["tma"].get(off, set())
        tx_roles = sorted(ro for ro, kinds in by_role.items() if "expect_tx" in kinds)
        plain = sorted(ro for ro, kinds in by_role.items() if "arrive" in kinds)
        parts = []
        ev = []
        issuers = sorted(set(tx_roles) | tma_roles)
        if issuers:
            parts.append(f"{names['engine_tma']} ← {'+'.join(issuers)}")
            if tx_roles:
                ev.append(f"expect_tx arrive at {at} in {'+'.join(tx_roles)}")
            if tma_roles:
                ev.append(f"UTMALDG signals {at} in {'+'.join(sorted(tma_roles))}")
        for ro in plain:
            if ro not in issuers:
                parts.append(ro)
                ev.append(f"SYNCS.ARRIVE at {at} in {ro}")
        if not parts:
            return None, not rel["resolved"], f"no SYNCS.ARRIVE or TMA load on {site.barrier} in the SASS"
        if not rel["resolved"]:
            return " + ".join(parts), True, "; ".join(ev) + " (matched by displacement: no address resolved)"
        assumed = sorted(notes.get(("assumed", off), ()))
        if assumed:
            return " + ".join(parts), True, "; ".join(ev) + "; assumes " + "; ".join(assumed)
        return " + ".join(parts), False, "; ".join(ev) + " (addresses resolved)"
    own = _OWN_COUNT.match(site.barrier) if site.kind == "named_barrier" else None
    if own:
        return (f"{site.role} (its other warps)", True,
                f"BAR.SYNC on a register id with {own.group(1)} threads, a count no BAR.ARV of the kernel has: "
                f"all {own.group(1)} sync (ids are runtime values: inferred)")
    if site.kind == "named_barrier" and site.barrier == _bar_label("R"):
        arv = sorted(rel["bar_arv"].get(_RUNTIME, set()))
        if not arv:
            return None, False, "BAR.SYNC on a register id, and no BAR.ARV on a register id to pair it with"
        label = [f"{ro} (other warpgroup)" if ro == site.role else ro for ro in arv]
        return (" + ".join(label), True,
                f"BAR.SYNC on a register id paired with BAR.ARV on a register id in {'+'.join(arv)} "
                "(ids are runtime values: the pairing is inferred, e.g. pingpong turns)")
    if site.kind == "named_barrier":
        bid = int(site.barrier.split()[1], 0)
        arv = rel["bar_arv"].get(bid, set())
        syncs = rel["bar_sync"].get(bid, set()) - {site.role}
        rel_roles = sorted(arv | syncs)
        if not rel_roles:
            if bid == 0:
                return "CTA (all warps)", False, "BAR.SYNC 0: every warp of the CTA arrives"
            if site.role in rel["bar_sync"].get(bid, set()):
                return (f"{site.role} (its other warps)", False,
                        f"BAR.SYNC {bid} only in {site.role}: a barrier among that role's warps")
            return None, False, f"no BAR.ARV / BAR.SYNC on barrier {bid} by another role or warpgroup"
        label = [f"{ro} (other warpgroup)" if ro == site.role else ro for ro in rel_roles]
        return " + ".join(label), False, f"BAR.ARV/BAR.SYNC {bid} in {'+'.join(rel_roles)}"
    if site.kind == "wgmma_group":
        return names["engine_tensor"], False, "WARPGROUP.DEPBAR waits for the role's own HGMMA group"
    if site.kind == "scoreboard":
        ops = rel["role_ops"].get(site.role, set())
        if "LDGSTS" in ops:
            return names["engine_cp_async"], False, "DEPBAR waits for the role's cp.async groups"
        if ops & {"UTMASTG", "UBLKCP", "UTMAREDG"}:
            return f"{names['engine_tma']} (store)", False, "DEPBAR waits for the role's TMA stores"
        return None, False, "DEPBAR with no asynchronous copy in the role"
    return None, False, f"unknown wait kind {site.kind}"


# --- the graph -----------------------------------------------------------------------------------


def role_graph(launch) -> RoleGraph:
    """The role wait graph of one :class:`profiler.report.Launch` (see the module docstring)."""
    sf = launch.sass
    texts = [str(t) for t in sf["sass"].tolist()]
    ins = [parse(t) for t in texts]
    bases = [p.base for p in ins]
    addresses = [int(a) for a in sf["address"].tolist()]
    offsets = sf["offset"].to_numpy() if "offset" in sf.columns else np.asarray(addresses) - addresses[0]
    samples = (sf["samples"].fillna(0).to_numpy(dtype=np.int64) if "samples" in sf.columns
               else np.zeros(len(sf), dtype=np.int64))
    executed = (sf["inst_executed"].fillna(0).to_numpy(dtype=np.int64) if "inst_executed" in sf.columns
                else np.zeros(len(sf), dtype=np.int64))
    cfg = shared_cfg(launch, addresses, texts, bases)  # built once per launch (producers walk it too)
    roles, regs = _assign_roles(ins, cfg, bases)
    role_list = []
    order = ["common", *[r for r in dict.fromkeys(roles) if r not in ("common", "shared")], "shared"]
    arr = np.asarray(roles, dtype=object)
    for name in order:
        idx = np.flatnonzero(arr == name)
        if not len(idx):
            continue
        role_list.append(Role(name, "inferred", int(len(idx)), _ranges(idx, offsets), regs.get(name),
                              int(executed[idx].sum()), int(samples[idx].sum())))
    total = int(samples.sum())
    mb = _MbarIndex(ins, cfg, offsets)
    if not mb.anchored:
        mb = None  # no mbarrier address resolves anywhere: fall back to displacements (inferred)
    notes: dict = {}
    sites = _sites(ins, {a: i for i, a in enumerate(addresses)}, roles, offsets, samples, mb, notes)
    rel = _releasers(ins, roles, bases, mb, notes)
    grouped: dict[tuple, dict] = {}
    unresolved: dict[str, int] = {}
    for s in sites:
        releaser, inferred, evidence = _pair(s, rel)
        if releaser is None:
            unresolved[f"{s.role} {s.barrier}: {evidence}"] = (
                unresolved.get(f"{s.role} {s.barrier}: {evidence}", 0) + s.samples)
            continue
        g = grouped.setdefault((s.role, s.barrier, releaser),
                               {"samples": 0, "inferred": inferred, "evidence": evidence, "pcs": []})
        g["samples"] += s.samples
        g["pcs"] += list(s.pcs)
    edges = [Edge(w, b, r, g["samples"], (g["samples"] / total) if total else 0.0, g["inferred"],
                  g["evidence"], sorted(g["pcs"]))
             for (w, b, r), g in grouped.items()]
    edges.sort(key=lambda e: (-e.samples, e.waiter, e.barrier))
    return RoleGraph(launch.kernel, launch.index, role_list, edges,
                     {"samples": int(sum(unresolved.values())), "reasons": unresolved}, total, sites)


def mbarrier_labels(launch) -> dict[int, str]:
    """Shared address -> the graph's label of every mbarrier the launch's SASS names (each init'd
    address, each ring member and ring base): what a measured trace (:mod:`profiler.analyze.event_trace`),
    which records addresses, needs to name barriers as the static graph does. {} where no address
    resolves."""
    sf = launch.sass
    texts = [str(t) for t in sf["sass"].tolist()]
    ins = [parse(t) for t in texts]
    addresses = [int(a) for a in sf["address"].tolist()]
    offsets = sf["offset"].to_numpy() if "offset" in sf.columns else np.asarray(addresses) - addresses[0]
    mb = _MbarIndex(ins, build_cfg(addresses, texts, [p.base for p in ins]), offsets)
    out: dict[int, str] = {}
    for b, members in mb.rings.items():
        for a in members:
            out[a] = mb._ring_label(b)
    for a in mb.inits:
        out.setdefault(a, f"mbarrier@{a:#x}")
    for v, anchored in mb.vals.values():
        if anchored and v.exact:
            out.setdefault(v.const, f"mbarrier@{v.const:#x}")
    return out


def role_edges_json(launch) -> list[dict]:
    """The summary's ``role_edges``: every edge of :func:`role_graph` with samples, heaviest first,
    as {waiter, barrier, releaser, samples, share, inferred}; [] without per-PC samples."""
    sf = launch.sass
    if not len(sf) or "samples" not in sf.columns:
        return []
    g = role_graph(launch)
    return [{"waiter": e.waiter, "barrier": e.barrier, "releaser": e.releaser, "samples": int(e.samples),
             "share": float(e.share), "inferred": bool(e.inferred)} for e in g.edges if e.samples]
