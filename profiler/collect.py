"""Profile kernels under Nsight Compute: the only module that starts ``ncu``.

One ncu *session* profiles one process for one or more *targets* (a ladder version, or an external
subject such as torch SDPA's flash kernel), exactly one measured launch each, and writes
``reports/<gpu>/<target>/<shape>.ncu-rep`` plus its provenance sidecar ``<shape>.json``
(:mod:`profiler.provenance`). Public functions:

- :func:`plan_version` / :func:`plan_all` / :func:`plan_command`: what to run (no side effects).
- :meth:`Session.ncu_argv`: the exact ncu command line (``whowaits profile --dry-run`` prints it).
- :func:`run_session`: run one session, check ncu's output, write the reports + sidecars atomically.
- :func:`parse_ncu_output`: passes per kernel and the error, if any, from ncu's own messages.

The section set itself (which files, which metrics) is :mod:`profiler.sections`.

How one measured launch is pinned down: ladder versions run in ``python -m kernels.runner``, which launches
each version N warm-up times and then once inside the NVTX push/pop range ``whowaits:<version>``; ncu takes
``--nvtx --nvtx-include whowaits:<version>/`` with the exact demangled-name regex of that version's kernel
and ``--launch-count`` = number of targets. External programs (``--cmd``) are pinned by a kernel-name regex
plus ``--launch-skip`` (the warm-up launches of that kernel) and ``--launch-count 1``.

ncu always runs with ``--clock-control none`` (the card's clocks are left alone), ``--cache-control all``
and ``--import-source yes`` (ladder builds carry ``-lineinfo``, see ``kernels/build.py``). With the
``whowaits`` set, ncu's section search path is replaced by the checkout's ``sections/`` folder (an
installed wheel's ``profiler/data/sections/``), so only our sections are collected (no built-in section or rule runs).

A session writes into a temporary folder beside the destination and renames each finished file into
place; on any error nothing is left behind, and an existing report is never overwritten without ``force``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from profiler import provenance
from profiler import settings
from profiler.errors import (
    CounterPermission,
    LaunchCount,
    NcuError,
    NcuFailed,
    NcuNotFound,
    NoGpu,
    NothingProfiled,
    ProgramFailed,
    WhowaitsError,
)
from profiler.sections import (  # noqa: F401 - section_files/section_metrics/set_metrics: moved, kept for callers
    DEFAULT_SET,
    SECTION_SCHEMA,
    SECTIONS_DIR,
    section_files,
    section_metrics,
    set_metrics,
)
from profiler.names import EXT_RUNNER_TITLES

from profiler import paths as _paths

REPO = _paths.checkout() or Path(__file__).resolve().parents[1]  # installed: the folder holding profiler/ and kernels/
REPORTS_DIR = _paths.reports_root()  # at import; `whowaits profile` resolves it again per call
DEFAULT_SHAPE = "b1_h64_s1024_d128_fp16"
DEFAULT_WARMUP = 3
CLOCK_CONTROL = "none"
CACHE_CONTROL = "all"
NVTX_PREFIX = "whowaits:"

# External subjects that `python -m kernels.runner` can launch itself (so `--all --ext` stays one process):
# runner name -> (report folder, regex on the demangled kernel name). Names as recorded by ncu on the H200.
EXT_SUBJECTS: dict[str, tuple[str, str]] = {
    "sdpa-flash": ("ext-sdpa-flash", r"flash_fwd_kernel"),
    "sdpa-cudnn": ("ext-sdpa-cudnn", r"cudnn_generated.*sdpa.*fprop"),
}

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


# --------------------------------------------------------------------------------------------------------
# what to run
@dataclass(frozen=True)
class Target:
    """One measured launch in a session: where its report goes and how ncu recognises its kernel."""

    name: str  # report folder under reports/<gpu>/: a version id or ext-NAME
    kernel_regex: str  # regex on the demangled kernel name
    nvtx_range: str | None = None  # NVTX push/pop range holding exactly this launch, if any
    runner_arg: str | None = None  # its positional for `python -m kernels.runner`, for runner sessions


@dataclass
class Session:
    """One ncu process over one profiled program; ``targets`` in the order the program launches them."""

    targets: list[Target]
    program: list[str]
    shape: str
    section_set: str = DEFAULT_SET
    launch_skip: int = 0
    cwd: Path = REPO
    env: dict[str, str] = field(default_factory=dict)
    build: list[str] = field(default_factory=list)  # version ids to build (with -lineinfo) before running
    warmup: int | None = None  # set for runner sessions: the program is regenerated for any subset of targets
    sections: tuple[str, ...] = ()  # explicit ncu sections (by identifier) instead of a set, e.g. ("LaunchStats",)

    def subset(self, targets: list[Target]) -> "Session":
        """The same session for some of its targets (runner sessions only; a command session is all-or-nothing)."""
        if targets == self.targets:
            return self
        if self.warmup is None:
            raise ValueError("only a runner session can be split into subsets")
        program = runner_program([t.runner_arg for t in targets], self.shape, self.warmup)
        return Session(targets, program, self.shape, self.section_set, self.launch_skip, self.cwd, self.env,
                       [], self.warmup, self.sections)

    @property
    def launch_count(self) -> int:
        return len(self.targets)

    @property
    def kernel_filter(self) -> str:
        regexes = [t.kernel_regex for t in self.targets]
        joined = regexes[0] if len(set(regexes)) == 1 else "|".join(f"({r})" for r in dict.fromkeys(regexes))
        return "regex:" + joined

    @property
    def nvtx_include(self) -> list[str] | None:
        ranges = [f"{t.nvtx_range}/" for t in self.targets if t.nvtx_range]
        return ranges or None

    def ncu_argv(self, ncu: str = "ncu", export: str | os.PathLike = "report") -> list[str]:
        """The full ncu command line writing to ``export`` (ncu appends ``.ncu-rep``)."""
        argv = [ncu, "--clock-control", CLOCK_CONTROL, "--cache-control", CACHE_CONTROL, "--import-source", "yes"]
        if self.sections:
            for sec in self.sections:
                argv += ["--section", sec]
        else:
            if self.section_set == DEFAULT_SET:
                argv += ["--section-folder", str(SECTIONS_DIR)]
            argv += ["--set", self.section_set]
        argv += ["--kernel-name-base", "demangled", "--kernel-name", self.kernel_filter]
        if self.nvtx_include:
            argv.append("--nvtx")
            for expr in self.nvtx_include:
                argv += ["--nvtx-include", expr]
        argv += ["--launch-skip", str(self.launch_skip), "--launch-count", str(self.launch_count)]
        argv += ["--force-overwrite", "--export", str(export)]
        return argv + list(self.program)


def _check_name(name: str) -> str:
    if not _NAME_RE.match(name) or name in (".", ".."):
        raise WhowaitsError(f"bad subject name {name!r}: use letters, digits, '_', '-', '.'")
    return name


def _shape_key(shape: str) -> str:
    from kernels.config import Shape  # kernels.config needs no GPU

    return Shape.parse(shape).key


def version_target(version_id: str) -> Target:
    """The target of a ladder version: its kernel's demangled-name prefix and its NVTX range (kernels/CONTRACT.md)."""
    return Target(version_id, rf"whowaits::{re.escape(version_id)}::flash_fwd<", NVTX_PREFIX + version_id, version_id)


def ext_runner_target(runner_name: str, suffix: str = "") -> Target:
    folder, regex = EXT_SUBJECTS[runner_name]
    return Target(_check_name(folder + suffix), regex, NVTX_PREFIX + runner_name, runner_name)


def runner_program(names: list[str], shape: str, warmup: int) -> list[str]:
    return [sys.executable, "-m", "kernels.runner", *names, "--shape", shape, "--warmup", str(warmup)]


def plan_versions(version_ids: list[str], shape: str = DEFAULT_SHAPE, *, ext: list[str] = (),
                  section_set: str = DEFAULT_SET, warmup: int = DEFAULT_WARMUP, ext_suffix: str = "") -> Session:
    """One session over ``python -m kernels.runner`` for the given versions (and runner ext subjects)."""
    from kernels import registry

    shape = _shape_key(shape)
    ids = [registry.get(v).id for v in version_ids]
    for e in ext:
        if e not in EXT_SUBJECTS:
            raise WhowaitsError(f"unknown external subject {e!r}: the runner knows {', '.join(EXT_SUBJECTS)}")
    targets = [version_target(v) for v in ids] + [ext_runner_target(e, ext_suffix) for e in ext]
    if not targets:
        raise WhowaitsError("nothing to profile")
    return Session(targets, runner_program([t.runner_arg for t in targets], shape, warmup), shape, section_set,
                   build=ids, warmup=warmup)


def plan_version(version_id: str, shape: str = DEFAULT_SHAPE, **kw) -> Session:
    """One ladder version (``whowaits profile VERSION``)."""
    return plan_versions([version_id], shape, **kw)


def plan_all(shape: str = DEFAULT_SHAPE, *, ext: bool = False, **kw) -> Session:
    """Every ladder version (and the runner's external subjects with ``ext``) in ONE session and ONE process."""
    from kernels import registry

    ids = [v.id for v in registry.versions()]
    if not ids and not ext:
        raise WhowaitsError("no kernel versions found under kernels/v*/version.toml")
    return plan_versions(ids, shape, ext=list(EXT_SUBJECTS) if ext else [], **kw)


def plan_command(command: str | list[str], kernel_regex: str, name: str, shape: str = DEFAULT_SHAPE, *,
                 launch_skip: int = 0, section_set: str = DEFAULT_SET, nvtx_range: str | None = None) -> Session:
    """Any program (``whowaits profile --cmd "…" --kernel REGEX --name ext-NAME``): the first launch of a
    kernel matching ``kernel_regex`` after ``launch_skip`` earlier ones (inside ``nvtx_range`` if given)."""
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv:
        raise WhowaitsError("--cmd is empty")
    try:
        re.compile(kernel_regex)
    except re.error as err:
        raise WhowaitsError(f"--kernel {kernel_regex!r} is not a valid regex: {err}") from None
    if launch_skip < 0:
        raise WhowaitsError("--launch-skip must be >= 0")
    target = Target(_check_name(name), kernel_regex, nvtx_range)
    return Session([target], argv, _any_shape_key(shape), section_set, launch_skip=launch_skip)


def _any_shape_key(shape: str) -> str:
    """``--shape`` for any program: an attention shape key (normalised), or any plain key of the user's
    own problem (``m4096_n4096_k4096``), the report's file name."""
    try:
        return _shape_key(shape)
    except WhowaitsError:
        if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", shape or ""):
            return shape
        raise WhowaitsError(f"--shape {shape!r}: give a plain key (letters, digits, '.', '_', '-'), "
                            "e.g. m4096_n4096_k4096") from None


# --------------------------------------------------------------------------------------------------------
# the environment
def find_ncu() -> str:
    """Path of ncu: ``$WHOWAITS_NCU`` or ``ncu`` on PATH."""
    env = settings.text("WHOWAITS_NCU")
    if env:
        if not (Path(env).is_file() and os.access(env, os.X_OK)):
            raise NcuNotFound(f"WHOWAITS_NCU={env} is not an executable file")
        return env
    path = shutil.which("ncu")
    if not path:
        raise NcuNotFound(
            "ncu (Nsight Compute CLI) not found on PATH: install Nsight Compute (it ships with the CUDA toolkit, "
            "e.g. /usr/local/cuda/bin) or set WHOWAITS_NCU"
        )
    return path


def _run_text(argv: list[str], timeout: float = 60) -> str | None:
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return cp.stdout if cp.returncode == 0 else None


def ncu_version(ncu: str) -> str | None:
    """``ncu --version`` -> e.g. ``"2025.3.1.0"``."""
    out = _run_text([ncu, "--version"])
    m = re.search(r"Version\s+([0-9][0-9.]*)", out or "")
    return m.group(1) if m else None


def gpu_info(device: str | None = None) -> tuple[str | None, str | None]:
    """(GPU name, driver version) of GPU 0 (or of ``device``: an nvidia-smi index or UUID, as a sweep pins its
    sessions) from nvidia-smi; (None, None) when nvidia-smi is not installed.

    Raises :class:`NoGpu` when nvidia-smi is there but finds no GPU (no driver, no device): ncu
    could only fail later, after starting the program.
    """
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None, None
    try:
        cp = subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader",
                             *([f"--id={device}"] if device else [])], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as err:
        raise NoGpu(f"no usable NVIDIA GPU: nvidia-smi did not run ({err})") from None
    out = cp.stdout.strip()
    if cp.returncode != 0 or not out:
        why = (cp.stdout + cp.stderr).strip().splitlines()
        raise NoGpu("no usable NVIDIA GPU: nvidia-smi: " + (why[0] if why else f"exit code {cp.returncode}"))
    name, _, driver = out.splitlines()[0].partition(",")
    return name.strip() or None, driver.strip() or None


def tool_version() -> str | None:
    """whowaits' version: the installed distribution's, else pyproject.toml's (a PYTHONPATH checkout)."""
    try:
        from importlib.metadata import version

        return version("whowaits")
    except ImportError:
        pass
    except Exception:  # noqa: BLE001 - importlib.metadata's PackageNotFoundError and kin: not installed
        pass
    try:
        import tomllib

        return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    except (OSError, KeyError, TypeError, ValueError):  # no checkout or no version there (tomllib's error is a ValueError)
        return None


# --------------------------------------------------------------------------------------------------------
# ncu's messages
_PASSES_RE = re.compile(r'==PROF== Profiling "(?P<kernel>[^"]*)".*?(?P<passes>\d+) pass(?:es)?')
_APP_ERR_RE = re.compile(r"==ERROR== The application returned an error code \((?P<code>-?\d+)\)")
_NO_DEVICE_PATTERNS = (
    "no cuda-capable device",
    "no supported cuda devices",
    "no cuda devices",
    "no nvidia gpu",
    "cuda_error_no_device",
    "cudaerrornodevice",
    "no cuda gpus are available",
    "found no nvidia driver",
)


@dataclass
class NcuOutcome:
    """What ncu's console output says about a session."""

    profiled: list[tuple[str, int]]  # (kernel name as ncu printed it, replay passes), in order
    error: str | None  # one line for the user, or None
    kind: type[NcuError] | None = None  # the error's kind (None when all is well)

    def exception(self) -> NcuError:
        """The error as an exception of its kind (only when ``error`` is set)."""
        assert self.error is not None and self.kind is not None
        return self.kind(self.error)


def _last_program_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        s = line.strip()
        if s and not s.startswith("=="):
            return s[:300]
    return ""


def parse_ncu_output(text: str, returncode: int = 0) -> NcuOutcome:
    """Passes per profiled kernel and the first problem ncu reports, as one line and its kind (an
    :class:`~profiler.errors.NcuError` subclass); both None when all is well."""
    profiled = [(m.group("kernel"), int(m.group("passes"))) for m in _PASSES_RE.finditer(text)]
    low = text.lower()
    error, kind = None, None
    if "err_nvgpuctrperm" in low:
        kind = CounterPermission
        error = ("ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM): run as root or enable "
                 "counter access for all users (NVreg_RestrictProfilingToAdminUsers=0), see "
                 "https://developer.nvidia.com/ERR_NVGPUCTRPERM")
    elif any(p in low for p in _NO_DEVICE_PATTERNS):
        kind = NoGpu
        error = "no usable NVIDIA GPU: " + (_ncu_error_line(text) or _last_program_line(text) or "no device found")
    elif (m := _APP_ERR_RE.search(text)) is not None:
        last = _last_program_line(text)
        kind = ProgramFailed
        error = f"the profiled program failed with exit code {m.group('code')}" + (f": {last}" if last else "")
    elif "no kernels were profiled" in low:
        kind = NothingProfiled
        error = "the kernel filter matched no kernel launch (ncu: No kernels were profiled)"
        seen = list(dict.fromkeys(short_kernel_name(k) for k in _available_kernels(text)))
        if seen:
            more = f", … and {len(seen) - SHOWN_KERNELS} more" if len(seen) > SHOWN_KERNELS else ""
            error += (f"; the program launched {len(seen)} kernel(s): " + ", ".join(seen[:SHOWN_KERNELS]) + more)
    elif returncode != 0:
        kind = NcuFailed
        error = f"ncu failed with exit code {returncode}: " + (_ncu_error_line(text) or _last_program_line(text) or "no message")
    return NcuOutcome(profiled, error, kind)


#: how many of the kernels a program launched an error lists when the filter matched none
SHOWN_KERNELS = 10


def short_kernel_name(name: str) -> str:
    """A demangled kernel name as a person scans it: no return type, no parameter list, no namespaces,
    template arguments elided (``void whowaits::v07::flash_fwd<128, 64, true>(const half*, …)`` ->
    ``flash_fwd<…>``)."""
    s = name.strip().replace("(anonymous namespace)", "{anonymous}")
    depth, cut = 0, len(s)
    for i, ch in enumerate(s):  # the parameter list: the first '(' outside template brackets
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0 and i > 0:
            cut = i
            break
    s = s[:cut]
    out, depth = [], 0
    for ch in s:  # template arguments, nested ones too, become one '<…>'
        if ch == "<":
            if depth == 0:
                out.append("<…>")
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    s = "".join(out).strip()
    s = s.rsplit(" ", 1)[-1]  # return type / qualifiers before the name
    return s.rsplit("::", 1)[-1] or name.strip()


def _available_kernels(text: str) -> list[str]:
    """The 'Available Kernels:' list ncu prints after 'No kernels were profiled'."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "Available Kernels:":
            out = []
            for item in lines[i + 1:]:
                m = re.match(r"^\s*\d+\.\s+(\S.*)$", item)
                if not m:
                    break
                out.append(m.group(1).strip())
            return out
    return []


def _ncu_error_line(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("==ERROR=="):
            return line[len("==ERROR=="):].strip()[:300]
    return ""


# --------------------------------------------------------------------------------------------------------
# running a session
@dataclass
class TargetResult:
    target: Target
    report: Path | None = None
    sidecar: Path | None = None
    passes: int | None = None
    kernel: str | None = None
    error: str | None = None
    error_kind: type[WhowaitsError] | None = None  # NothingProfiled, ProgramFailed, … (profiler.errors)

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class SessionResult:
    session: Session
    argvs: list[list[str]]  # one ncu command per ncu process (more than one only after a crash)
    wall_s: float
    results: list[TargetResult]
    log: str

    @property
    def failures(self) -> list[TargetResult]:
        return [r for r in self.results if not r.ok]


#: seconds ncu gets to end (and to end the program it profiles) once asked to stop, before it is killed
STOP_GRACE_S = 10.0


def _descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (its children, theirs, …), read from /proc; [] where /proc cannot tell.

    ncu is a launcher script that starts the real ncu binary as its child (no exec), and that binary starts the
    program it profiles: a signal to the launcher alone ends the launcher and leaves the profiler and the
    program running (seen on the H200 with ncu 2025.3.1: scripts/device/h200_verify_sections.sh)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


#: set in the environment of the ncu whowaits starts (a fresh value per session): every process of that
#: session inherits it, also one that left the tree below ncu (a daemonised helper re-parented to init)
SESSION_TOKEN = "WHOWAITS_NCU_SESSION"


def _session_members(token: str) -> list[int]:
    """Live processes whose environment carries ``SESSION_TOKEN=token`` (read from /proc/*/environ;
    processes this user may not read are skipped)."""
    needle = f"{SESSION_TOKEN}={token}".encode()
    me = os.getpid()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def stop_child(proc: subprocess.Popen, signum: int, grace: float = STOP_GRACE_S, token: str | None = None) -> None:
    """Stop ``proc`` (ncu) and every process below it after this process was interrupted or terminated, and
    wait for them. The tree is read first (:func:`_descendants`: the launcher's children are re-parented the
    moment it ends). A signal sent to the whole process group (a terminal's Ctrl-C, ``timeout``) has reached
    them already: they get a moment to end on their own. Otherwise (the signal went to whowaits alone) ncu, the
    real profiler below its launcher and the profiled program get the same signal; past ``grace`` seconds what
    is left is killed. With ``token`` (the session's :data:`SESSION_TOKEN`), the processes carrying it join
    the tree, wherever a process of the session was re-parented (on the H200 every process of the session carries
    it, and a stop of whowaits alone ended them all: docs/reliability.md).
    Nothing started here outlives this call. ncu stays in whowaits' process group, so whoever stops that
    group (a sweep's job runner) stops ncu with it."""
    import signal as _signal
    import time as _time

    tree = _descendants(proc.pid)
    if token:
        tree = sorted(set(tree) | set(_session_members(token)))
    deadline = _time.monotonic() + grace
    try:
        proc.wait(timeout=0.5)
    except subprocess.TimeoutExpired:
        try:
            proc.send_signal(signum)
        except OSError:
            pass
    _signal_all([p for p in tree if _alive(p)], signum)
    try:
        proc.wait(timeout=max(0.0, deadline - _time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
    while _time.monotonic() < deadline and any(_alive(p) for p in tree):
        _time.sleep(0.05)
    if token:  # what the session started meanwhile
        tree = sorted(set(tree) | set(_session_members(token)))
    _signal_all([p for p in tree if _alive(p)], _signal.SIGKILL)
    proc.wait()


def _stream(argv: list[str], cwd: Path, env: dict, on_line: Callable[[str], None] | None) -> tuple[int, str]:
    """Run argv, merging stderr into stdout; feed each line to ``on_line``; return (exit code, all output).

    A signal meant for whowaits alone (``kill PID``, a supervisor's SIGTERM) cannot leave ncu profiling: when
    this process is interrupted or terminated while ncu runs, ncu gets the same signal and is waited for
    (:func:`stop_child`) before the interrupt goes on up."""
    import signal as _signal

    import secrets

    token = secrets.token_hex(8)
    full_env = os.environ | env | {SESSION_TOKEN: token}
    lines: list[str] = []
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", bufsize=1)
    except OSError as err:
        raise NcuFailed(f"could not start {argv[0]}: {err.strerror}") from None
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            lines.append(line)
            if on_line:
                on_line(line.rstrip("\n"))
        return proc.wait(), "".join(lines)
    except BaseException as exc:
        signum = getattr(exc, "signum", None)
        if not isinstance(signum, int):
            signum = _signal.SIGINT if isinstance(exc, KeyboardInterrupt) else _signal.SIGTERM
        stop_child(proc, signum, token=token)
        raise
    finally:
        proc.stdout.close()


def subject_provenance(target: Target, shape: str) -> dict:
    """The sidecar fields that describe what was measured (:mod:`profiler.provenance`): ``problem_flops`` of
    the shape; for a ladder version its ``build_hash`` (the build cache key of the config profiled, the
    same key ``kernels.build`` caches the cubin under), ``ladder_order``, ``title``, ``change`` and
    ``expected_bottleneck``; for the runner's external subjects their title. Computed here, at profile
    time, so that the views read them from the sidecar and never import ``kernels``."""
    from kernels import build as kbuild
    from kernels import registry
    from kernels.config import Shape

    try:
        s = Shape.parse(shape)
    except WhowaitsError:  # a key of the user's own problem (profile --cmd --shape m4096_n4096_k4096)
        return {"problem_flops": None, "build_hash": None, "ladder_order": None, "title": None,
                "change": None, "expected_bottleneck": None}
    out = {"problem_flops": s.flops(), "build_hash": None, "ladder_order": None, "title": None,
           "change": None, "expected_bottleneck": None}
    ladder = {v.id: v for v in registry.versions()}
    if target.runner_arg in ladder and target.runner_arg == target.name:
        v = ladder[target.runner_arg]
        out.update(build_hash=kbuild._source_hash(v, v.config_for(s.head_dim, s.dtype, s.causal)),
                   ladder_order=v.number, title=v.title, change=v.change,
                   expected_bottleneck=v.expected_bottleneck)
    elif target.runner_arg in EXT_RUNNER_TITLES:
        out["title"] = EXT_RUNNER_TITLES[target.runner_arg]
    return out


def _build_versions(ids: list[str], shape: str) -> dict[str, str]:
    """Build each version's cubin for ``shape`` (-lineinfo, cached); {version: error} for those that fail."""
    if not ids:
        return {}
    from kernels import build as kbuild
    from kernels import registry
    from kernels.config import Shape

    s = Shape.parse(shape)
    failed = {}
    for vid in ids:
        try:
            v = registry.get(vid)
            kbuild.build(v, v.config_for(s.head_dim, s.dtype, s.causal))
        except WhowaitsError as err:
            failed[vid] = f"build failed: {err}"
    return failed


def run_session(session: Session, *, out_root: Path = REPORTS_DIR, gpu: str | None = None, force: bool = False,
                on_line: Callable[[str], None] | None = None,
                on_target_done: Callable[[TargetResult], None] | None = None) -> SessionResult:
    """Run the session under ncu and write one report + sidecar per target that ncu profiled.

    Raises what makes profiling impossible, each of its kind (:mod:`profiler.errors`): :class:`NcuNotFound`,
    :class:`NoGpu`, :class:`CounterPermission`, :class:`NothingProfiled` (a filter that matched nothing),
    :class:`NcuFailed`, a plain :class:`WhowaitsError` for an existing report without ``force``, and, for a
    one-target session, :class:`ProgramFailed` for a crashed program. With several targets a version that fails (does not build, crashes the runner, is
    not profiled) is recorded in the result's ``failures`` and the others go on: after a crash a new ncu
    session resumes with the targets after the failing one. No file is left behind for a failed target.
    """
    ncu = find_ncu()
    pinned = session.env.get("CUDA_VISIBLE_DEVICES", "")
    gpu_name, driver = gpu_info(pinned if pinned and "," not in pinned else None)  # a sweep's GPU, not GPU 0
    slug = gpu or provenance.gpu_slug(gpu_name)
    dests = {t.name: _paths.report_path(out_root, slug, t.name, session.shape) for t in session.targets}
    if not force:
        existing = [str(p) for p in dests.values() if p.exists()]
        if existing:
            raise WhowaitsError(f"report exists: {existing[0]} (use --force to overwrite)")

    results = {t.name: TargetResult(t) for t in session.targets}

    def fail(t: Target, msg: str, kind: type[WhowaitsError] = WhowaitsError) -> None:
        results[t.name].error = msg
        results[t.name].error_kind = kind
        if on_target_done:
            on_target_done(results[t.name])

    for name, err in _build_versions(session.build, session.shape).items():
        fail(next(t for t in session.targets if t.name == name), err)
    pending = [t for t in session.targets if not results[t.name].error]
    if not pending:
        return SessionResult(session, [], 0.0, list(results.values()), "")

    out_root = Path(out_root)
    made = [d for d in (out_root, out_root / slug) if not d.exists()]  # removed again if nothing lands in them
    (out_root / slug).mkdir(parents=True, exist_ok=True)
    tmpdir = Path(tempfile.mkdtemp(prefix=".whowaits-profile-", dir=out_root / slug))
    argvs: list[list[str]] = []
    logs: list[str] = []
    wall = 0.0
    try:
        ncu_ver = ncu_version(ncu)
        commit, dirty = provenance.git_state(session.cwd)
        staged: list[tuple[TargetResult, Path, dict]] = []
        while pending:
            sub = session.subset(pending)
            stem = tmpdir / f"session{len(argvs)}"
            argv = sub.ncu_argv(ncu, stem)
            argvs.append(argv)
            t0 = time.perf_counter()
            code, log = _stream(argv, session.cwd, session.env, on_line)
            wall += time.perf_counter() - t0
            logs.append(log)
            outcome = parse_ncu_output(log, code)
            rep = stem.with_name(stem.name + ".ncu-rep")
            crashed = outcome.kind is ProgramFailed
            if outcome.error and not (crashed and len(session.targets) > 1):
                raise outcome.exception()
            if not rep.is_file() and not crashed:
                raise NcuFailed(f"ncu exited {code} but wrote no report: "
                                    + (_ncu_error_line(log) or _last_program_line(log) or "no message"))
            k = len(outcome.profiled)
            # Launches come in target order (one per NVTX range), so the i-th 'Profiling' line is the i-th
            # target when all were profiled; after a crash the first k were, and target k crashed.
            candidates = pending[:k] if crashed else pending
            resume = pending[k + 1:] if crashed else []
            if crashed and k < len(pending):
                fail(pending[k], outcome.error, ProgramFailed)
            passes = {t.name: outcome.profiled[i][1] for i, t in enumerate(candidates)} \
                if len(candidates) == k else {}
            parts = _parts(ncu, rep, candidates, tmpdir) if rep.is_file() else {
                t.name: NcuFailed("no report") for t in candidates}
            for t in candidates:
                part = parts[t.name]
                if isinstance(part, NcuError):
                    fail(t, str(part), type(part))
                    continue
                r = results[t.name]
                r.passes = passes.get(t.name)
                side = provenance.make_sidecar(
                    version=t.name, shape=session.shape, ncu_command=[a.replace(str(tmpdir), "<tmp>") for a in argv],
                    ncu_version=ncu_ver, driver_version=driver, gpu=gpu_name, git_commit=commit, git_dirty=dirty,
                    clock_control=CLOCK_CONTROL, cache_control=CACHE_CONTROL, section_set=session.section_set,
                    kernel_filter="regex:" + t.kernel_regex, launch_skip=sub.launch_skip,
                    launch_count=sub.launch_count, nvtx_include=[f"{t.nvtx_range}/"] if t.nvtx_range else None,
                    time=datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
                    tool_version=tool_version(), report_sha256=provenance.sha256_file(part),
                    split_command=None if part == rep else [
                        a.replace(str(tmpdir), "<tmp>") for a in split_command(ncu, rep, t, part)],
                    **subject_provenance(t, session.shape),
                )
                staged.append((r, part, side))
            pending = resume
        for r, part, side in staged:  # every part exists and is checked: move them into place
            dest = dests[r.target.name]
            if dest.exists() and not force:
                fail(r.target, f"report appeared meanwhile: {dest} (use --force to overwrite)")
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            side_tmp = tmpdir / f"{r.target.name}.json"
            provenance.write_json_atomic(side_tmp, side)
            os.replace(part, dest)
            os.replace(side_tmp, provenance.sidecar_path(dest))
            r.report, r.sidecar = dest, provenance.sidecar_path(dest)
            if on_target_done:
                on_target_done(r)
        return SessionResult(session, argvs, wall, [results[t.name] for t in session.targets], "".join(logs))
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
        for d in reversed(made):
            try:
                d.rmdir()  # only if still empty
            except OSError:
                pass


def _parts(ncu: str, rep: Path, targets: list[Target], tmpdir: Path) -> dict[str, Path | NcuError]:
    """Each target's own report: the session report itself for one target, else split out of it by the
    target's kernel regex (ncu --import ... --export, run in parallel). {name: path, or the error of its
    kind saying why there is none}."""
    if not targets:  # the program died before its first measured launch
        return {}
    if len(targets) == 1:
        return {targets[0].name: rep}
    from concurrent.futures import ThreadPoolExecutor

    def one(t: Target) -> Path | NcuError:
        try:
            return split_report(ncu, rep, t, tmpdir / f"{t.name}.ncu-rep")
        except NcuError as err:
            return err

    with ThreadPoolExecutor(max_workers=min(8, len(targets))) as pool:
        return dict(zip([t.name for t in targets], pool.map(one, targets)))


def split_command(ncu: str, combined: Path, target: Target, out: Path) -> list[str]:
    """ncu command that copies one target's launch out of a combined report into a report of its own.

    ncu 2025.3 filters an imported report by kernel name (not by NVTX range: ``--nvtx`` is refused with
    ``--import``), which is why every target of a multi-target session has a kernel regex of its own.
    """
    return [ncu, "--import", str(combined), "--kernel-name-base", "demangled",
            "--kernel-name", "regex:" + target.kernel_regex, "--force-overwrite", "--export", str(out)]


_EXPORTED_RE = re.compile(r'==PROF== Exported launch "(?P<kernel>[^"]*)"')


def split_report(ncu: str, combined: Path, target: Target, out: Path) -> Path:
    """Write ``target``'s one launch of ``combined`` to ``out``.

    Raises :class:`NothingProfiled` when no launch matched, :class:`LaunchCount` when several did, and
    the kind ncu's output names (:class:`NcuFailed` …) when the split itself failed; ``out`` is then
    removed."""
    argv = split_command(ncu, combined, target, out)
    code, log = _stream(argv, REPO, {}, None)
    outcome = parse_ncu_output(log, code)
    exported = _EXPORTED_RE.findall(log)
    if outcome.error and not exported:
        out.unlink(missing_ok=True)
        if outcome.kind is NothingProfiled:
            raise NothingProfiled("not profiled: no launch of its kernel in the session report")
        raise outcome.kind(f"could not split it out of the session report: {outcome.error}")
    if len(exported) != 1 or not out.is_file():
        out.unlink(missing_ok=True)
        if not exported:
            raise NothingProfiled("not profiled: no launch of its kernel in the session report")
        raise LaunchCount(f"its kernel regex matched {len(exported)} launches of the session report, not 1")
    return out
