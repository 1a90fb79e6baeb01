"""PyPI's nvcc (the dev extra's ``nvidia-cuda-nvcc``, for CI machines without a CUDA toolkit) builds a
rung exactly as the toolkit's nvcc does: same ptxas resources and the same static SASS opcode counts."""

from __future__ import annotations

import pytest

from conftest import IN_CI
from kernels import build, registry


def test_pypi_nvcc_builds_a_rung_like_the_toolkit(tmp_path, monkeypatch):
    nvcc = build.pypi_nvcc()
    if nvcc is None:
        assert not IN_CI, "CI installs the dev extra, which has nvidia-cuda-nvcc"
        pytest.skip("nvidia-cuda-nvcc not installed (pip install -e '.[dev]')")
    v = registry.versions()[0]
    reference = build.build(v, v.config)  # whatever find_nvcc() finds first (PATH, toolkit, PyPI)
    monkeypatch.setenv("WHOWAITS_BUILD_DIR", str(tmp_path))
    monkeypatch.setattr(build.shutil, "which", lambda name: None)  # no toolkit on PATH
    real_is_file = build.Path.is_file
    monkeypatch.setattr(build.Path, "is_file",
                        lambda self: False if str(self) == "/usr/local/cuda/bin/nvcc" else real_is_file(self))
    build.find_nvcc.cache_clear()
    build.nvcc_version.cache_clear()
    try:
        assert build.find_nvcc() == nvcc
        assert "V13.0.88" in build.nvcc_version()
        got = build.build(v, v.config)
    finally:
        monkeypatch.undo()
        build.find_nvcc.cache_clear()
        build.nvcc_version.cache_clear()
    assert str(got.cubin).startswith(str(tmp_path))  # compiled here, not read from a cache
    assert (got.registers, got.spill_store_bytes, got.smem_bytes) == \
        (reference.registers, reference.spill_store_bytes, reference.smem_bytes)
    assert got.sass_opcodes == reference.sass_opcodes
