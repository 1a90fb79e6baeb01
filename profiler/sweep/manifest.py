"""The sweep manifest (TOML): what to run, on which subjects and shapes, and where results go.

Example (every key but ``subjects`` and ``shapes`` optional; relative paths are taken from the manifest's
folder)::

    name = "ladder-3-shapes"
    run = ["profile"]                 # any of profile, bench, check
    section_set = "whowaits"          # ncu --set for profile jobs
    out = "reports"                   # reports root: <out>/<gpu>/<subject>/<shape>.ncu-rep
    logs = "sweep-logs/ladder-3-shapes"   # one log per job, plus the sweep's own log (sweep.jsonl)
    gpu = "h200"                      # folder under out; default: from each GPU's name (nvidia-smi)
    retries = 2                       # extra attempts after a transient failure (error kinds in profiler.sweep.kinds)
    retry_delay_s = 10
    batch = 8                         # ladder subjects per ncu session (one process, one expensive first launch)
    timeout_s = 1800                  # per ncu session / bench / check process
    warmup = 3
    lock_dir = "/run/lock/whowaits"   # per-GPU lock files (default: $WHOWAITS_LOCK_DIR, else /run/lock/whowaits)
    lock_timeout_s = 3600             # how long a worker waits for a GPU another process holds

    [subjects]
    versions = ["all"]                # ladder version ids (or "all")
    ext = ["sdpa-flash", "sdpa-cudnn"]   # the runner's external subjects
    [[subjects.cmd]]                  # any program: profiled like `whowaits profile --cmd`
    name = "ext-my-gemm"
    cmd = "python3 bench/gemm.py --shape {shape}"   # {shape}, {batch}, {heads}, {seqlen}, {head_dim}, {dtype}, {causal}
    kernel = "gemm_kernel"
    launch_skip = 3

    [shapes]
    keys = ["b1_h64_s1024_d128", "b4_h16_s4096_d128"]   # with or without the dtype suffix
    dtypes = ["fp16"]                 # crossed with keys that have no dtype
    causal = [false]                  # crossed too

A bad manifest is one line: the file, the key, what is wrong.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from profiler import settings
from profiler.errors import WhowaitsError

KINDS = ("profile", "bench", "check")
DEFAULT_LOCK_DIR = "/run/lock/whowaits"
_BASE_SHAPE_RE = re.compile(r"^b(\d+)_h(\d+)_s(\d+)_d(\d+)$")
_TOP_KEYS = {"name", "run", "section_set", "out", "logs", "gpu", "retries", "retry_delay_s", "batch", "timeout_s",
             "warmup", "lock_dir", "lock_timeout_s", "subjects", "shapes", "env"}


@dataclass(frozen=True)
class CmdSubject:
    name: str
    cmd: str
    kernel: str
    launch_skip: int = 0
    nvtx: str | None = None


@dataclass
class Manifest:
    path: Path
    name: str
    run: tuple[str, ...]
    versions: tuple[str, ...]
    ext: tuple[str, ...]
    cmds: tuple[CmdSubject, ...]
    shapes: tuple[str, ...]
    section_set: str = "whowaits"
    out: Path = Path("reports")
    logs: Path = Path("sweep-logs")
    gpu: str | None = None
    retries: int = 2
    retry_delay_s: float = 10.0
    batch: int = 8
    timeout_s: float = 1800.0
    warmup: int = 3
    lock_dir: Path = Path(DEFAULT_LOCK_DIR)
    lock_timeout_s: float = 3600.0
    env: dict[str, str] = field(default_factory=dict)


def _err(path: Path, msg: str) -> WhowaitsError:
    return WhowaitsError(f"{path}: {msg}")


def _typed(path: Path, d: dict, key: str, kind, default, where: str = ""):
    if key not in d:
        return default
    v = d[key]
    ok = isinstance(v, kind) and not (kind in (int, float, (int, float)) and isinstance(v, bool))
    if not ok:
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise _err(path, f"{where}{key} must be {names}, not {type(v).__name__} ({v!r})")
    return v


def _str_list(path: Path, d: dict, key: str, default: list, where: str = "") -> list[str]:
    v = d.get(key, default)
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise _err(path, f"{where}{key} must be a list of strings")
    return v


def expand_shapes(path: Path, keys: list[str], dtypes: list[str], causal: list[bool]) -> list[str]:
    """Shape keys: ``keys`` without a dtype crossed with ``dtypes`` × ``causal``; full keys taken as they are."""
    from kernels.config import Shape

    out: list[str] = []
    for k in keys:
        if _BASE_SHAPE_RE.match(k):
            full = [f"{k}_{dt}" + ("_causal" if c else "") for dt in dtypes for c in causal]
        else:
            full = [k]
        for f in full:
            try:
                key = Shape.parse(f).key
            except WhowaitsError as err:
                raise _err(path, f"[shapes] {err}") from None
            if key not in out:
                out.append(key)
    return out


def load(path: str | os.PathLike) -> Manifest:
    """Read and check a manifest; relative paths resolve against its folder."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise WhowaitsError(f"no such manifest: {path}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise WhowaitsError(f"cannot read manifest {path}: {err}") from None
    except tomllib.TOMLDecodeError as err:
        raise _err(path, f"not valid TOML: {err}") from None
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise _err(path, f"unknown key {unknown[0]!r} (known: {', '.join(sorted(_TOP_KEYS))})")
    base = path.resolve().parent

    def where(p: str) -> Path:
        q = Path(os.path.expanduser(p))
        return q if q.is_absolute() else base / q

    run = _str_list(path, data, "run", ["profile"])
    bad = [k for k in run if k not in KINDS]
    if bad or not run:
        raise _err(path, f"run: unknown job kind {bad[0]!r} (use {', '.join(KINDS)})" if bad else "run is empty")
    subj = data.get("subjects")
    if not isinstance(subj, dict):
        raise _err(path, "[subjects] is missing: list versions = [...], ext = [...] or [[subjects.cmd]] entries")
    versions = _str_list(path, subj, "versions", [], "subjects.")
    ext = _str_list(path, subj, "ext", [], "subjects.")
    from profiler.collect import EXT_SUBJECTS

    for e in ext:
        if e not in EXT_SUBJECTS:
            raise _err(path, f"subjects.ext: unknown external subject {e!r} (the runner knows {', '.join(EXT_SUBJECTS)})")
    cmds = []
    raw_cmds = subj.get("cmd", [])
    if not isinstance(raw_cmds, list) or not all(isinstance(c, dict) for c in raw_cmds):
        raise _err(path, "subjects.cmd must be an array of tables ([[subjects.cmd]])")
    for i, c in enumerate(raw_cmds):
        w = f"subjects.cmd[{i}]."
        for key in ("name", "cmd", "kernel"):
            if not isinstance(c.get(key), str) or not c.get(key):
                raise _err(path, f"{w}{key} is missing (name, cmd and kernel are required)")
        cmds.append(CmdSubject(c["name"], c["cmd"], c["kernel"], _typed(path, c, "launch_skip", int, 0, w),
                               _typed(path, c, "nvtx", str, None, w)))
    if not (versions or ext or cmds):
        raise _err(path, "[subjects] names nothing to run")
    if versions:
        from kernels import registry

        try:
            ids = [v.id for v in registry.resolve(None, all_=True)] if versions == ["all"] else \
                  [registry.get(v).id for v in versions]
        except WhowaitsError as err:
            raise _err(path, f"subjects.versions: {err}") from None
        versions = list(dict.fromkeys(ids))
    shp = data.get("shapes")
    if not isinstance(shp, dict):
        raise _err(path, "[shapes] is missing: keys = [\"b1_h64_s1024_d128\", ...]")
    keys = _str_list(path, shp, "keys", [], "shapes.")
    if not keys:
        raise _err(path, "shapes.keys is empty")
    dtypes = _str_list(path, shp, "dtypes", ["fp16"], "shapes.")
    causal = shp.get("causal", [False])
    if isinstance(causal, bool):
        causal = [causal]
    if not isinstance(causal, list) or not all(isinstance(c, bool) for c in causal):
        raise _err(path, "shapes.causal must be a list of true/false")
    shapes = expand_shapes(path, keys, dtypes, causal)
    env = data.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise _err(path, "[env] must map names to strings")
    name = _typed(path, data, "name", str, path.stem)
    m = Manifest(
        path=path, name=name, run=tuple(run), versions=tuple(versions), ext=tuple(ext), cmds=tuple(cmds),
        shapes=tuple(shapes), section_set=_typed(path, data, "section_set", str, "whowaits"),
        out=where(_typed(path, data, "out", str, "reports")),
        logs=where(_typed(path, data, "logs", str, f"sweep-logs/{name}")),
        gpu=_typed(path, data, "gpu", str, None),
        retries=_typed(path, data, "retries", int, 2), retry_delay_s=float(_typed(path, data, "retry_delay_s", (int, float), 10)),
        batch=_typed(path, data, "batch", int, 8), timeout_s=float(_typed(path, data, "timeout_s", (int, float), 1800)),
        warmup=_typed(path, data, "warmup", int, 3),
        lock_dir=where(_typed(path, data, "lock_dir", str, settings.text("WHOWAITS_LOCK_DIR") or DEFAULT_LOCK_DIR)),
        lock_timeout_s=float(_typed(path, data, "lock_timeout_s", (int, float), 3600)),
        env=dict(env),
    )
    for key, lo in (("retries", 0), ("batch", 1), ("warmup", 0)):
        if getattr(m, key) < lo:
            raise _err(path, f"{key} must be >= {lo}")
    for key in ("retry_delay_s", "timeout_s", "lock_timeout_s"):
        if getattr(m, key) < 0:
            raise _err(path, f"{key} must be >= 0")
    return m
