"""Static facts read from a built cubin, on any machine: SASS opcode counts and demangled names.

Tools come from PyPI where possible (``nvidia-cuda-cuobjdump`` puts ``cuobjdump`` under
``site-packages/nvidia/cu*/bin``), else from PATH / ``/usr/local/cuda/bin``.

:func:`sass_text` keeps what it read, keyed on the cubin's bytes and the cuobjdump binary: in this
process, and sealed on disk beside the build cache (``<build cache>/../sass/``, see
:func:`kernels.build.cache_dir`). One ``cuobjdump -sass`` costs ~0.4 s of CPU whatever the cubin's
size (it spawns nvdisasm, whose start-up is most of it; ``nvdisasm -ndf -c`` direct is 0.25 s, and
neither takes several cubins per call: measured 2026-12-01 on the 2-core machine), and the same
cubin is read again by the build's own facts, the freshness check, the policy check and the trace
and wip proofs: 64 calls for 52 cubins in one run of the test suite before this cache.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from collections import Counter
from functools import lru_cache
from pathlib import Path

from profiler.errors import WhowaitsError


def _pypi_tool(name: str) -> str | None:
    try:
        import nvidia  # namespace package from nvidia-cuda-* wheels
    except ImportError:
        return None
    for base in getattr(nvidia, "__path__", []):
        for cand in sorted(Path(base).glob(f"cu*/bin/{name}"), reverse=True):
            if cand.is_file():
                return str(cand)
        cand = Path(base) / "cuda_cuobjdump" / "bin" / name  # cu12 wheel layout
        if cand.is_file():
            return str(cand)
    return None


@lru_cache(maxsize=None)
def find_tool(name: str) -> str:
    """Path of a CUDA binary tool (``cuobjdump``, ``nvdisasm``, ``cu++filt``); WhowaitsError if absent."""
    for cand in (_pypi_tool(name), shutil.which(name), f"/usr/local/cuda/bin/{name}"):
        if cand and Path(cand).is_file():
            return cand
    raise WhowaitsError(
        f"{name} not found: install the PyPI package nvidia-cuda-cuobjdump (pip install -e .) or put CUDA's bin on PATH"
    )


# "        /*0040*/                   @!P0 HMMA.16816.F32 R4, R8, R12, R4 ;"
_SASS_LINE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)(?:\.[A-Z0-9_.]*)?\b")


_TEXTS: dict[str, str] = {}


@lru_cache(maxsize=None)
def _tool_key(tool: str) -> str:
    st = Path(tool).stat()
    return f"{Path(tool).resolve()}:{st.st_size}:{st.st_mtime_ns}"


def _text_entry(key: str) -> Path:
    from profiler.paths import build_dir  # noqa: PLC0415

    return build_dir().parent / "sass" / f"{key}.txt"


def sass_text(cubin: Path) -> str:
    """``cuobjdump -sass`` of a cubin (from the cache when these bytes were read before by this
    cuobjdump; an entry whose seal fails is deleted and read again)."""
    from profiler import cachefile  # noqa: PLC0415

    tool = find_tool("cuobjdump")
    try:
        data = Path(cubin).read_bytes()
    except OSError as err:
        raise WhowaitsError(f"cannot read {cubin}: {err.strerror or err}") from None
    key = hashlib.sha256(_tool_key(tool).encode() + b"\0" + data).hexdigest()[:40]
    text = _TEXTS.get(key)
    if text is not None:
        return text
    entry = _text_entry(key)
    payload = cachefile.read(entry)
    if payload is not None:
        try:
            text = payload.decode()
        except UnicodeDecodeError:
            cachefile.discard(entry)
    if text is None:
        proc = subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise WhowaitsError(f"cuobjdump failed on {cubin}: {(proc.stderr or proc.stdout).strip().splitlines()[:1]}")
        text = proc.stdout
        cachefile.write(entry, text.encode())  # a read-only or full cache folder costs speed only
    _TEXTS[key] = text
    return text


# the offset and the instruction (predicate included, no trailing ';') of each SASS line
_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def instructions(sass: str) -> list[tuple[int, str]]:
    """``[(offset, instruction)]`` of a ``cuobjdump -sass`` text, in address order."""
    return [(int(m.group(1), 16), m.group(2)) for m in _INSTRUCTION.finditer(sass)]


def base_opcode(ins: str) -> str:
    """``@!P0 HMMA.16816.F32 R4, ...`` -> ``HMMA``."""
    op = ins.split()[1] if ins.startswith("@") else ins.split()[0]
    return op.split(".", 1)[0]


def mufu_under_pv(seq: list[tuple[int, str]]) -> list[int]:
    """For each ``WARPGROUP.DEPBAR.LE gsb0, 0x1`` (QK^T[n] done, PV[n-1] pending) the MUFU.EX2 before the next
    ``gsb0, 0x0`` (PV[n-1] done): the softmax exponentials that can run while the consumer's own PV is on the
    tensor cores (0 when ptxas hoisted the PV wait above the softmax, as in v12-v14)."""
    counts, inside = [], False
    for _, ins in seq:
        if "WARPGROUP.DEPBAR.LE gsb0, 0x1" in ins:
            counts.append(0)
            inside = True
        elif "WARPGROUP.DEPBAR.LE gsb0, 0x0" in ins:
            inside = False
        elif inside and "MUFU.EX2" in ins:
            counts[-1] += 1
    return counts


def opcode_counts(sass: str) -> dict[str, int]:
    """Static count of each base opcode (modifiers dropped: ``HMMA.16816.F32`` -> ``HMMA``), most common first."""
    counts: Counter[str] = Counter()
    for line in sass.splitlines():
        m = _SASS_LINE.match(line)
        if m:
            counts[m.group(1)] += 1
    return dict(counts.most_common())


def demangle(names: list[str]) -> list[str]:
    """Demangle C++ symbols with ``cu++filt`` or binutils' ``c++filt`` (WhowaitsError if neither exists)."""
    tool = None
    for cand in ("cu++filt", "c++filt"):
        try:
            tool = find_tool(cand)
            break
        except WhowaitsError:
            continue
    if tool is None:
        raise WhowaitsError("no demangler found: need cu++filt (CUDA) or c++filt (binutils) on PATH")
    proc = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True)
    if proc.returncode != 0:
        raise WhowaitsError(f"{tool} failed: {proc.stderr.strip()[:200]}")
    return proc.stdout.splitlines()[: len(names)]
