"""`whowaits show` in-process (:mod:`clirun`, the console script's own entry function), on the
committed reports."""

from __future__ import annotations

import csv
import io
import json
import subprocess

from clirun import whowaits
from conftest import STARTER_REPORTS, golden_raw_number


def run(*args, cache_dir=None) -> subprocess.CompletedProcess:
    """``whowaits ARGS`` in-process, on the session's cache (``cache_dir`` is accepted and left
    unused: the cold path is tested in test_report.py)."""
    return whowaits(*args)


def test_json_gives_ncu_stall_counts_for_both_reports(tmp_path):
    for stem, path in STARTER_REPORTS.items():
        res = run("show", path, "--format", "json", cache_dir=tmp_path)
        assert res.returncode == 0, res.stderr
        data = json.loads(res.stdout)
        assert isinstance(data, list) and len(data) == 1
        s = data[0]
        for reason, n in s["stall_samples"].items():
            assert n == golden_raw_number(stem, f"smsp__pcsamp_warps_issue_stalled_{reason}"), reason
        for key in ["kernel", "duration_ns", "stall_samples", "stall_share", "short_scoreboard", "barriers",
                    "tensor_pipe_pct", "roofline", "opcode_waits", "missing", "launch"]:
            assert key in s


def test_table_is_the_default(tmp_path):
    res = run("show", STARTER_REPORTS["ext-sdpa-cudnn-fullset_b1_h64_s1024_d128_fp16"], "--top", "3", cache_dir=tmp_path)
    assert res.returncode == 0, res.stderr
    for heading in ["Stall breakdown", "Who waits on whom", "SSC", "Barriers", "Tensor cores", "Roofline", "Top instructions"]:
        assert heading in res.stdout, heading
    assert "WARPGROUP.DEPBAR.LE" in res.stdout  # the instruction the barrier stall sits on


def test_csv_is_a_flat_table(tmp_path):
    res = run("show", STARTER_REPORTS["ext-sdpa-flash-fullset_b1_h64_s1024_d128_fp16"], "-f", "csv", "--kernel", "flash_fwd", cache_dir=tmp_path)
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert set(rows[0]) == {"report", "launch", "kernel", "field", "value"}
    fields = {r["field"]: r["value"] for r in rows}
    assert fields["stall_samples.short_scoreboard"] == "924"
    assert fields["tensor_path"] == "hmma"
    assert fields["launch.grid"] == "8x1x64"


def _assert_one_line_error(res, text):
    assert res.returncode == 2
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("whowaits: error: ")
    assert text in lines[0]
    assert "Traceback" not in res.stderr


def test_missing_path(tmp_path):
    _assert_one_line_error(run("show", tmp_path / "nope.ncu-rep", cache_dir=tmp_path), "no such file")


def test_not_a_report(tmp_path):
    p = tmp_path / "x.ncu-rep"
    p.write_text("definitely not a report\n")
    _assert_one_line_error(run("show", p, cache_dir=tmp_path), "not an Nsight Compute report")


def test_truncated_report(tmp_path):
    p = tmp_path / "cut.ncu-rep"
    p.write_bytes(STARTER_REPORTS["ext-sdpa-cudnn-fullset_b1_h64_s1024_d128_fp16"].read_bytes()[:1_200_000])
    _assert_one_line_error(run("show", p, cache_dir=tmp_path), "truncated")


def test_kernel_regex_matching_nothing(tmp_path):
    res = run("show", STARTER_REPORTS["ext-sdpa-cudnn-fullset_b1_h64_s1024_d128_fp16"], "--kernel", "^nope$", cache_dir=tmp_path)
    _assert_one_line_error(res, "matches no launch")
    assert "cudnn_generated" in res.stderr  # lists the kernels that exist


def test_invalid_regex(tmp_path):
    res = run("show", STARTER_REPORTS["ext-sdpa-cudnn-fullset_b1_h64_s1024_d128_fp16"], "--kernel", "(", cache_dir=tmp_path)
    _assert_one_line_error(res, "not a valid regex")


def test_help_documents_the_command():
    res = run("show", "--help")
    assert res.returncode == 0
    for opt in ["--kernel", "--format", "--top"]:
        assert opt in res.stdout
