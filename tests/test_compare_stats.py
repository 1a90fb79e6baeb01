"""Unit tests of the sampling statistics (no reports needed)."""

import math

import numpy as np
import pytest

from profiler.compare import stats


def test_wilson_matches_textbook_values():
    # Wilson 95% interval for 81/263 (Newcombe 1998, table I example): 0.2553 .. 0.3662
    lo, hi = stats.wilson_interval(81, 263)
    assert float(lo) == pytest.approx(0.2553, abs=5e-4)
    assert float(hi) == pytest.approx(0.3662, abs=5e-4)


def test_wilson_edges_and_empty():
    lo, hi = stats.wilson_interval(np.array([0, 10, 0]), np.array([10, 10, 0]))
    assert lo[0] == 0.0 and 0 < hi[0] < 0.35
    assert hi[1] == pytest.approx(1.0) and 0.65 < lo[1] < 1
    assert math.isnan(lo[2]) and math.isnan(hi[2])
    with pytest.raises(ValueError):
        stats.wilson_interval(11, 10)


def test_newcombe_interval_textbook():
    # Newcombe (1998) method 10, example (56/70 - 48/80): 0.0524 .. 0.3339
    d, lo, hi = stats.newcombe_interval(48, 80, 56, 70)
    assert float(d) == pytest.approx(0.2, abs=1e-9)
    assert float(lo) == pytest.approx(0.0524, abs=5e-4)
    assert float(hi) == pytest.approx(0.3339, abs=5e-4)


def test_share_change_flags_real_changes_only():
    # 40% -> 10% on 10k samples is real; 40% -> 40.5% on 1k samples is noise
    out = stats.share_change([4000, 400], [10000, 1000], [1000, 405], [10000, 1000])
    assert list(out["significant"]) == [True, False]
    assert out["delta"][0] == pytest.approx(-0.3)
    assert out["delta_lo"][0] < -0.3 < out["delta_hi"][0] < 0


def test_bonferroni_widens_intervals():
    assert stats.z_for(0.05, 10) > stats.z_for(0.05, 1) == pytest.approx(1.959964, abs=1e-6)
    one = stats.share_change(500, 1000, 560, 1000, m=1)
    many = stats.share_change(500, 1000, 560, 1000, m=20)
    assert bool(one["significant"]) and not bool(many["significant"])


def test_duration_change():
    assert stats.duration_change(200, 100) == {"ratio": 0.5, "speedup": 2.0, "significant": True}
    assert stats.duration_change(100, 103)["significant"] is False
    assert stats.duration_change(None, 100)["ratio"] is None
