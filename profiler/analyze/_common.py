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
