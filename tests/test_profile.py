"""`whowaits profile` end to end on a machine without a GPU: tests/fake_ncu/ (a fake `ncu` that replays ncu's
messages recorded on the H200, and a fake `nvidia-smi`) stands first on PATH. Every error path must print one
line on stderr, exit non-zero and leave no report, sidecar or temporary folder behind. The fake's happy path
copies a committed report, so the file handling (atomic write, sidecar, --force, --all) is tested too; that
ncu's real output lands in the right place was proven on the H200 (reports/h200/*/ and their sidecars)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FAKE = REPO / "tests" / "fake_ncu"
STARTER = REPO / "reports" / "h200" / "ext-sdpa-flash-fullset" / "b1_h64_s1024_d128_fp16.ncu-rep"
SHAPE = "b1_h64_s1024_d128_fp16"
CMD = ["--cmd", "python3 scripts/sdpa_subject.py --backend flash", "--kernel", "flash_fwd_kernel",
       "--name", "ext-sdpa-flash", "--launch-skip", "3"]


def whowaits(args: list[str], tmp_path: Path, mode: str = "ok", path: str | None = None, **env) -> subprocess.CompletedProcess:
    """``whowaits profile ARGS --out <tmp>/reports`` in-process (:mod:`clirun`), the fake ncu first on PATH."""
    from clirun import whowaits as run

    e = dict(WHOWAITS_NCU=None, PATH=path if path is not None else f"{FAKE}{os.pathsep}{os.environ.get('PATH', '')}",
             FAKE_NCU_MODE=mode, FAKE_NCU_REPORT=str(STARTER), FAKE_NCU_LOG=str(tmp_path / "ncu-calls.log"), **env)
    return run("profile", *args, "--out", str(tmp_path / "reports"), env=e, cwd=REPO)


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def one_error_line(cp: subprocess.CompletedProcess, *needles: str) -> None:
    assert cp.returncode == 2, cp.stderr
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("whowaits: error: "), cp.stderr
    assert "Traceback" not in cp.stderr
    for n in needles:
        assert n in lines[0]


@pytest.mark.parametrize("mode,needles", [
    ("perm", ["ERR_NVGPUCTRPERM"]),
    ("nokernel", ["matched no kernel launch", "fmha_cutlassF_f32_aligned_64x128_rf_sm80"]),
    ("crash", ["the profiled program failed with exit code 3: boom"]),
    ("nogpu", ["no usable NVIDIA GPU", "couldn't communicate with the NVIDIA driver"]),
])
def test_error_paths_leave_nothing_behind(tmp_path, mode, needles):
    cp = whowaits(CMD, tmp_path, mode)
    one_error_line(cp, *needles)
    assert files_under(tmp_path / "reports") == []


def test_no_ncu_on_path(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    cp = whowaits(CMD, tmp_path, path=str(empty))
    one_error_line(cp, "ncu (Nsight Compute CLI) not found on PATH")
    assert files_under(tmp_path / "reports") == []


def test_cmd_report_is_named_after_the_shape_only_when_given(tmp_path):
    cp = whowaits(CMD, tmp_path)  # no --shape: the report is named after --name, never the ladder's default shape
    assert cp.returncode == 0, cp.stderr
    assert files_under(tmp_path / "reports") == ["h200", "h200/ext-sdpa-flash", "h200/ext-sdpa-flash/ext-sdpa-flash.json",
                                                 "h200/ext-sdpa-flash/ext-sdpa-flash.ncu-rep"]
    from profiler import provenance

    side = provenance.read_sidecar(tmp_path / "reports" / "h200" / "ext-sdpa-flash" / "ext-sdpa-flash.ncu-rep")
    assert side["problem_flops"] is None  # no attention formula guessed for a program whose problem we don't know
    cp = whowaits(CMD + ["--shape", "m4096_n4096_k4096"], tmp_path)
    assert cp.returncode == 0, cp.stderr
    assert (tmp_path / "reports" / "h200" / "ext-sdpa-flash" / "m4096_n4096_k4096.ncu-rep").is_file()
    cp = whowaits(["--cmd", "python3 k.py {version}", "--versions", "a,b", "--kernel", "flash_fwd_kernel",
                   "--name", "mine"], tmp_path)  # one stem for every version: migration lines them up
    assert cp.returncode == 0, cp.stderr
    assert [p for p in files_under(tmp_path / "reports") if p.startswith("h200/mine")] == [
        "h200/mine-a", "h200/mine-a/mine.json", "h200/mine-a/mine.ncu-rep",
        "h200/mine-b", "h200/mine-b/mine.json", "h200/mine-b/mine.ncu-rep"]


def test_profile_writes_report_and_sidecar_and_refuses_to_overwrite(tmp_path):
    CMD = globals()["CMD"] + ["--shape", SHAPE]  # the program runs this attention shape: its FLOPs go in the sidecar
    cp = whowaits(CMD, tmp_path)
    assert cp.returncode == 0, cp.stderr
    out = tmp_path / "reports" / "h200" / "ext-sdpa-flash"
    assert files_under(tmp_path / "reports") == ["h200", "h200/ext-sdpa-flash",
                                                 f"h200/ext-sdpa-flash/{SHAPE}.json", f"h200/ext-sdpa-flash/{SHAPE}.ncu-rep"]
    from profiler import provenance

    side = provenance.read_sidecar(out / f"{SHAPE}.ncu-rep")
    assert side["version"] == "ext-sdpa-flash" and side["gpu"] == "NVIDIA H200" and side["driver_version"] == "580.159.04"
    assert side["ncu_version"] == "2025.3.1.0" and side["section_set"] == "whowaits" and side["launch_skip"] == 3
    assert side["ncu_command"][0].endswith("ncu") and "<tmp>/session0" in side["ncu_command"]
    assert side["report_sha256"] == hashlib.sha256(STARTER.read_bytes()).hexdigest() and side["split_command"] is None
    assert "(20 passes)" in cp.stdout
    # provenance for the views: the problem's FLOPs of the shape (4·B·H·S²·D); a --cmd subject has no build of ours
    assert side["problem_flops"] == 4 * 1 * 64 * 1024 ** 2 * 128 and side["build_hash"] is None
    assert side["ladder_order"] is None

    before = (out / f"{SHAPE}.json").read_text()
    cp = whowaits(CMD, tmp_path)
    one_error_line(cp, "report exists", "--force")
    assert (out / f"{SHAPE}.json").read_text() == before
    assert len((tmp_path / "ncu-calls.log").read_text().splitlines()) == 1  # refused before running ncu again

    cp = whowaits(CMD + ["--force"], tmp_path)
    assert cp.returncode == 0 and len((tmp_path / "ncu-calls.log").read_text().splitlines()) == 2
    assert [p for p in files_under(tmp_path / "reports") if ".whowaits-profile-" in p] == []


def test_dry_run_runs_nothing(tmp_path):
    cp = whowaits(["v01", "--dry-run"], tmp_path)
    assert cp.returncode == 0
    assert cp.stdout.startswith(str(FAKE / "ncu") + " --clock-control none")
    assert "--nvtx-include whowaits:v01_naive/" in cp.stdout and "kernels.runner v01_naive" in cp.stdout
    assert not (tmp_path / "ncu-calls.log").exists() and files_under(tmp_path / "reports") == []


def test_all_goes_on_past_a_crashing_version(tmp_path):
    from kernels import registry

    ids = [v.id for v in registry.versions()][:3]
    if len(ids) < 3:
        pytest.skip("needs three ladder versions")
    kernels = ",".join(f"void whowaits::{i}::flash_fwd<__half>()" for i in ids)
    # the runner dies on the second version after the first was profiled; whowaits resumes with the third
    cp = whowaits(ids, tmp_path, "crash-after", FAKE_NCU_KERNELS=kernels, FAKE_NCU_CRASH_AFTER="1")
    assert cp.returncode == 1
    assert f"{ids[1]}: the profiled program failed with exit code 1" in cp.stderr and "failed:" in cp.stderr
    written = [p for p in files_under(tmp_path / "reports") if p.endswith(".ncu-rep")]
    assert written == [f"h200/{ids[0]}/{SHAPE}.ncu-rep", f"h200/{ids[2]}/{SHAPE}.ncu-rep"]
    calls = (tmp_path / "ncu-calls.log").read_text().splitlines()
    sessions = [c for c in calls if "--import " not in c]
    assert len(sessions) == 2 and "--launch-count 3" in sessions[0] and "--launch-count 1" in sessions[1]
    assert sessions[1].endswith(f"kernels.runner {ids[2]} --shape {SHAPE} --warmup 3")


def test_all_splits_the_session_report(tmp_path, ladder_built):
    from kernels import registry

    ids = [v.id for v in registry.versions()]
    kernels = ",".join([f"void whowaits::{i}::flash_fwd<__half>()" for i in ids] + ["void pytorch_flash::flash_fwd_kernel<>()",
                        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7"])
    cp = whowaits(["--all", "--ext"], tmp_path, FAKE_NCU_KERNELS=kernels, FAKE_NCU_SPLIT_MISS="cudnn")
    # the cuDNN launch is not in the session report: that subject fails, every other one is written
    assert cp.returncode == 1 and "ext-sdpa-cudnn: not profiled" in cp.stderr
    written = sorted(p.split("/")[1] for p in files_under(tmp_path / "reports") if p.endswith(".ncu-rep"))
    assert written == sorted(ids + ["ext-sdpa-flash"])
    calls = (tmp_path / "ncu-calls.log").read_text().splitlines()
    assert len([c for c in calls if "--import " not in c]) == 1  # ONE ncu session for the whole ladder
    splits = [c for c in calls if c.startswith("--import ")]
    assert len(splits) == len(ids) + 2 and all("--nvtx" not in c for c in splits)
    from profiler import provenance

    side = provenance.read_sidecar(tmp_path / "reports" / "h200" / ids[0] / f"{SHAPE}.ncu-rep")
    assert side["split_command"][1:3] == ["--import", "<tmp>/session0.ncu-rep"]
    assert side["split_command"][-2:] == ["--export", f"<tmp>/{ids[0]}.ncu-rep"]
    # the rung's build cache key, ladder order and title, so that compare/ never reads kernels/
    from kernels import build
    from kernels.config import Shape

    v, shp = registry.get(ids[0]), Shape.parse(SHAPE)
    assert side["build_hash"] == build._source_hash(v, v.config_for(shp.head_dim, shp.dtype, shp.causal))
    assert (side["ladder_order"], side["title"], side["change"]) == (v.number, v.title, v.change)
    assert side["problem_flops"] == shp.flops()
    ext = provenance.read_sidecar(tmp_path / "reports" / "h200" / "ext-sdpa-flash" / f"{SHAPE}.ncu-rep")
    assert ext["title"] == "torch SDPA, FlashAttention-2 backend" and ext["build_hash"] is None


def test_usage_errors(tmp_path):
    one_error_line(whowaits([], tmp_path), "nothing to profile")
    one_error_line(whowaits(["--cmd", "x"], tmp_path), "--cmd needs --kernel")
    one_error_line(whowaits(["v01", "--all"], tmp_path), "either version ids or --all")
    one_error_line(whowaits(["v01", "--shape", "b1"], tmp_path), "bad shape key")
