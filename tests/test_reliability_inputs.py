"""Damaged inputs are one line and exit 2, never an internal error (exit 70): sidecars that are not UTF-8,
not files, or hold values of the wrong type (diff, migration, index); `check --format junit` on an input error
still writes well-formed JUnit XML with one errored case (a CI recipe `--format junit > file || true` keeps
the reason), and characters XML forbids are escaped; a policy with a UTF-8 byte-order mark is read, a deeply
nested one is one line. All on copies of committed reports (tmp_path)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
H200 = REPO / "reports" / "h200"
SHAPE = "b1_h64_s1024_d128_fp16"
ENTRY = "import sys; sys.argv[0] = 'whowaits'; from profiler.fastcli import main; main()"


def cli(*args: str, cwd: Path = REPO, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ, PYTHONPATH=str(REPO), WHOWAITS_NO_RESULT_CACHE="1", **(env or {}))
    return subprocess.run([sys.executable, "-c", ENTRY, *args], cwd=cwd, env=e, capture_output=True, text=True,
                          timeout=300)


def one_line(cp: subprocess.CompletedProcess, code: int = 2) -> str:
    lines = cp.stderr.strip().splitlines()
    assert cp.returncode == code and len(lines) == 1 and "Traceback" not in cp.stderr, (cp.returncode, cp.stderr)
    return lines[0]


# --- 7. damaged sidecars --------------------------------------------------------------------------------------

SIDECAR_DAMAGE = {
    "not_utf8": (b"\xff\xfe{\"version\": 1}", "not UTF-8"),
    "ladder_order_text": ({"ladder_order": "x"}, "ladder_order must be an integer"),
    "problem_flops_text": ({"problem_flops": "abc"}, "problem_flops must be a number"),
    "title_number": ({"title": 5}, "title must be a string"),
    "ncu_command_ints": ({"ncu_command": [1, 2]}, "ncu_command must be a list of strings"),
    "git_dirty_text": ({"git_dirty": "yes"}, "git_dirty must be true or false"),
    "launch_count_float": ({"launch_count": 1.5}, "launch_count must be an integer"),
    "directory": (None, "not a regular file"),
    "not_object": (b"[1, 2]", "expected a JSON object"),
}


def _damaged_root(tmp_path: Path, how: str) -> tuple[Path, Path]:
    root = tmp_path / "reports"
    for v in ("v03_tensor_cores", "v04_swizzle_cp_async"):
        shutil.copytree(H200 / v, root / "h200" / v)
    side = root / "h200" / "v04_swizzle_cp_async" / f"{SHAPE}.json"
    data, _ = SIDECAR_DAMAGE[how]
    if data is None:
        side.unlink()
        side.mkdir()
    elif isinstance(data, bytes):
        side.write_bytes(data)
    else:
        side.write_text(json.dumps(json.loads(side.read_text()) | data))
    return root, side


@pytest.mark.slow
@pytest.mark.parametrize("how", sorted(SIDECAR_DAMAGE))
def test_a_damaged_sidecar_is_one_line_naming_it(tmp_path, how):
    root, side = _damaged_root(tmp_path, how)
    want = SIDECAR_DAMAGE[how][1]
    for args in (("diff", "v03", "v04", "--reports", str(root / "h200"), "--format", "json"),
                 ("migration", "--reports", str(root / "h200"), "--format", "json")):
        line = one_line(cli(*args))
        assert line.startswith("whowaits: error: ") and str(side) in line and want in line, line
    cp = cli("index", str(root), "--store", str(tmp_path / "store"))  # a partial index: exit 1, the rest kept
    lines = cp.stderr.strip().splitlines()
    assert cp.returncode == 1 and len(lines) == 2 and str(side) in lines[0] and want in lines[0], cp.stderr
    assert "1 added" in cp.stdout and "1 launches in the table" in cp.stdout


def test_every_committed_sidecar_reads():
    from profiler.provenance import read_sidecar

    reps = sorted(REPO.glob("reports/**/*.ncu-rep")) + sorted(REPO.glob("tests/public-reports/**/*.ncu-rep"))
    assert len(reps) > 20
    for r in reps:
        read_sidecar(r)  # no WhowaitsError: the type checks hold every sidecar whowaits wrote


# --- 10. check --format junit ----------------------------------------------------------------------------------

def _junit(cp: subprocess.CompletedProcess) -> ET.Element:
    assert cp.stdout.startswith('<?xml version="1.0" encoding="utf-8"?>'), cp.stdout
    return ET.fromstring(cp.stdout)


@pytest.mark.parametrize("policy", ["missing", "bad_toml", "unknown_key", "no_reports"])
def test_junit_on_an_input_error_is_one_errored_case(tmp_path, policy):
    pol = tmp_path / "whowaits.toml"
    if policy == "bad_toml":
        pol.write_text("[check\n")
    elif policy == "unknown_key":
        pol.write_text('[check]\nnope = 1\n[[check.rule]]\nversion = "v07_tuned"\nno_missing = true\n')
    elif policy == "no_reports":
        pol.write_text(f'[check]\nreports = "{tmp_path / "none"}"\n[[check.rule]]\nversion = "v07_tuned"\n'
                       f'shape = "{SHAPE}"\nno_missing = true\n')
    cp = cli("check", "--policy", str(pol), "--format", "junit", cwd=tmp_path)
    line = one_line(cp)
    root = _junit(cp)
    assert root.get("errors") == "1" and root.get("tests") == "1"
    (err,) = root.iter("error")
    assert err.get("message") == line[len("whowaits: error: "):]


def test_junit_escapes_what_xml_cannot_hold(tmp_path):
    pol = tmp_path / "whowaits.toml"
    pol.write_text(f'[check]\nreports = "{H200}"\n[[check.rule]]\nversion = "v07_tuned\\u0001\\u001b[31m"\n'
                   f'shape = "{SHAPE}"\nno_missing = true\n')
    cp = cli("check", "--policy", str(pol), "--format", "junit", cwd=tmp_path)
    assert cp.returncode in (1, 2), cp.stderr
    root = _junit(cp)  # well-formed
    text = ET.tostring(root, encoding="unicode")
    assert "\\x01" in text and "\\x1b" in text and "\x01" not in text


def test_xml_text_keeps_what_xml_holds():
    from profiler.check.render import xml_text

    assert xml_text("a\tb\nc\rd·é←") == "a\tb\nc\rd·é←"
    assert xml_text("a\x00b\x1fc\ufffe") == "a\\x00b\\x1fc\\ufffe"


# --- 11. policies: a byte-order mark, deep nesting ------------------------------------------------------------

def test_a_policy_with_a_utf8_bom_is_read(tmp_path):
    from profiler.check.policy import load_policy

    pol = tmp_path / "whowaits.toml"
    body = f'[check]\nreports = "{H200}"\n[[check.rule]]\nversion = "v07_tuned"\nshape = "{SHAPE}"\nno_missing = true\n'
    pol.write_bytes(b"\xef\xbb\xbf" + body.encode())
    assert load_policy(pol).rules[0].versions == ("v07_tuned",)


@pytest.mark.parametrize("depth", [2000, 20000])
def test_a_deeply_nested_policy_is_one_line(tmp_path, depth):
    pol = tmp_path / "whowaits.toml"
    pol.write_text("[check]\nalpha = " + "[" * depth + "]" * depth + "\n")
    line = one_line(cli("check", "--policy", str(pol), cwd=tmp_path))
    assert str(pol) in line
