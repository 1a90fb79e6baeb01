"""The GPUs a sweep may use, and a per-GPU lock that holds across processes and users.

:func:`visible_gpus`: ``CUDA_VISIBLE_DEVICES`` when set (indices as nvidia-smi numbers them, or UUIDs),
else every GPU nvidia-smi lists. Each gets one worker, pinned with ``CUDA_VISIBLE_DEVICES=<uuid>`` (a UUID
names the same board whatever ``CUDA_DEVICE_ORDER`` is).

:class:`GpuLock`: an exclusive ``flock`` on ``<lock_dir>/gpu-<uuid>.lock``. The default folder,
``/run/lock/whowaits`` (``$WHOWAITS_LOCK_DIR`` or the manifest's ``lock_dir`` to change it), is on the
host's shared tmpfs, not in a private ``/tmp`` (a systemd service with ``PrivateTmp``, a container with
its own ``/tmp``, which is where ncu's own lock file lives): every sweep, of any user, that shares the folder
sees the lock. The folder is created world-writable with the sticky bit, the lock files readable and
writable by all, so another user's sweep can take them. The kernel drops a ``flock`` when its holder
exits, so a killed sweep never leaves a GPU locked. The holder writes who it is (pid, user, host, what)
into the file; a waiting worker shows it.
"""

from __future__ import annotations

import fcntl
import getpass
import json
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from profiler.errors import WhowaitsError


@dataclass(frozen=True)
class Gpu:
    """One visible GPU: ``index`` as nvidia-smi numbers it (or as given), its UUID and name when known."""

    index: str
    uuid: str | None = None
    name: str | None = None

    @property
    def pin(self) -> str:
        """The ``CUDA_VISIBLE_DEVICES`` value that gives a process this GPU alone."""
        return self.uuid or self.index

    @property
    def lock_key(self) -> str:
        return self.uuid or f"{socket.gethostname()}-index{self.index}"

    @property
    def label(self) -> str:
        return f"gpu{self.index}"


def nvidia_smi_gpus() -> list[Gpu] | None:
    """Every GPU nvidia-smi lists (index, uuid, name); None without nvidia-smi."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        cp = subprocess.run([smi, "--query-gpu=index,uuid,name", "--format=csv,noheader"],
                            capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as err:
        raise WhowaitsError(f"no usable NVIDIA GPU: nvidia-smi did not run ({err})") from None
    if cp.returncode != 0:
        why = (cp.stdout + cp.stderr).strip().splitlines()
        raise WhowaitsError("no usable NVIDIA GPU: nvidia-smi: " + (why[0] if why else f"exit code {cp.returncode}"))
    out = []
    for line in cp.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3:
            out.append(Gpu(parts[0], parts[1] or None, ", ".join(parts[2:]) or None))
    return out


def visible_gpus(env: Mapping[str, str] | None = None) -> list[Gpu]:
    """The GPUs this process may use (see the module docstring); WhowaitsError when there are none."""
    if env is None:
        env = os.environ
    smi = nvidia_smi_gpus()
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        if not smi:
            raise WhowaitsError("no visible GPU: nvidia-smi is not installed and CUDA_VISIBLE_DEVICES is not set")
        return smi
    entries = [e.strip() for e in cvd.split(",") if e.strip()]
    if not entries or entries[0] == "-1":
        raise WhowaitsError(f"no visible GPU: CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU")
    out = []
    for e in entries:
        hits = [g for g in smi or [] if e == g.index or e == g.uuid]
        hits = hits or [g for g in smi or [] if e.startswith(("GPU-", "MIG-")) and g.uuid and g.uuid.startswith(e)]
        if len(hits) > 1:
            raise WhowaitsError(f"CUDA_VISIBLE_DEVICES entry {e!r} names {len(hits)} GPUs: give more of the UUID")
        out.append(hits[0] if hits else Gpu(e, e if e.startswith(("GPU-", "MIG-")) else None, None))
    if len({g.pin for g in out}) != len(out):
        raise WhowaitsError(f"CUDA_VISIBLE_DEVICES={cvd!r} names one GPU twice")
    return out


def lock_dir(path: str | os.PathLike) -> Path:
    """Create the lock folder (world-writable, sticky) if needed; WhowaitsError when that is impossible."""
    d = Path(path)
    try:
        if not d.is_dir():
            d.mkdir(parents=True, exist_ok=True)
            os.chmod(d, 0o1777)
    except OSError as err:
        raise WhowaitsError(f"cannot create the GPU lock folder {d} ({err.strerror}): set lock_dir in the manifest "
                            "or WHOWAITS_LOCK_DIR to a folder every user of these GPUs can write") from None
    return d


def _safe(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", key)


class GpuLock:
    """An exclusive lock on one GPU (see the module docstring). Not re-entrant."""

    def __init__(self, folder: str | os.PathLike, gpu: Gpu):
        self.gpu = gpu
        self.path = lock_dir(folder) / f"gpu-{_safe(gpu.lock_key)}.lock"
        self._fd: int | None = None

    def _open(self) -> int:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as err:
            raise WhowaitsError(f"cannot open the GPU lock {self.path} ({err.strerror}): another user may own it "
                                "without sharing it; set lock_dir / WHOWAITS_LOCK_DIR to a shared folder") from None
        try:
            if os.fstat(fd).st_uid == os.geteuid():
                os.fchmod(fd, 0o666)  # umask would keep other users out
        except OSError:
            pass
        return fd

    def holder(self) -> dict | None:
        """Who holds (or last held) the lock, as written by its holder."""
        try:
            text = self.path.read_text()
        except OSError:
            return None
        try:
            return json.loads(text) if text.strip() else None
        except ValueError:
            return None

    def try_acquire(self, what: str = "") -> bool:
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except OSError:
            os.close(fd)
            raise
        self._fd = fd
        info = {"pid": os.getpid(), "user": _user(), "host": socket.gethostname(), "since": time.time(), "what": what}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        return True

    def acquire(self, timeout: float, what: str = "", on_wait=None, poll: float = 0.2) -> float:
        """Block until the lock is ours (polling); returns seconds waited. WhowaitsError after ``timeout``."""
        t0 = time.monotonic()
        told = False
        while not self.try_acquire(what):
            waited = time.monotonic() - t0
            if not told and on_wait:
                on_wait(self.holder())
                told = True
            if waited >= timeout:
                h = self.holder() or {}
                raise WhowaitsError(f"waited {waited:.0f} s for the lock of GPU {self.gpu.pin} ({self.path}), held by "
                                    f"pid {h.get('pid')} of {h.get('user')} on {h.get('host')}: {h.get('what')}")
            time.sleep(poll)
        return time.monotonic() - t0

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry in a container
        return str(os.geteuid())
