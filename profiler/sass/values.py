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

__all__ = ["Resolver", "Value"]

_IMM = re.compile(r"^-?0x[0-9a-fA-F]+$|^-?\d+$")
_ZERO = ("RZ", "URZ")
_WINDOW = "SR_CgaCtaId"  # the CTA's id within its cluster: the window bits of a shared address


@dataclass(frozen=True)
class Value:
    """``const`` plus runtime terms (``runtime``: why each is not a constant); ``exact`` when there
    are none."""

    const: int
    runtime: tuple[str, ...] = ()
    assumed: tuple[str, ...] = ()

    @property
    def exact(self) -> bool:
        return not self.runtime

    def __add__(self, other: "Value") -> "Value":
        return Value(self.const + other.const, self.runtime + other.runtime, self.assumed + other.assumed)

    def shifted(self, sh: int) -> "Value":
        return Value(self.const << sh, self.runtime, self.assumed)

    def assuming(self, why: str) -> "Value":
        return Value(self.const, self.runtime, self.assumed + (why,))


def _unknown(why: str) -> Value:
    return Value(0, (why,))


def _guard(p) -> tuple[str, bool] | None:
    if p.guard is None or p.guard.endswith("PT"):
        return None
    return p.guard, bool(p.guard_negated)


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

    def reaching(self, i: int, reg: str) -> tuple[int, ...] | None:
        """Indices of the definitions of ``reg`` that reach instruction ``i`` (sorted); None when a
        path from the kernel's entry reaches ``i`` without defining it."""
        key = (i, reg)
        if key in self._defs:
            return self._defs[key]
        preds = self.cfg.preds
        found: set[int] = set()
        from_entry = False
        seen: set[int] = set()
        todo = [p for p, _ in preds[i]]
        if i == 0:
            from_entry = True
        while todo:
            j = todo.pop()
            if j in seen:
                continue
            seen.add(j)
            p = self.ins[j]
            if reg in p.writes:
                found.add(j)
                if p.guard is None or p.guard.endswith("PT"):
                    continue  # an unconditional definition kills the paths behind it
            pj = preds[j]
            if j == 0:
                from_entry = True  # instruction 0 is the kernel's only entry
            todo.extend(q for q, _ in pj if q not in seen)
        out = None if from_entry else tuple(sorted(found))
        self._defs[key] = out
        return out

    def value(self, i: int, reg: str, depth: int = 0) -> Value:
        """The value ``reg`` holds when instruction ``i`` reads it."""
        if reg in _ZERO:
            return Value(0)
        key = (i, reg)
        if key in self._vals:
            return self._vals[key]
        pc = self.offsets[i]
        defs = self.reaching(i, reg)
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
        return _unknown(f"{reg} at {pc:#x}: {len(defs)} reaching definitions "
                        f"({', '.join(f'{self.offsets[d]:#x}' for d in defs)})")

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
        not only to runtime terms beside the displacement."""
        regs, disp = Value(0), 0
        for tok in inner.replace("-", "+-").split("+"):
            tok = tok.strip().split(".")[0]
            if not tok:
                continue
            if _IMM.match(tok):
                disp += int(tok, 0)
            else:
                regs = regs + self.operand(i, tok)
        return Value(regs.const + disp, regs.runtime, regs.assumed), regs.const != 0

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
        if any(_IMM.match(x) and int(x, 0) == 1 << _window_shift() for x in (a, b)):
            return Value(0)  # a CTA rank times 2^24: the window bits, whichever CTA of the cluster
        va, vb = self.operand(d, a, depth), self.operand(d, b, depth)
        if va.exact and vb.exact:
            return Value(va.const * vb.const, (), va.assumed + vb.assumed)
        if (va.exact and va.const == 0) or (vb.exact and vb.const == 0):
            return Value(0, (), va.assumed + vb.assumed)
        return Value(0, va.runtime + vb.runtime + (f"{a} * {b} at {pc:#x}",), va.assumed + vb.assumed)

    def _permute(self, d: int, a: str, sel: int, b: str, depth: int) -> Value:
        """``PRMT d, a, sel, b`` (byte ``k`` of the result is byte ``sel`` nibble ``k`` of {b:a}): exact
        when both are. The shared-window idiom ``PRMT R4, R4, 0x4210, R_rank`` keeps a's low three
        bytes and puts the CTA rank in the top byte: the address is a's (the rank is the window)."""
        va, vb = self.operand(d, a, depth), self.operand(d, b, depth)
        nib = [(sel >> (4 * k)) & 0x7 for k in range(4)]
        if va.exact and vb.exact and nib[3] < 4:
            both = (va.const & 0xFFFFFFFF) | ((vb.const & 0xFFFFFFFF) << 32)
            out = sum(((both >> (8 * n)) & 0xFF) << (8 * k) for k, n in enumerate(nib))
            return Value(out, (), va.assumed + vb.assumed)
        if nib[:3] == [0, 1, 2] and nib[3] >= 4:
            return va  # a's low 24 bits (a shared address) under a CTA rank's window byte (own or peer)
        return _unknown(f"PRMT {a}, {sel:#x}, {b} at {self.offsets[d]:#x}: not a window byte on an address")
