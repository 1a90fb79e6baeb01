"""Kernel configs and problem shapes: one place that maps Python <-> C++ template <-> demangled name <-> key.

A version's **config family** (``family`` in its ``version.toml``, CONTRACT.md) fixes its template
signature, its tunable fields, its thread count and its name parser. Three families exist:

- ``fwd`` (:class:`FwdConfig`, ladder I and v08): warps of 32 threads each own rows of the tile::

    template <typename Element, int kHeadDim, int kBlockM, int kBlockN, int kWarps, int kStages, bool kCausal>

- ``wg`` (:class:`WgConfig`, v09): consumer warpgroups of 128 threads (wgmma)::

    template <typename Element, int kHeadDim, int kBlockM, int kBlockN, int kWarpgroups, int kStages, bool kCausal>

- ``ws`` (:class:`WsConfig`, v10 on): one producer warpgroup + ``kConsumers`` consumer warpgroups::

    template <typename Element, int kHeadDim, int kBlockM, int kBlockN, int kConsumers, int kStages, bool kCausal>

both as ``__global__ void whowaits::vNN_slug::flash_fwd(...)``, so a report's demangled kernel name parses
back to ``(version_id, config)`` with the family's ``from_kernel_name`` (``FAMILIES[name]``), in the
compiler's spelling (``<__half, 128, 64, 64, 4, 1, false>``) and in Nsight Compute's
(``<__half, (int)128, (int)64, (int)64, (int)4, (int)1, (bool)0>``). The name alone does not say the family
(both have 7 arguments): ``kernels.registry.parse_kernel_name`` picks it from the version id.

``Shape`` is a problem size, keyed ``b{B}_h{H}_s{S}_d{D}_{dtype}[_causal]`` everywhere (reports, bench files).
Pure Python: no torch, no CUDA.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from profiler.errors import WhowaitsError

# dtype key <-> C++ element type <-> bytes per element.
DTYPES: dict[str, str] = {"fp16": "__half", "bf16": "__nv_bfloat16"}
_CXX_TO_DTYPE = {v: k for k, v in DTYPES.items()}
_CXX_TO_DTYPE["half"] = "fp16"  # some demanglers print the typedef
_CXX_TO_DTYPE["__nv_bfloat16_raw"] = "bf16"
ELEMENT_BYTES = {"fp16": 2, "bf16": 2}
#: bytes written between timed launches to flush the L2 (bench, tune and the trace time the same way)
FLUSH_BYTES = 256 * 1024 * 1024

# Dynamic shared memory per CTA for each `smem_layout` a version may declare (CONTRACT.md).
SMEM_LAYOUTS = ("none", "kv", "q_kv", "tma_q_kv", "tma_q2_kv", "tma_q2_kv_o", "tma_q2_kv_o_fit", "tma_q2_kv_o_p64")
SMEM_OPTIN_BYTES = 227 * 1024  # the most dynamic shared memory a CTA may have on the H100/H200
TMA_ALIGN_SLACK = 1024  # `tma_q_kv`: room to round the tile base up to the 1024-byte 128B-swizzle atom

# Tunable fields of the `fwd` family (the auto-tuner's space is generated from a family's TUNABLE).
TUNABLE_FIELDS = ("block_m", "block_n", "warps", "stages")


class _ConfigMixin:
    """What every config family shares: C++ spelling, short form, smem size, name parsing."""

    FAMILY: ClassVar[str]
    TUNABLE: ClassVar[tuple[str, ...]]  # template int arguments after head_dim, in order
    SHORT: ClassVar[tuple[str, ...]]  # one letter per TUNABLE field for short_form

    if TYPE_CHECKING:  # the fields every family's dataclass declares (for the type checker)
        __dataclass_fields__: ClassVar[dict[str, Any]]
        head_dim: int
        dtype: str
        causal: bool
        block_m: int
        block_n: int
        stages: int

        @property
        def threads(self) -> int: ...

    def _validate(self) -> None:
        if self.dtype not in DTYPES:
            raise WhowaitsError(f"unknown dtype {self.dtype!r}: expected one of {', '.join(DTYPES)}")
        for name in ("head_dim", *self.TUNABLE):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise WhowaitsError(f"config field {name} must be a positive integer, got {value!r}")
        if not isinstance(self.causal, bool):
            raise WhowaitsError(f"config field causal must be true/false, got {self.causal!r}")

    @property
    def element(self) -> str:
        """The C++ element type (``__half`` / ``__nv_bfloat16``)."""
        return DTYPES[self.dtype]

    @property
    def warp_count(self) -> int:
        """Warps per CTA (blockDim.x / 32), whatever the family calls its unit."""
        return self.threads // 32

    def template_args(self) -> str:
        """The template argument list, e.g. ``__half, 128, 64, 64, 4, 1, false``."""
        ints = ", ".join(str(getattr(self, f)) for f in ("head_dim", *self.TUNABLE))
        return f"{self.element}, {ints}, {'true' if self.causal else 'false'}"

    def short_form(self) -> str:
        """Compact id used in file names and tables, e.g. ``d128_m64_n64_w4_s1_fp16`` (+ ``_causal``)."""
        parts = [f"d{self.head_dim}"] + [f"{c}{getattr(self, f)}" for c, f in zip(self.SHORT, self.TUNABLE)]
        return "_".join(parts) + f"_{self.dtype}" + ("_causal" if self.causal else "")

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def smem_bytes(self, layout: str) -> int:
        """Dynamic shared memory per CTA (bytes) for a version's ``smem_layout`` (CONTRACT.md)."""
        e = ELEMENT_BYTES[self.dtype]
        if layout == "none":
            return 0
        if layout == "kv":
            return self.stages * 2 * self.block_n * self.head_dim * e
        if layout == "q_kv":
            return (self.block_m + self.stages * 2 * self.block_n) * self.head_dim * e
        if layout == "tma_q_kv":
            return (self.block_m + self.stages * 2 * self.block_n) * self.head_dim * e + TMA_ALIGN_SLACK
        if layout == "tma_q2_kv":  # two Q buffers (v14: the next tile's Q loads while the current one is read)
            return (2 * self.block_m + self.stages * 2 * self.block_n) * self.head_dim * e + TMA_ALIGN_SLACK
        if layout == "tma_q2_kv_o":  # + an O staging tile for the TMA-store epilogue (v17)
            return (3 * self.block_m + self.stages * 2 * self.block_n) * self.head_dim * e + TMA_ALIGN_SLACK
        if layout == "tma_q2_kv_o_fit":  # v25: the O staging tile only where it fits; else O goes into Q's rows
            with_o = self.smem_bytes("tma_q2_kv_o")
            return with_o if with_o <= SMEM_OPTIN_BYTES else self.smem_bytes("tma_q2_kv")
        if layout == "tma_q2_kv_o_p64":  # v27: + a block_m x block_n P tile at head_dim 64 (PV reads P from smem)
            p_tile = self.block_m * self.block_n * e if self.head_dim == 64 else 0
            return self.smem_bytes("tma_q2_kv_o") + p_tile
        raise WhowaitsError(f"unknown smem_layout {layout!r}: expected one of {', '.join(SMEM_LAYOUTS)}")

    @classmethod
    def from_kernel_name(cls, name: str):
        """Parse a ladder kernel name back to ``(version_id, config)`` in this family's signature.

        Accepts ``void whowaits::v07_tuned::flash_fwd<__half, 128, 128, 64, 4, 2, false>(const __half *, …)``,
        the same without ``void``/arguments, ncu's ``(int)128`` / ``(bool)0`` spelling, and the mangled
        symbol (``_ZN8whowaits9v07_tuned9flash_fwdI6__halfLi128E…``). ncu's short display name drops the
        namespace (``void flash_fwd<__half, 128, 32, 16, 8, 1, 0>(const T1 *, …)``): the config still
        parses, and ``version_id`` is then ``None`` (take the version from the mangled name or NVTX range).
        """
        version_id, dtype, ints, causal = split_kernel_name(name)
        return version_id, cls(*ints, causal=causal, dtype=dtype)


@dataclass(frozen=True, order=True)
class FwdConfig(_ConfigMixin):
    """Family ``fwd``: one instantiation of ``flash_fwd<Element, kHeadDim, kBlockM, kBlockN, kWarps, kStages,
    kCausal>``. Field order = template argument order."""

    FAMILY: ClassVar[str] = "fwd"
    TUNABLE: ClassVar[tuple[str, ...]] = TUNABLE_FIELDS
    SHORT: ClassVar[tuple[str, ...]] = ("m", "n", "w", "s")

    head_dim: int = 128
    block_m: int = 64
    block_n: int = 64
    warps: int = 4
    stages: int = 1
    causal: bool = False
    dtype: str = "fp16"

    def __post_init__(self) -> None:
        self._validate()

    @property
    def threads(self) -> int:
        return 32 * self.warps


@dataclass(frozen=True, order=True)
class WgConfig(_ConfigMixin):
    """Family ``wg``: ``flash_fwd<Element, kHeadDim, kBlockM, kBlockN, kWarpgroups, kStages, kCausal>``.

    ``warpgroups`` consumer warpgroups of 128 threads (4 consecutive warps, wgmma's unit), each owning
    ``block_m / warpgroups`` query rows; blockDim.x = 128 * warpgroups.
    """

    FAMILY: ClassVar[str] = "wg"
    TUNABLE: ClassVar[tuple[str, ...]] = ("block_m", "block_n", "warpgroups", "stages")
    SHORT: ClassVar[tuple[str, ...]] = ("m", "n", "g", "s")

    head_dim: int = 128
    block_m: int = 128
    block_n: int = 128
    warpgroups: int = 2
    stages: int = 2
    causal: bool = False
    dtype: str = "fp16"

    def __post_init__(self) -> None:
        self._validate()

    @property
    def threads(self) -> int:
        return 128 * self.warpgroups


@dataclass(frozen=True, order=True)
class WsConfig(_ConfigMixin):
    """Family ``ws`` (warp-specialised, v10 on): ``flash_fwd<Element, kHeadDim, kBlockM, kBlockN, kConsumers,
    kStages, kCausal>``.

    One producer warpgroup (its first warp issues the TMA loads, ``setmaxnreg.dec``) beside ``consumers``
    consumer warpgroups (wgmma + softmax, ``setmaxnreg.inc``), each owning ``block_m / consumers`` query rows;
    blockDim.x = 128 * (consumers + 1). Same template shape as ``wg``, so the name parser is shared.
    """

    FAMILY: ClassVar[str] = "ws"
    TUNABLE: ClassVar[tuple[str, ...]] = ("block_m", "block_n", "consumers", "stages")
    SHORT: ClassVar[tuple[str, ...]] = ("m", "n", "c", "s")

    head_dim: int = 128
    block_m: int = 128
    block_n: int = 128
    consumers: int = 2
    stages: int = 2
    causal: bool = False
    dtype: str = "fp16"

    def __post_init__(self) -> None:
        self._validate()

    @property
    def threads(self) -> int:
        return 128 * (self.consumers + 1)


FAMILIES: dict[str, type] = {"fwd": FwdConfig, "wg": WgConfig, "ws": WsConfig}


def split_kernel_name(name: str) -> tuple[str | None, str, list[int], bool]:
    """``(version_id or None, dtype, [5 ints], causal)`` from any spelling of a ladder kernel name."""
    mm = _MANGLED_RE.search(name)
    if mm and int(mm.group(1)) == len(mm.group(2)):
        ints = [int(x) for x in mm.group(4, 5, 6, 7, 8)]
        return mm.group(2), _CXX_TO_DTYPE[mm.group(3)], ints, mm.group(9) == "1"
    m = _NAME_RE.search(name)
    if not m:
        raise WhowaitsError(f"not a whowaits ladder kernel name: {name[:120]!r}")
    version_id, args = m.group(1), [a.strip() for a in m.group(2).split(",")]
    if len(args) != 7:
        raise WhowaitsError(f"expected 7 template arguments in {name[:120]!r}, found {len(args)}")
    element = args[0].replace("const", "").strip()
    if element not in _CXX_TO_DTYPE:
        raise WhowaitsError(f"unknown element type {element!r} in kernel name")
    return version_id, _CXX_TO_DTYPE[element], [_parse_int(a) for a in args[1:6]], _parse_bool(args[6])


_NAME_RE = re.compile(r"(?:^|[\s:])(?:whowaits::(v\d\d_[a-z0-9_]+)::)?flash_fwd<(.*?)>\s*(?:\(|$)")
_MANGLED_RE = re.compile(
    r"_ZN8whowaits(\d+)(v\d\d_[a-z0-9_]+)9flash_fwdI(?:6|13)(__half|__nv_bfloat16)"
    r"Li(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELb([01])E"
)
_CAST_RE = re.compile(r"^\((?:unsigned\s+)?(?:int|bool|long|unsigned)\)\s*")


def _parse_int(text: str) -> int:
    t = _CAST_RE.sub("", text.strip()).rstrip("uUlL")
    try:
        return int(t)
    except ValueError:
        raise WhowaitsError(f"template argument {text!r} is not an integer") from None


def _parse_bool(text: str) -> bool:
    t = _CAST_RE.sub("", text.strip())
    if t in ("true", "1"):
        return True
    if t in ("false", "0"):
        return False
    raise WhowaitsError(f"template argument {text!r} is not a bool")


# --- shapes ------------------------------------------------------------------------------------------------
_SHAPE_RE = re.compile(r"^b(\d+)_h(\d+)_s(\d+)_d(\d+)_(fp16|bf16)(_causal)?$")


@dataclass(frozen=True, order=True)
class Shape:
    """A forward-attention problem: q, k, v, o all (batch, heads, seqlen, head_dim)."""

    batch: int
    heads: int
    seqlen: int
    head_dim: int
    dtype: str = "fp16"
    causal: bool = False

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise WhowaitsError(f"unknown dtype {self.dtype!r}: expected one of {', '.join(DTYPES)}")
        for name in ("batch", "heads", "seqlen", "head_dim"):
            if getattr(self, name) < 1:
                raise WhowaitsError(f"shape field {name} must be >= 1")

    @property
    def key(self) -> str:
        k = f"b{self.batch}_h{self.heads}_s{self.seqlen}_d{self.head_dim}_{self.dtype}"
        return k + ("_causal" if self.causal else "")

    def __str__(self) -> str:
        return self.key

    @classmethod
    def parse(cls, key: str) -> "Shape":
        """Parse ``b{B}_h{H}_s{S}_d{D}_{fp16|bf16}[_causal]``."""
        m = _SHAPE_RE.match(key.strip())
        if not m:
            raise WhowaitsError(
                f"bad shape key {key!r}: expected b{{B}}_h{{H}}_s{{S}}_d{{D}}_{{fp16|bf16}}[_causal], "
                "e.g. b1_h64_s1024_d128_fp16"
            )
        b, h, s, d = (int(x) for x in m.group(1, 2, 3, 4))
        return cls(b, h, s, d, m.group(5), m.group(6) is not None)

    def flops(self) -> float:
        """FLOPs of one forward call: 4·B·H·S²·D (two matmuls), half of it when causal (docs/methods.md, Bench)."""
        f = 4.0 * self.batch * self.heads * self.seqlen * self.seqlen * self.head_dim
        return f / 2 if self.causal else f
