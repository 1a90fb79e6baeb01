"""Kernel configs and problem shapes: one place that maps Python <-> C++ template <-> demangled name <-> key.

``FwdConfig`` mirrors the template of every ladder version (``kernels/CONTRACT.md``)::

    template <typename Element, int kHeadDim, int kBlockM, int kBlockN, int kWarps, int kStages, bool kCausal>
    __global__ void whowaits::vNN_slug::flash_fwd(...)

so a report's demangled kernel name parses back to ``(version_id, FwdConfig)`` with
:meth:`FwdConfig.from_kernel_name`, in the compiler's spelling (``<__half, 128, 64, 64, 4, 1, false>``)
and in Nsight Compute's (``<__half, (int)128, (int)64, (int)64, (int)4, (int)1, (bool)0>``).

``Shape`` is a problem size, keyed ``b{B}_h{H}_s{S}_d{D}_{dtype}[_causal]`` everywhere (reports, bench files).
Pure Python: no torch, no CUDA.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from profiler.errors import WhowaitsError

# dtype key <-> C++ element type <-> bytes per element.
DTYPES: dict[str, str] = {"fp16": "__half", "bf16": "__nv_bfloat16"}
_CXX_TO_DTYPE = {v: k for k, v in DTYPES.items()}
_CXX_TO_DTYPE["half"] = "fp16"  # some demanglers print the typedef
_CXX_TO_DTYPE["__nv_bfloat16_raw"] = "bf16"
ELEMENT_BYTES = {"fp16": 2, "bf16": 2}

# Dynamic shared memory per CTA for each `smem_layout` a version may declare (CONTRACT.md).
SMEM_LAYOUTS = ("none", "kv", "q_kv")

# Tunable fields (the auto-tuner's space is generated from these); the rest are fixed by the problem.
TUNABLE_FIELDS = ("block_m", "block_n", "warps", "stages")


@dataclass(frozen=True, order=True)
class FwdConfig:
    """One instantiation of a version's ``flash_fwd`` template. Field order = template argument order."""

    head_dim: int = 128
    block_m: int = 64
    block_n: int = 64
    warps: int = 4
    stages: int = 1
    causal: bool = False
    dtype: str = "fp16"

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise WhowaitsError(f"unknown dtype {self.dtype!r}: expected one of {', '.join(DTYPES)}")
        for name in ("head_dim", "block_m", "block_n", "warps", "stages"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise WhowaitsError(f"config field {name} must be a positive integer, got {value!r}")
        if not isinstance(self.causal, bool):
            raise WhowaitsError(f"config field causal must be true/false, got {self.causal!r}")

    # --- C++ side -------------------------------------------------------------------------------------
    @property
    def element(self) -> str:
        """The C++ element type (``__half`` / ``__nv_bfloat16``)."""
        return DTYPES[self.dtype]

    @property
    def threads(self) -> int:
        return 32 * self.warps

    def template_args(self) -> str:
        """The template argument list, e.g. ``__half, 128, 64, 64, 4, 1, false``."""
        return (
            f"{self.element}, {self.head_dim}, {self.block_m}, {self.block_n}, {self.warps}, {self.stages}, "
            f"{'true' if self.causal else 'false'}"
        )

    def short_form(self) -> str:
        """Compact id used in file names and tables, e.g. ``d128_m64_n64_w4_s1_fp16`` (+ ``_causal``)."""
        s = f"d{self.head_dim}_m{self.block_m}_n{self.block_n}_w{self.warps}_s{self.stages}_{self.dtype}"
        return s + ("_causal" if self.causal else "")

    def replace(self, **changes) -> "FwdConfig":
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
        raise WhowaitsError(f"unknown smem_layout {layout!r}: expected one of {', '.join(SMEM_LAYOUTS)}")

    # --- parsing back -----------------------------------------------------------------------------------
    @classmethod
    def from_kernel_name(cls, name: str) -> tuple[str | None, "FwdConfig"]:
        """Parse a ladder kernel name back to ``(version_id, FwdConfig)``.

        Accepts ``void whowaits::v07_tuned::flash_fwd<__half, 128, 128, 64, 4, 2, false>(const __half *, …)``,
        the same without ``void``/arguments, ncu's ``(int)128`` / ``(bool)0`` spelling, and the mangled
        symbol (``_ZN8whowaits9v07_tuned9flash_fwdI6__halfLi128E…``). ncu's short display name drops the
        namespace (``void flash_fwd<__half, 128, 32, 16, 8, 1, 0>(const T1 *, …)``): the config still
        parses, and ``version_id`` is then ``None`` (take the version from the mangled name or NVTX range).
        """
        mm = _MANGLED_RE.search(name)
        if mm and int(mm.group(1)) == len(mm.group(2)):
            ints = [int(x) for x in mm.group(4, 5, 6, 7, 8)]
            return mm.group(2), cls(*ints, causal=mm.group(9) == "1", dtype=_CXX_TO_DTYPE[mm.group(3)])
        m = _NAME_RE.search(name)
        if not m:
            raise WhowaitsError(f"not a whowaits ladder kernel name: {name[:120]!r}")
        version_id, args = m.group(1), [a.strip() for a in m.group(2).split(",")]
        if len(args) != 7:
            raise WhowaitsError(f"expected 7 template arguments in {name[:120]!r}, found {len(args)}")
        element = args[0].replace("const", "").strip()
        if element not in _CXX_TO_DTYPE:
            raise WhowaitsError(f"unknown element type {element!r} in kernel name")
        ints = [_parse_int(a) for a in args[1:6]]
        causal = _parse_bool(args[6])
        return version_id, cls(*ints, causal=causal, dtype=_CXX_TO_DTYPE[element])


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
        """FLOPs of one forward call: 4·B·H·S²·D (two matmuls), half of it when causal (DESIGN.md)."""
        f = 4.0 * self.batch * self.heads * self.seqlen * self.seqlen * self.head_dim
        return f / 2 if self.causal else f
