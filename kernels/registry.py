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

from kernels.config import DTYPES, FAMILIES, SMEM_LAYOUTS, FwdConfig, split_kernel_name
from profiler.errors import WhowaitsError

KERNELS_DIR = Path(__file__).resolve().parent
_ID_RE = re.compile(r"^v(\d\d)_[a-z0-9_]+$")
_REQUIRED_STR = ("id", "title", "change", "hypothesis", "expected_bottleneck", "arch", "smem_layout")
_ARCHES = ("sm_80", "sm_90", "sm_90a")
ABIS = ("pointers", "tensor_maps", "tensor_maps_persistent", "tensor_maps_persistent_o",
        "tensor_maps_persistent_o16", "tensor_maps_persistent_o_ws")  # launch ABI (CONTRACT.md)
# (tmap_q, tmap_k, tmap_v[, tmap_o], o, seqlen, scale[, num_bh]): how many tensor maps each TMA ABI passes first
TENSOR_MAPS = {"tensor_maps": 3, "tensor_maps_persistent": 3, "tensor_maps_persistent_o": 4,
               "tensor_maps_persistent_o16": 4, "tensor_maps_persistent_o_ws": 4}
# The rows of tmap_o's box: one consumer warpgroup's 64 rows (v17), or one warp's 16 (v35: each warp stores its own)
O_BOX_ROWS = {"tensor_maps_persistent_o": 64, "tensor_maps_persistent_o16": 16, "tensor_maps_persistent_o_ws": 64}
Q_BOX_ROWS_ALLOWED = (0, 64)  # version.toml q_box_rows: 0 = block_m rows (one box a tile), 64 = one box per consumer
TMA_ABIS = tuple(TENSOR_MAPS)
PERSISTENT_ABIS = ("tensor_maps_persistent", "tensor_maps_persistent_o",
                   "tensor_maps_persistent_o16", "tensor_maps_persistent_o_ws")  # one CTA per SM, + int num_bh
# + float* ws after num_bh: the stream-K workspace (kernels/common/sm90/stream_k.cuh), WORKSPACE_BYTES(grid) bytes
WORKSPACE_ABIS = ("tensor_maps_persistent_o_ws",)
# A persistent kernel's grid (version.toml `grid`; kernels.launch.persistent_grid): "sms", one CTA per SM (at most one
# per tile); "whole_heads", the CTAs of one round take whole heads where a grid of at most that many CTAs does so in as
# few rounds (v42).
GRID_POLICIES = ("sms", "whole_heads")


def workspace_bytes(grid_x: int, consumers: int = 2, head_dim: int = 128) -> int:
    """The stream-K workspace of a launch of ``grid_x`` CTAs (stream_k.cuh's StreamKSlots): per CTA, every consumer
    thread's O fragment (head_dim / 2 floats) plus its two rows' maximum and sum (4 floats), then one 8-byte flag per
    consumer warp."""
    threads = consumers * 128
    return grid_x * (threads * (head_dim // 2 + 4) * 4 + threads // 32 * 8)


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
    config: FwdConfig  # the default config (head_dim/dtype/causal overridden per call); its family's class
    head_dim_overrides: dict = field(default_factory=dict)  # {64: {"block_m": ...}} from [config.d64]
    causal_overrides: dict = field(default_factory=dict)  # {128: {"block_n": ...}} from [config.d128_causal]
    head_dims: tuple[int, ...] = (64, 128)
    dtypes: tuple[str, ...] = ("fp16", "bf16")
    causal: bool = True
    expect_sass: tuple[str, ...] = ()
    forbid_sass: tuple[str, ...] = ()
    allow_spills: bool = False
    allow_ptxas: tuple[str, ...] = ()  # ptxas codes of build.FATAL_PTXAS_WARNINGS this rung's builds may print (v23)
    tune_space: dict = field(default_factory=dict)  # {field: [values]} from [tune]
    verdict: str = ""
    family: str = "fwd"  # config family (kernels.config.FAMILIES): template signature + name parser
    abi: str = "pointers"  # launch ABI (ABIS)
    source_version: str = ""  # a config-only rung compiles this version's kernel.cu in its own namespace
    grid: str = "sms"  # a persistent ABI's grid policy (GRID_POLICIES): kernels.launch.persistent_grid
    q_box_rows: int = 0  # rows of Q's TMA box (a TMA ABI only); 0: block_m, one box a tile (v47: 64, one per consumer)

    @property
    def source(self) -> Path:
        """The kernel.cu that is compiled: the version's own, or its ``source`` version's."""
        return (self.path.parent / self.source_version / "kernel.cu") if self.source_version else self.path / "kernel.cu"

    @property
    def config_cls(self) -> type:
        return FAMILIES[self.family]

    @property
    def tunable_fields(self) -> tuple[str, ...]:
        return self.config_cls.TUNABLE

    def config_for(self, head_dim: int, dtype: str, causal: bool) -> FwdConfig:
        """The version's default config for one problem (tiles may differ per head_dim, see [config.d64], and
        under a causal mask, [config.d128_causal], which applies after [config.d128])."""
        self.check_supports(head_dim, dtype, causal)
        over = dict(self.head_dim_overrides.get(head_dim, {}))
        if causal:
            over.update(self.causal_overrides.get(head_dim, {}))
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
    family = data.get("family", "fwd")
    if family not in FAMILIES:
        raise WhowaitsError(f"{where}: family {family!r} not in {', '.join(FAMILIES)}")
    abi = data.get("abi", "pointers")
    if abi not in ABIS:
        raise WhowaitsError(f"{where}: abi {abi!r} not in {', '.join(ABIS)}")
    source_version = data.get("source", "")
    if not isinstance(source_version, str) or (source_version and not _ID_RE.match(source_version)):
        raise WhowaitsError(f"{where}: 'source' must be another version's id (vNN_slug) whose kernel.cu this rung compiles")
    if source_version:
        if (path.parent / "kernel.cu").is_file():
            raise WhowaitsError(f"{where}: a rung with source = {source_version!r} must not have its own kernel.cu")
        if not (path.parent.parent / source_version / "kernel.cu").is_file():
            raise WhowaitsError(f"{where}: source {source_version!r} has no kernel.cu")
    elif not (path.parent / "kernel.cu").is_file():
        raise WhowaitsError(f"{where}: kernel.cu missing beside it")
    cls = FAMILIES[family]
    tunable = cls.TUNABLE

    cfg = data.get("config")
    if not isinstance(cfg, dict):
        raise WhowaitsError(f"{where}: a [config] table is required")
    known = {"head_dim", *tunable, "causal", "dtype"}
    overrides: dict[int, dict] = {}
    causal_overrides: dict[int, dict] = {}
    plain = {}
    for key, value in cfg.items():
        sub = re.fullmatch(r"d(\d+)(_causal)?", key)
        if isinstance(value, dict) and sub:
            bad = set(value) - set(tunable)
            if bad:
                raise WhowaitsError(f"{where}: [config.{key}] may set only {', '.join(tunable)}")
            (causal_overrides if sub.group(2) else overrides)[int(sub.group(1))] = dict(value)
        elif key in known:
            plain[key] = value
        else:
            raise WhowaitsError(f"{where}: unknown [config] field {key!r} (known: {', '.join(sorted(known))})")
    try:
        config = cls(**plain)
    except TypeError as err:
        raise WhowaitsError(f"{where}: bad [config]: {err}") from None

    sup = data.get("supports", {})
    head_dims = tuple(sup.get("head_dims", [64, 128]))
    dtypes = tuple(sup.get("dtypes", list(DTYPES)))
    if not all(isinstance(d, int) for d in head_dims) or not set(dtypes) <= set(DTYPES):
        raise WhowaitsError(f"{where}: [supports] head_dims must be integers and dtypes in {', '.join(DTYPES)}")

    tune = data.get("tune", {})
    for key, values in tune.items():
        if key not in tunable or not isinstance(values, list) or not all(isinstance(v, int) for v in values):
            raise WhowaitsError(f"{where}: [tune] {key!r}: fields are {', '.join(tunable)}, each a list of ints")

    def str_list(key: str) -> tuple[str, ...]:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise WhowaitsError(f"{where}: {key!r} must be a list of strings")
        return tuple(value)

    grid = data.get("grid", "sms")
    if grid not in GRID_POLICIES:
        raise WhowaitsError(f"{where}: grid {grid!r} not in {', '.join(GRID_POLICIES)}")
    if grid != "sms" and abi not in PERSISTENT_ABIS:
        raise WhowaitsError(f"{where}: grid {grid!r} needs a persistent abi ({', '.join(PERSISTENT_ABIS)})")
    q_box_rows = data.get("q_box_rows", 0)
    if q_box_rows not in Q_BOX_ROWS_ALLOWED or (q_box_rows and abi not in TMA_ABIS):
        raise WhowaitsError(f"{where}: q_box_rows {q_box_rows!r}: 0 (block_m) or 64, and only with a tensor-map abi")
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
        causal_overrides=causal_overrides,
        head_dims=head_dims,
        dtypes=dtypes,
        causal=bool(sup.get("causal", True)),
        expect_sass=str_list("expect_sass"),
        forbid_sass=str_list("forbid_sass"),
        allow_spills=allow_spills,
        allow_ptxas=str_list("allow_ptxas"),
        tune_space={k: list(v) for k, v in tune.items()},
        verdict=str(data.get("verdict", "")),
        family=family,
        abi=abi,
        source_version=source_version,
        grid=grid,
        q_box_rows=q_box_rows,
    )


def versions(root: Path | None = None) -> list[Version]:
    """All versions under ``root`` (default: this package's folder), sorted by number."""
    return list(_versions(str(root or KERNELS_DIR)))


WIP_DIR = KERNELS_DIR / "wip"


def wip_versions() -> list[Version]:
    """The rungs not landed yet: every ``kernels/wip/v*/version.toml`` (kernels/wip/README.md), validated like
    the ladder's. ``versions()`` never lists them, so they stay out of the registry, bench, profile --all,
    reports and migration; the build compiles them (``build.source_include``) and tests/test_kernels_wip.py checks
    that each one compiles with its static claims. Parse a wip rung's kernel name with
    ``parse_kernel_name(name, root=WIP_DIR)``."""
    return versions(WIP_DIR) if WIP_DIR.is_dir() else []


def get_landed_or_wip(version_id: str) -> Version:
    """:func:`get` over the ladder and then ``kernels/wip/`` (for the static tools that read a rung's cubin
    before it lands: scripts/sass_loop_counts.py, scripts/trace_windows.py, the trace proofs)."""
    try:
        return get(version_id)
    except WhowaitsError:
        for v in wip_versions():
            if version_id in (v.id, v.id.split("_", 1)[0]):
                return v
    raise WhowaitsError(f"unknown kernel version {version_id!r}: neither landed nor in kernels/wip/")


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


def parse_kernel_name(name: str, root: Path | None = None):
    """``(version_id, config)`` for any spelling of a ladder kernel name, in the version's own family.

    The family comes from the version id in the name; a name without one (ncu's short display name) or
    with an unknown id parses in the ``fwd`` family.
    """
    version_id, _, _, _ = split_kernel_name(name)
    family = "fwd"
    if version_id:
        for v in versions(root):
            if v.id == version_id:
                family = v.family
    return FAMILIES[family].from_kernel_name(name)


def resolve(ids: list[str] | None, all_: bool = False) -> list[Version]:
    """Several ids (or all versions when ``ids`` is empty or ``all_``)."""
    if all_ or not ids:
        return versions()
    return [get(i) for i in ids]
