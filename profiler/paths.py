"""Where whowaits finds its own data and the user's reports: one place, the same for a checkout and an
installed wheel.

- :func:`sections_dir`: the ``whowaits`` section set: the checkout's top-level ``sections/`` (its source of
  truth), or in an installed wheel the copy shipped as package data (``profiler/data/sections``, put there
  by setup.py's build hook); ``whowaits profile`` hands this folder to ncu (``--section-folder``).
- :func:`checkout`: the source checkout this package lives in (a folder with ``pyproject.toml`` and
  ``profiler/`` side by side), or None for an installed wheel.
- :func:`reports_root` / :func:`reports_dir`: where reports are read and written. In order: the option
  the user gave (``--out`` / ``--reports``), ``$WHOWAITS_REPORTS_DIR``, ``./reports`` in the current
  directory, the checkout's ``reports/`` (only when running from a checkout), else ``./reports``. Never
  inside site-packages.

Nothing here imports more than the standard library, so every command can use it at no cost.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from profiler import settings

__all__ = ["DEFAULT_GPU", "REPORTS_ENV", "build_dir", "cache_dir", "checkout", "report_path", "reports_dir", "reports_root",
           "sections_dir"]

#: the GPU folder under a reports root that views read unless told otherwise
DEFAULT_GPU = "h200"
#: environment variable naming the folder of version folders (``…/reports/<gpu>``)
REPORTS_ENV = "WHOWAITS_REPORTS_DIR"


def sections_dir() -> Path:
    """The folder of the ``whowaits`` section set (``*.section`` + ``section-schema.textproto``): the
    checkout's ``sections/`` when running from a checkout, else the wheel's ``profiler/data/sections``."""
    repo = checkout()
    if repo is not None and (repo / "sections").is_dir():
        return repo / "sections"
    from importlib.resources import files

    return Path(str(files("profiler") / "data" / "sections"))


@lru_cache(maxsize=1)
def checkout() -> Path | None:
    """The source checkout holding this package (editable install or PYTHONPATH), else None."""
    root = Path(__file__).resolve().parents[1]
    if (root / "pyproject.toml").is_file() and (root / "profiler" / "paths.py").is_file() \
            and "site-packages" not in root.parts and "dist-packages" not in root.parts:
        return root
    return None


def reports_root(out: str | os.PathLike | None = None) -> Path:
    """The reports root (holding ``<gpu>/<subject>/<shape>.ncu-rep``) that ``whowaits profile`` writes to.

    ``out`` when given; else the parent of ``$WHOWAITS_REPORTS_DIR``; else ``./reports`` when it exists;
    else the checkout's ``reports/`` when running from one; else ``./reports`` (made when written to)."""
    if out is not None:
        return Path(out)
    env = settings.path(REPORTS_ENV)
    if env:
        return env.parent
    here = Path.cwd() / "reports"
    if here.is_dir():
        return here
    repo = checkout()
    if repo is not None:
        return repo / "reports"
    return here


def reports_dir(gpu: str = DEFAULT_GPU, root: str | os.PathLike | None = None) -> Path:
    """The folder holding one folder per version: ``root`` when given, ``$WHOWAITS_REPORTS_DIR``, else
    ``./reports/<gpu>`` when it exists, else the checkout's ``reports/<gpu>`` (from a checkout), else
    ``./reports/<gpu>``."""
    if root is not None:
        return Path(root)
    env = settings.path(REPORTS_ENV)
    if env:
        return env
    here = Path.cwd() / "reports" / gpu
    if here.is_dir():
        return here
    repo = checkout()
    if repo is not None:
        return repo / "reports" / gpu
    return here


def build_dir() -> Path:
    """``$WHOWAITS_BUILD_DIR``, else ``.cache/whowaits/build`` of the source checkout (what the device scripts
    carry), else, for an installed wheel, ``build/`` of the user's cache folder (:func:`cache_dir`), never
    inside site-packages: where kernel builds (and, beside it, their SASS text and trace builds) are kept."""
    env = settings.path("WHOWAITS_BUILD_DIR")
    if env:
        return env
    root = checkout()
    return root / ".cache" / "whowaits" / "build" if root is not None else cache_dir() / "build"


def report_path(root: str | os.PathLike, gpu: str, subject: str, shape: str) -> Path:
    """Where the report of ``subject`` at ``shape`` on ``gpu`` lives under a reports root:
    ``<root>/<gpu>/<subject>/<shape>.ncu-rep`` (what ``profile`` and ``sweep`` write, the views read)."""
    return Path(root) / gpu / str(subject) / f"{shape}.ncu-rep"


def cache_dir() -> Path:
    """``$WHOWAITS_CACHE_DIR`` or ``~/.cache/whowaits``: parsed reports, summaries, command results."""
    return settings.path("WHOWAITS_CACHE_DIR") or Path.home() / ".cache" / "whowaits"
