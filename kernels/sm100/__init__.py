"""Blackwell (sm_100a / sm_103a) kernels of ours, built and read statically: no GPU of that kind is here.

- :func:`build`: ``nvcc -cubin -arch=<arch> -lineinfo -O3`` of a kernel folder's ``kernel.cu``, cached in
  the build cache (``kernels.build.cache_dir()/../sm100/``) under the hash of the source, the arch, the
  flags and nvcc's version; written atomically.
- :func:`functions`: the SASS of each function of a cubin (``cuobjdump -sass`` through
  :func:`kernels.sass.sass_text`, cached), as ``{name: [(offset, instruction)]}``; cuobjdump prints branch
  targets as offsets within the function (``@P0 BRA 0x250``), the addresses the SASS front end takes.

``tcgen05_gemm/kernel.cu`` holds a warp-specialised tcgen05 GEMM tile (TMA producer warp, MMA warp,
four epilogue warps reading tensor memory, mbarrier rings between them) and a tensor-memory round trip;
``tests/test_sm100.py`` reads their SASS.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from pathlib import Path

from profiler.errors import WhowaitsError

HERE = Path(__file__).resolve().parent
ARCHS = ("sm_100a", "sm_103a")
FLAGS = ("-cubin", "-lineinfo", "-O3")
#: the CTA shape each kernel is launched with (what a static role split needs)
BLOCK_DIM = {"tcgen05_gemm": (192, 1, 1), "tmem_roundtrip": (128, 1, 1)}


def source(kernel: str = "tcgen05_gemm") -> Path:
    return HERE / kernel / "kernel.cu"


def build(kernel: str = "tcgen05_gemm", arch: str = "sm_100a") -> Path:
    """The cubin of ``kernels/sm100/<kernel>/kernel.cu`` for ``arch`` (built once per content)."""
    from kernels import build as kbuild

    if arch not in ARCHS:
        raise WhowaitsError(f"unknown Blackwell arch {arch!r}: one of {', '.join(ARCHS)}")
    src = source(kernel)
    if not src.is_file():
        raise WhowaitsError(f"no kernel source {src}")
    nvcc = kbuild.find_nvcc()
    key = hashlib.sha256(b"\0".join([src.read_bytes(), arch.encode(), " ".join(FLAGS).encode(),
                                     kbuild.nvcc_version().encode()])).hexdigest()[:24]
    out_dir = kbuild.cache_dir().parent / "sm100"
    out = out_dir / f"{kernel}-{arch}-{key}.cubin"
    if out.is_file():
        return out
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{kernel}-", suffix=".cubin", dir=out_dir)
    os.close(fd)
    try:
        proc = subprocess.run([nvcc, *FLAGS, f"-arch={arch}", "-o", tmp, str(src)], capture_output=True, text=True,
                              check=False)
        if proc.returncode != 0:
            msg = (proc.stderr or proc.stdout).strip().splitlines()
            raise WhowaitsError(f"nvcc failed on {src} for {arch}: {msg[0] if msg else proc.returncode}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)\s*$", re.MULTILINE)


def functions(cubin: Path) -> dict[str, list[tuple[int, str]]]:
    """``{function name: [(offset, instruction)]}`` of a cubin's SASS, each in address order."""
    from kernels import sass

    text = sass.sass_text(cubin)
    heads = list(_FUNCTION.finditer(text))
    out: dict[str, list[tuple[int, str]]] = {}
    for i, m in enumerate(heads):
        body = text[m.end(): heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        out[m.group(1)] = sass.instructions(body)
    return out
