"""The committed host-cost files (scripts/device/host_us.py, reports/h200/host/): what each row says follows from its
rounds, every plan-path call was bit-equal to the full path, and the newest file holds ladder IV's host target
(docs/ladder-iv.md).

Every file is a subject; the target is read from the newest (by its name's time stamp), where the launcher as it is
now was measured: a planned ``forward()`` ≤ 25 µs at both shapes, for every version timed there.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HOST_FILES = sorted((REPO / "reports" / "h200" / "host").glob("*-host_us.json"))
TARGET_US = 25.0  # ladder IV (docs/ladder-iv.md): host cost of one forward() <= 25 us, the GPU kept busy


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def test_there_are_host_files():
    assert len(HOST_FILES) >= 5


@pytest.mark.parametrize("path", HOST_FILES, ids=[p.name for p in HOST_FILES])
def test_each_row_follows_from_its_rounds(path):
    data = _load(path)
    assert data["calls"] >= 100 and data["rounds"] >= 5
    for shape, rows in data["shapes"].items():
        assert "sdpa-auto" in rows, shape  # the peer is timed in the same run
        for label, row in rows.items():
            if "bit_equal" in row:  # a check row: every call agreed
                assert row["bit_equal"] and all(row["bit_equal"]), (shape, label)
                continue
            if row["host_us"] is None:
                assert row.get("note"), (shape, label)
                continue
            rounds = row["rounds_us"]
            assert len(rounds) == data["rounds"]
            assert row["host_us"] == pytest.approx(statistics.median(rounds), abs=0.011)
            if "min_us" in row:
                assert row["min_us"] == pytest.approx(min(rounds), abs=0.011)
            if "vs_sdpa_auto" in row:  # interleaved rounds (2026-12-03 on): the per-round ratio's median
                ref = rows["sdpa-auto"]["rounds_us"]  # (rounded to 0.01 us in the file: 1e-3 relative slack)
                assert row["vs_sdpa_auto"] == pytest.approx(statistics.median(a / b for a, b in zip(rounds, ref)),
                                                            rel=1e-3, abs=0.0011)


def test_the_newest_file_holds_the_target():
    newest = HOST_FILES[-1]
    data = _load(newest)
    planned = {(shape, label): row["host_us"] for shape, rows in data["shapes"].items() for label, row in rows.items()
               if row.get("host_us") is not None and label[:1] == "v" and " " not in label}
    assert planned, f"{newest.name}: no planned forward() row"
    assert all(us <= TARGET_US for us in planned.values()), (newest.name, planned)
    # and cheaper than torch's own call in the same rounds
    assert all(data["shapes"][shape][label]["vs_sdpa_auto"] < 1 for shape, label in planned), newest.name
