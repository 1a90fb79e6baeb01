"""Helpers shared by the analyses: `missing` records and JSON-safe values."""

from __future__ import annotations

import numpy as np
import pandas as pd



def missing(field: str, section: str) -> dict:
    """One entry of a `missing` list: the output field that is null, and the ncu section that
    would supply it."""
    return {"field": field, "section": section}


def with_missing(frame: pd.DataFrame, entries: list[dict]) -> pd.DataFrame:
    """Attach `missing` entries to a frame (``frame.attrs["missing"]``) and return it."""
    frame.attrs["missing"] = list(entries)
    return frame


def dedup(entries: list[dict]) -> list[dict]:
    """``missing`` entries without repeats (first occurrence kept)."""
    seen, out = set(), []
    for e in entries:
        k = (e["field"], e["section"])
        if k not in seen:
            seen.add(k)
            out.append(e)
    return out


def py(value):
    """A JSON-serialisable plain Python value (numpy scalars -> int/float, NaN -> None)."""
    if value is None:
        return None
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        f = float(value)
        return None if np.isnan(f) else f
    if value is pd.NA:
        return None
    return value


def group_sum(key: np.ndarray, mat: np.ndarray, groups: int) -> np.ndarray:
    """Row sums of the integer matrix ``mat`` (rows x columns) by group ``key[row]`` in
    ``range(groups)``: ``np.add.at(out, key, mat)`` with a sort and ``np.add.reduceat`` (3300 PCs x
    20 reasons into 8 groups: 1.7 ms instead of 4.0, load average 8)."""
    out = np.zeros((groups, mat.shape[1]), dtype=mat.dtype)
    if len(key) == 0 or mat.shape[1] == 0:
        return out
    order = np.argsort(key, kind="stable")
    ks = key[order]
    starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    out[ks[starts]] = np.add.reduceat(mat[order], starts, axis=0)
    return out


class OpcodeMatch(dict[str, bool]):
    """``match[opcode]``: whether ``opcode`` is one of ``prefixes`` or one of them with modifiers
    (``SYNCS.ARRIVE`` matches ``SYNCS.ARRIVE.TRANS64``), worked out once per distinct opcode (a plain dict
    lookup after that): the analyses ask this of every instruction of a kernel that has a few hundred
    distinct opcodes."""

    def __init__(self, prefixes) -> None:
        super().__init__()
        self.prefixes = tuple(prefixes)

    def __missing__(self, opcode: str) -> bool:
        v = self[opcode] = any(opcode == p or opcode.startswith(p + ".") for p in self.prefixes)
        return v


_ABSENT = object()


def per_launch(launch, name: str, build):
    """``build()`` computed once per launch and kept on it under ``name``, for the analyses of one summary that
    need the same derived data (the SASS tensor split: the roofline's FLOPs, its ceilings and the tensor
    utilisation each ask for it). Valid while the launch's ``sass`` frame is the same object (the results depend
    on nothing else of the launch but its metrics, which a launch never swaps). Callers must not mutate what it
    returns. A launch that takes no attributes (a frozen stand-in) computes every time."""
    sass = getattr(launch, "sass", None)
    memo: tuple[object, dict[str, object]] | None = getattr(launch, "_analysis_memo", None)
    if memo is None or memo[0] is not sass:
        memo = (sass, {})
        try:
            launch._analysis_memo = memo
        except AttributeError:
            return build()
    got = memo[1].get(name, _ABSENT)
    if got is _ABSENT:
        got = memo[1][name] = build()
    return got


def shared_cfg(launch, addresses, texts, bases):
    """:func:`profiler.sass.build_cfg` of a launch's SASS, built once for the analyses that walk it
    (the producers' walk and the role graph each built it: ~5% of a warm ``show`` of the flash
    report, py-spy). Kept on the launch while its ``sass`` frame is the same object and the base
    opcodes given are equal (the graph depends on nothing else of the frame)."""
    from profiler.sass import build_cfg  # noqa: PLC0415

    sass = getattr(launch, "sass", None)
    key = None if bases is None else list(bases)
    memo = getattr(launch, "_cfg_memo", None)
    if memo is not None and key is not None and memo[0] is sass and memo[1] == key:
        return memo[2]
    cfg = build_cfg(addresses, texts, bases)
    if key is not None:
        try:
            launch._cfg_memo = (sass, key, cfg)
        except AttributeError:  # a frozen stand-in: no memo
            pass
    return cfg
