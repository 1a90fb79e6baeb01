"""Build one cubin per (version, config) with nvcc, on any machine (no GPU needed).

For each build a tiny translation unit is generated that includes ``kernels/<version>/kernel.cu`` and
explicitly instantiates ``whowaits::<version>::flash_fwd<config.template_args()>``. Results are cached
under ``$WHOWAITS_BUILD_DIR`` or ``<repo>/.cache/whowaits/build/<hash>/`` (an installed wheel: the user's cache
folder, :func:`cache_dir`) where the hash covers the
files the translation unit includes (transitively, each by its name relative to ``kernels/`` and its bytes),
the flags, the nvcc version and the config; a cache entry is written to a temporary folder and renamed
into place, so a half-finished build is never read.

``NVCC_FLAGS`` (the one place the flags live), with reasons:

- ``-cubin -gencode arch=compute_90a,code=sm_90a``: machine code for the H200 only, loaded with the
  driver API; the ``-gencode`` spelling, because ``-arch=sm_90a`` with nvcc 13.0 also runs a plain
  sm_90 pass that rejects wgmma/setmaxnreg (device/HOPPER.md).
- ``-O3``: release code, as benchmarked.
- ``-lineinfo``: source lines for ncu's source page (``--import-source yes``), no effect on codegen.
- ``-std=c++17``: ``if constexpr`` and friends in the templates.
- ``-I kernels``: versions include shared helpers as ``"common/sm80/<name>.cuh"`` (``common/sm90/`` for Hopper-only ones).
- ``-Xptxas -v``: ptxas prints registers, shared memory, stack and spills, parsed into ``BuildResult``.
- ptxas warnings C7508 / C7511 / C7515 / C7519 (``FATAL_PTXAS_WARNINGS``: setmaxnreg ignored, wgmma serialised
  for lack of registers, wgmma serialised, warpgroup.arrive injected) fail the build: each means the Hopper code is
  not what the source claims. A rung that records one on purpose lists it in ``allow_ptxas`` (v23: C7511).
- no ``--use_fast_math``: each version chooses its math explicitly (``__expf``, ``exp2f``, ``__fdividef``),
  so a rung that changes the softmax instructions (v06) changes them in its own source, not by a flag.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from kernels import sass as _sass
from kernels.config import FwdConfig
from kernels.registry import KERNELS_DIR, PERSISTENT_ABIS, TENSOR_MAPS, WORKSPACE_ABIS, Version
from profiler.errors import WhowaitsError
from profiler.paths import build_dir

NVCC_FLAGS: tuple[str, ...] = (
    "-cubin",
    "-gencode",
    "arch=compute_90a,code=sm_90a",
    "-O3",
    "-lineinfo",
    "-std=c++17",
    "-Xptxas",
    "-v",
)
CACHE_FORMAT = 2  # bump when BuildResult's meta.json or the key's inputs change (2: only included files)


@dataclass
class BuildResult:
    """What one build produced: the cubin, its entry symbol and the resources ptxas reported."""

    version: str
    config: FwdConfig
    cubin: Path
    entry: str  # mangled name, for cuModuleGetFunction
    registers: int
    smem_static_bytes: int  # static __shared__ as ptxas reports it
    smem_dynamic_bytes: int  # from the version's smem_layout (CONTRACT.md)
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    barriers: int
    sass_opcodes: dict[str, int] = field(default_factory=dict)
    ptxas_log: str = ""
    cached: bool = False

    @property
    def smem_bytes(self) -> int:
        return self.smem_static_bytes + self.smem_dynamic_bytes

    @property
    def spill_bytes(self) -> int:
        return self.spill_store_bytes + self.spill_load_bytes

    def as_json(self) -> dict:
        """The row ``whowaits kernels build --format json`` prints."""
        return {
            "version": self.version,
            "config": self.config.as_dict(),
            "config_short": self.config.short_form(),
            "registers": self.registers,
            "smem_bytes": self.smem_bytes,
            "smem_static_bytes": self.smem_static_bytes,
            "smem_dynamic_bytes": self.smem_dynamic_bytes,
            "stack_bytes": self.stack_bytes,
            "spill_bytes": self.spill_bytes,
            "spill_store_bytes": self.spill_store_bytes,
            "spill_load_bytes": self.spill_load_bytes,
            "barriers": self.barriers,
            "entry": self.entry,
            "cubin": str(self.cubin),
            "sass_opcodes": self.sass_opcodes,
        }


def pypi_nvcc() -> str | None:
    """The ``nvcc`` of PyPI's ``nvidia-cuda-nvcc`` wheel (``nvidia/cu13/bin/nvcc``; the dev extra
    installs it, with the matching ``nvidia-cuda-crt``/``-runtime``/``nvidia-nvvm``), if installed."""
    import importlib.util  # noqa: PLC0415

    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return None
    for root in (spec.submodule_search_locations or []) if spec else []:
        for sub in ("cu13", "cuda_nvcc"):
            cand = Path(root) / sub / "bin" / "nvcc"
            if cand.is_file() and os.access(cand, os.X_OK):
                return str(cand)
    return None


@lru_cache(maxsize=1)
def find_nvcc() -> str:
    """``nvcc`` on PATH, else ``/usr/local/cuda/bin/nvcc``, else the one PyPI's ``nvidia-cuda-nvcc``
    installed (the dev extra: so CI compiles every rung without a CUDA toolkit); WhowaitsError if
    none exists."""
    for cand in (shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc", pypi_nvcc()):
        if cand and Path(cand).is_file():
            return cand
    raise WhowaitsError("nvcc not found: put the CUDA toolkit's bin on PATH (or install it in /usr/local/cuda), "
                        "or pip install -e '.[dev]' (PyPI's nvidia-cuda-nvcc)")


@lru_cache(maxsize=1)
def nvcc_version() -> str:
    proc = subprocess.run([find_nvcc(), "--version"], capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if "release" in ln or "Build" in ln]
    return " ".join(lines) or proc.stdout.strip()


def cache_dir() -> Path:
    """Where builds are kept: :func:`profiler.paths.build_dir` (``$WHOWAITS_BUILD_DIR``, else the checkout's
    ``.cache/whowaits/build``, else the user's cache). kernels.tracebuild and kernels.sass keep their entries
    beside it (``../trace``, ``../sass``)."""
    return build_dir()


def source_include(version: Version) -> str:
    """The kernel.cu the translation unit includes, relative to ``-I kernels``: ``vNN_slug/kernel.cu`` (the
    ``source`` version's for a config-only rung), or ``wip/vNN_slug/kernel.cu`` for a rung not landed yet
    (``kernels/wip/``, read by ``registry.wip_versions()``): the same string as before for every landed rung, so
    their build keys do not move, and a wip rung compiles with the ladder's own flags, checks and cache."""
    folder = "wip/" if version.path.parent.name == "wip" else ""
    return f"{folder}{version.source_version or version.id}/kernel.cu"


def translation_unit(version: Version, config) -> str:
    """The generated .cu that instantiates one config of a version.

    ``WHOWAITS_NAMESPACE`` is set to the version's id, so a config-only rung (``source = "vNN_…"``)
    compiles its source version's kernel.cu in its own namespace; the parameter list follows the ABI.
    """
    e = config.element
    if version.abi in TENSOR_MAPS:  # 3 maps, or 4 with tmap_o (the TMA-store epilogue, v17)
        params = "const __grid_constant__ CUtensorMap, " * TENSOR_MAPS[version.abi] + f"{e}* __restrict__, int, float"
        if version.abi in PERSISTENT_ABIS:
            params += ", int"  # num_bh = B·H: the persistent grid no longer spells the problem out
        if version.abi in WORKSPACE_ABIS:
            params += ", float* __restrict__"  # the stream-K workspace (v40)
    else:
        params = f"const {e}* __restrict__, const {e}* __restrict__, const {e}* __restrict__, {e}* __restrict__, int, float"
    src = source_include(version)
    return (
        "// generated by kernels/build.py: one explicit instantiation\n"
        "#include <cuda.h>\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
        f"#define WHOWAITS_NAMESPACE {version.id}\n"
        f'#include "{src}"\n'
        f"template __global__ void whowaits::{version.id}::flash_fwd<{config.template_args()}>(\n    {params});\n"
    )


# ptxas warnings that mean the Hopper code is not what it claims (treated as build errors):
# C7508 setmaxnreg ignored, C7511 wgmma serialised "due to insufficient register resources" (printed as info: v23
# met it with an integer result written into a wgmma accumulator register), C7515 wgmma serialised, C7519
# warpgroup.arrive injected (device/HOPPER.md). A version's `allow_ptxas` lets its own builds through.
FATAL_PTXAS_WARNINGS = ("C7508", "C7511", "C7515", "C7519")


_PTXAS_CODE_RE = re.compile(r"^\s*ptxas\s+\w+\s*:\s*\((C\d{4})\)")


def fatal_warnings(log: str, allow: tuple[str, ...] = ()) -> list[str]:
    """The ptxas lines of ``log`` that fail the build: any line whose code is in ``FATAL_PTXAS_WARNINGS``
    and not in ``allow``, whatever its severity. ptxas of nvcc 13.0 prints C7519 as
    ``ptxas info    : (C7519) warpgroup.arrive is injected ...`` (seen on traced v11/v13 builds), so
    matching only "warning" lines let it through."""
    out = []
    for ln in log.splitlines():
        m = _PTXAS_CODE_RE.match(ln)
        if m and m.group(1) in FATAL_PTXAS_WARNINGS and m.group(1) not in allow:
            out.append(ln.strip())
    return out


_QUOTED_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def included_files(text: str, including: Path | None = None) -> list[Path]:
    """Every file of ``kernels/`` that ``text`` includes with ``#include "..."``, transitively, in a stable order
    (first reached first). A name is looked up as nvcc does for the quoted form: beside the including file,
    then under ``-I kernels``. Names that resolve nowhere in ``kernels/`` (none today) are left out: nvcc
    would fail on them, or take them from the toolkit, which ``nvcc --version`` in the key already covers."""
    seen: dict[Path, None] = {}
    todo = [(text, including)]
    root = KERNELS_DIR.resolve()
    while todo:
        src, where = todo.pop(0)
        for name in _QUOTED_INCLUDE_RE.findall(src):
            for base in ([where.parent] if where is not None else []) + [KERNELS_DIR]:
                cand = (base / name).resolve()
                if cand.is_file() and cand.is_relative_to(root):
                    if cand not in seen:
                        seen[cand] = None
                        todo.append((cand.read_text(errors="replace"), cand))
                    break
    return list(seen)


def _source_hash(version: Version, config: FwdConfig) -> str:
    """The build key: nvcc's version, the flags, the generated translation unit, the launch contract fields,
    and the name (relative to ``kernels/``) and bytes of every file the translation unit includes, followed
    transitively (the rung's kernel.cu, another rung's kernel.cu it compiles, and the shared headers it uses).
    Only the files the rung includes: a header added beside them, or a checkout elsewhere, keeps the key."""
    h = hashlib.sha256()
    h.update(f"format={CACHE_FORMAT}\n".encode())
    h.update(nvcc_version().encode())
    h.update(" ".join(NVCC_FLAGS).encode())
    tu = translation_unit(version, config)
    h.update(tu.encode())
    h.update(f"{version.smem_layout}|{version.abi}|{version.family}".encode())
    if version.allow_ptxas:  # a build let through by the rung's allowance is not the same as one without it
        h.update(("allow_ptxas=" + ",".join(version.allow_ptxas)).encode())
    root = KERNELS_DIR.resolve()
    for path in included_files(tu):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:24]


_ENTRY_RE = re.compile(r"Compiling entry function '([^']+)'")
_STACK_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED_RE = re.compile(r"Used (\d+) registers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")
_BAR_RE = re.compile(r"used (\d+) barriers")


def parse_ptxas(log: str) -> dict:
    """Registers, static smem, stack, spills, barriers and the entry symbol from ``ptxas -v`` output."""
    entry = _ENTRY_RE.search(log)
    used = _USED_RE.search(log)
    if not entry or not used:
        raise WhowaitsError("could not parse ptxas -v output (no entry function / register count found)")
    stack = _STACK_RE.search(log)
    smem = _SMEM_RE.search(log[used.start():].splitlines()[0])
    bars = _BAR_RE.search(log)
    return {
        "entry": entry.group(1),
        "registers": int(used.group(1)),
        "smem_static_bytes": int(smem.group(1)) if smem else 0,
        "stack_bytes": int(stack.group(1)) if stack else 0,
        "spill_store_bytes": int(stack.group(2)) if stack else 0,
        "spill_load_bytes": int(stack.group(3)) if stack else 0,
        "barriers": int(bars.group(1)) if bars else 0,
    }


def _first_error(text: str) -> str:
    for line in text.splitlines():
        if "error" in line.lower():
            return line.strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0] if lines else "(no output)"


def build(version: Version, config=None, *, force: bool = False) -> BuildResult:
    """Build (or fetch from cache) the cubin of ``version`` at ``config`` (default: the version's own).

    Raises WhowaitsError with nvcc's first error line when the kernel does not compile (a static_assert
    that rejects the config lands here too).
    """
    if config is None:
        config = version.config_for(version.config.head_dim, version.config.dtype, version.config.causal)
    key = _source_hash(version, config)
    out = cache_dir() / f"{version.id}-{config.short_form()}-{key}"
    meta_path = out / "meta.json"
    if meta_path.is_file() and not force:
        meta = json.loads(meta_path.read_text())
        return _result(version, config, out, meta, cached=True)

    out.parent.mkdir(parents=True, exist_ok=True)
    with _key_lock(out):
        if meta_path.is_file() and not force:  # built by another process while this one waited
            meta = json.loads(meta_path.read_text())
            return _result(version, config, out, meta, cached=True)
        return _build(version, config, out, force)


@contextmanager
def _key_lock(out: Path):
    """An exclusive lock on one build key (a lock file in the temporary folder), so that processes
    building the same rung at once (two pytest-xdist workers: the policy check and `profile --all`
    each build the ladder) compile it once: the second waits, then takes the cached build.
    Without ``fcntl`` (Windows) no lock: both compile and the first folder stays."""
    try:
        import fcntl  # noqa: PLC0415
    except ImportError:  # pragma: no cover
        yield
        return
    import hashlib  # noqa: PLC0415

    locks = Path(tempfile.gettempdir()) / "whowaits-build-locks"  # not in the cache folder: it holds builds only
    try:
        locks.mkdir(exist_ok=True)
        f = open(locks / (hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:24] + ".lock"), "a")
    except OSError:  # an unwritable temporary folder: build without the lock
        yield
        return
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _build(version: Version, config, out: Path, force: bool) -> BuildResult:
    tmp = Path(tempfile.mkdtemp(prefix=f".{version.id}-", dir=out.parent))
    try:
        tu = tmp / "tu.cu"
        tu.write_text(translation_unit(version, config))
        cubin = tmp / "kernel.cubin"
        cmd = [find_nvcc(), *NVCC_FLAGS, "-I", str(KERNELS_DIR), "-o", str(cubin), str(tu)]
        # nvcc's intermediates go to our private folder, not a /tmp shared with other processes
        env = {**os.environ, "TMPDIR": str(tmp), "TEMP": str(tmp), "TMP": str(tmp)}
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        except OSError as err:
            raise WhowaitsError(f"could not run nvcc ({cmd[0]}): {err}") from None
        log = proc.stdout + proc.stderr
        if proc.returncode != 0:
            raise WhowaitsError(f"{version.id} [{config.short_form()}] does not compile: {_first_error(log)}")
        fatal = fatal_warnings(log, allow=version.allow_ptxas)
        if fatal:
            raise WhowaitsError(f"{version.id} [{config.short_form()}] does not compile: ptxas warning treated as error: {fatal[0]}")
        meta = parse_ptxas(log)
        meta["ptxas_log"] = log.strip()
        meta["command"] = " ".join(cmd)
        meta["sass_opcodes"] = _sass.opcode_counts(_sass.sass_text(cubin))
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        if not force and (out / "meta.json").is_file():
            # a concurrent build of the same key won (e.g. two pytest-xdist workers): keep it (never
            # remove a folder another process may be reading) and answer with it; ours goes below
            meta = json.loads((out / "meta.json").read_text())
        else:
            if out.exists():
                shutil.rmtree(out)
            os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return _result(version, config, out, meta, cached=False)


def _result(version: Version, config: FwdConfig, out: Path, meta: dict, cached: bool) -> BuildResult:
    return BuildResult(
        version=version.id,
        config=config,
        cubin=out / "kernel.cubin",
        entry=meta["entry"],
        registers=meta["registers"],
        smem_static_bytes=meta["smem_static_bytes"],
        smem_dynamic_bytes=config.smem_bytes(version.smem_layout),
        stack_bytes=meta["stack_bytes"],
        spill_store_bytes=meta["spill_store_bytes"],
        spill_load_bytes=meta["spill_load_bytes"],
        barriers=meta.get("barriers", 0),
        sass_opcodes=meta.get("sass_opcodes", {}),
        ptxas_log=meta.get("ptxas_log", ""),
        cached=cached,
    )


def build_many(
    jobs: list[tuple[Version, FwdConfig | None]], *, workers: int | None = None
) -> list[BuildResult | WhowaitsError]:
    """Build several (version, config) pairs in parallel; a failure is returned in place, not raised."""

    def one(job: tuple[Version, FwdConfig | None]) -> BuildResult | WhowaitsError:
        try:
            return build(*job)
        except WhowaitsError as err:
            return err

    workers = workers or max(1, min(len(jobs), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, jobs))


def static_violations(version: Version, result: BuildResult) -> dict[str, list[str]]:
    """What a build breaks of its ``version.toml``'s static claims: ``spills`` (ptxas spill bytes when
    ``allow_spills`` is false), ``expect_sass`` (claimed opcodes absent from the cubin) and
    ``forbid_sass`` (forbidden opcodes present). Empty lists when it keeps them (``whowaits check``)."""
    ops = result.sass_opcodes
    return {
        "spills": ([f"{result.spill_store_bytes} B spill stores, {result.spill_load_bytes} B spill loads"]
                   if result.spill_bytes and not version.allow_spills else []),
        "expect_sass": [o for o in version.expect_sass if o not in ops],
        "forbid_sass": [o for o in version.forbid_sass if o in ops],
    }


__all__ = ["NVCC_FLAGS", "FATAL_PTXAS_WARNINGS", "BuildResult", "build", "build_many", "fatal_warnings", "parse_ptxas",
           "source_include", "static_violations", "translation_unit", "cache_dir"]
