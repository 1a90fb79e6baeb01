"""Build hook: the top-level ``sections/`` folder (the ``whowaits`` Nsight Compute section set, edited
in place in the checkout) is copied into the wheel as package data at ``profiler/data/sections/``.

Everything else about the build lives in pyproject.toml; this file only adds the copy, so a checkout
has one copy of the sections (``sections/``) and an installed wheel has its own
(``profiler/paths.sections_dir`` finds whichever applies). The sdist carries ``sections/`` through
MANIFEST.in, so a wheel built from the sdist gets them the same way.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPyWithSections(build_py):
    """``build_py``, then ``sections/*`` into ``<build>/profiler/data/sections/``."""

    def run(self) -> None:
        super().run()
        src = HERE / "sections"
        if not src.is_dir():
            raise SystemExit(f"{src}: missing; the wheel must ship the section set")
        dst = Path(self.build_lib) / "profiler" / "data" / "sections"
        dst.mkdir(parents=True, exist_ok=True)
        for f in sorted(src.iterdir()):
            if f.is_file():
                shutil.copy2(f, dst / f.name)


setup(cmdclass={"build_py": BuildPyWithSections})
