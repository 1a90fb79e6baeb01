"""Installable anywhere: the wheel, installed outside the checkout, is a working ``whowaits``.

The wheel is built from a copy of the package sources (``pip wheel --no-deps --no-build-isolation``, so
no network is needed), installed with ``pip install --no-deps --target`` into a temporary folder, and run
from other folders with only that folder on ``PYTHONPATH`` (its dependencies come from this venv; the
checkout is never on the path: the test checks where ``profiler`` was imported from). It must ship the
section set (the checkout's top-level ``sections/``, copied to ``profiler/data/sections`` by setup.py's
build hook; the sdist carries ``sections/``) and hand it to ncu, and read and write reports where the user
is (``./reports``, ``$WHOWAITS_REPORTS_DIR``, ``--out``), never inside the install folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHAPE = "b1_h64_s1024_d128_fp16"
VERSIONS = ("v06_softmax_fusion", "v07_tuned")


def _source_copy(base: Path) -> Path:
    """What a fresh clone holds of the build's inputs, copied to ``base/src``."""
    src = base / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "build", ".cache", "*.egg-info")
    for pkg in ("profiler", "kernels", "sections"):
        shutil.copytree(ROOT / pkg, src / pkg, ignore=ignore)
    return src


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The wheel, installed into a folder of its own (``pip install --target``)."""
    base = tmp_path_factory.mktemp("wheel")
    src = _source_copy(base)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(base / "dist"), str(src)],
                   check=True, cwd=base, capture_output=True, timeout=300)
    (wheel,) = (base / "dist").glob("whowaits-*.whl")
    target = base / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, cwd=base, capture_output=True, timeout=300)
    return target


def _whowaits(site: Path, cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    code = ("import sys, profiler; sys.stderr.write('IMPORTED ' + profiler.__file__ + chr(10)); "
            "from profiler.fastcli import main; sys.argv = ['whowaits', *sys.argv[1:]]; main()")
    full = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WHOWAITS_REPORTS_DIR")}
    full.update({"PYTHONPATH": str(site), "COLUMNS": "200"}, **(env or {}))
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=300)
    imported = proc.stderr.splitlines()[0].removeprefix("IMPORTED ")
    assert Path(imported).resolve().is_relative_to(site.resolve()), imported  # the wheel, not the checkout
    return proc


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A user's folder holding a copy of two committed versions' reports (``reports/h200/<version>/``)."""
    home = tmp_path_factory.mktemp("user")
    for v in VERSIONS:
        shutil.copytree(ROOT / "reports" / "h200" / v, home / "reports" / "h200" / v)
    return home


def test_wheel_ships_the_section_set(site):
    shipped = sorted(p.name for p in (site / "profiler" / "data" / "sections").iterdir())
    ours = sorted(p.name for p in (ROOT / "sections").iterdir())
    assert shipped == ours and "section-schema.textproto" in shipped
    for name in ours:  # byte for byte the checkout's source of truth
        assert (site / "profiler" / "data" / "sections" / name).read_bytes() == (ROOT / "sections" / name).read_bytes()
    assert not (site / "reports").exists() and not (site / "sections").exists()


def test_sdist_carries_the_section_set(tmp_path):
    """The sdist holds the top-level ``sections/`` (MANIFEST.in) and the build hook (setup.py), so a
    wheel built from it ships the set too."""
    import tarfile

    code = ("import sys; from setuptools import build_meta; "
            "print(build_meta.build_sdist(sys.argv[1]))")
    src = _source_copy(tmp_path)
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=src, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    name = proc.stdout.split()[-1]
    with tarfile.open(tmp_path / name) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    ours = {f"sections/{p.name}" for p in (ROOT / "sections").iterdir()}
    assert ours <= names and "setup.py" in names and "MANIFEST.in" in names


def test_show_and_migration_read_reports_where_the_user_is(site, tree):
    rep = Path("reports") / "h200" / "v07_tuned" / f"{SHAPE}.ncu-rep"
    show = _whowaits(site, tree, "show", str(rep), "--format", "json")
    assert show.returncode == 0, show.stderr
    (summary,) = json.loads(show.stdout)
    assert summary["kernel"].startswith("void whowaits::v07_tuned::flash_fwd")

    mig = _whowaits(site, tree, "migration", "--format", "json")  # ./reports/h200 found from the cwd
    assert mig.returncode == 0, mig.stderr
    assert json.loads(mig.stdout)["versions"] == list(VERSIONS)

    elsewhere = _whowaits(site, tree.parent, "migration", "--format", "json",
                          env={"WHOWAITS_REPORTS_DIR": str(tree / "reports" / "h200")})
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert json.loads(elsewhere.stdout)["versions"] == list(VERSIONS)

    nothing = _whowaits(site, tree.parent, "migration", "--format", "json")  # no ./reports here
    assert nothing.returncode == 2 and "Traceback" not in nothing.stderr
    said = nothing.stderr.splitlines()[1:]
    assert len(said) == 1 and str(tree.parent / "reports" / "h200") in said[0] and str(site) not in said[0]


def test_profile_dry_run_uses_the_shipped_sections(site, tmp_path):
    proc = _whowaits(site, tmp_path, "profile", "v07_tuned", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    argv = proc.stdout.split()
    folder = Path(argv[argv.index("--section-folder") + 1])
    assert folder.resolve() == (site / "profiler" / "data" / "sections").resolve()
    assert "--set" in argv and argv[argv.index("--set") + 1] == "whowaits"
    assert "kernels.runner" in proc.stdout and "v07_tuned" in proc.stdout


def test_reports_resolve_from_the_option_env_or_cwd(tmp_path, monkeypatch):
    from profiler import paths

    monkeypatch.delenv(paths.REPORTS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reports" / "h200").mkdir(parents=True)
    assert paths.reports_dir() == tmp_path / "reports" / "h200"
    assert paths.reports_root() == tmp_path / "reports"
    assert paths.reports_root(tmp_path / "mine") == tmp_path / "mine"
    monkeypatch.setenv(paths.REPORTS_ENV, str(tmp_path / "x" / "h200"))
    assert paths.reports_dir() == tmp_path / "x" / "h200"
    assert paths.reports_root() == tmp_path / "x"
    assert paths.reports_dir(root=tmp_path / "y") == tmp_path / "y"


def test_a_checkout_uses_its_top_level_sections():
    from profiler import paths, sections

    assert paths.sections_dir() == ROOT / "sections" == sections.SECTIONS_DIR
    assert not (ROOT / "profiler" / "data" / "sections").exists()  # one copy in the checkout
