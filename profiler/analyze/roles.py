"""Who waits on whom between warp roles: the static barrier wait graph of one launch.

A pure function of a launch's per-PC SASS frame (``address``, ``offset``, ``sass``, ``base``,
``inst_executed``, ``samples``, ``stall_*``) -> :class:`RoleGraph`. The opcodes it looks for are data
(``profiler/data/roles.toml``).

1. **Roles** (:mod:`profiler.analyze.role_split`): thread-index branches decided warp by warp, warps
   grouped by the code they reach and named by what it does (``consumer``, ``producer``,
   ``scheduler``, ``epilogue``, ``exit``), with their warps, setmaxnreg and a check of the warp count
   against ncu's executed count; the code reached from each ``setmaxnreg`` count as the fallback; one
   role ``cta`` without either. Code every role runs is ``common``, code several run ``shared``.
   Roles found this way are ``source = "inferred"``.
2. **Wait sites** (:mod:`profiler.analyze.wait_sites`): a try-wait with every reader of its predicate
   and its retry loop, a named barrier with the ``barrier`` samples of the next instruction, wgmma
   group and operand (``warpgroup_arrive``) waits, asynchronous-copy group waits; each sample given
   to one site.
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
   resolve is unresolved, with the reason. A ring pointer bumped in a loop is named by its base,
   stride and stage count (``mbarrier@0x2e418+0x10×8``), pointers into one ring by one name; the CTA
   rank in a cluster address is window bits (a peer CTA's barrier is the same barrier). Only in a kernel where *no* mbarrier address resolves do
   sites fall back to their operand's displacement (``[R20+URZ+0x10]`` -> ``mbarrier+0x10``), matched
   across base registers: those edges are ``inferred``, as are edges that rest on a guarded
   definition paired with a differently guarded use (:attr:`profiler.sass.values.Value.assumed`). A named barrier
   is released by the roles that ``BAR.ARV`` (or ``BAR.SYNC``) on the same id; a wgmma group by the
   tensor core; a ``DEPBAR`` by the role's cp.async or TMA-store copies.
4. **Edges** ``waiter —[barrier]→ releaser`` weighted by the samples of their wait sites, as a share
   of the launch's samples. A wait whose releaser is not in the SASS is ``unresolved``, with the
   reason; nothing is guessed.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from functools import lru_cache

import numpy as np

from profiler import metrics as M
from profiler.analyze import buildcache
from profiler.analyze._common import OpcodeMatch, shared_cfg
from profiler.analyze.buildcache import bits, unbits
from profiler.analyze.role_split import split_roles
from profiler.analyze.wait_sites import WaitSite, claim_sites, site_plan
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
    """A role: ``name``; ``source`` (``inferred`` from thread-index branches or setmaxnreg, or
    ``declared``); ``pcs`` how many instruction slots its code holds and ``ranges`` their offsets as
    [first, last] pairs (contiguous runs); ``setmaxnreg`` the register count it asks for (None
    without one); ``inst_executed`` and ``samples`` over its code; ``does`` what it does in words
    (``MMA consumer``, ``TMA producer``, ``tile scheduler``, ``epilogue``, ``exit``); ``warps`` the
    warps of a CTA that play it (empty when unknown); ``entry`` the offset of its first instruction
    outside any loop, ``entry_executed`` ncu's executed count there and ``entry_expected`` what the
    warp split predicts (its warps that reach the entry × the launch's CTAs)."""

    name: str
    source: str
    pcs: int
    ranges: list
    setmaxnreg: int | None
    inst_executed: int
    samples: int
    does: str = ""
    warps: list = field(default_factory=list)
    entry: int | None = None
    entry_executed: int | None = None
    entry_expected: int | None = None


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
    partial: list = field(default_factory=list)


@dataclass
class RoleGraph:
    """The wait graph of one launch: ``roles``, ``edges`` (heaviest first), ``unresolved``
    {samples, reasons {reason: samples}}, ``total_samples`` of the launch, ``missing`` [{field, section}]
    (the section whose per-PC stall samples the edges and shares need, when the report has none)."""

    kernel: str
    launch_index: int
    roles: list[Role]
    edges: list[Edge]
    unresolved: dict
    total_samples: int
    sites: list[WaitSite] = field(default_factory=list)
    missing: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        """The JSON contract of ``whowaits roles --format json`` (one object per launch)."""
        return {
            "kernel": self.kernel,
            "launch_index": self.launch_index,
            "total_samples": self.total_samples,
            "roles": [asdict(r) for r in self.roles],
            "edges": [asdict(e) for e in self.edges],
            "unresolved": self.unresolved,
            "missing": self.missing,
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


def _ranges(indices, offsets) -> list:
    out: list = []
    for i in sorted(indices):
        if out and out[-1][2] == i - 1:
            out[-1][1], out[-1][2] = int(offsets[i]), i
        else:
            out.append([int(offsets[i]), int(offsets[i]), i])
    return [[a, b] for a, b, _ in out]


def _launch_int(launch, name: str) -> int:
    try:
        v = launch.value(name) if launch.has(name) else None
    except (AttributeError, KeyError):
        v = None
    try:
        return 0 if v is None or math.isnan(float(v)) else int(v)
    except (TypeError, ValueError):
        return 0


def _block_dim(launch) -> tuple[int, int, int] | None:
    """The CTA's (x, y, z) thread counts from the launch statistics; None without them."""
    dims = tuple(_launch_int(launch, f"launch__block_dim_{c}") for c in "xyz")
    if not dims[0]:
        return None
    return (dims[0], dims[1] or 1, dims[2] or 1)


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
        self.indexed_inits: list[int] = []
        is_tma, is_init = OpcodeMatch(rules["release"]["tma_load"]), OpcodeMatch(rules["release"]["mbarrier_init"])
        for i, p in enumerate(ins):
            if p.base == "SYNCS" or (p.barriers and _is_commit(p)) or is_tma[p.opcode]:
                v = self._resolve(i)
                if v is None:
                    continue
                self.vals[i] = v
                if is_init[p.opcode] and v[1] and not v[0].exact:
                    self.indexed_inits.append(v[0].const)  # a barrier per warp or lane: base + index
                if is_init[p.opcode] and v[1] and v[0].exact:
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
        self.pointer_rings = _pointer_rings([v for v, a in self.vals.values() if a and v.ring])

    def _resolve(self, i: int) -> tuple[Value, bool] | None:
        p = self.ins[i]
        inner = _mem_operand(p.text)
        if inner is None:
            return None
        if p.base == "SYNCS" or _is_commit(p):
            return self.R.address(i, inner)
        m = re.match(r"^UR(\d+)$", inner.strip())  # UTMALDG [URn]: URn+1 holds the mbarrier address
        if not m:
            return None
        v = self.R.value(i, f"UR{int(m.group(1)) + 1}")
        return v, v.const != 0

    def _ring_label(self, b: int) -> str:
        n = len(self.rings.get(b, [b]))
        return f"mbarrier@{b:#x}×{n}" if b in self.inits else f"mbarrier@{b:#x}[i]"

    def _in_pointer_ring(self, a: int) -> str | None:
        for lo, stride, stages in set(self.pointer_rings.values()):
            if stages and lo <= a <= lo + stride * (stages - 1) and (a - lo) % stride == 0:
                return f"mbarrier@{lo:#x}+{stride:#x}×{stages}"
        return None

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
        if v.ring:
            lo, stride, stages = self.pointer_rings[v.ring]
            if self.inits and not self.indexed_inits and \
                    not any(lo + k * stride in self.inits for k in range(max(stages, 1))):
                return _Mbar(None, f"ring {lo:#x}+{stride:#x} at {pc:#x} holds no mbarrier the kernel initialises")
            n = f"×{stages}" if stages else "[i]"
            return _Mbar(f"mbarrier@{lo:#x}+{stride:#x}{n}", "", v.assumed)
        if v.exact:
            a = v.const
            ring = self._in_pointer_ring(a)
            if ring is not None:  # the first stage of a ring pointer's ring, before its loop
                return _Mbar(ring, "", v.assumed)
            if self.inits and a not in self.inits and not self.indexed_inits:
                return _Mbar(None, f"address {a:#x} at {pc:#x} is no mbarrier the kernel initialises")
            b = self.ring_of.get(a)
            return _Mbar(self._ring_label(b) if b is not None else f"mbarrier@{a:#x}", "", v.assumed)
        b = v.const
        if self.inits and b not in self.inits and not self.indexed_inits:
            return _Mbar(None, f"ring base {b:#x} at {pc:#x} is no mbarrier the kernel initialises")
        return _Mbar(self._ring_label(b), "", v.assumed)


def _pointer_rings(vals: list[Value]) -> dict[tuple, tuple[int, int, int]]:
    """Ring pointers (:attr:`profiler.sass.values.Value.ring`) named as one ring: the same stride and
    stage count, addresses in the same residue class, overlapping extents (nvjet's producer starts
    its pointer one stage later than the consumer's). Clustered by the pointers' initial values, not
    by the addresses formed from them (a pointer minus the wrap is below the ring). ring -> (lowest
    base, stride, stages)."""
    out: dict[tuple, tuple[int, int, int]] = {}
    by: dict[tuple, list[int]] = {}
    for v in vals:
        assert v.ring is not None
        stride, stages, base = v.ring
        by.setdefault((stride, stages, base % stride), []).append(base)
    for (stride, stages, _), bases in by.items():
        span = stride * max(stages - 1, 0)
        lo = hi = None
        for c in sorted(set(bases)):
            if lo is None or hi is None or c > hi:
                lo = c
            hi = max(hi or c, c + span)
            out[(stride, stages, c)] = (lo, stride, stages)
    return out


# --- wait sites ----------------------------------------------------------------------------------


def _is_commit(p) -> bool:
    """A tcgen05.commit (``UTCBAR [UR6], URZ``): an mbarrier arrive issued by the tensor core once the
    thread's earlier tcgen05 operations completed; its memory operand is the barrier."""
    return p.base != "SYNCS" and any(b.kind == "mbarrier" for b in p.barriers)


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


def _bar_labeler(ins, rules: dict):
    """The label of a named-barrier wait instruction (see :func:`_bar_label`)."""
    is_arv = OpcodeMatch(rules["release"]["named_barrier_arrive"])
    arv_counts = {b.count for p in ins if is_arv[p.opcode]
                  for b in p.barriers if b.kind == "cta" and isinstance(b.id, str)}  # register-id arrives' counts

    def label(p) -> str | None:
        bid = next((b for b in p.barriers if b.kind == "cta"), None)
        if bid is None:
            return None
        own = isinstance(bid.id, str) and bid.count is not None and bid.count not in arv_counts
        return _bar_label(bid.id, bid.count if own else None)
    return label


# --- releasers -----------------------------------------------------------------------------------


def _releasers(ins, roles, bases, mb: _MbarIndex | None = None, notes: dict | None = None) -> dict:
    rules = _rules()
    notes = {} if notes is None else notes
    r = rules["release"]
    names = rules["names"]
    arrives: dict[str, dict[str, set]] = {}  # barrier label -> role -> {"arrive", "expect_tx", "commit"}
    tma: dict[str | None, set] = {}          # barrier label -> roles whose UTMALDG signals it
    bar_arv: dict[int | str, set] = {}       # named barrier id -> roles arriving
    bar_sync: dict[int | str, set] = {}
    bar_count: dict[int | str, set] = {}     # named barrier id -> thread counts of its BAR.SYNCs (None: all)
    role_ops: dict[str, set] = {}
    for role, base in dict.fromkeys(zip(roles, bases)):
        role_ops.setdefault(role, set()).add(base)
    is_arrive, is_tma = OpcodeMatch(r["mbarrier_arrive"]), OpcodeMatch(r["tma_load"])
    is_bar_arv, is_bar_wait = OpcodeMatch(r["named_barrier_arrive"]), OpcodeMatch(rules["wait"]["named_barrier"])
    for i, p in enumerate(ins):
        if is_arrive[p.opcode]:
            off = _mbar_key(ins, i, mb, notes)
            if off is None:
                continue
            regs_ = [o for o in p.srcs if o.kind == "reg"]
            tx = p.base == "SYNCS" and bool(regs_) and regs_[-1].text not in ("RZ", "URZ")
            kind = "expect_tx" if tx else ("commit" if _is_commit(p) else "arrive")
            arrives.setdefault(off, {}).setdefault(roles[i], set()).add(kind)
        elif is_tma[p.opcode]:
            if mb is None:
                labels = {_label(o) for o in _tma_barrier_offsets(ins, i)}
            else:
                labels = {_mbar_key(ins, i, mb, notes)}
            for off in labels:
                tma.setdefault(off, set()).add(roles[i])
        elif is_bar_arv[p.opcode]:
            b = next((b for b in p.barriers if b.kind == "cta"), None)
            if b is not None:
                bar_arv.setdefault(_bar_key(b.id), set()).add(roles[i])
        elif is_bar_wait[p.opcode]:
            b = next((b for b in p.barriers if b.kind == "cta"), None)
            if b is not None:
                bar_sync.setdefault(_bar_key(b.id), set()).add(roles[i])
                bar_count.setdefault(_bar_key(b.id), set()).add(b.count)
    return {"arrives": arrives, "tma": tma, "bar_arv": bar_arv, "bar_sync": bar_sync, "bar_count": bar_count,
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
        plain = sorted(ro for ro, kinds in by_role.items() if kinds & {"arrive", "commit"})
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
                parts.append(f"{ro} (its other warps)" if ro == site.role else ro)
                what = "SYNCS.ARRIVE" if "arrive" in by_role[ro] else "UTCBAR (tcgen05 commit)"
                ev.append(f"{what} at {at} in {ro}")
        if not parts:
            return None, not rel["resolved"], f"no SYNCS.ARRIVE, tcgen05 commit or TMA load on {site.barrier} in the SASS"
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
        counts = rel["bar_count"].get(bid, set())
        threads = rel.get("threads", 0)
        part = sorted(c for c in counts if c is not None and (not threads or c < threads))
        if not rel_roles:
            if bid == 0 and not part:
                return "CTA (all warps)", False, "BAR.SYNC 0: every warp of the CTA arrives"
            if part:  # BAR.SYNC 0x0, 0x80: 128 threads, not the CTA
                return (f"{site.role} (its other warps)", False,
                        f"BAR.SYNC {bid} with {'/'.join(map(str, part))} threads"
                        + (f" of the CTA's {threads}" if threads else "") + f", only in {site.role}")
            if site.role in rel["bar_sync"].get(bid, set()):
                return (f"{site.role} (its other warps)", False,
                        f"BAR.SYNC {bid} only in {site.role}: a barrier among that role's warps")
            return None, False, f"no BAR.ARV / BAR.SYNC on barrier {bid} by another role or warpgroup"
        label = [f"{ro} (other warpgroup)" if ro == site.role else ro for ro in rel_roles]
        return " + ".join(label), False, f"BAR.ARV/BAR.SYNC {bid} in {'+'.join(rel_roles)}"
    if site.kind == "warpgroup_arrive":
        return (names["engine_tensor"], False,
                "HGMMA waits for the previous wgmma to release its operands (warpgroup_arrive samples)")
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


def _static(launch, bd: tuple[int, int, int] | None) -> dict:
    """What :func:`role_graph` takes from the SASS (and the CTA's shape ``bd``) alone, kept per build
    (:mod:`.buildcache`): ``roles`` [name, its instructions (:func:`~.buildcache.bits`), ranges,
    setmaxnreg, does, warps, entry index, entry offset, warps reaching the entry or None], ``keys`` the
    wait sites' (kind, label, role), ``plan`` their claims [key, instruction, reason]
    (:func:`~.wait_sites.site_plan`), ``pairs`` [releaser, inferred, evidence] per key."""
    sf = launch.sass
    texts = [str(t) for t in sf["sass"].tolist()]
    ins = [parse(t) for t in texts]
    bases = [p.base for p in ins]
    addresses = [int(a) for a in sf["address"].tolist()]
    offsets = sf["offset"].to_numpy() if "offset" in sf.columns else np.asarray(addresses) - addresses[0]
    cfg = shared_cfg(launch, addresses, texts, bases)  # built once per launch (producers walk it too)
    addr_index = {a: i for i, a in enumerate(addresses)}
    mb = _MbarIndex(ins, cfg, offsets)
    split = split_roles(ins, cfg, mb.R, bd, addr_index, _rules())
    roles = split.owner
    out_roles = []
    order = ["common", *[r for r in split.roles if r not in ("common", "shared")], "shared"]
    arr = np.asarray(roles, dtype=object)
    offset_list = [int(o) for o in offsets.tolist()]
    for name in order:
        idx = np.flatnonzero(arr == name)
        sr = split.roles.get(name)
        if not len(idx) and (sr is None or not sr.warps):
            continue
        entry = sr.entry if sr is not None else None
        out_roles.append([
            name, bits(idx.tolist(), len(ins)), _ranges(idx.tolist(), offset_list), sr.setmaxnreg if sr else None,
            sr.does if sr else ("every role" if name == "common" else "several roles"),
            list(sr.warps) if sr else [],
            None if entry is None else int(entry), None if entry is None else int(offsets[entry]),
            sr.entry_warps if sr is not None and sr.warps and entry is not None else None])
    mbi: _MbarIndex | None = mb
    if not mb.anchored:
        mbi = None  # no mbarrier address resolves anywhere: fall back to displacements (inferred)
    notes: dict = {}
    plan = site_plan(ins, cfg, addr_index, roles, _rules(), lambda i: _mbar_key(ins, i, mbi, notes),
                     _bar_labeler(ins, _rules()))
    rel = _releasers(ins, roles, bases, mbi, notes)
    rel["threads"] = bd[0] * bd[1] * bd[2] if bd else 0
    keys = list(dict.fromkeys(k for k, _, _ in plan))
    at = {k: n for n, k in enumerate(keys)}
    pairs = [list(_pair(WaitSite(kind, label, role, (), 0), rel)) for kind, label, role in keys]
    return {"roles": out_roles, "keys": [list(k) for k in keys], "plan": [[at[k], i, r] for k, i, r in plan],
            "pairs": pairs}


def _decode(n_ins: int):
    def decode(st: dict) -> dict:
        keys = [(str(kind), str(label), str(role)) for kind, label, role in st["keys"]]
        pairs = [(rel if rel is None else str(rel), bool(inf), str(ev)) for rel, inf, ev in st["pairs"]]
        if len(pairs) != len(keys):
            raise ValueError("roles: a pair per key")
        roles = [(str(name), unbits(ix, n_ins), [list(r) for r in ranges], smr, str(does), list(warps),
                  entry, entry_off, entry_warps)
                 for name, ix, ranges, smr, does, warps, entry, entry_off, entry_warps in st["roles"]]
        plan = [(keys[k], int(i), r) for k, i, r in st["plan"]]
        if any(not 0 <= i < n_ins for _, i, _ in plan) or any(
                e is not None and not 0 <= e < n_ins for *_, e, _, _ in roles):
            raise ValueError("roles: not this frame's")
        return {"roles": roles, "plan": plan, "pair": dict(zip(keys, pairs))}
    return decode


def role_graph(launch) -> RoleGraph:
    """The role wait graph of one :class:`profiler.report.Launch` (see the module docstring)."""
    sf = launch.sass
    offsets = (sf["offset"].to_numpy() if "offset" in sf.columns
               else sf["address"].to_numpy().astype(np.int64) - int(sf["address"].iloc[0]))
    samples = (sf["samples"].fillna(0).to_numpy(dtype=np.int64) if "samples" in sf.columns
               else np.zeros(len(sf), dtype=np.int64))
    executed = (sf["inst_executed"].fillna(0).to_numpy(dtype=np.int64) if "inst_executed" in sf.columns
                else np.zeros(len(sf), dtype=np.int64))
    bd = _block_dim(launch)
    st = buildcache.part(launch, f"roles{list(bd) if bd else ''}", lambda: _static(launch, bd), _decode(len(sf)))
    ctas = _launch_int(launch, "launch__grid_size")
    role_list = []
    for name, idx, ranges, smr, does, warps, entry, entry_off, entry_warps in st["roles"]:
        role_list.append(Role(
            name, "inferred", len(idx), [list(r) for r in ranges], smr,
            int(executed[idx].sum()), int(samples[idx].sum()), does, list(warps), entry_off,
            None if entry is None else int(executed[entry]),
            entry_warps * ctas if entry_warps is not None and ctas else None))
    total = int(samples.sum())
    scols = [c for c in sf.columns if c.startswith("stall_")]
    smat = sf[scols].fillna(0).to_numpy(dtype=np.int64) if scols else None  # one conversion, not one per column
    stalls = {c[len("stall_"):]: smat[:, k] for k, c in enumerate(scols)} if smat is not None else {}
    sites = claim_sites(st["plan"], offsets, samples, stalls)
    pair = st["pair"]
    grouped: dict[tuple, dict] = {}
    unresolved: dict[str, int] = {}
    for s in sites:
        releaser, inferred, evidence = pair[(s.kind, s.barrier, s.role)]
        if releaser is None:
            unresolved[f"{s.role} {s.barrier}: {evidence}"] = (
                unresolved.get(f"{s.role} {s.barrier}: {evidence}", 0) + s.samples)
            continue
        g = grouped.setdefault((s.role, s.barrier, releaser),
                               {"samples": 0, "inferred": inferred, "evidence": evidence, "pcs": [], "partial": []})
        g["samples"] += s.samples
        g["pcs"] += list(s.pcs)
        g["partial"] += [list(x) for x in s.partial]
    edges = [Edge(w, b, r, g["samples"], (g["samples"] / total) if total else 0.0, g["inferred"],
                  g["evidence"], sorted(g["pcs"]), sorted(g["partial"]))
             for (w, b, r), g in grouped.items()]
    edges.sort(key=lambda e: (-e.samples, e.waiter, e.barrier))
    sampled = "samples" in sf.columns and bool(sf["samples"].notna().any()) and bool(scols)
    missing = [] if sampled else [{"field": f, "section": M.stall_config()["per_pc_section"]}
                                  for f in ("edges", "roles[].samples")]
    return RoleGraph(launch.kernel, launch.index, role_list, edges,
                     {"samples": int(sum(unresolved.values())), "reasons": unresolved}, total, sites, missing)


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
