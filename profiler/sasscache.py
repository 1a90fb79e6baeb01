"""SASS text shared across reports: ncu_report's disassembly of a kernel function, cached by its code.

Reading a report, most of the time goes into ncu_report's ``IAction.sass_by_pc``: one native call
per instruction slot (3,368 for the flash report's kernel) plus a one-time start of its disassembler
per process. Many reports hold the same build of a function (one rung at several shapes, a sweep,
the ``whowaits`` and full-set reports of one kernel, and every report again after an edit to the
ingester or a data file, which misses the frames cache of :mod:`profiler.report`). Each report file
embeds the ELF module of the profiled kernel, so the function's text is cached here by the bytes
of that module:

* **Key**: the sha256 of the embedded ELF module holding ``.text.<mangled name>``, the mangled
  name, and a :func:`profiler.cachefile.fingerprint` of this file, ``data/sass_cache.toml`` and the
  ``ncu-report`` version. Edits elsewhere (analyses, metric maps, the ingester) keep the entry.
  A name found in two modules with different bytes is not cached.
* **Entry** (``<cache dir>/<module sha256>.<fingerprint>.<name hash>.sass``, sealed and
  written atomically by :mod:`profiler.cachefile`): JSON ``{"function", "base", "size", "step",
  "texts", "opcodes", "files", "lines"}``, the text of every slot of the function from its first
  instruction (``base``, the address it had in the report that wrote the entry) to its end (``size``
  bytes, ``step`` a slot), each slot's full opcode (:func:`profiler.metrics.full_opcode` of its text:
  moving the text leaves it alone) and its source file and line (``IAction.source_info``: the module's
  line table, so the same for every report of the build; null where ncu_report has none). A known
  build's ingest then spends no native call and no parse on its slots.
* **Moving the text**: ncu_report prints PC-relative targets (branches, ``BSSY``, ``CALL.REL``…)
  as absolute addresses, so the text of the same code loaded at another address differs in those
  numbers only. An entry is written only when every literal at or above ``min_address`` sits in
  an opcode listed PC-relative (``data/sass_cache.toml``) and inside the function, printed as
  ``0x`` + lowercase hex; reading it moves exactly those literals by the distance between the two
  bases. ``tests/test_sasscache.py`` checks on the committed reports that share a build at
  different addresses that the moved text equals ncu_report's, byte for byte.
* **When it is used**: only where the report's PC layout is known to start at the function's first
  instruction: it has per-PC ``inst_executed`` (the entry instruction always executes, so its
  lowest PC is the function's start), every PC the metrics name lies inside the function, and
  the slot size the ingester infers equals the entry's. Otherwise the text is read from
  ncu_report, as without the cache.

An entry that fails its seal, does not decode or does not match its key's function is deleted
and rebuilt. Only :mod:`profiler.report` calls this module; it never imports ``ncu_report``.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from profiler import cachefile

__all__ = ["Entry", "Modules", "holds_any", "lookup", "min_address", "store", "movable", "move", "pc_relative"]

#: what an entry is derived from (package-relative files) and the reader whose text it holds
_FROM = (("sasscache.py", "data/sass_cache.toml"), ("ncu-report",))
_SUFFIX = ".sass"
_ELF = b"\x7fELF\x02\x01"  # 64-bit, little-endian
_EM_CUDA = 190
_HEX = re.compile(r"0x[0-9a-f]+")


@lru_cache(maxsize=1)
def _config() -> tuple[tuple[str, ...], int]:
    from profiler import metrics as M  # noqa: PLC0415

    d = M._load("sass_cache.toml")
    return tuple(str(o) for o in d["pc_relative"]), int(d["min_address"])


def pc_relative(opcode: str) -> bool:
    """Whether ncu_report prints ``opcode``'s address literals as absolute branch targets (``pc_relative`` of
    ``data/sass_cache.toml``: the opcode or one with modifiers after it)."""
    return any(opcode == o or opcode.startswith(o + ".") for o in _config()[0])


def min_address() -> int:
    """``min_address`` of ``data/sass_cache.toml``: a hexadecimal literal from here up is an address."""
    return _config()[1]


class Modules:
    """The CUDA ELF modules a report file embeds: ``.text.<name>`` section -> (module sha256, size
    of the function's code). Parsed on first use; a file without any gives no functions."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._functions: dict[str, tuple[str, int] | None] | None = None

    def function(self, mangled: str) -> tuple[str, int] | None:
        """(sha256 of the module holding ``.text.<mangled>``, the section's size), or None when no
        module, or more than one module with different bytes, holds it."""
        if self._functions is None:
            try:
                self._functions = _scan(self.path.read_bytes())
            except OSError:
                self._functions = {}
        return self._functions.get(mangled)


def holds_any(modules: Modules) -> bool:
    """Whether the cache holds the text of any function of the report's modules (a report of a build
    seen before: :mod:`profiler.report` then reads it without a disassembly worker). Read from the
    file's bytes alone, before ncu_report opens it."""
    if modules._functions is None:
        modules.function("")
    return any(fn is not None and _path(*fn[:1], name).exists()
               for name, fn in (modules._functions or {}).items())


def _scan(buf: bytes) -> dict[str, tuple[str, int] | None]:
    out: dict[str, tuple[str, int] | None] = {}
    at = buf.find(_ELF)
    while at >= 0:
        module = _module(buf, at)
        if module is None:
            at = buf.find(_ELF, at + 1)
            continue
        end, sections = module
        sha = hashlib.sha256(memoryview(buf)[at:end]).hexdigest()
        for name, size in sections:
            prev = out.get(name, (sha, size))
            out[name] = (sha, size) if prev == (sha, size) else None
        at = buf.find(_ELF, end)
    return out


def _module(buf: bytes, at: int) -> tuple[int, list[tuple[str, int]]] | None:
    """(end offset, [(function name, code size)]) of a CUDA ELF starting at ``buf[at]``, or None
    when the bytes there are no well-formed one (a chance match of the magic)."""
    try:
        (machine,) = struct.unpack_from("<H", buf, at + 18)
        phoff, shoff = struct.unpack_from("<QQ", buf, at + 32)
        phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", buf, at + 54)
        if machine != _EM_CUDA or shentsize != 64 or not 0 < shstrndx < shnum:
            return None
        end = max(shoff + shnum * shentsize, phoff + phnum * phentsize)
        heads = []
        for i in range(shnum):
            name, kind, _flags, _addr, off, size = struct.unpack_from("<IIQQQQ", buf, at + shoff + 64 * i)
            heads.append((name, kind, off, size))
            if kind != 8:  # SHT_NOBITS holds no bytes in the file
                end = max(end, off + size)
        if at + end > len(buf):
            return None
        _, _, stroff, strsize = heads[shstrndx]
        names = buf[at + stroff: at + stroff + strsize]
        sections = []
        for name, kind, _off, size in heads:
            stop = names.index(b"\0", name)
            text = names[name:stop].decode("utf-8")
            if kind == 1 and text.startswith(".text."):  # SHT_PROGBITS
                sections.append((text[len(".text."):], size))
        return at + end, sections
    except (struct.error, ValueError, IndexError, UnicodeDecodeError):
        return None


def _path(module_sha: str, mangled: str) -> Path:
    from profiler.paths import cache_dir  # noqa: PLC0415

    name = hashlib.sha256(mangled.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return cache_dir() / f"{module_sha}.{cachefile.fingerprint(*_FROM)}.{name}{_SUFFIX}"


def movable(texts: list[str], opcodes: list[str], base: int, size: int) -> bool:
    """Whether the text of a function at ``base`` can be moved to another address: it is loaded at
    or above ``min_address``, and every literal from there up is an address inside the function
    (``base`` to ``base + size``, both ends included) in a PC-relative opcode, printed as
    ``format(value, "#x")``."""
    low = _config()[1]
    if base < low:
        return False
    for text, opcode in zip(texts, opcodes):
        for m in _HEX.finditer(text):
            v = int(m.group(), 16)
            if v < low:
                continue
            if not (pc_relative(opcode) and base <= v <= base + size and format(v, "#x") == m.group()):
                return False
    return True


def move(texts: list[str], old: int, new: int) -> list[str]:
    """``texts`` (of a :func:`movable` function at ``old``) as they read at ``new``."""
    low = _config()[1]
    if old == new:
        return list(texts)
    delta = new - old

    def shift(m: re.Match) -> str:
        v = int(m.group(), 16)
        return m.group() if v < low else format(v + delta, "#x")

    return [_HEX.sub(shift, t) if "0x" in t else t for t in texts]


class Entry(NamedTuple):
    """What the cache holds of a function, slot by slot from its first instruction."""

    texts: list[str]
    opcodes: list[str]
    files: list[str | None]
    lines: list[int | None]


def _valid(d: dict, mangled: str, size: int, step: int) -> bool:
    texts, n = d["texts"], len(d["texts"]) if isinstance(d["texts"], list) else -1
    kinds = {f: set(map(type, d[f])) if isinstance(d[f], list) and len(d[f]) == n else None
             for f in ("texts", "opcodes", "files", "lines")}
    return (d["function"] == mangled and d["size"] == size and d["step"] == step
            and isinstance(d["base"], int) and n * step == size and kinds["texts"] == {str} and all(texts)
            and kinds["opcodes"] == {str}
            and kinds["files"] is not None and kinds["files"] <= {str, type(None)}
            and kinds["lines"] is not None and kinds["lines"] <= {int, type(None)})


def lookup(modules: Modules, mangled: str, base: int, step: int) -> Entry | None:
    """What the cache holds of every slot of function ``mangled`` loaded at ``base`` (``step`` bytes a
    slot), its text moved to ``base``, or None (not cached, not cacheable, or a damaged entry: deleted)."""
    fn = modules.function(mangled)
    if fn is None or base < _config()[1]:
        return None
    sha, size = fn
    path = _path(sha, mangled)
    payload = cachefile.read(path)
    if payload is None:
        return None
    try:
        d = json.loads(payload)
        ok = isinstance(d, dict) and _valid(d, mangled, size, step)
    except (ValueError, TypeError, KeyError):
        ok = False
    if not ok:
        cachefile.discard(path)
        return None
    return Entry(move(d["texts"], d["base"], base), d["opcodes"], d["files"], d["lines"])


def store(modules: Modules, mangled: str, base: int, step: int, texts: list[str], opcodes: list[str],
          files: list[str | None], lines: list[int | None]) -> bool:
    """Cache function ``mangled`` (every slot from its first instruction at ``base``: the text as
    ncu_report gave it, the full opcode, the source file and line) when it covers the function exactly
    and :func:`movable`; True if so."""
    fn = modules.function(mangled)
    if fn is None or step <= 0:
        return False
    sha, size = fn
    if (len(texts) * step != size or not all(texts) or not len(texts) == len(opcodes) == len(files) == len(lines)
            or not movable(texts, opcodes, base, size)):
        return False
    payload = {"function": mangled, "base": base, "size": size, "step": step, "texts": list(texts),
               "opcodes": list(opcodes), "files": list(files), "lines": [None if ln is None else int(ln) for ln in lines]}
    cachefile.write(_path(sha, mangled), json.dumps(payload).encode("utf-8", "surrogatepass"))
    return True
