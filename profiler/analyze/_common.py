"""Helpers shared by the analyses: stall columns of the per-PC frame, and `missing` records."""

from __future__ import annotations

import numpy as np
import pandas as pd

from profiler import metrics as M


def missing(field: str, section: str) -> dict:
    """One entry of a `missing` list: the output field that is null, and the ncu section that
    would supply it."""
    return {"field": field, "section": section}


def with_missing(frame: pd.DataFrame, entries: list[dict]) -> pd.DataFrame:
    """Attach `missing` entries to a frame (``frame.attrs["missing"]``) and return it."""
    frame.attrs["missing"] = list(entries)
    return frame


def stall_columns(sass: pd.DataFrame) -> list[tuple[str, str]]:
    """(reason, column) for every stall reason sampled per PC in ``sass``, in reason order."""
    return [(r, f"stall_{r}") for r in M.stall_reasons() if f"stall_{r}" in sass.columns]


def per_pc_stalls(launch) -> tuple[list[str], np.ndarray]:
    """(reasons, read-only matrix PCs x reasons) of stall samples of a launch's sass frame."""
    return launch.stall_matrix()


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
