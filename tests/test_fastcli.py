"""The console script replays a read-only command's stored output (profiler/fastcli.py): same bytes as
computing it, none of the heavy imports on a hit, a new key whenever a file it reads changes, errors never
stored. Run on copies of two committed reports, as subprocesses (the console script's own path)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from profiler import fastcli

ROOT = Path(__file__).resolve().parents[1]
SHAPE = "b1_h64_s1024_d128_fp16"
HEAVY = ("pandas", "pyarrow", "plotly", "ncu_report", "typer", "numpy")


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("user")
    for v in ("v06_softmax_fusion", "v07_tuned"):
        shutil.copytree(ROOT / "reports" / "h200" / v, home / "reports" / "h200" / v)
    return home


def _run(cwd: Path, *args: str, replay: bool = True, importtime: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("WHOWAITS_REPORTS_DIR", "WHOWAITS_NO_RESULT_CACHE")}
    if not replay:
        env["WHOWAITS_NO_RESULT_CACHE"] = "1"
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run([sys.executable, *flags, "-m", "profiler.fastcli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _imported(stderr: str) -> set[str]:
    return {line.split("|")[2].strip().split(".")[0] for line in stderr.splitlines()
            if line.startswith("import time:") and line.count("|") == 2}


def test_replayed_output_is_the_computed_output_without_heavy_imports(tree):
    args = ("diff", "v06", "v07", "--format", "json")
    computed = _run(tree, *args, replay=False)
    assert computed.returncode == 0, computed.stderr
    first = _run(tree, *args)  # a miss: computed, stored
    again = _run(tree, *args, importtime=True)  # a hit
    assert first.returncode == again.returncode == 0
    assert first.stdout == again.stdout == computed.stdout
    assert again.stderr.replace("\n", "").count("whowaits:") == computed.stderr.count("whowaits:")
    assert not set(HEAVY) & _imported(again.stderr)
    assert "pandas" in _imported(_run(tree, *args, replay=False, importtime=True).stderr)  # the check can fail


def test_key_changes_with_what_the_command_reads(tree, monkeypatch):
    monkeypatch.chdir(tree)
    monkeypatch.delenv("WHOWAITS_REPORTS_DIR", raising=False)
    argv = ["migration", "--format", "json"]
    k0 = fastcli.command_key(argv)
    assert fastcli.command_key(argv) == k0
    side = tree / "reports" / "h200" / "v07_tuned" / f"{SHAPE}.json"
    text = side.read_text()
    try:
        side.write_text(text.replace("{", "{ ", 1))  # same meaning, other bytes: content, not mtime, decides
        assert fastcli.command_key(argv) != k0
    finally:
        side.write_text(text)
    assert fastcli.command_key(argv) == k0
    assert fastcli.command_key(["migration", "--format", "json", "--shape", SHAPE]) != k0
    monkeypatch.setenv("WHOWAITS_REPORTS_DIR", str(tree / "reports" / "h200"))
    assert fastcli.command_key(argv) != k0  # the environment is part of the key
    show = ["show", str(tree / "reports" / "h200" / "v07_tuned" / f"{SHAPE}.ncu-rep"), "--format", "json"]
    k1 = fastcli.command_key(show)
    side.write_text(text.replace("{", "{ ", 1))
    try:
        assert fastcli.command_key(show) != k1  # show's key covers the report's sidecar too
    finally:
        side.write_text(text)


def test_errors_are_never_stored(tree, tmp_path):
    cache = Path(os.environ["WHOWAITS_CACHE_DIR"]) / "results"
    before = set(cache.glob("*.json")) if cache.is_dir() else set()
    for _ in range(2):
        bad = _run(tree, "diff", "v06", "v99", "--format", "json")
        assert bad.returncode == 2 and "unknown version 'v99'" in bad.stderr and "Traceback" not in bad.stderr
    after = set(cache.glob("*.json")) if cache.is_dir() else set()
    assert after == before


@pytest.mark.parametrize("argv,ok", [
    (["show", "x.ncu-rep", "--format", "json"], True),
    (["show", "x.ncu-rep", "-f", "json"], True),
    (["migration", "--format=json"], True),
    (["show", "x.ncu-rep"], False),
    (["diff", "a", "b", "--format", "csv"], False),
    (["migration", "--format", "json", "--html", "out.html"], False),
    (["migration", "--format", "json", "--help"], False),
    (["report", "--format", "json"], False),
    (["migration", "series.toml", "--format", "json"], False),
    (["diff", "a", "b", "--series", "s.toml", "--format", "json"], False),
    (["migration", "--from-store", "latest", "--format", "json"], False),
    ([], False),
])
def test_what_is_replayed(argv, ok, monkeypatch):
    monkeypatch.delenv("WHOWAITS_NO_RESULT_CACHE", raising=False)
    assert fastcli.replayable(argv) is ok
    monkeypatch.setenv("WHOWAITS_NO_RESULT_CACHE", "1")
    assert fastcli.replayable(argv) is False
