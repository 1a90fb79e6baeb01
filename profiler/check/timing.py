"""Noise-aware timing verdicts from bench result files (``whowaits bench --repeat N``).

A bench row holds the median of its timed reps (``ms``); with ``--repeat N`` it also holds
``ms_runs``: the median of each of N interleaved rounds over all implementations, so the
run-to-run spread of a row is *measured*, not assumed. Two rows (the same implementation at the
same shape, from two bench files) are compared on the log scale:

- ``x_i = ln(ms_runs_i)`` per round (a row without ``ms_runs`` is one round, ``ln ms``);
- the pooled sample variance of the rounds of both rows (rows with N >= 2 contribute), with
  ``df = N_a + N_b - 2`` degrees of freedom;
- the change ``d = mean(x_b) - mean(x_a)`` is significant when ``|d| > t · s · sqrt(1/N_a + 1/N_b)``,
  ``t`` the two-sided Student quantile at level ``alpha / m`` (Bonferroni over ``m`` rows compared).

Without at least one row measured with ``--repeat 2`` or more there is no spread to judge by:
:func:`compare_rows` says so (``verdict = "no spread"``) instead of inventing one. Pure functions;
no GPU, no torch.
"""

from __future__ import annotations

import math
import statistics

VERDICTS = ("slower", "faster", "within noise", "no spread", "not timed")


def t_two_sided_cdf(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with integer ``df`` >= 1 (closed form, Abramowitz & Stegun 26.7.3/4)."""
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    t = abs(t)
    theta = math.atan(t / math.sqrt(df))
    s, c = math.sin(theta), math.cos(theta)
    if df % 2 == 1:
        term, total = c, (c if df > 1 else 0.0)
        for k in range(3, df - 1, 2):  # c + 2/3 c^3 + 2·4/(3·5) c^5 + ... up to c^(df-2)
            term *= (k - 1) / k * c * c
            total += term
        return 2 / math.pi * (theta + s * total)
    term, total = 1.0, 1.0
    for k in range(2, df - 1, 2):  # 1 + 1/2 c^2 + 1·3/(2·4) c^4 + ... up to c^(df-2)
        term *= (k - 1) / k * c * c
        total += term
    return s * total


def t_quantile(alpha: float, df: int) -> float:
    """The ``t`` with P(|T| > t) = ``alpha`` for ``df`` degrees of freedom (bisection on the CDF)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    lo, hi = 0.0, 1.0
    while t_two_sided_cdf(hi, df) < 1 - alpha:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_two_sided_cdf(mid, df) < 1 - alpha:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def runs_of(row: dict) -> list[float]:
    """The per-round medians of a bench row (``ms_runs``), or ``[ms]`` without repeats; [] if untimed."""
    runs = row.get("ms_runs")
    if isinstance(runs, list) and runs and all(isinstance(x, (int, float)) and x > 0 for x in runs):
        return [float(x) for x in runs]
    ms = row.get("ms")
    return [float(ms)] if isinstance(ms, (int, float)) and ms > 0 else []


def spread(row: dict) -> float | None:
    """Relative run-to-run spread of a row: sample SD of ``ln(ms_runs)`` (None with fewer than 2 rounds)."""
    runs = runs_of(row)
    if len(runs) < 2:
        return None
    return statistics.stdev(math.log(x) for x in runs)


def compare_rows(prev: dict, cur: dict, alpha: float = 0.05, m: int = 1) -> dict:
    """Compare the timing of bench row ``cur`` against ``prev`` (see the module docstring).

    Returns ``{ratio, band, df, n_prev, n_cur, spread, significant, verdict}``: ``ratio`` = cur / prev
    (> 1 slower; geometric means of the rounds), ``band`` the relative half-width a change must exceed
    (``exp(t·se) - 1``), ``spread`` the pooled SD of ln(ms) per round; ``verdict`` one of :data:`VERDICTS`.
    """
    a, b = runs_of(prev), runs_of(cur)
    out = {"ratio": None, "band": None, "df": 0, "n_prev": len(a), "n_cur": len(b), "spread": None,
           "significant": None, "verdict": "not timed"}
    if not a or not b:
        return out
    la, lb = [math.log(x) for x in a], [math.log(x) for x in b]
    d = statistics.fmean(lb) - statistics.fmean(la)
    out["ratio"] = math.exp(d)
    df = sum(len(x) - 1 for x in (la, lb))
    out["df"] = df
    if df < 1:
        out["verdict"] = "no spread"
        return out
    ss = sum(sum((v - statistics.fmean(x)) ** 2 for v in x) for x in (la, lb))
    s = math.sqrt(ss / df)
    se = s * math.sqrt(1 / len(la) + 1 / len(lb))
    t = t_quantile(alpha / max(int(m), 1), df)
    out["spread"] = s
    out["band"] = math.exp(t * se) - 1
    out["significant"] = abs(d) > t * se
    out["verdict"] = ("slower" if d > 0 else "faster") if out["significant"] else "within noise"
    return out


def compare_bench(prev_rows: list[dict], cur_rows: list[dict], alpha: float = 0.05) -> list[dict]:
    """Every implementation/shape in both row lists, compared (Bonferroni over the rows compared).

    Returns one dict per row of ``cur_rows`` that ``prev_rows`` also has: ``implementation``,
    ``shape``, ``ms_prev``, ``ms``, plus :func:`compare_rows`'s keys."""
    prev = {(r.get("implementation"), r.get("shape")): r for r in prev_rows}
    pairs = [(prev[(r.get("implementation"), r.get("shape"))], r) for r in cur_rows
             if (r.get("implementation"), r.get("shape")) in prev]
    m = sum(1 for p, c in pairs if runs_of(p) and runs_of(c)) or 1
    out = []
    for p, c in pairs:
        res = compare_rows(p, c, alpha=alpha, m=m)
        out.append({"implementation": c.get("implementation"), "shape": c.get("shape"),
                    "ms_prev": p.get("ms"), "ms": c.get("ms"), **res})
    return out


def verdict_text(res: dict) -> str:
    """One phrase for a comparison: ``1.120x slower (beyond the ±3.1% run-to-run band, df 4)``."""
    if res["verdict"] == "not timed":
        return "not timed on one side"
    r = res["ratio"]
    if res["verdict"] == "no spread":
        return (f"{r:.3f}x the time; no run-to-run spread measured on either side "
                "(bench with --repeat 2 or more)")
    band = f"±{100 * res['band']:.1f}% run-to-run band, df {res['df']}"
    if res["verdict"] == "within noise":
        return f"{r:.3f}x the time, within noise ({band})"
    word = f"{r:.3f}x slower" if r > 1 else f"{1 / r:.3f}x faster"
    return f"{word} (beyond the {band})"
