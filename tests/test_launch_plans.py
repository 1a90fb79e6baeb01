"""The launcher's plans without a GPU: what a cached launch is keyed on, so that a plan is reused only for a problem
that would pass the same validation and launch the same function, and new data pointers get new arguments.

torch is not installed on the CPU machines that run this suite, so the tensors here are stand-ins that expose the
five attributes the keys read (the real launch path runs in the device scripts: scripts/device/host_us.py times
it, kernels.check checks its results, including calls whose pointers change)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from kernels import bench, launch
from profiler.check.inputs import CUDNN_BEST, read_bench
from profiler.errors import WhowaitsError

REPO = Path(__file__).resolve().parent.parent


class FakeTensor:
    """Shape, strides, dtype, device and data pointer: what problem_key and pointer_key read."""

    def __init__(self, ptr=0x7F0000000000, shape=(1, 64, 1024, 128), dtype="torch.float16", device=0, stride=None):
        self.ptr, self.shape, self.dtype, self.device = ptr, tuple(shape), dtype, device
        b, h, s, d = shape
        self._stride = stride or (h * s * d, s * d, d, 1)

    def data_ptr(self):
        return self.ptr

    def stride(self):
        return self._stride

    def get_device(self):
        return self.device


def qkv(**kw):
    return [FakeTensor(ptr=0x7F0000000000 + i * 0x10000000, **kw) for i in range(3)]


def key(q, k, v, out=None, causal=False, version="v18_desc_iterator_o", config=None):
    return launch.problem_key(q, k, v, out, causal, version, config)


def test_equal_problems_share_a_key_whatever_the_pointers():
    a, b = qkv(), [FakeTensor(ptr=0x7E0000000000 + i * 0x10000000) for i in range(3)]
    assert key(*a) == key(*b)
    assert launch.pointer_key(*a, a[0]) != launch.pointer_key(*b, b[0])


# every field a launch depends on: one change each must give another problem key
CHANGES = {
    "shape": dict(shape=(1, 64, 1000, 128)),
    "head_dim": dict(shape=(1, 64, 1024, 64)),
    "dtype": dict(dtype="torch.bfloat16"),
    "device": dict(device=1),
    "strides": dict(stride=(64 * 1024 * 128, 128, 64 * 128, 1)),  # (B, S, H, D) memory seen as (B, H, S, D)
}


@pytest.mark.parametrize("which,change", list(itertools.product(range(3), CHANGES)),
                         ids=[f"{'qkv'[i]}-{c}" for i, c in itertools.product(range(3), CHANGES)])
def test_any_tensor_field_changes_the_key(which, change):
    base = qkv()
    other = list(base)
    other[which] = FakeTensor(ptr=base[which].ptr, **CHANGES[change])
    assert key(*base) != key(*other)


def test_causal_version_config_out_and_environment_change_the_key(monkeypatch):
    q, k, v = qkv()
    base = key(q, k, v)
    assert key(q, k, v, causal=True) != base
    assert key(q, k, v, version="v20_three_consumers") != base
    assert key(q, k, v, config=("another", "config")) != base
    assert key(q, k, v, out=FakeTensor()) != base  # the caller's out is validated once, then part of the key
    assert key(q, k, v, out=FakeTensor()) != key(q, k, v, out=FakeTensor(dtype="torch.bfloat16"))
    for knob in launch.ENV_KNOBS:
        monkeypatch.setenv(knob, "1")
        assert key(q, k, v) != base, knob
        monkeypatch.delenv(knob)
    assert key(q, k, v) == base


def test_remember_keeps_the_newest_entries():
    table: dict = {}
    for i in range(10):
        launch.remember(table, i, str(i), 4)
    assert list(table) == [6, 7, 8, 9]


def test_non_tensor_inputs_take_the_full_path_and_fail_in_one_line():
    # problem_key raises AttributeError on a str; forward must then validate and raise WhowaitsError, not crash
    with pytest.raises(AttributeError):
        launch.problem_key("q", "k", "v", None, False, "v18", None)
    with pytest.raises(WhowaitsError):
        launch.forward("q", "k", "v", version="v18_desc_iterator_o")


@pytest.mark.parametrize("value, on", [(None, True), ("1", True), ("0", False), (" 0 ", False)])
def test_plans_can_be_switched_off_by_environment(value, on):
    """WHOWAITS_LAUNCH_CACHE is read once, at import (module docstring): a fresh interpreter sees the setting."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "WHOWAITS_LAUNCH_CACHE"}
    if value is not None:
        env["WHOWAITS_LAUNCH_CACHE"] = value
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    out = subprocess.run([sys.executable, "-c", "import kernels.launch as l; print(l.LAUNCH_CACHE)"],
                         env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert out == str(on)


# --- cuDNN at its best (kernels.bench summary, the gate's cudnn-best row) ---------------------------------------

def _row(name, tflops):
    return bench.BenchRow(name, "b4_h16_s4096_d128_fp16", 1.0, tflops, 1e-3, 60.0)


def test_summary_takes_the_faster_cudnn_row():
    rows = [_row("v18_desc_iterator_o", 630.0), _row("sdpa-cudnn", 560.0), _row("sdpa-auto", 600.0),
            _row("flex-attention", 470.0)]
    s = bench.summarize(rows, None)
    assert s["cudnn_best"] == {"implementation": "sdpa-auto", "tflops": 600.0}
    assert s["best_vs_cudnn"] == pytest.approx(630.0 / 600.0)
    assert s["best_vs"]["sdpa-cudnn"] == pytest.approx(630.0 / 560.0)  # the per-row ratios stay as they were
    rows[1].tflops = 610.0
    assert bench.summarize(rows, None)["cudnn_best"]["implementation"] == "sdpa-cudnn"
    assert "cudnn_best" not in bench.summarize([_row("v18_desc_iterator_o", 630.0)], None)


BENCH_WITH_BOTH = [p for p in sorted((REPO / "reports" / "h200" / "bench").glob("*.json"))
                   if {"sdpa-cudnn", "sdpa-auto"} <= {r["implementation"] for r in json.loads(p.read_text())["rows"]
                                                      if r.get("tflops")}]


@pytest.mark.parametrize("path", BENCH_WITH_BOTH, ids=[p.name for p in BENCH_WITH_BOTH])
def test_gate_cudnn_best_is_the_faster_of_the_two_rows(path):
    b = read_bench(path)
    best = b.row(CUDNN_BEST)
    assert best["tflops"] == max(b.row("sdpa-cudnn")["tflops"], b.row("sdpa-auto")["tflops"])
    assert best["implementation"] in bench.CUDNN_ROWS


# --- the planned launch's argument structs ----------------------------------------------------------------------

def _cuda_h() -> Path | None:
    import shutil

    nvcc = shutil.which("nvcc")
    for base in filter(None, [Path(nvcc).resolve().parent.parent if nvcc else None, Path("/usr/local/cuda")]):
        if (base / "include" / "cuda.h").is_file():
            return base / "include"
    return None


def test_launch_config_struct_matches_cuda_h(tmp_path):
    """CUlaunchConfig's ctypes layout (what cuLaunchKernelEx reads on every planned launch) against cuda.h's, through
    the host C compiler: a field at the wrong offset would launch a wrong grid or on a wrong stream."""
    import ctypes
    import shutil
    import subprocess

    inc, cc = _cuda_h(), shutil.which("cc") or shutil.which("gcc")
    if inc is None or cc is None:
        pytest.skip("needs cuda.h (the CUDA toolkit, as kernels.build does) and a C compiler")
    fields = [name for name, _ in launch.CUlaunchConfig._fields_]
    src = tmp_path / "layout.c"
    src.write_text("#include <stddef.h>\n#include <stdio.h>\n#include <cuda.h>\nint main(void) {\n"
                   + "".join(f'    printf("%zu\\n", offsetof(CUlaunchConfig, {f}));\n' for f in fields)
                   + '    printf("%zu\\n", sizeof(CUlaunchConfig));\n    return 0;\n}\n')
    exe = tmp_path / "layout"
    subprocess.run([cc, f"-I{inc}", str(src), "-o", str(exe)], check=True, capture_output=True)
    want = [int(x) for x in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()]
    have = [getattr(launch.CUlaunchConfig, f).offset for f in fields] + [ctypes.sizeof(launch.CUlaunchConfig)]
    assert have == want


def test_a_plan_makes_one_config_per_stream_and_never_rewrites_it():
    plan = launch.LaunchPlan(None, 0, (132, 1, 1), 384, 200_000, 1024, 0.088, 64, (192, 128, 128, 64))
    a, b = plan.config(0), plan.config(0x5555)
    assert (a[1].gridDimX, a[1].blockDimX, a[1].sharedMemBytes, a[1].hStream) == (132, 384, 200_000, None)
    assert b[1].hStream == 0x5555 and a[1].hStream is None  # stream 0 (the legacy default stream) is NULL
    assert plan.configs[0] is a and plan.configs[0x5555] is b
    for s in range(launch.STREAMS_MAX + 3):
        plan.config(0x1000 + s)
    assert len(plan.configs) == launch.STREAMS_MAX


def test_the_environment_reader_sees_what_os_environ_sees(monkeypatch):
    from profiler import settings

    read = settings.reader(*launch.ENV_KNOBS)
    monkeypatch.delenv(launch.ENV_KNOBS[0], raising=False)
    monkeypatch.delenv(launch.ENV_KNOBS[1], raising=False)
    assert read() == (None, None)
    monkeypatch.setenv(launch.ENV_KNOBS[1], "waits")
    first = read()
    assert first[0] is None and first[1] is not None
    monkeypatch.setenv(launch.ENV_KNOBS[1], "waits:mbar")
    assert read() != first
    with pytest.raises(KeyError):
        settings.reader("WHOWAITS_" + "UNDECLARED")  # split: the tree scan must not read it as a name


def test_tensor_map_constants_match_cuda_h(tmp_path):
    """The enum values, size and alignment the ctypes encoder (launch.TensorMap) passes to cuTensorMapEncodeTiled,
    read back from cuda.h through the C compiler (the encode itself needs the driver: scripts/device/host_us.py
    compares its maps byte for byte with cuda.bindings' on the GPU)."""
    import shutil
    import subprocess

    inc, cc = _cuda_h(), shutil.which("cc") or shutil.which("gcc")
    if inc is None or cc is None:
        pytest.skip("needs cuda.h (the CUDA toolkit, as kernels.build does) and a C compiler")
    names = ["CU_TENSOR_MAP_DATA_TYPE_FLOAT16", "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", "CU_TENSOR_MAP_INTERLEAVE_NONE",
             "CU_TENSOR_MAP_SWIZZLE_128B", "CU_TENSOR_MAP_L2_PROMOTION_L2_256B", "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE",
             "(int)sizeof(CUtensorMap)", "(int)_Alignof(CUtensorMap)"]
    src = tmp_path / "tmap.c"
    src.write_text("#include <stdio.h>\n#include <cuda.h>\nint main(void) {\n"
                   + "".join(f'    printf("%d\\n", {n});\n' for n in names) + "    return 0;\n}\n")
    exe = tmp_path / "tmap"
    subprocess.run([cc, "-std=c11", f"-I{inc}", str(src), "-o", str(exe)], check=True, capture_output=True)
    want = [int(x) for x in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()]
    assert want == [launch.TMAP_FLOAT16, launch.TMAP_BFLOAT16, launch.TMAP_INTERLEAVE_NONE, launch.TMAP_SWIZZLE_128B,
                    launch.TMAP_L2_PROMOTION_256B, launch.TMAP_OOB_FILL_NONE, launch.TMAP_BYTES, launch.TMAP_ALIGN]


def test_a_tensor_map_buffer_is_aligned_and_its_own():
    maps = [launch.TensorMap() for _ in range(16)]
    assert all(m.getPtr() % launch.TMAP_ALIGN == 0 for m in maps)
    assert len({m.getPtr() for m in maps}) == len(maps)
    assert all(m.raw() == bytes(launch.TMAP_BYTES) for m in maps)  # zeroed until encoded


def test_packed_arguments_point_at_the_kernel_abi_values():
    """A new pointer set's kernelParams (the pointer ABI, which needs no driver): q, k, v, o as pointers, then the
    plan's seqlen, scale and num_bh, which every pointer set of the plan shares; misaligned pointers are refused."""
    import ctypes

    plan = launch.LaunchPlan(None, 0, (132, 1, 1), 384, 0, 1000, 0.125, 64, ())
    ptrs = (0x7F0000000000, 0x7F0000100000, 0x7F0000200000, 0x7F0000300000)
    addr, params, _keep = launch._pack(plan, ptrs)
    assert addr.value == ctypes.addressof(params) and len(params) == 7
    read = [ctypes.c_void_p.from_address(params[i]).value for i in range(4)]
    assert read == list(ptrs)
    assert ctypes.c_int.from_address(params[4]).value == 1000
    assert ctypes.c_float.from_address(params[5]).value == 0.125
    assert ctypes.c_int.from_address(params[6]).value == 64
    other = launch._pack(plan, (0x7E0000000000,) + ptrs[1:])[1]
    assert list(other)[4:] == list(params)[4:]  # the scalars are the plan's, made once
    assert plan.args[ptrs][1] is params
    with pytest.raises(WhowaitsError):
        launch._pack(plan, (ptrs[0] + 8,) + ptrs[1:])


def test_packed_arguments_end_with_the_workspace_of_a_workspace_abi():
    """A workspace ABI's pointer set is (q, k, v, out, ws): the kernelParams end with the workspace pointer after the
    plan's scalars (kernels/CONTRACT.md, tensor_maps_persistent_o_ws), and each workspace is its own pointer set."""
    import ctypes

    plan = launch.LaunchPlan(None, 0, (132, 1, 1), 384, 0, 1000, 0.125, 64, (), workspace=lambda: None)
    ptrs = (0x7F0000000000, 0x7F0000100000, 0x7F0000200000, 0x7F0000300000, 0x7F0000400000)
    addr, params, _keep = launch._pack(plan, ptrs)
    assert len(params) == 8 and ctypes.c_void_p.from_address(params[7]).value == ptrs[4]
    assert ctypes.c_int.from_address(params[6]).value == 64
    other = launch._pack(plan, ptrs[:4] + (0x7F0000500000,))[1]
    assert ctypes.c_void_p.from_address(other[7]).value == 0x7F0000500000 and plan.args[ptrs][1] is params


def test_workspace_bytes_follow_stream_k_slots():
    """stream_k.cuh's StreamKSlots: per CTA 2 x 128 consumer threads x (64 floats of O + m, m', l, l'), then 8 flags
    of 8 bytes (one per consumer warp): 69,696 B per CTA, 9.2 MB for 132 CTAs at head_dim 128."""
    from kernels import registry

    assert registry.workspace_bytes(1) == 256 * 68 * 4 + 8 * 8
    assert registry.workspace_bytes(132) == 132 * 69_696
    assert registry.WORKSPACE_ABIS == tuple(a for a in registry.ABIS if a.endswith("_ws"))
    assert all(v.abi in registry.WORKSPACE_ABIS for v in registry.versions() if v.id == "v40_stream_k")
