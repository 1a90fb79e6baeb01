"""One SASS line as data: :func:`parse` -> :class:`Instruction`.

The SASS text in an ncu report is the disassembly without control codes (no stall counts, no
scoreboard bits), so everything here comes from the opcode, its modifiers and its operands, and
from ``data/sass.toml``: which opcodes set which scoreboard, how many registers an operand spans
(``LDSM.16.M88.4 R8, [R2]`` writes R8..R11, ``LDS.128`` 4, ``HMMA.16816.F32 R4, R8, R12, R4`` reads
R8..R11, R12..R13, R4..R7), how many leading operands are destinations, and which producers
complete in issue order.

Register names: ``R8``, ``UR4`` (uniform), ``P0``, ``UP1`` (predicates); the zero registers and
true predicates (``RZ``, ``URZ``, ``PT``, ``UPT``) are left out. A ``.64`` operand (``R2.64``) names
the pair R2, R3.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from profiler import metrics as M

__all__ = [
    "Barrier",
    "Instruction",
    "Operand",
    "in_order_group",
    "late_read_mask",
    "parse",
    "register_mask",
    "scoreboard_of",
]

GUARD = re.compile(r"^\s*@(!?)(U?P[0-6T])\s+")
_PRED = re.compile(r"(?<![A-Za-z0-9_])(UP|P)([0-6]|T)(?![A-Za-z0-9_])")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_TOK = re.compile(r"(?<![A-Za-z0-9_])(?:(UR|R)(\d+|Z)(\.64)?|(UP|P)([0-6]|T)(?![A-Za-z0-9_]))")
_INT = re.compile(r"^(0x[0-9a-fA-F]+|\d+)$")
_REG = re.compile(r"^U?R(\d+|Z)(?![A-Za-z0-9_])")
_COND = re.compile(r"^(!?)(U?P[0-6T])$")

#: base opcodes whose last hexadecimal operand is a code address
_TARGET_OPS = frozenset(("BRA", "JMP", "CALL", "BSSY"))


@dataclass(frozen=True)
class Operand:
    """One operand as written (``.reuse`` dropped).

    ``kind``: ``"reg"`` (a register, possibly negated/absolute: ``-R5``, ``|R2|``), ``"pred"``
    (``P0``, ``!P2``, ``UPT``), ``"mem"`` (an address in brackets: ``[R2+0x80]``,
    ``desc[UR6][R136.64]``, ``gdesc[UR16]``), ``"imm"`` (a number, ``-INF``), ``"other"`` (special
    registers ``SR_TID.X``, scoreboard/barrier names ``SB0``, ``gsb0``, ``B0``). ``regs``: the
    register names it reads or writes, widened (``R8`` of ``LDSM….4`` -> R8..R11); ``width``: how
    many registers its first register spans (1 for one register, 0 when it names none).
    """

    text: str
    kind: str
    regs: tuple[str, ...]
    width: int


@dataclass(frozen=True)
class Barrier:
    """A scoreboard or barrier an instruction names.

    ``kind``: ``"sb"`` (``DEPBAR.LE SB0, 0x1``: wait until at most ``count`` instructions on
    scoreboard SB0 are pending; cp.async ``wait_group``), ``"gsb"`` (wgmma group ``gsb0`` of an
    ``HGMMA`` or a ``WARPGROUP.DEPBAR.LE gsb0, 0x0``), ``"cta"`` (a named CTA barrier of
    ``BAR.SYNC``/``BAR.ARV``/``BAR.RED``: ``id`` the barrier number, ``count`` the thread count when
    given), ``"convergence"`` (``BSSY B0`` / ``BSYNC B0``), ``"mbarrier"`` (``SYNCS.*``: ``id`` the
    address operand as written, e.g. ``[UR17]``)."""

    kind: str
    id: int | str
    count: int | None = None


@dataclass(frozen=True)
class Instruction:
    """A parsed SASS instruction.

    ``opcode`` with modifiers (``HMMA.16816.F32``), ``base`` (``HMMA``), ``modifiers``
    (``("16816", "F32")``); ``guard`` the predicate register that guards it (``P0``, ``UP1``;
    None when unguarded or guarded by ``PT``) and ``guard_negated`` (``@!P0``); ``dsts`` / ``srcs``
    the destination / source operands (:class:`Operand`); ``reads`` / ``writes`` every register
    name read / written (the guard is read); ``scoreboard`` ``"short"`` / ``"long"`` for a
    variable-latency opcode (ncu's ``short_scoreboard`` / ``long_scoreboard``), else None;
    ``in_order`` the in-order group (``"shared"``) or None; ``barriers`` the scoreboards and
    barriers it names (:class:`Barrier`); ``target`` the code address of a ``BRA``/``JMP``/``CALL``
    (branch target) or ``BSSY`` (reconvergence point), else None. ``rmask`` / ``wmask`` are
    ``reads`` / ``writes`` as bit sets (:func:`register_mask`), for fast dataflow walks.
    """

    text: str
    opcode: str
    base: str
    modifiers: tuple[str, ...]
    guard: str | None
    guard_negated: bool
    dsts: tuple[Operand, ...]
    srcs: tuple[Operand, ...]
    reads: frozenset
    writes: frozenset
    scoreboard: str | None
    in_order: str | None
    barriers: tuple[Barrier, ...]
    target: int | None
    rmask: int = 0
    wmask: int = 0
    cond: str | None = None
    cond_negated: bool = False

    @property
    def is_branch(self) -> bool:
        """A ``BRA``/``JMP`` (conditional or not)."""
        return self.base in ("BRA", "JMP")

    @property
    def conditional(self) -> bool:
        """Whether this branch/exit may or may not be taken: guarded (``@P0 BRA``, ``@!P1 EXIT``) or
        with a predicate operand (``BRA !P0, T``, ``BRA.U UP1, T``, ``@!P0 BRA P1, T``)."""
        return self.guard is not None or self.cond is not None

    def decided_by(self) -> tuple[tuple[str, bool], ...]:
        """The predicates that decide whether this instruction takes effect, as (register, negated):
        its guard and its branch predicate operand; taken when every one holds."""
        out = []
        if self.guard is not None:
            out.append((self.guard, self.guard_negated))
        if self.cond is not None:
            out.append((self.cond, self.cond_negated))
        return tuple(out)


def _scoreboards(d: dict) -> dict[str, str]:
    """base opcode -> its scoreboard (``data/sass.toml`` [scoreboard]); an opcode in [scoreboard_either] gets both
    names, ``"long|short"``, and is a producer for a stall of either reason."""
    out = {op: kind for kind, ops in d["scoreboard"].items() for op in ops}
    kinds = sorted(d["scoreboard"])
    for op in d.get("scoreboard_either", {}).get("ops", ()):
        out[op] = "|".join(kinds)
    return out


@lru_cache(maxsize=1)
def _isa() -> dict:
    d = M._load("sass.toml")
    w = d["widths"]
    return {
        "scoreboard": _scoreboards(d),
        "late_read": tuple(d.get("late_read", ("R", "UR", "P", "UP"))),
        "in_order": {op: group for group, ops in d.get("in_order", {}).items() for op in ops},
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
        "tmem_regs": frozenset(d.get("tcgen05", {}).get("tmem_regs", ())),
        "mbar_arrive": frozenset(d.get("tcgen05", {}).get("mbarrier_arrive", ())),
    }


def scoreboard_of(base: str) -> str | None:
    """``"short"`` / ``"long"``: the scoreboard a base opcode's variable-latency traffic is
    tracked on (``data/sass.toml`` [scoreboard]), ``"long|short"`` for one ncu may report under
    either ([scoreboard_either]), or None for a fixed-latency opcode."""
    return _isa()["scoreboard"].get(base)


@lru_cache(maxsize=1)
def late_read_mask() -> int:
    """Bits (:func:`register_mask`) of the register files a variable-latency instruction reads
    late, after issue (``data/sass.toml`` ``late_read``): a write to one of them after such an
    instruction waits for its read."""
    spans = {"R": (0, 256), "UR": (256, 64), "P": (320, 7), "UP": (330, 7)}
    m = 0
    for kind in _isa()["late_read"]:
        lo, n = spans[kind]
        m |= ((1 << n) - 1) << lo
    return m


def in_order_group(base: str) -> str | None:
    """The in-order group of a base opcode (``data/sass.toml`` [in_order]), or None."""
    return _isa()["in_order"].get(base)


def _split_operands(text: str) -> list[str]:
    return [o for o in map(str.strip, text.split(",")) if o]


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


_OPERANDS: dict[tuple[str, int | None], Operand] = {}


def _operand(text: str, width: int | None) -> Operand:
    """The :class:`Operand` of one operand text, cached by (text, width): a kernel's lines repeat
    the same operands."""
    key = (text, width)
    op = _OPERANDS.get(key)
    if op is None:
        out: list[str] = []
        _regs(text, width, out)
        o = text.lstrip("-!~|")
        if "[" in o:
            kind = "mem"
        elif _PRED.fullmatch(o):
            kind = "pred"
        elif _REG.match(o):
            kind = "reg"
        elif o[:2] == "0x" or o[:1].isdigit() or o.lstrip("+-") in ("INF", "QNAN") or o.startswith("+"):
            kind = "imm"
        else:
            kind = "other"
        op = _OPERANDS[key] = Operand(text, kind, tuple(out), len(out) if kind == "reg" else 0)
        if len(_OPERANDS) > 65536:
            _OPERANDS.clear()
            _OPERANDS[key] = op
    return op


@lru_cache(maxsize=8192)
def _widths(opcode: str, n_src: int) -> tuple[int | None, dict[int, int]]:
    """(width of the first destination operand or None, {source index: width} where not 1) of
    an opcode with modifiers that has ``n_src`` source operands."""
    cfg = _isa()
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
    elif base in cfg["tmem_regs"]:  # LDTM.x32 R4, tmem[UR4] / STTM.x8 tmem[UR4], R4
        n = next((int(m[1:]) for m in mods[1:] if re.fullmatch(r"x\d+", m)), 1)
        if base.startswith("LD"):
            dest_w = n
        else:
            src_w[n_src - 1] = n
    elif "64" in mods[1:] and base in cfg["pair64"]:
        dest_w = 2
    return dest_w, src_w


def _int(text: str) -> int | None:
    return int(text, 0) if _INT.match(text) else None


def _barriers(base: str, opcode: str, ops: list[str]) -> tuple[Barrier, ...]:
    out: list[Barrier] = []
    if base == "DEPBAR" or (base == "WARPGROUP" and ".DEPBAR" in opcode):
        m = re.match(r"^(SB|gsb)(\d+)$", ops[0]) if ops else None
        if m:
            out.append(Barrier("sb" if m.group(1) == "SB" else "gsb", int(m.group(2)),
                               _int(ops[1]) if len(ops) > 1 else None))
    elif base == "BAR" and ops:
        bid = _int(ops[0])
        if bid is None and _REG.match(ops[0]):
            bid = ops[0]  # the id is in a register (BAR.SYNC R2, 0x100): known only at run time
        if bid is not None:
            out.append(Barrier("cta", bid, _int(ops[1]) if len(ops) > 1 else None))
    elif base in ("BSSY", "BSYNC", "BREAK", "BMOV") and ops:
        m = re.match(r"^B(\d+)$", ops[0])
        if m:
            out.append(Barrier("convergence", int(m.group(1))))
    elif base == "SYNCS" or base in _isa()["mbar_arrive"]:  # UTCBAR: tcgen05.commit arrives on an mbarrier
        mem = next((o for o in ops if o.startswith("[")), None)
        if mem is not None:
            out.append(Barrier("mbarrier", mem))
    for o in ops:  # an HGMMA names its wgmma group last: `gsb0`, or on its C operand as the SASS of the
        # reports writes it (`HGMMA.64x128x16.F32 R24, gdesc[UR20], R24.gsb0`: this HGMMA commits the group)
        m = re.match(r"^(?:.*\.)?gsb(\d+)$", o)
        if m and base != "WARPGROUP":
            out.append(Barrier("gsb", int(m.group(1))))
    return tuple(out)


@lru_cache(maxsize=65536)
def parse(sass: str) -> Instruction:
    """Parse one SASS line (see :class:`Instruction`).

    ``'LDSM.16.M88.4 R8, [R2]'`` writes R8..R11 and reads R2; ``'@P0 LDG.E.128 R4,
    desc[UR4][R2.64]'`` writes R4..R7, reads P0, UR4, R2, R3; ``'HMMA.16816.F32 R4, R8, R12, R4'``
    writes R4..R7 and reads R8..R11, R12..R13, R4..R7.

    Destinations: the first operand plus the predicates right after it (``ISETP P0, PT, …``,
    ``IADD3 R4, P0, …``), none when the first operand is an address or an immediate (stores,
    barriers, branches), or as many as ``data/sass.toml`` [dest_operands] says (``SHFL`` 2).
    Cached by text; every line of a report parses (an empty line to an instruction with no opcode).
    """
    reads: list[str] = []
    text = sass.strip().rstrip(";")
    guard, negated = None, False
    g = GUARD.match(text)
    if g:
        if g.group(2) not in ("PT", "UPT"):
            guard, negated = g.group(2), g.group(1) == "!"
            reads.append(guard)
        text = text[g.end():]
    parts = text.split(None, 1)
    if not parts:
        return Instruction(sass, "", "", (), guard, negated, (), (), frozenset(reads), frozenset(), None,
                           None, (), None, register_mask(reads), 0)
    opcode = parts[0]
    ops = _split_operands(parts[1]) if len(parts) > 1 else []
    ops = [o.replace(".reuse", "") for o in ops]
    base, _, rest = opcode.partition(".")
    modifiers = tuple(rest.split(".")) if rest else ()
    cfg = _isa()
    n_rule = cfg["dests"].get(base)

    # how many leading operands are destinations
    if not ops or _is_memory_or_imm(ops[0]):
        n_dest = 0
    elif n_rule is not None:
        n_dest = int(n_rule)
    else:
        n_dest = 1
        while n_dest < len(ops) and _PRED.fullmatch(ops[n_dest].lstrip("!")):
            n_dest += 1
    n_dest = min(n_dest, len(ops))
    dest_w, src_w = _widths(opcode, len(ops) - n_dest)

    dsts = tuple(_operand(o, dest_w if i == 0 else None) for i, o in enumerate(ops[:n_dest]))
    srcs = tuple(_operand(o, src_w.get(i)) for i, o in enumerate(ops[n_dest:]))
    writes = [r for o in dsts for r in o.regs]
    for o in srcs:
        reads += o.regs
    target = None
    if base in _TARGET_OPS or (base == "WARPSYNC" and "COLLECTIVE" in modifiers):
        hexes = _HEX.findall(parts[1]) if len(parts) > 1 else []
        target = int(hexes[-1], 16) if hexes else None
    sb = cfg["scoreboard"].get(base)
    cond, cond_neg = None, False
    if base in _TARGET_OPS and base != "BSSY" and ops:
        c = _COND.match(ops[0])
        if c:
            if c.group(2) not in ("PT", "UPT"):
                cond, cond_neg = c.group(2), c.group(1) == "!"
            elif c.group(1) == "!":
                cond = "!PT"  # never taken
    return Instruction(sass, opcode, base, modifiers, guard, negated, dsts, srcs, frozenset(reads),
                       frozenset(writes), sb, cfg["in_order"].get(base), _barriers(base, opcode, ops),
                       target, register_mask(reads), register_mask(writes), cond, cond_neg)


_BIT_BASE = {"R": 0, "UR": 256, "P": 320, "UP": 330}
_BITS: dict[str, int] = {}


def register_mask(names) -> int:
    """Register names as one int bit set: R0..R255 bits 0-255, UR0..UR63 256-319, P0..P6 320-326,
    UP0..UP6 330-336."""
    m = 0
    bits = _BITS
    for n in names:
        b = bits.get(n)
        if b is None:
            k = 2 if n[0] == "U" else 1
            b = bits[n] = 1 << (_BIT_BASE[n[:k]] + int(n[k:]))
        m |= b
    return m
