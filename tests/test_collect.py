"""profiler.collect and profiler.provenance without a GPU: the ncu command lines, ncu's recorded messages,
sidecars. (The error paths end to end through the CLI are in test_profile.py; the happy path ran on the H200.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiler import collect, provenance, sections
from profiler.errors import (
    CounterPermission,
    LaunchCount,
    NcuError,
    NcuFailed,
    NoGpu,
    NothingProfiled,
    ProgramFailed,
    WhowaitsError,
)

RECORDED = Path(__file__).resolve().parent / "fake_ncu" / "recorded"
SHAPE = "b1_h64_s1024_d128_fp16"


def _opt(argv: list[str], name: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == name]


def test_version_command_pins_one_launch_with_our_sections():
    s = collect.plan_version("v01", SHAPE)
    argv = s.ncu_argv("ncu", "/tmp/x")
    assert _opt(argv, "--clock-control") == ["none"]
    assert _opt(argv, "--import-source") == ["yes"]
    assert _opt(argv, "--section-folder") == [str(collect.SECTIONS_DIR)]
    assert _opt(argv, "--set") == ["whowaits"]
    assert _opt(argv, "--kernel-name-base") == ["demangled"]
    assert _opt(argv, "--kernel-name") == ["regex:whowaits::v01_naive::flash_fwd<"]
    assert _opt(argv, "--nvtx-include") == ["whowaits:v01_naive/"] and "--nvtx" in argv
    assert _opt(argv, "--launch-count") == ["1"] and _opt(argv, "--launch-skip") == ["0"]
    assert _opt(argv, "--export") == ["/tmp/x"]
    # the program: the runner with the version, after every ncu option
    i = argv.index("-m")
    assert argv[i + 1:i + 3] == ["kernels.runner", "v01_naive"] and argv[i + 3:] == ["--shape", SHAPE, "--warmup", "3"]


def test_full_set_uses_ncus_own_sections():
    argv = collect.plan_version("v01", SHAPE, section_set="full").ncu_argv()
    assert "--section-folder" not in argv and _opt(argv, "--set") == ["full"]
    argv = collect.Session([collect.version_target("v01_naive")], ["prog"], SHAPE, sections=("LaunchStats",)).ncu_argv()
    assert _opt(argv, "--section") == ["LaunchStats"] and "--set" not in argv


def test_all_is_one_session_over_one_runner_process():
    from kernels import registry

    ids = [v.id for v in registry.versions()]
    s = collect.plan_all(SHAPE, ext=True)
    names = [t.name for t in s.targets]
    assert names == ids + ["ext-sdpa-flash", "ext-sdpa-cudnn"]
    argv = s.ncu_argv()
    assert _opt(argv, "--launch-count") == [str(len(names))]
    assert _opt(argv, "--nvtx-include") == [f"whowaits:{i}/" for i in ids] + ["whowaits:sdpa-flash/", "whowaits:sdpa-cudnn/"]
    assert argv.count("kernels.runner") == 1 and argv[-len(names) - 4:-4] == ids + ["sdpa-flash", "sdpa-cudnn"]
    # a subset (resuming after a crash) is the same session for fewer targets
    sub = s.subset(s.targets[2:])
    assert _opt(sub.ncu_argv(), "--launch-count") == [str(len(names) - 2)]
    assert "v01_naive" not in sub.program and sub.program[-len(names) + 2 - 4] == ids[2]
    assert [t.name for t in collect.plan_all(SHAPE, ext=True, ext_suffix="-whowaits").targets][-1] == "ext-sdpa-cudnn-whowaits"


def test_split_filters_by_kernel_name_only():
    # ncu 2025.3.1 refuses --nvtx with --import (recorded on the H200): split by the kernel regex
    t = collect.version_target("v03_tensor_cores")
    argv = collect.split_command("ncu", Path("s.ncu-rep"), t, Path("p.ncu-rep"))
    assert "--nvtx" not in argv and _opt(argv, "--import") == ["s.ncu-rep"]
    assert _opt(argv, "--kernel-name") == ["regex:whowaits::v03_tensor_cores::flash_fwd<"]


def test_command_subject():
    s = collect.plan_command("python3 my prog.py --n '1 2'", r"gemm_\w+", "ext-cublas", SHAPE, launch_skip=5)
    assert s.program == ["python3", "my", "prog.py", "--n", "1 2"]
    argv = s.ncu_argv()
    assert _opt(argv, "--launch-skip") == ["5"] and "--nvtx" not in argv
    assert _opt(argv, "--kernel-name") == [r"regex:gemm_\w+"]
    with pytest.raises(WhowaitsError, match="not a valid regex"):
        collect.plan_command("p", "gemm_(", "ext-x", SHAPE)
    with pytest.raises(WhowaitsError, match="bad subject name"):
        collect.plan_command("p", "k", "../etc", SHAPE)
    # --cmd takes any plain key of the user's own problem (not only the ladder's b_h_s_d keys), but never a path
    assert collect.plan_command("p", "k", "ext-x", "m4096_n4096_k4096").shape == "m4096_n4096_k4096"
    with pytest.raises(WhowaitsError, match="plain key"):
        collect.plan_command("p", "k", "ext-x", "../b1_h64")
    with pytest.raises(WhowaitsError, match="empty"):
        collect.plan_command("  ", "k", "ext-x", SHAPE)


def test_unknown_version_is_a_user_error():
    with pytest.raises(WhowaitsError):
        collect.plan_version("v99_nope", SHAPE)


def test_recorded_messages_parse():
    out = collect.parse_ncu_output((RECORDED / "profile-unfiltered.txt").read_text())
    assert out.error is None and out.kind is None and len(out.profiled) == 16 and {p for _, p in out.profiled} == {20}
    assert out.profiled[3][0] == "flash_fwd_kernel"

    combined = (RECORDED / "combined-and-split.txt").read_text()
    out = collect.parse_ncu_output(combined)
    assert [p for _, p in out.profiled] == [20, 20] and out.profiled[0][0].startswith("void pytorch_flash::flash_fwd_kernel<")
    assert collect._EXPORTED_RE.findall(combined) == [
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0"]

    out = collect.parse_ncu_output((RECORDED / "no-kernels.txt").read_text(), 0)
    assert out.profiled == [] and out.error.startswith("the kernel filter matched no kernel launch")
    assert out.kind is NothingProfiled and isinstance(out.exception(), NothingProfiled)
    assert "flash_fwd_kernel, fmha_cutlassF_f32_aligned_64x128_rf_sm80" in out.error

    out = collect.parse_ncu_output((RECORDED / "crash.txt").read_text(), 3)
    assert out.error == "the profiled program failed with exit code 3: boom" and out.kind is ProgramFailed
    assert str(out.exception()) == out.error


def test_other_messages():
    perm = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters"
    out = collect.parse_ncu_output(perm + "\n==WARNING== No kernels were profiled.\n")
    assert "ERR_NVGPUCTRPERM" in out.error and out.kind is CounterPermission
    out = collect.parse_ncu_output("==ERROR== Something odd\n", 1)
    assert out.error == "ncu failed with exit code 1: Something odd" and out.kind is NcuFailed
    assert collect.parse_ncu_output("==ERROR== No CUDA-capable device is detected\n", 1).kind is NoGpu
    # every kind is an NcuError, and so the CLI's one-line WhowaitsError
    for kind in (CounterPermission, NcuFailed, NoGpu, NothingProfiled, ProgramFailed):
        assert issubclass(kind, NcuError) and issubclass(kind, WhowaitsError)
    assert collect.parse_ncu_output('==PROF== Profiling "k" - 0: 0%....50%....100% - 1 pass\n').profiled == [("k", 1)]


def test_gpu_slug():
    assert provenance.gpu_slug("NVIDIA H200") == "h200"
    assert provenance.gpu_slug("NVIDIA GeForce RTX 4090") == "geforce-rtx-4090"
    assert provenance.gpu_slug(None) == "unknown-gpu"


def test_section_set_lists_what_it_collects():
    names = sections.set_metrics()
    assert "group:smsp__pcsamp_warp_stall_reasons" in names and "gpu__time_duration.sum" in names


# --- provenance ---------------------------------------------------------------------------------------
def test_sidecar_roundtrip(tmp_path):
    rep = tmp_path / "v01" / f"{SHAPE}.ncu-rep"
    rep.parent.mkdir()
    rep.write_bytes(b"report bytes")
    side = provenance.make_sidecar(version="v01", shape=SHAPE, ncu_command=["ncu", "--set", "whowaits"], launch_count=1)
    path = provenance.write_sidecar(rep, side)
    assert path == tmp_path / "v01" / f"{SHAPE}.json"
    assert [p.name for p in rep.parent.iterdir() if p.name.endswith(".tmp")] == []
    back = provenance.read_sidecar(rep)
    assert list(back)[: len(provenance.SIDECAR_KEYS)] == list(provenance.SIDECAR_KEYS)
    assert back["ncu_command"] == ["ncu", "--set", "whowaits"] and back["gpu"] is None
    assert back["report_sha256"] == provenance.sha256_file(rep)
    assert provenance.read_sidecar(tmp_path / "nothing.ncu-rep") is None
    with pytest.raises(ValueError):
        provenance.make_sidecar(colour="red")


def test_sidecar_old_and_bad(tmp_path):
    rep = tmp_path / "a.ncu-rep"
    provenance.sidecar_path(rep).write_text(json.dumps({"version": "v01", "note": "kept"}))
    back = provenance.read_sidecar(rep)
    assert back["version"] == "v01" and back["shape"] is None and back["note"] == "kept"
    provenance.sidecar_path(rep).write_text("{not json")
    with pytest.raises(WhowaitsError, match="not valid JSON"):
        provenance.read_sidecar(rep)


@pytest.mark.parametrize("subject", ["ext-sdpa-flash-fullset", "ext-sdpa-cudnn-fullset"])
def test_starter_reports_have_sidecars(subject):
    rep = collect.REPORTS_DIR / "h200" / subject / f"{SHAPE}.ncu-rep"
    side = provenance.read_sidecar(rep)
    assert side is not None and side["section_set"] == "full" and side["launch_count"] == 1
    assert side["gpu"] == "NVIDIA H200" and side["ncu_version"].startswith("2025.3.1")
    assert side["report_sha256"] == provenance.sha256_file(rep)


def test_committed_whowaits_reports_have_matching_sidecars():
    reps = sorted((collect.REPORTS_DIR / "h200").glob(f"*/{SHAPE}.ncu-rep"))
    ours = [r for r in reps if (provenance.read_sidecar(r) or {}).get("section_set") == "whowaits"]
    if not ours:
        pytest.skip("no whowaits-set reports committed yet")
    for rep in ours:
        side = provenance.read_sidecar(rep)
        assert side["version"] == rep.parent.name and side["shape"] == SHAPE
        assert side["report_sha256"] == provenance.sha256_file(rep)
        assert side["clock_control"] == "none" and "--import-source" in side["ncu_command"]
        assert side["gpu"] == "NVIDIA H200" and side["git_commit"]


def _whowaits_reports() -> list[Path]:
    reps = sorted((collect.REPORTS_DIR / "h200").glob(f"*/{SHAPE}.ncu-rep"))
    return [r for r in reps if (provenance.read_sidecar(r) or {}).get("section_set") == "whowaits"]


@pytest.mark.parametrize("rep", _whowaits_reports(), ids=lambda p: p.parent.name)
def test_whowaits_set_reports_have_nothing_missing(rep):
    # the data set: one launch per report, and every field `whowaits show` prints is there
    from profiler.analyze import summarize

    from profiler.compare.gaps import STAND_INS, optional

    rows = summarize(str(rep))
    # (section "none": the kernel has no such thing, e.g. no async group for `overlap`; no section supplies it.
    # A field with a stand-in that has a value is shown through it: the reports taken before WhowaitsPipes
    # collected the XU counter show the XU pipe's % derived from the SASS, the same figure. The L2 read fan-out's
    # fields are an optional view: a report taken before WhowaitsRoofline collected its counters (fa07923) has none
    # of them and says "not collected"; one taken since has them all)
    s = rows[0]
    l2 = s["roofline"]["l2_reads"]
    before_l2 = all(v is None for v in l2.values())
    assert len(rows) == 1 and [m for m in s["missing"] if m["section"] != "none"
                               and not (m["field"] in STAND_INS and s[STAND_INS[m["field"]]] is not None)
                               and not (before_l2 and optional(m["field"]))] == []
    assert rows[0]["stall_samples"] and rows[0]["roofline"]["flops"] > 0


# --- error kinds, through the fake ncu (tests/fake_ncu: ncu's messages recorded on the H200) -----------
FAKE_NCU = Path(__file__).resolve().parent / "fake_ncu"
STARTER = Path(__file__).resolve().parents[1] / "reports/h200/ext-sdpa-flash-fullset/b1_h64_s1024_d128_fp16.ncu-rep"


def _fake(monkeypatch, tmp_path, mode="ok", **env):
    import os

    monkeypatch.delenv("WHOWAITS_NCU", raising=False)
    monkeypatch.setenv("PATH", f"{FAKE_NCU}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_NCU_MODE", mode)
    monkeypatch.setenv("FAKE_NCU_REPORT", str(STARTER))
    monkeypatch.setenv("FAKE_NCU_LOG", str(tmp_path / "ncu-calls.log"))
    for k in ("FAKE_NCU_KERNELS", "FAKE_NCU_SPLIT_MISS"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)


@pytest.mark.parametrize("mode, kind", [
    ("perm", CounterPermission), ("nokernel", NothingProfiled), ("crash", ProgramFailed), ("nogpu", NoGpu),
])
def test_run_session_raises_each_failure_as_its_kind(tmp_path, monkeypatch, mode, kind):
    """collect.run_session tells ncu's failures apart by class, not by message text; nothing is written."""
    _fake(monkeypatch, tmp_path, mode)
    session = collect.plan_command("python3 scripts/sdpa_subject.py --backend flash", "flash_fwd_kernel",
                                   "ext-sdpa-flash", SHAPE, launch_skip=3)
    with pytest.raises(kind):
        collect.run_session(session, out_root=tmp_path / "reports")
    assert not (tmp_path / "reports").exists()


def test_split_report_kinds(tmp_path, monkeypatch):
    """A split that matches no launch is NothingProfiled, one that matches two is LaunchCount; no file is left."""
    target = collect.Target("ext-x", "flash_fwd", None)
    out = tmp_path / "part.ncu-rep"
    _fake(monkeypatch, tmp_path, FAKE_NCU_KERNELS="flash_fwd_a,flash_fwd_b")
    with pytest.raises(LaunchCount, match="matched 2 launches"):
        collect.split_report("ncu", STARTER, target, out)
    assert not out.exists()
    _fake(monkeypatch, tmp_path, FAKE_NCU_KERNELS="flash_fwd_a", FAKE_NCU_SPLIT_MISS="flash")
    with pytest.raises(NothingProfiled, match="not profiled"):
        collect.split_report("ncu", STARTER, target, out)
    assert not out.exists()
    _fake(monkeypatch, tmp_path, FAKE_NCU_KERNELS="flash_fwd_a")
    assert collect.split_report("ncu", STARTER, target, out) == out and out.is_file()
