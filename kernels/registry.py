"""Discover the ladder's versions: every ``kernels/v*/version.toml`` (CONTRACT.md), in ladder order.

``versions()`` returns all :class:`Version` records sorted by number; ``get(id)`` one of them (also by
its number prefix, ``v01``); an unknown id raises :class:`WhowaitsError` listing the known ones.
The toml is validated: a missing or mistyped field is an error that names the file and the field.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from kernels.config import DTYPES, SMEM_LAYOUTS, TUNABLE_FIELDS, FwdConfig
from profiler.errors import WhowaitsError

KERNELS_DIR = Path(__file__).resolve().parent
_ID_RE = re.compile(r"^v(\d\d)_[a-z0-9_]+$")
_REQUIRED_STR = ("id", "title", "change", "hypothesis", "expected_bottleneck", "arch", "smem_layout")
_ARCHES = ("sm_80", "sm_90", "sm_90a")


@dataclass(frozen=True)
class Version:
    """One rung of the ladder, as its ``version.toml`` declares it."""

    id: str
    number: int
    path: Path
    parent: str
    title: str
    change: str
    hypothesis: str
    expected_bottleneck: str
    arch: str
    smem_layout: str
    config: FwdConfig  # the default config (head_dim/dtype/causal overridden per call)
    head_dim_overrides: dict = field(default_factory=dict)  # {64: {"block_m": ...}} from [config.d64]
    head_dims: tuple[int, ...] = (64, 128)
    dtypes: tuple[str, ...] = ("fp16", "bf16")
    causal: bool = True
    expect_sass: tuple[str, ...] = ()
    forbid_sass: tuple[str, ...] = ()
    allow_spills: bool = False
    tune_space: dict = field(default_factory=dict)  # {field: [values]} from [tune]
    verdict: str = ""

    @property
    def source(self) -> Path:
        return self.path / "kernel.cu"

    def config_for(self, head_dim: int, dtype: str, causal: bool) -> FwdConfig:
        """The version's default config for one problem (tiles may differ per head_dim, see [config.d64])."""
        self.check_supports(head_dim, dtype, causal)
        over = self.head_dim_overrides.get(head_dim, {})
        return self.config.replace(head_dim=head_dim, dtype=dtype, causal=causal, **over)

    def supports_text(self) -> str:
        return (
            f"head_dim {'/'.join(map(str, self.head_dims))}, dtype {'/'.join(self.dtypes)}, "
            f"causal {'yes' if self.causal else 'no'}"
        )

    def check_supports(self, head_dim: int, dtype: str, causal: bool) -> None:
        if head_dim not in self.head_dims or dtype not in self.dtypes or (causal and not self.causal):
            raise WhowaitsError(
                f"{self.id} does not support head_dim={head_dim} dtype={dtype} causal={causal}; "
                f"it supports {self.supports_text()}"
            )


def _load(path: Path) -> Version:
    where = str(path.relative_to(KERNELS_DIR.parent)) if path.is_relative_to(KERNELS_DIR.parent) else str(path)
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise WhowaitsError(f"{where}: invalid toml: {err}") from None
    for key in _REQUIRED_STR:
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise WhowaitsError(f"{where}: field {key!r} must be a non-empty string")
    vid = data["id"]
    if vid != path.parent.name:
        raise WhowaitsError(f"{where}: id {vid!r} differs from its folder name {path.parent.name!r}")
    m = _ID_RE.match(vid)
    if not m:
        raise WhowaitsError(f"{where}: id {vid!r} must look like vNN_slug (lowercase a-z 0-9 _)")
    if data["arch"] not in _ARCHES:
        raise WhowaitsError(f"{where}: arch {data['arch']!r} not in {', '.join(_ARCHES)}")
    if data["smem_layout"] not in SMEM_LAYOUTS:
        raise WhowaitsError(f"{where}: smem_layout {data['smem_layout']!r} not in {', '.join(SMEM_LAYOUTS)}")
    if not isinstance(data.get("parent", ""), str):
        raise WhowaitsError(f"{where}: field 'parent' must be a string (a version id or \"\")")
    if not (path.parent / "kernel.cu").is_file():
        raise WhowaitsError(f"{where}: kernel.cu missing beside it")

    cfg = data.get("config")
    if not isinstance(cfg, dict):
        raise WhowaitsError(f"{where}: a [config] table is required")
    known = {"head_dim", "block_m", "block_n", "warps", "stages", "causal", "dtype"}
    overrides: dict[int, dict] = {}
    plain = {}
    for key, value in cfg.items():
        if isinstance(value, dict) and re.fullmatch(r"d\d+", key):
            bad = set(value) - set(TUNABLE_FIELDS)
            if bad:
                raise WhowaitsError(f"{where}: [config.{key}] may set only {', '.join(TUNABLE_FIELDS)}")
            overrides[int(key[1:])] = dict(value)
        elif key in known:
            plain[key] = value
        else:
            raise WhowaitsError(f"{where}: unknown [config] field {key!r} (known: {', '.join(sorted(known))})")
    try:
        config = FwdConfig(**plain)
    except TypeError as err:
        raise WhowaitsError(f"{where}: bad [config]: {err}") from None

    sup = data.get("supports", {})
    head_dims = tuple(sup.get("head_dims", [64, 128]))
    dtypes = tuple(sup.get("dtypes", list(DTYPES)))
    if not all(isinstance(d, int) for d in head_dims) or not set(dtypes) <= set(DTYPES):
        raise WhowaitsError(f"{where}: [supports] head_dims must be integers and dtypes in {', '.join(DTYPES)}")

    tune = data.get("tune", {})
    for key, values in tune.items():
        if key not in TUNABLE_FIELDS or not isinstance(values, list) or not all(isinstance(v, int) for v in values):
            raise WhowaitsError(f"{where}: [tune] {key!r}: fields are {', '.join(TUNABLE_FIELDS)}, each a list of ints")

    def str_list(key: str) -> tuple[str, ...]:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise WhowaitsError(f"{where}: {key!r} must be a list of strings")
        return tuple(value)

    allow_spills = data.get("allow_spills", False)
    if not isinstance(allow_spills, bool):
        raise WhowaitsError(f"{where}: 'allow_spills' must be true/false")
    return Version(
        id=vid,
        number=int(m.group(1)),
        path=path.parent,
        parent=data.get("parent", ""),
        title=data["title"],
        change=data["change"],
        hypothesis=data["hypothesis"],
        expected_bottleneck=data["expected_bottleneck"],
        arch=data["arch"],
        smem_layout=data["smem_layout"],
        config=config,
        head_dim_overrides=overrides,
        head_dims=head_dims,
        dtypes=dtypes,
        causal=bool(sup.get("causal", True)),
        expect_sass=str_list("expect_sass"),
        forbid_sass=str_list("forbid_sass"),
        allow_spills=allow_spills,
        tune_space={k: list(v) for k, v in tune.items()},
        verdict=str(data.get("verdict", "")),
    )


def versions(root: Path | None = None) -> list[Version]:
    """All versions under ``root`` (default: this package's folder), sorted by number."""
    return list(_versions(str(root or KERNELS_DIR)))


@lru_cache(maxsize=4)
def _versions(root: str) -> tuple[Version, ...]:
    found = [_load(p) for p in sorted(Path(root).glob("v*/version.toml"))]
    numbers = {}
    for v in found:
        if v.number in numbers:
            raise WhowaitsError(f"two versions share number {v.number:02d}: {numbers[v.number]} and {v.id}")
        numbers[v.number] = v.id
    return tuple(sorted(found, key=lambda v: v.number))


def get(version_id: str, root: Path | None = None) -> Version:
    """The version named ``version_id`` (full id ``v02_smem_tiling`` or just ``v02``)."""
    all_versions = versions(root)
    for v in all_versions:
        if version_id == v.id or version_id == v.id.split("_", 1)[0]:
            return v
    known = ", ".join(v.id for v in all_versions) or "none"
    raise WhowaitsError(f"unknown kernel version {version_id!r}; known versions: {known}")


def resolve(ids: list[str] | None, all_: bool = False) -> list[Version]:
    """Several ids (or all versions when ``ids`` is empty or ``all_``)."""
    if all_ or not ids:
        return versions()
    return [get(i) for i in ids]
