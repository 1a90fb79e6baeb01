"""Provenance sidecars: ``<shape>.json`` beside every ``<shape>.ncu-rep`` (docs/contract.md, the sidecar).

A sidecar records how a report was taken, so that views can refuse to compare reports whose collection
differs (the confound guard) and a reader can reproduce the profile. Keys (every one always present; a
value that cannot be known is ``null``)::

    version          the subject: a ladder version id (v03_...) or an external subject (ext-sdpa-flash)
    shape            shape key, b{B}_h{H}_s{S}_d{D}_{dtype}[_causal]
    ncu_command      the full ncu argv (list of str), as run
    ncu_version      e.g. "2025.3.1.0"
    driver_version   e.g. "580.159.04"
    gpu              e.g. "NVIDIA H200"
    git_commit       HEAD of the repo when profiled
    git_dirty        whether the work tree had uncommitted changes
    clock_control    ncu --clock-control ("none")
    cache_control    ncu --cache-control ("all" = caches flushed before each replay pass)
    section_set      ncu --set ("whowaits", "full", ...)
    kernel_filter    the kernel name filter, e.g. "regex:whowaits::v03_x::flash_fwd<"
    launch_skip      ncu --launch-skip
    launch_count     ncu --launch-count
    nvtx_include     list of --nvtx-include expressions, or null
    time             ISO-8601 UTC time the profile finished
    tool_version     whowaits' version
    report_sha256    sha256 of the report file the sidecar describes
    split_command    for a report split out of a multi-subject session report: the ncu --import ...
                     --export command that did it (null otherwise)
    build_hash       a ladder version's build cache key (``kernels.build``'s key over its sources, the
                     shared headers, nvcc's version and flags) for the config profiled; null for others
    problem_flops    the problem's FLOPs for one call at ``shape`` (attention forward: 4·B·H·S²·D, halved
                     when causal; ``profile --cmd --problem-flops N`` for a user's kernel), so views get
                     TFLOPS without knowing the problem; null if unknown
    ladder_order     a ladder version's number (v03 -> 3): the order of views; for ``profile --cmd
                     --versions`` the version's place in the list (0, 1, …); null for external subjects
    title            a one-line title (the version's, or the external subject's)
    change           a ladder version's one-line change (its version.toml), null otherwise
    expected_bottleneck  the version's hypothesis of its bottleneck, written before measuring

Views (``profiler.compare``) read these and never the ``kernels`` package; a report without a sidecar
still works, without TFLOPS, titles or ladder order.

Optional keys (:data:`OPTIONAL_SIDECAR_KEYS`), written only when known::

    problem_bytes    bytes one call of the problem must move (``profile --cmd --problem-bytes N``; fills a
                     GB/s column)

Writes are atomic (a temporary file in the same folder, then ``os.replace``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

from profiler import settings
from profiler.errors import WhowaitsError
from profiler.io import write_json_atomic

SIDECAR_KEYS: tuple[str, ...] = (
    "version",
    "shape",
    "ncu_command",
    "ncu_version",
    "driver_version",
    "gpu",
    "git_commit",
    "git_dirty",
    "clock_control",
    "cache_control",
    "section_set",
    "kernel_filter",
    "launch_skip",
    "launch_count",
    "nvtx_include",
    "time",
    "tool_version",
    "report_sha256",
    "split_command",
    "build_hash",
    "problem_flops",
    "ladder_order",
    "title",
    "change",
    "expected_bottleneck",
)


def sidecar_path(report_path: str | os.PathLike) -> Path:
    """``reports/h200/v03/b1_..._fp16.ncu-rep`` -> ``reports/h200/v03/b1_..._fp16.json``."""
    p = Path(report_path)
    name = p.name
    if name.endswith(".ncu-rep"):
        name = name[: -len(".ncu-rep")]
    return p.with_name(name + ".json")


def gpu_slug(gpu_name: str | None) -> str:
    """``"NVIDIA H200"`` -> ``"h200"`` (the reports/<gpu>/ folder)."""
    if not gpu_name:
        return "unknown-gpu"
    s = re.sub(r"^nvidia\s+", "", gpu_name.strip(), flags=re.I).lower()
    return re.sub(r"[^a-z0-9]+", "-", s).strip("-") or "unknown-gpu"


def git_state(repo: str | os.PathLike) -> tuple[str | None, bool | None]:
    """(HEAD commit, dirty?) of ``repo``; ``$WHOWAITS_GIT_COMMIT`` / ``$WHOWAITS_GIT_DIRTY`` when set (they
    win: the device machine gets a copy of the working tree without its .git, and a copy nested in another
    checkout, as ``.devcarry/<name>`` there, would otherwise report the outer checkout's HEAD)."""
    env_commit = settings.text("WHOWAITS_GIT_COMMIT")
    dirty = settings.raw("WHOWAITS_GIT_DIRTY")
    env_dirty = (dirty not in ("", "0", "false")) if dirty is not None else None
    if env_commit:
        return env_commit, env_dirty

    def text(argv: list[str]) -> str | None:
        try:
            cp = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            return None
        return cp.stdout if cp.returncode == 0 else None

    commit = text(["git", "-C", str(repo), "rev-parse", "HEAD"])
    if commit:
        status = text(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"])
        return commit.strip(), (bool(status.strip()) if status is not None else None)
    return None, env_dirty


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


#: the type each sidecar value must have (or null): "str", "int", "number", "bool", "strs" (a list of str)
_SIDECAR_TYPES: dict[str, str] = {
    "ncu_command": "strs", "nvtx_include": "strs", "split_command": "strs", "git_dirty": "bool",
    "launch_skip": "int", "launch_count": "int", "ladder_order": "int", "problem_flops": "number",
    "problem_bytes": "number",
}


def _type_ok(kind: str, v) -> bool:
    if v is None:
        return True
    if kind == "strs":
        return isinstance(v, list) and all(isinstance(x, str) for x in v)
    if kind == "bool":
        return isinstance(v, bool)
    if kind == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if kind == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")
    return isinstance(v, str)


def read_sidecar(report_path: str | os.PathLike) -> dict | None:
    """The sidecar of a report as a dict with every key of :data:`SIDECAR_KEYS`, or ``None`` if it has none.

    Keys missing from an older sidecar come back as ``None``; a sidecar that cannot be read (no regular
    file, not UTF-8, not a JSON object) or holds a value of the wrong type (``ladder_order: "x"``) raises
    :class:`WhowaitsError` naming the file (and the key).
    """
    sp = sidecar_path(report_path)
    if not (sp.exists() or sp.is_symlink()):
        return None
    if not sp.is_file():
        raise WhowaitsError(f"{sp}: the sidecar is not a regular file (a directory, FIFO or broken link)")
    try:
        with open(sp, "rb", opener=lambda f, fl: os.open(f, fl | os.O_NONBLOCK)) as f:
            data = json.loads(f.read().decode("utf-8"))
    except UnicodeDecodeError as err:
        raise WhowaitsError(f"{sp}: the sidecar is not UTF-8 text (byte {err.start})") from None
    except json.JSONDecodeError as err:
        raise WhowaitsError(f"{sp}: not valid JSON ({err.msg} at line {err.lineno})") from None
    except (OSError, RecursionError) as err:
        raise WhowaitsError(f"{sp}: cannot read the sidecar ({getattr(err, 'strerror', None) or err})") from None
    if not isinstance(data, dict):
        raise WhowaitsError(f"{sp}: expected a JSON object")
    for k in (*SIDECAR_KEYS, *OPTIONAL_SIDECAR_KEYS):
        kind = _SIDECAR_TYPES.get(k, "str")
        if not _type_ok(kind, data.get(k)):
            want = {"strs": "a list of strings", "bool": "true or false", "int": "an integer",
                    "number": "a number", "str": "a string"}[kind]
            raise WhowaitsError(f"{sp}: {k} must be {want} or null, got {json.dumps(data.get(k))[:60]}")
    return {k: data.get(k) for k in SIDECAR_KEYS} | {k: v for k, v in data.items() if k not in SIDECAR_KEYS}


OPTIONAL_SIDECAR_KEYS: tuple[str, ...] = ("problem_bytes",)


def make_sidecar(**fields) -> dict:
    """A sidecar dict: every key of :data:`SIDECAR_KEYS` (unknown ones ``None``), plus the optional keys
    given with a value; unknown keywords are an error."""
    extra = set(fields) - set(SIDECAR_KEYS) - set(OPTIONAL_SIDECAR_KEYS)
    if extra:
        raise ValueError(f"unknown sidecar keys: {sorted(extra)}")
    return {k: fields.get(k) for k in SIDECAR_KEYS} | {
        k: fields[k] for k in OPTIONAL_SIDECAR_KEYS if fields.get(k) is not None}


def write_sidecar(report_path: str | os.PathLike, sidecar: dict) -> Path:
    """Write the sidecar of ``report_path`` atomically; ``report_sha256`` is filled in from the report if unset."""
    data = make_sidecar(**{k: v for k, v in sidecar.items() if k in SIDECAR_KEYS or k in OPTIONAL_SIDECAR_KEYS})
    if data["report_sha256"] is None and Path(report_path).is_file():
        data["report_sha256"] = sha256_file(report_path)
    return write_json_atomic(sidecar_path(report_path), data)
