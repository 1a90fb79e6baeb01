"""The analyses' results that depend on a launch's SASS alone, cached per build of a kernel.

Many analyses start from the SASS only: the control-flow graph, the producer walk of each stalled
consumer (:mod:`.producers`), the warp-role split, mbarrier names and wait-site plan of the role graph
(:mod:`.roles`), the inferred regions (:mod:`.regions`), the overlap walks (:mod:`.overlap`), the barrier
opcodes' slots and the tensor instructions' tiles (:mod:`.kernel`, :mod:`.roofline`), the build signs, the
slots of each opcode and opcode class (:func:`codes`). A new
report of a build seen before (another shape of a rung, a re-profile) has new metrics but the same
SASS, so those parts are kept here and only the metric-dependent rest is computed again.

* **Key**: a sha256 over what the cached parts are computed from, the launch's ``sass`` frame's
  SASS columns: every slot's text, full and base opcode and opcode class, its offset and its address
  relative to the frame's first. A branch target is printed as an absolute address (any hexadecimal
  literal at or above ``min_address`` of ``data/sass_cache.toml``: SASS immediates are 32-bit), so
  the same build loaded elsewhere prints other numbers: where every such literal sits in an opcode
  listed PC-relative there (where the analyses read it as a branch target, an index of the frame),
  it enters the key relative to the frame's first address, and the frame's base does not; otherwise
  (a frame below ``min_address``, or an address literal elsewhere) the key holds the texts as printed
  and the base. Besides: a :func:`profiler.cachefile.fingerprint` of the analyses, the SASS parser,
  the data files and the metric maps (any edit there starts afresh). Parts that depend on a launch
  statistic besides the SASS name it in their part name (the role split: the CTA's shape).
* **Parts** hold positions in the frame (indices), never PCs: a PC is read from the current frame
  when a result is used, so a build at another base address gets its own PCs.
* **Entry** ``<cache dir>/<key>.analyses``, JSON ``{"parts": {name: value}}``, sealed and written
  atomically by :mod:`profiler.cachefile`; read once per process and build (an in-process memo on
  top), written back by :func:`flush` (end of :func:`profiler.analyze.summarize_launch`) when a part
  was added. The producer walk's control-flow graph and per-slot registers (~270 KB for 3,368 slots),
  needed only by a report whose samples stall where no report of the build stalled before, are an entry
  of their own, ``<key>.walk`` (:func:`side`). An entry that fails its seal or does not decode is
  deleted and rebuilt; an unwritable cache folder only costs the speed.

Every part's value is plain JSON (lists, str-keyed dicts, ints, strs, bools, None) and is used as
read back: a freshly computed part goes through the same decoding as one read from disk.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from profiler import cachefile, sasscache
from profiler.metrics import full_opcode

__all__ = ["bits", "codes", "flush", "forget", "ints", "key_of", "part", "side", "unbits", "unints"]

#: what a cached part is computed from: the analyses, the SASS parser, the data files but the lists of the
#: metrics a GPU has (``*.txt``: ~1 MB that only the ingester reads), the metric maps, the SASS cache's rule for
#: which literals are branch targets (the key's relative mode); numpy's version enters
#: the key from ``numpy.__version__`` (asking the installed distributions costs ~15 ms per process)
_FROM = (("analyze", "sass", *sorted(f"data/{p.name}" for p in (cachefile.PACKAGE / "data").iterdir()
                                     if p.suffix != ".txt"),
          "metrics.py", "names.py", "cachefile.py", "sasscache.py"),)
_SUFFIX = ".analyses"
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{9,}")  # a literal of 33+ bits: at least min_address
_MEMO_SIZE = 16
#: key -> _Entry of the builds seen in this process
_MEMO: OrderedDict[str, _Entry] = OrderedDict()


class _Entry:
    """One build's parts: ``raw`` (JSON values, what is stored), ``live`` (decoded), ``dirty``."""

    __slots__ = ("key", "raw", "live", "dirty")

    def __init__(self, key: str, raw: dict) -> None:
        self.key, self.raw, self.dirty = key, raw, False
        self.live: dict[str, object] = {}


def key_of(sass) -> str | None:
    """The key of a ``sass`` frame's SASS-only results (module docstring); None without SASS."""
    if sass is None or not len(sass) or "sass" not in sass.columns or "address" not in sass.columns:
        return None
    texts = sass["sass"].tolist()
    try:
        joined = "\0".join(texts)
    except TypeError:  # a slot without text
        return None
    addresses = sass["address"].to_numpy().astype(np.int64)
    a0 = int(addresses[0])
    low = sasscache.min_address()
    opcodes = sass["opcode"].tolist() if "opcode" in sass.columns else None
    pieces: list[str] = []
    relative = a0 >= low
    at = line = 0
    for m in _ADDRESS.finditer(joined):
        v = int(m.group(), 16)
        if v < low:
            continue
        line += joined.count("\0", at, m.start())
        op = opcodes[line] if opcodes is not None else full_opcode(texts[line])
        if not relative or not isinstance(op, str) or not sasscache.pc_relative(op):
            relative = False
            break
        pieces.append(joined[at:m.start()])
        pieces.append(f"@{v - a0:+#x}")
        at = m.end()
    h = hashlib.sha256(f"{cachefile.fingerprint(*_FROM)}\0numpy {np.__version__}\0".encode())
    h.update(f"{len(texts)}\0{'rel' if relative else a0}\0".encode())
    h.update((addresses - a0).tobytes())
    if "offset" in sass.columns:
        h.update(sass["offset"].to_numpy().astype(np.int64).tobytes())
    h.update(("".join(pieces) + joined[at:] if relative else joined).encode("utf-8", "surrogatepass"))
    for col in ("opcode", "base", "opcode_class"):
        vals = sass[col].tolist() if col in sass.columns else []
        h.update(f"\1{col}\0".encode() + "\0".join(map(str, vals)).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _path(key: str):
    from profiler.paths import cache_dir  # noqa: PLC0415

    return cache_dir() / f"{key}{_SUFFIX}"


def _load(key: str) -> _Entry:
    """The entry of ``key``: from the memo, else from disk (a damaged one deleted), else empty."""
    e = _MEMO.get(key)
    if e is not None:
        _MEMO.move_to_end(key)
        return e
    raw: dict = {}
    path = _path(key)
    payload = cachefile.read(path)
    if payload is not None:
        try:
            d = json.loads(payload)
            ok = isinstance(d, dict) and isinstance(d.get("parts"), dict)
        except ValueError:
            ok = False
        if ok:
            raw = d["parts"]
        else:
            cachefile.discard(path)
    e = _MEMO[key] = _Entry(key, raw)
    while len(_MEMO) > _MEMO_SIZE:
        _MEMO.popitem(last=False)
    return e


def _entry(launch) -> _Entry | None:
    from profiler.analyze._common import per_launch  # noqa: PLC0415

    key = per_launch(launch, "buildcache.key", lambda: key_of(getattr(launch, "sass", None)))
    return None if key is None else _load(key)


def part(launch, name: str, build: Callable[[], Any], decode: Callable[[Any], Any] | None = None) -> Any:
    """The part ``name`` of the launch's build: decoded from the cache, or ``build()`` (plain JSON values)
    stored and decoded the same way (``decode``: default the value itself). A stored value that fails
    to decode is dropped with its entry's file and built again. Without SASS, ``build()`` decoded."""
    e = _entry(launch)
    dec = decode or (lambda v: v)
    if e is None:
        return dec(build())
    got = e.live.get(name, _ABSENT)
    if got is not _ABSENT:
        return got
    raw = e.raw.get(name, _ABSENT)
    if raw is not _ABSENT:
        try:
            got = e.live[name] = dec(raw)
            return got
        except (KeyError, IndexError, TypeError, ValueError):
            e.raw.pop(name, None)
            cachefile.discard(_path(e.key))
            e.dirty = True
    raw = e.raw[name] = build()
    e.dirty = True
    got = e.live[name] = dec(raw)
    return got


_ABSENT = object()


def side(launch, name: str, build: Callable[[], Any], decode: Callable[[Any], Any]) -> Any:
    """Like :func:`part`, for a large part only some runs need (the producer walk's graph and per-slot
    registers): kept in an entry of its own, ``<key>.<name>``, read only when asked for and written as soon
    as it is built."""
    e = _entry(launch)
    if e is None:
        return decode(build())
    memo = "side:" + name
    got = e.live.get(memo, _ABSENT)
    if got is not _ABSENT:
        return got
    path = _path(e.key).with_suffix("." + name)
    payload = cachefile.read(path)
    if payload is not None:
        try:
            got = e.live[memo] = decode(json.loads(payload))
            return got
        except (KeyError, IndexError, TypeError, ValueError):
            cachefile.discard(path)
    raw = build()
    try:
        cachefile.write(path, json.dumps(raw, separators=(",", ":"), allow_nan=False).encode())
    except (TypeError, ValueError):  # not plain JSON (a bug): kept in this process only
        pass
    got = e.live[memo] = decode(raw)
    return got


def touch(launch) -> None:
    """Mark the launch's entry changed (a part that grows in place: the producer walks)."""
    e = _entry(launch)
    if e is not None:
        e.dirty = True


def flush(launch) -> None:
    """Write the launch's entry when a part was added since it was read (atomically; an unwritable
    cache folder is ignored)."""
    e = _entry(launch)
    if e is None or not e.dirty:
        return
    e.dirty = False
    try:
        payload = json.dumps({"parts": e.raw}, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError):  # a part that is not plain JSON (a bug): kept in this process only
        return
    cachefile.write(_path(e.key), payload)


def forget() -> None:
    """Drop the in-process memo (the next use reads the disk entry again)."""
    _MEMO.clear()


def bits(indices, n: int) -> str:
    """A set of indices in ``range(n)`` as a compact string (:func:`unbits` reads it back)."""
    mask = np.zeros(n, dtype=bool)
    ix = np.fromiter(indices, dtype=np.intp)
    mask[ix] = True
    return base64.b64encode(np.packbits(mask).tobytes()).decode("ascii")


def unbits(s: str, n: int) -> np.ndarray:
    """The sorted indices (intp) of a :func:`bits` string of length ``n``."""
    raw = np.frombuffer(base64.b64decode(s.encode("ascii"), validate=True), dtype=np.uint8)
    if len(raw) != (n + 7) // 8:
        raise ValueError("bitmap of another length")
    return np.flatnonzero(np.unpackbits(raw)[:n]).astype(np.intp)


def ints(values) -> str:
    """Integers (each fitting in 32 bits) as a compact string (:func:`unints` reads them back)."""
    return base64.b64encode(np.asarray(values, dtype="<i4").tobytes()).decode("ascii")


def unints(s: str, n: int) -> np.ndarray:
    """The ``n`` integers (intp) of an :func:`ints` string."""
    raw = np.frombuffer(base64.b64decode(s.encode("ascii"), validate=True), dtype="<i4")
    if len(raw) != n:
        raise ValueError("integers of another count")
    return raw.astype(np.intp)


def codes(launch, column: str) -> tuple[list[str], np.ndarray] | None:
    """``np.unique(launch.sass[column], return_inverse=True)`` of a SASS column (``opcode``, ``opcode_class``,
    ``base``): (the sorted distinct values, every slot's index among them), kept per build; None when a slot
    has none (the caller's own way then)."""
    sass = launch.sass
    n = len(sass)
    if column not in sass.columns or sass[column].hasnans:  # a slot without one: not what np.unique sorts
        return None

    def build() -> list:
        uniq, inv = np.unique(sass[column].to_numpy(dtype=object), return_inverse=True)
        return [[str(u) for u in uniq], ints(inv.reshape(-1))]

    def decode(v: list) -> tuple[list[str], np.ndarray]:
        names, idx = v
        got = unints(idx, n)
        if len(got) and (got.min() < 0 or got.max() >= len(names)):
            raise ValueError("codes out of range")
        got.setflags(write=False)
        return [str(x) for x in names], got

    return part(launch, f"codes.{column}", build, decode)
