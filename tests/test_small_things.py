"""Small things that cost users time: the kernels a program launched, listed short when the
filter matched none; progress bars on long steps, on a terminal only."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from profiler.collect import SHOWN_KERNELS, parse_ncu_output, short_kernel_name
from profiler.errors import NothingProfiled

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "tests" / "fake_ncu" / "recorded" / "no-kernels.txt"


@pytest.mark.parametrize("name,short", [
    ("void whowaits::v07_tuned::flash_fwd<128, 64, (bool)1>(const __half*, int)", "flash_fwd<…>"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
     "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)", "vectorized_elementwise_kernel<…>"),
    ("void (anonymous namespace)::softmax_warp_forward<float, 10>(float*, const float*)", "softmax_warp_forward<…>"),
    ("flash_fwd_kernel", "flash_fwd_kernel"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x128x128_4x1x1_kernel0_0",
     "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x128x128_4x1x1_kernel0_0"),
])
def test_short_kernel_names(name, short):
    assert short_kernel_name(name) == short


def test_recorded_no_kernels_lists_every_kernel_short():
    out = parse_ncu_output(RECORDED.read_text())  # ncu's own message, recorded on the H200 (7 kernels)
    assert out.kind is NothingProfiled
    assert "the program launched 7 kernel(s): distribution_elementwise_grid_stride_kernel, elementwise_kernel, " \
           "flash_fwd_kernel, fmha_cutlassF_f32_aligned_64x128_rf_sm80, reduce_kernel" in out.error
    assert "more" not in out.error


def test_many_kernels_are_cut_at_ten_with_the_count():
    names = [f"void ns::kernel_{i}<{i}, float>(float*)" for i in range(14)] + ["void ns::kernel_0<99, half>(half*)"]
    text = "==WARNING== No kernels were profiled.\nAvailable Kernels:\n" + "".join(
        f"{i + 1}. {n}\n" for i, n in enumerate(names))
    err = parse_ncu_output(text).error
    listed = err.split("kernel(s): ", 1)[1]
    assert err.count("kernel(s)") == 1 and "launched 14 kernel(s)" in err  # kernel_0 twice: one short name
    assert listed.split(", … and ")[0].split(", ") == [f"kernel_{i}<…>" for i in range(SHOWN_KERNELS)]
    assert listed.endswith("… and 4 more")


@pytest.mark.skipif(shutil.which("nvcc") is None and not (Path(sys.executable).parent / "nvcc").exists(),
                    reason="needs nvcc")
def test_kernels_build_shows_a_bar_on_a_terminal_only():
    def build(**env):
        e = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR")}
        e.update(env)
        return subprocess.run([sys.executable, "-m", "profiler.fastcli", "kernels", "build", "v01", "v02",
                               "--format", "json"], cwd=ROOT, env=e, capture_output=True, text=True, timeout=600)

    piped = build()
    assert piped.returncode == 0, piped.stderr
    assert [r["version"] for r in json.loads(piped.stdout)] == ["v01_naive", "v02_smem_tiling"]
    assert "building" not in piped.stderr and "nvcc v0" not in piped.stderr
    term = build(FORCE_COLOR="1", TTY_COMPATIBLE="1", COLUMNS="100")  # rich treats stderr as a terminal
    assert term.returncode == 0, term.stderr
    assert json.loads(term.stdout) == json.loads(piped.stdout)  # stdout untouched by the bar
    assert "building" in term.stderr or "nvcc v0" in term.stderr
    assert "/2" in term.stderr
