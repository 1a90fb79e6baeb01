"""Sampling statistics for stall shares.

Stall samples are a sample: ncu's warp-state sampler looks at one warp per SM sub-partition
every N cycles, so a reason's share ``k / n`` is a binomial proportion. We give every share
a Wilson score interval and call a change between two reports *significant* when Newcombe's
hybrid score interval for the difference of two proportions (built from the two Wilson
intervals) excludes zero. With many reasons compared at once the level is Bonferroni-corrected
(``alpha / m``), so "significant" means the same thing whether a table has 3 rows or 30.

Samples of one warp taken a few hundred cycles apart are positively correlated, so these
intervals are, if anything, too narrow: a change inside them is noise for sure; a change just
outside them deserves a second report before it is trusted. Functions are vectorised over
numpy arrays and have no state.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

ALPHA = 0.05
"""Family-wise error level used by :func:`share_change` unless told otherwise."""

DURATION_NOISE = 0.05
"""Relative run-to-run spread of one measured kernel duration on the lent H200 (±5%, see
``shared/h200/attention-baselines-2026-11-30.txt``). One launch per report gives no interval of
its own, so a duration change smaller than this is reported as within noise."""


def z_for(alpha: float, m: int = 1) -> float:
    """Two-sided normal quantile for level ``alpha`` Bonferroni-split over ``m`` comparisons."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return NormalDist().inv_cdf(1 - alpha / (2 * max(int(m), 1)))


def wilson_interval(k, n, z: float = 1.959963984540054):
    """Wilson score interval for the proportion ``k / n``.

    ``k`` and ``n`` may be scalars or arrays (broadcast). Returns ``(lo, hi)`` arrays in [0, 1];
    where ``n == 0`` both bounds are NaN (no samples, no share).
    """
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    if np.any(k < 0) or np.any(k > n):
        raise ValueError("sample counts must satisfy 0 <= k <= n")
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        z2 = z * z
        denom = 1 + z2 / n
        centre = (p + z2 / (2 * n)) / denom
        half = z * np.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
        lo = np.clip(centre - half, 0.0, 1.0)
        hi = np.clip(centre + half, 0.0, 1.0)
    empty = n == 0
    lo = np.where(empty, np.nan, lo)
    hi = np.where(empty, np.nan, hi)
    return lo, hi


def newcombe_interval(k1, n1, k2, n2, z: float = 1.959963984540054):
    """Newcombe's hybrid score interval (method 10) for ``k2/n2 - k1/n1``.

    Returns ``(delta, lo, hi)``. NaN where either side has no samples.
    """
    k1, n1, k2, n2 = (np.asarray(x, dtype=float) for x in (k1, n1, k2, n2))
    l1, u1 = wilson_interval(k1, n1, z)
    l2, u2 = wilson_interval(k2, n2, z)
    with np.errstate(invalid="ignore", divide="ignore"):
        p1 = k1 / n1
        p2 = k2 / n2
        d = p2 - p1
        lo = d - np.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2)
        hi = d + np.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2)
    return d, lo, hi


def share_change(k1, n1, k2, n2, alpha: float = ALPHA, m: int | None = None) -> dict:
    """Compare shares ``k1/n1`` (A) and ``k2/n2`` (B) row by row.

    ``m`` is the number of comparisons for the Bonferroni split (default: the number of rows).
    Returns a dict of arrays: ``share_a, share_b, lo_a, hi_a, lo_b, hi_b`` (Wilson, at the
    corrected level), ``delta`` (B - A, a fraction), ``delta_lo, delta_hi`` (Newcombe) and
    ``significant`` (bool: the difference interval excludes 0).
    """
    k1, n1, k2, n2 = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (k1, n1, k2, n2)))
    rows = k1.size
    z = z_for(alpha, rows if m is None else m)
    la, ha = wilson_interval(k1, n1, z)
    lb, hb = wilson_interval(k2, n2, z)
    d, dlo, dhi = newcombe_interval(k1, n1, k2, n2, z)
    with np.errstate(invalid="ignore", divide="ignore"):
        sa = k1 / n1
        sb = k2 / n2
    sig = np.nan_to_num(dlo, nan=0.0) > 0
    sig |= np.nan_to_num(dhi, nan=0.0) < 0
    return {
        "share_a": sa, "share_b": sb,
        "lo_a": la, "hi_a": ha, "lo_b": lb, "hi_b": hb,
        "delta": d, "delta_lo": dlo, "delta_hi": dhi,
        "significant": sig,
    }


def duration_change(a_ns, b_ns, noise: float = DURATION_NOISE) -> dict:
    """Compare two durations. Returns ``ratio`` (B/A), ``speedup`` (A/B) and ``significant``
    (|B/A - 1| beyond the run-to-run ``noise``). ``None`` where either side is unknown."""
    if a_ns is None or b_ns is None or not a_ns or not b_ns:
        return {"ratio": None, "speedup": None, "significant": None}
    ratio = float(b_ns) / float(a_ns)
    return {"ratio": ratio, "speedup": 1.0 / ratio, "significant": abs(ratio - 1.0) > noise}


def fmt_ns(ns) -> str:
    """A duration for people: ns, µs, ms or s with 3 significant figures (never an exponent: a value that would
    round up to 1000 of a unit is given in the next)."""
    if ns is None:
        return "n/a"
    ns = float(ns)
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if abs(ns) >= 0.9995 * scale:
            v = ns / scale
            return f"{v:,.0f} {unit}" if unit == "s" and abs(v) >= 999.5 else f"{v:.3g} {unit}"
    return f"{ns:.3g} ns"


def fmt_ratio(x, digits: int = 3) -> str:
    """A ratio for people: ``digits`` significant figures, and whole numbers from 1000 on (never an exponent)."""
    return f"{x:,.0f}x" if abs(x) >= 999.5 else f"{x:.{digits}g}x"
