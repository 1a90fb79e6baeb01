"""One home for settings: every ``WHOWAITS_*`` name in the tree is declared in profiler/settings.py (or
listed there as not an environment variable), only that module reads them from the environment,
docs/settings.md is generated from it, and ``whowaits env`` prints it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from clirun import whowaits

from profiler import settings

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"(?<!-D)(?<!#define )(?<!#ifdef )(?<!#ifndef )(?<!defined\()\bWHOWAITS_[A-Z0-9_]*[A-Z0-9]")
#: reads of the environment by a name: os.environ.get("WHOWAITS_X"), os.getenv(...), os.environ["WHOWAITS_X"]
READ = re.compile(r"""(?:os\.environ\.get|os\.getenv|os\.environ\[)\(?\s*["'](WHOWAITS_[A-Z0-9_]+)""")


def _sources() -> list[Path]:
    out = []
    for top in ("profiler", "kernels", "scripts", "tests", "notebooks"):
        for p in sorted((ROOT / top).rglob("*")):
            if p.suffix in (".py", ".sh", ".ipynb") and p.is_file() and p.name != "test_settings.py" \
                    and "__pycache__" not in p.parts and "public-reports" not in p.parts and "golden" not in p.parts:
                out.append(p)
    return out


def test_every_name_in_the_tree_is_declared():
    declared = {s.name for s in settings.SETTINGS}
    assert not declared & settings.NOT_ENVIRONMENT
    found: dict[str, list[str]] = {}
    for p in _sources():
        for name in NAME.findall(p.read_text(errors="replace")):
            found.setdefault(name, []).append(str(p.relative_to(ROOT)))
    unknown = {n: f[:3] for n, f in found.items() if n not in declared | settings.NOT_ENVIRONMENT}
    assert unknown == {}, "declare them in profiler/settings.py"
    # every declared setting is used somewhere (a stale declaration is dead weight)
    used = {n for n, files in found.items() if any(f != "profiler/settings.py" for f in files)}
    assert declared <= used, declared - used


def test_only_the_settings_module_reads_the_environment():
    readers = [(str(p.relative_to(ROOT)), m.group(1)) for p in _sources() if p.suffix == ".py"
               for m in READ.finditer(p.read_text()) if p.name != "settings.py"]
    # scripts and tests may read what they pass on to children; the package and the kernels may not
    assert [r for r in readers if r[0].startswith(("profiler/", "kernels/"))] == []


def test_docs_table_is_generated_from_the_declaration():
    assert (ROOT / "docs" / "settings.md").read_text() == settings.markdown(), \
        "regenerate: python -m profiler.settings > docs/settings.md"


def test_parsing(monkeypatch):
    monkeypatch.setenv("WHOWAITS_DEBUG", "0")
    assert settings.flag("WHOWAITS_DEBUG") is False
    monkeypatch.setenv("WHOWAITS_DEBUG", "1")
    assert settings.flag("WHOWAITS_DEBUG") is True
    monkeypatch.setenv("WHOWAITS_PROCESSES", " 3 ")
    assert settings.integer("WHOWAITS_PROCESSES") == 3
    monkeypatch.setenv("WHOWAITS_CACHE_DIR", "  ")
    assert settings.path("WHOWAITS_CACHE_DIR") is None
    monkeypatch.delenv("WHOWAITS_CACHE_DIR")
    assert settings.raw("WHOWAITS_CACHE_DIR") is None
    try:
        settings.raw("WHOWAITS_NOT_A_SETTING")
    except KeyError as err:
        assert "not a declared setting" in str(err)
    else:
        raise AssertionError("an undeclared name must be refused")


def test_env_command_prints_every_setting_with_its_value(tmp_path):
    proc = whowaits("env", "--format", "json", env={"WHOWAITS_LOCK_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["name"] for r in rows] == [s.name for s in settings.SETTINGS]
    by = {r["name"]: r for r in rows}
    assert by["WHOWAITS_LOCK_DIR"]["value"] == str(tmp_path)
    assert by["WHOWAITS_LOCK_DIR"]["default"] == "/run/lock/whowaits" and by["WHOWAITS_LOCK_DIR"]["meaning"]
    table = whowaits("env")
    assert table.returncode == 0 and "WHOWAITS_REPORTS_DIR" in table.stdout
