"""What value a register holds where an instruction reads it, when the SASS says so: reaching
definitions over the control-flow graph and a small symbolic evaluator of address arithmetic.

Used to name a shared-memory object (an mbarrier) by its address rather than by an operand's
displacement: ``SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR12], R6`` where ``UR12`` has exactly one
reaching definition ``ULEA UR12, UR5, UR7, 0x18`` with ``UR5 = S2UR SR_CgaCtaId`` (the CTA's window
bits, not part of the object's identity), ``UR7 = UIADD3 UR6, 0x40`` and ``UR6 = UMOV 0x400``
resolves to the shared address ``0x440``.

A register read at instruction ``i`` is **resolved** only when exactly one definition reaches ``i``
(a guarded definition does not kill the ones before it, so it counts beside them); each operand of
that definition is resolved the same way. Two cases of several reaching definitions still resolve:
every one of them gives the same constant (e.g. ``UMOV UR6, 0x400`` on both sides of a branch); or
the read is guarded and the nearest definition before it in straight-line code is guarded too
(compilers predicate an address computation together with its one use, ``@!P0 LEA R10, R10, UR10,
0x3`` … ``@!P0 SYNCS.ARRIVE … [R10+URZ]``): with the same guard predicate, unchanged in between,
that definition is the one that reaches whenever the read executes (exact); with a different guard
(``@!UP1 ULEA UR8 …`` … ``@!P0 SYNCS.ARRIVE … [UR8]``) the pairing is an assumption, recorded in
:attr:`Value.assumed`. The result is a :class:`Value`: a constant plus the
*runtime* terms that could not be resolved (each with its reason), e.g. a ring stage's index
``(n % stages) * 8`` held in a loop-carried register.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from profiler import metrics as M
from profiler.sass.instruction import register_mask

__all__ = ["Resolver", "Value"]

_IMM = re.compile(r"^-?0x[0-9a-fA-F]+$|^-?\d+$")
_ZERO = ("RZ", "URZ")
_INDEX = "index: "  # a runtime term that is a small index (a stage or phase), not an address
_INDEX_MAX = 0xFF
_WINDOW = "SR_CgaCtaId"  # the CTA's id within its cluster: the window bits of a shared address


@dataclass(frozen=True)
class Value:
    """``const`` plus runtime terms (``runtime``: why each is not a constant); ``exact`` when there
    are none. ``ring`` (stride, stages, base; 0 stages when no wrap is seen) when the value is a ring
    pointer (:meth:`Resolver._ring`) whose initial value is ``base``; a displacement added to it keeps
    it (nvjet's producer waits on ``[R10+UR45]``, the pointer plus the next stage's or the wrapped
    stage's offset)."""

    const: int
    runtime: tuple[str, ...] = ()
    assumed: tuple[str, ...] = ()
    ring: tuple[int, int, int] | None = None

    @property
    def exact(self) -> bool:
        return not self.runtime

    def __add__(self, other: Value) -> Value:
        return Value(self.const + other.const, self.runtime + other.runtime, self.assumed + other.assumed,
                     self.ring or other.ring)

    def shifted(self, sh: int) -> Value:
        return Value(self.const << sh, self.runtime, self.assumed)

    def assuming(self, why: str) -> Value:
        return Value(self.const, self.runtime, self.assumed + (why,))


def _unknown(why: str) -> Value:
    return Value(0, (why,))


def _guard(p) -> tuple[str, bool] | None:
    if p.guard is None or p.guard.endswith("PT"):
        return None
    return p.guard, bool(p.guard_negated)


@lru_cache(maxsize=1)
def _elect_ops() -> frozenset:
    """Opcodes that elect one lane of the active ones (``data/sass.toml`` [values] ``elect``)."""
    return frozenset(M._load("sass.toml")["values"].get("elect", ()))


@lru_cache(maxsize=1)
def _window_shift() -> int:
    """Where a CTA's rank sits in a shared::cluster address (``data/sass.toml`` [values])."""
    return int(M._load("sass.toml")["values"]["window_shift"])


class Resolver:
    """Reaching definitions and values of registers in one kernel's SASS.

    ``ins``: parsed :class:`~profiler.sass.Instruction` s in address order; ``cfg`` their
    :class:`~profiler.sass.CFG`; ``offsets`` (ints) name instructions in reasons."""

    MAX_DEPTH = 32

    def __init__(self, ins, cfg, offsets) -> None:
        self.ins = ins
        self.cfg = cfg
        self.offsets = [int(o) for o in offsets]
        self._defs: dict[tuple[int, str], tuple[int, ...] | None] = {}
        self._vals: dict[tuple[int, str], Value] = {}
        self._pidx: list[tuple[int, ...]] | None = None  # per block: predecessor blocks
        self._wm: list[int] = []
        self._kills: list[bool] = []
        self._bmask: list[int] = []  # per block: registers it writes
        self._bstart: list[int] = []
        self._bend: list[int] = []

    def reaching(self, i: int, reg: str) -> tuple[int, ...] | None:
        """Indices of the definitions of ``reg`` that reach instruction ``i`` (sorted); None when a
        path from the kernel's entry reaches ``i`` without defining it."""
        key = (i, reg)
        if key in self._defs:
            return self._defs[key]
        if reg in _ZERO:
            return ()
        if self._pidx is None:
            blocks = self.cfg.blocks
            self._pidx = [b.preds for b in blocks]
            self._wm = [p.wmask for p in self.ins]
            self._kills = [p.guard is None or p.guard.endswith("PT") or self._elected(k)
                           for k, p in enumerate(self.ins)]
            self._bmask = []
            for b in blocks:
                m = 0
                for k in range(b.start, b.end + 1):
                    m |= self._wm[k]
                self._bmask.append(m)
            self._bstart = [b.start for b in blocks]
            self._bend = [b.end for b in blocks]
        wm, kills = self._wm, self._kills
        bit = register_mask((reg,))
        found: set[int] = set()
        from_entry = False

        def scan(hi: int, lo: int) -> bool:
            """Definitions in hi..lo (backwards); True when one kills the paths behind it."""
            for k in range(hi, lo - 1, -1):
                if wm[k] & bit:
                    found.add(k)
                    if kills[k]:
                        return True
            return False

        b0 = self.cfg.block_of(i)
        start = self._bstart[b0]
        if not scan(i - 1, start):
            if start == 0:
                from_entry = True
            seen: set[int] = set(self._pidx[b0])
            todo = list(self._pidx[b0])
            while todo:
                b = todo.pop()
                if self._bmask[b] & bit and scan(self._bend[b], self._bstart[b]):
                    continue
                if self._bstart[b] == 0:
                    from_entry = True  # instruction 0 is the kernel's only entry
                for q in self._pidx[b]:
                    if q not in seen:
                        seen.add(q)
                        todo.append(q)
        out = None if from_entry else tuple(sorted(found))
        self._defs[key] = out
        return out

    def _elected(self, k: int) -> bool:
        """Whether instruction ``k`` writes only uniform registers under a predicate an ``ELECT`` set
        just before it (``@P0 ELECT P1`` … ``@P1 R2UR.BROADCAST UR4, R3``: nvcc's election loop
        around a uniform operation in divergent code). One lane is elected whenever the loop body
        runs, so the uniform register is written every time: the definition kills the ones before."""
        p = self.ins[k]
        if p.guard is None or p.guard_negated or not p.writes or not all(w.startswith("U") for w in p.writes):
            return False
        for j in range(k - 1, max(-1, k - 4), -1):
            q = self.ins[j]
            if p.guard in q.writes:
                return q.base in _elect_ops()
        return False

    def value(self, i: int, reg: str, depth: int = 0) -> Value:
        """The value ``reg`` holds when instruction ``i`` reads it."""
        if reg in _ZERO:
            return Value(0)
        key = (i, reg)
        if key in self._vals:
            return self._vals[key]
        pc = self.offsets[i]
        defs = self.reaching(i, reg)
        self._vals[key] = _unknown(f"{reg} at {pc:#x}: loop-carried")  # a cycle back here reads this
        if depth >= self.MAX_DEPTH:
            v = _unknown(f"{reg} at {pc:#x}: definition chain deeper than {self.MAX_DEPTH}")
        elif defs is not None and len(defs) == 1:
            v = self._eval(defs[0], reg, depth + 1)
        else:
            v = self._several(i, reg, defs, depth)
        self._vals[key] = v
        return v

    def _nearest(self, i: int, reg: str) -> int | None:
        """The nearest definition of ``reg`` before ``i`` along a single-predecessor chain."""
        j = i
        for _ in range(256):
            pr = self.cfg.preds[j]
            if len(pr) != 1:
                return None
            j = pr[0][0]
            if reg in self.ins[j].writes:
                return j
        return None

    def _several(self, i: int, reg: str, defs, depth: int) -> Value:
        pc = self.offsets[i]
        if defs:
            vals = [self._eval(d, reg, depth + 1) for d in defs]
            if all(v.exact for v in vals) and len({v.const for v in vals}) == 1:
                return Value(vals[0].const, (), tuple(a for v in vals for a in v.assumed))
            rings = {v.ring for v in vals if v.ring}
            if len(rings) == 1 and len({v.const for v in vals}) == 1 and all(v.ring or v.exact for v in vals):
                # copies of one ring pointer (UMOV UR7, UR6), or its base on the way in
                return next(v for v in vals if v.ring)
            ring = self._ring(i, reg, defs, vals)
            if ring is not None:
                return ring
        gi = _guard(self.ins[i])
        j = self._nearest(i, reg)
        if gi is not None and j is not None:
            gj = _guard(self.ins[j])
            if gj is not None:
                v = self._eval(j, reg, depth + 1)
                pred_written = any(gi[0] in self.ins[k].writes for k in range(j + 1, i))
                if gj == gi and not pred_written:
                    return v
                return v.assuming(
                    f"{reg} at {pc:#x} (@{'!' if gi[1] else ''}{gi[0]}) taken from its guarded definition at "
                    f"{self.offsets[j]:#x} (@{'!' if gj[1] else ''}{gj[0]})")
        if defs is None:
            return _unknown(f"{reg} at {pc:#x}: undefined on a path from the kernel's entry")
        vals = [self._eval(d, reg, depth + 1) for d in defs]
        if vals and all(v.exact for v in vals):  # a step chosen by a branch (nvjet: MOV R8, 0x8 / @P2 MOV R8, -0x10)
            return Value(0, (f"{reg} at {pc:#x}: one of {', '.join(sorted({hex(v.const) for v in vals}))}",),
                         tuple(a for v in vals for a in v.assumed))
        return _unknown(f"{reg} at {pc:#x}: {len(defs)} reaching definitions "
                        f"({', '.join(f'{self.offsets[d]:#x}' for d in defs)})")

    def _copies_of(self, d: int, reg: str, limit: int = 64) -> set[int] | None:
        """The non-copy definitions that reach ``reg`` at ``d`` through moves (``UMOV UR7, UR6``)."""
        out: set[int] = set()
        todo = [(d, reg)]
        seen: set[tuple[int, str]] = set()
        while todo and len(seen) < limit:
            j, r = todo.pop()
            if (j, r) in seen:
                continue
            seen.add((j, r))
            defs = self.reaching(j, r)
            if not defs:
                return None
            for k in defs:
                p = self.ins[k]
                src = [o.text for o in p.srcs if o.kind == "reg"]
                if p.base in ("MOV", "UMOV") and len(src) == 1:
                    todo.append((k, src[0]))
                else:
                    out.add(k)
        return out

    def _step(self, d: int) -> tuple[str, int] | None:
        """(register, immediate) of a definition ``X = Y + imm`` (a pointer bump), else None; a skip
        by a runtime number of stages ``X = n * stride + Y`` (``UIMAD.U32 UR7, UR23, 0x10, UR7``)
        gives (Y, 0)."""
        p = self.ins[d]
        srcs = [o.text for o in p.srcs]
        if p.base in ("IMAD", "UIMAD") and len(srcs) == 3 and not ({"X", "HI", "WIDE"} & set(p.modifiers)) \
                and _IMM.match(srcs[1]) and re.match(r"^U?R\d+$", srcs[2]):
            return srcs[2], 0
        if p.base not in ("IADD3", "UIADD3", "VIADD", "IADD") or "X" in p.modifiers:
            return None
        regs = [o.text for o in p.srcs if o.kind == "reg" and o.text not in _ZERO]
        imms = [int(o.text, 0) for o in p.srcs if o.kind == "imm" and _IMM.match(o.text)]
        if len(regs) != 1 or not imms or regs[0].startswith("-"):
            return None
        return regs[0], sum(imms)

    def _ring(self, i: int, reg: str, defs, vals: list[Value]) -> Value | None:
        """A ring pointer: ``reg`` is set to a base (an anchored value) before a loop and bumped in it
        (nvjet: ``UIADD3 UR6, UR7, 0x10`` and, at the wrap, ``UIADD3 UR6, UR7, -0x70`` with
        ``UR7 = UMOV UR6``). The pointer's definitions, closed over the sources of its bumps
        (through moves), are bumps of the pointer itself or its base; the value is the base plus a
        runtime stage term, ``ring`` = (stride, stages, base) with the stage count from the wrap
        (0x70 / 0x10 + 1 = 8)."""
        group: set[int] = set()
        srcs: dict[int, set[int]] = {}
        todo = list(defs)
        while todo:
            d = todo.pop()
            if d in group:
                continue
            group.add(d)
            if len(group) > 64:
                return None
            st = self._step(d)
            if st is not None:
                src = self._copies_of(d, st[0])
                if src is None:
                    return None
                srcs[d] = src
                todo.extend(src)
        def carried(d: int) -> bool:  # d's sources lead back to d: a loop-carried bump
            seen: set[int] = set()
            todo = list(srcs.get(d, ()))
            while todo:
                k = todo.pop()
                if k == d:
                    return True
                if k not in seen:
                    seen.add(k)
                    todo.extend(srcs.get(k, ()))
            return False

        loop = {d for d in srcs if carried(d)}
        if not loop:
            return None
        bumps = [b for b in (self._step(d)[1] for d in loop) if b]  # type: ignore[index]
        pointer = set(defs)  # the pointer's own definitions: what reaches the use, and the bumps' sources
        todo = [d for d in pointer if d in loop]
        while todo:
            for k in srcs[todo.pop()]:
                if k not in pointer:
                    pointer.add(k)
                    if k in loop:
                        todo.append(k)
        bases: list[Value] = []
        for d in sorted(pointer - loop):
            dst = [o.text for o in self.ins[d].dsts if o.kind == "reg"]
            v = self._eval(d, dst[0], 1) if dst else _unknown("no register")
            if v.const == 0:
                return None
            bases.append(v)
        ups = sorted({b for b in bumps if b > 0})
        downs = sorted({b for b in bumps if b < 0})
        if not bases or len(ups) != 1 or len({b.const % ups[0] for b in bases}) != 1:
            return None  # the bases must be stages of one ring (nvjet skinny: UR7 and UR7 + 0x10)
        stride = ups[0]
        bases.sort(key=lambda b: b.const)
        stages = (-downs[0] // stride + 1) if len(downs) == 1 and -downs[0] % stride == 0 else 0
        why = (f"{reg} at {self.offsets[i]:#x}: ring pointer from {bases[0].const:#x}, +{stride:#x}"
               + (f", wraps {downs[0]:#x} ({stages} stages)" if stages else ""))
        return Value(bases[0].const, bases[0].runtime + (why,), tuple(a for b in bases for a in b.assumed),
                     (stride, stages, bases[0].const))

    def operand(self, i: int, text: str, depth: int = 0) -> Value:
        """The value of a source operand's text (``UR7``, ``-UR4``, ``0x40``) at instruction ``i``."""
        t = text.strip()
        neg = t.startswith("-")
        t = t.lstrip("-")
        if _IMM.match(t):
            v = Value(int(t, 0))
        elif re.match(r"^U?R\d+$|^U?RZ$", t):
            v = self.value(i, t, depth)
        else:
            return _unknown(f"operand {text} at {self.offsets[i]:#x}")
        return Value(-v.const, v.runtime, v.assumed) if neg else v

    def address(self, i: int, inner: str) -> tuple[Value, bool]:
        """The value of a memory operand's inside (``R11+UR11+0x10``) at instruction ``i``, and
        whether it is *anchored*: its registers resolve to a non-zero constant part (a base address),
        not only to runtime terms beside the displacement, or resolve exactly (to the window bits or
        zero) beside a displacement that is then the address."""
        regs, disp = Value(0), 0
        for tok in inner.replace("-", "+-").split("+"):
            tok = tok.strip().split(".")[0]
            if not tok:
                continue
            if _IMM.match(tok):
                disp += int(tok, 0)
            else:
                regs = regs + self.operand(i, tok)
        # [URZ+0x2e498], [UR39+0x2e498] (UR39 the window); [UR22+0x344e8] with UR22 an index (^ 8)
        anchored = regs.const != 0 or (disp != 0 and all(r.startswith(_INDEX) for r in regs.runtime))
        return Value(regs.const + disp, regs.runtime, regs.assumed, regs.ring), anchored

    def _eval(self, d: int, reg: str, depth: int) -> Value:
        p = self.ins[d]
        pc = self.offsets[d]
        srcs = [o.text for o in p.srcs if o.kind != "pred"]
        dst = [o.text for o in p.dsts if o.kind == "reg"]
        if not dst or dst[0] != reg:
            return _unknown(f"{reg} at {pc:#x}: written as a wide or second destination of {p.base}")
        mods = set(p.modifiers)
        base = p.base
        if base in ("S2UR", "S2R", "CS2R") and srcs and srcs[0] == _WINDOW:
            return Value(0)  # window bits of this CTA's shared memory
        if base in ("MOV", "UMOV") and len(srcs) >= 1:
            return self.operand(d, srcs[0], depth)
        if base == "R2UR" and srcs:
            return self.operand(d, srcs[0], depth)
        if base == "IMAD" and len(srcs) == 3 and ("MOV" in mods or "RZ" in srcs[:2]) and "X" not in mods \
                and "HI" not in mods and "WIDE" not in mods:
            return self.operand(d, srcs[2], depth)  # RZ * b + c, or IMAD.MOV: a move of c
        if base == "IMAD" and len(srcs) == 3 and ("IADD" in mods or srcs[1] in ("0x1", "1")) \
                and not ({"X", "HI", "WIDE"} & mods):
            return self.operand(d, srcs[0], depth) + self.operand(d, srcs[2], depth)  # a * 1 + c
        if base in ("IMAD", "UIMAD") and len(srcs) == 3 and not ({"X", "HI", "WIDE"} & mods):
            return self._product(d, srcs[0], srcs[1], depth) + self.operand(d, srcs[2], depth)
        if base in ("IMUL", "UIMUL") and len(srcs) == 2 and not ({"HI", "WIDE"} & mods):
            return self._product(d, srcs[0], srcs[1], depth)
        if base in ("LOP3", "ULOP3") and len(srcs) >= 4 and any(_IMM.match(x) for x in srcs[:3]):
            k = max(int(x, 0) for x in srcs[:3] if _IMM.match(x))
            if 0 < k <= _INDEX_MAX:  # a small index or phase bit (ULOP3.LUT UR22, UR21, 0x8, URZ, 0x3c: ^ 8)
                return Value(0, (f"{_INDEX}{reg} at {pc:#x}: {p.opcode} with {k:#x}",))
        if base in ("PRMT", "UPRMT") and len(srcs) == 3 and _IMM.match(srcs[1]):
            return self._permute(d, srcs[0], int(srcs[1], 0), srcs[2], depth)
        if base in ("IADD3", "UIADD3", "VIADD", "IADD", "UIADD") and "X" not in mods:
            ops = [s for s in srcs if not re.match(r"^!?U?P(\d+|T)$", s)]
            total = Value(0)
            for s in ops:
                total = total + self.operand(d, s, depth)
            return total
        if base in ("LEA", "ULEA") and not ({"HI", "X"} & mods) and len(srcs) >= 3:
            a, b, sh = srcs[0], srcs[1], srcs[2]
            if not _IMM.match(sh):
                return _unknown(f"{p.base} at {pc:#x}: register shift")
            if int(sh, 0) == _window_shift():
                return self.operand(d, b, depth)  # a CTA rank into the window bits: b is the address
            va, vb = self.operand(d, a, depth), self.operand(d, b, depth)
            if va.exact:
                return vb + va.shifted(int(sh, 0))
            return vb + Value(0, va.runtime + (f"{a} << {sh} at {pc:#x}",), va.assumed)
        if base in ("SHF", "USHF", "SHL", "USHL") and "L" in mods and len(srcs) >= 2 and _IMM.match(srcs[1]):
            if int(srcs[1], 0) == _window_shift():
                return Value(0)  # a CTA rank into the window bits (USHF.L.U32 UR5, UR_rank, 0x18)
            va = self.operand(d, srcs[0], depth)
            if va.exact:
                return va.shifted(int(srcs[1], 0))
            return Value(0, va.runtime + (f"{srcs[0]} << {srcs[1]} at {pc:#x}",), va.assumed)
        return _unknown(f"{reg} at {pc:#x}: defined by {p.opcode}")

    def _product(self, d: int, a: str, b: str, depth: int) -> Value:
        """``a * b`` at instruction ``d``: exact when both are; the CTA's window bits times anything
        are no part of an address (``IMAD R4, R3, 0x1000000, R4`` with R3 the CTA rank); a runtime
        factor times a constant is a runtime term (a ring stage ``idx * 8``)."""
        pc = self.offsets[d]
        if any(_IMM.match(x.lstrip("-")) and abs(int(x, 0)) == 1 << _window_shift() for x in (a, b)):
            return Value(0)  # a CTA rank times 2^24: the window bits, whichever CTA of the cluster
        va, vb = self.operand(d, a, depth), self.operand(d, b, depth)
        if va.exact and vb.exact:
            return Value(va.const * vb.const, (), va.assumed + vb.assumed)
        if (va.exact and va.const == 0) or (vb.exact and vb.const == 0):
            return Value(0, (), va.assumed + vb.assumed)
        k = va.const if va.exact else vb.const if vb.exact else 0
        if 0 < abs(k) <= _INDEX_MAX:  # a stage or warpgroup index times a barrier's size
            return Value(0, (f"{_INDEX}{a} * {b} at {pc:#x}",), va.assumed + vb.assumed)
        return Value(0, va.runtime + vb.runtime + (f"{a} * {b} at {pc:#x}",), va.assumed + vb.assumed)

    def _permute(self, d: int, a: str, sel: int, b: str, depth: int) -> Value:
        """``PRMT d, a, sel, b`` (byte ``k`` of the result is byte ``sel`` nibble ``k`` of {b:a}): exact
        when both are. The shared-window idioms ``PRMT R4, R4, 0x4210, R_rank`` (nvjet) and
        ``PRMT R16, R_rank, 0x654, R16`` (CUTLASS) keep an address's low three bytes and put a CTA
        rank in the top byte: the value is the address (the rank is the window)."""
        va, vb = self.operand(d, a, depth), self.operand(d, b, depth)
        nib = [(sel >> (4 * k)) & 0x7 for k in range(4)]
        if va.exact and vb.exact and nib[3] < 4:
            both = (va.const & 0xFFFFFFFF) | ((vb.const & 0xFFFFFFFF) << 32)
            out = sum(((both >> (8 * n)) & 0xFF) << (8 * k) for k, n in enumerate(nib))
            return Value(out, (), va.assumed + vb.assumed)
        if nib[:3] == [0, 1, 2] and nib[3] >= 4:
            return va  # a's low 24 bits (a shared address) under a CTA rank's window byte (own or peer)
        if nib[:3] == [4, 5, 6] and nib[3] < 4:
            return vb  # CUTLASS' cluster arrive: PRMT R16, R_rank, 0x654, R_addr (b's low bytes, rank on top)
        return _unknown(f"PRMT {a}, {sel:#x}, {b} at {self.offsets[d]:#x}: not a window byte on an address")
