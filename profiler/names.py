"""Names that several modules share: one place, so that a view, the summary schema and the store agree.

Raw ncu metric names stay in ``data/metrics.toml``; this module holds the project's own vocabulary and
the few mappings between ncu's spellings that code needs.
"""

from __future__ import annotations

import re

# --- roofline levels -----------------------------------------------------------------------------------
LEVELS: tuple[str, ...] = ("l1", "l2", "dram", "smem")
"""Memory levels of the roofline, in order: ncu's three (L1, L2, DRAM) and our shared-memory level."""

NCU_LEVELS: tuple[str, ...] = ("l1", "l2", "dram")
"""The levels ncu's own roofline sections have."""

SMEM_OPS: tuple[str, ...] = ("ld", "st", "ldsm", "stsm", "ldgsts", "gmma", "atom")
"""Shared-memory byte counters by operation (``roofline.smem.bytes_by_op``)."""

L2_READ_COUNTERS: tuple[str, ...] = ("delivered_bytes", "multicast_bytes", "sectors", "requests", "miss_sectors")
"""The L2 read fan-out's counters (``roofline.l2_reads.<name>``; canonical metric ``l2_read_<name>`` of
``data/metrics.toml``)."""

L2_READ_DERIVED: tuple[str, ...] = ("bytes", "fanout", "miss_share", "multicast_share")
"""What ``roofline.l2_reads`` derives from them: L2 bytes read for the SMs (sectors x 32), the fan-out (delivered
bytes / those bytes: SMs served per L2 read), the misses' share of the sectors and TMA multicast's share of the
delivered bytes."""

# --- subjects ------------------------------------------------------------------------------------------
SHAPE_RE = re.compile(r"^b\d+_h\d+_s\d+_d\d+_[a-z0-9]+(_causal)?$")
"""A shape key, the stem of a report file (``b1_h64_s1024_d128_fp16``, ``…_causal``)."""

EXT_PREFIX = "ext-"
"""External subjects (torch SDPA backends, cuBLAS, any program) are report folders named ``ext-*``."""


def is_external(subject: str | None) -> bool:
    """Whether a report folder / version name is an external subject (``ext-sdpa-cudnn``)."""
    return bool(subject) and str(subject).startswith(EXT_PREFIX)


EXT_RUNNER_TITLES: dict[str, str] = {
    "sdpa-flash": "torch SDPA, FlashAttention-2 backend",
    "sdpa-cudnn": "torch SDPA, cuDNN backend (wgmma)",
}
"""Titles of the external subjects ``python -m kernels.runner`` launches (written into their sidecars)."""

# --- tensor paths --------------------------------------------------------------------------------------
TENSOR_PATHS: tuple[str, ...] = ("hmma", "gmma")
"""``tensor_path`` values of a summary for one path: mma.sync (``HMMA``) and wgmma (``HGMMA``). A summary
also says ``none`` (no tensor instruction), ``mixed`` (both), or ``a+b`` for merged launches."""

PATH_COUNTER: dict[str, str] = {"hmma": "hmma", "gmma": "hgmma", "hgmma": "hgmma"}
"""``tensor_path`` -> the key its FLOPs, ceilings and instruction counts use (``flops_by_path.tensor_hgmma``,
``ceilings.tensor_hgmma_tflops``, ``tensor_inst.hgmma``): ncu's op counters say ``hgmma`` where the
path is called ``gmma`` (its pipe, ``…_op_gmma``)."""


def path_counter(path: str | None) -> str | None:
    """The counter key of a tensor path (``gmma`` -> ``hgmma``), None for none/mixed/unknown."""
    return PATH_COUNTER.get(path or "")


# --- stall reasons -------------------------------------------------------------------------------------
NOT_WAITING: tuple[str, ...] = ("selected", "not_selected")
"""Reasons that are not a wait on another instruction: never named the *top waiter*."""

SCOREBOARD_REASONS: dict[str, str] = {"short_scoreboard": "short", "long_scoreboard": "long"}
"""Stall reasons that wait on a scoreboard, and which one (who-waits-on-whom traces these)."""

RATIO_ALIAS: dict[str, str] = {"warpgroup_arrive": "gmma", "no_instructions": "no_instruction"}
"""Sampler reason -> the name gh100's kernel-level ratio metrics use
(``smsp__average_warps_issue_stalled_<name>_per_issue_active.ratio``)."""

# --- missing ------------------------------------------------------------------------------------------
NO_SECTION = "none"
"""The ``section`` of a ``missing`` entry that no ncu section would supply: the kernel has nothing to report
there (``overlap`` of a kernel whose SASS commits no asynchronous group); such an entry says why in ``reason``
and never fails ``whowaits check``'s ``no_missing``."""

# --- keys ----------------------------------------------------------------------------------------------
CLASS_COLUMN = "opcode_class"
"""The opcode-class column of analysis frames (the sass frame, who_waits, …)."""
CLASS_KEY = "class"
"""The same in summary records (``who_waits``, ``opcode_waits``, ``waits_on`` …: docs/contract.md)."""

__all__ = [
    "CLASS_COLUMN", "CLASS_KEY", "EXT_PREFIX", "EXT_RUNNER_TITLES", "LEVELS", "NCU_LEVELS", "NO_SECTION", "NOT_WAITING",
    "PATH_COUNTER", "RATIO_ALIAS", "SCOREBOARD_REASONS", "SMEM_OPS", "TENSOR_PATHS", "is_external",
    "path_counter",
]
