"""No cache entry is replayed unless its seal and its key both match, on copies of committed reports' entries:
the replay cache (`show`/`diff` `--format json` results), the parsed-frames cache and the summaries cache.
Each damage (a flipped bit, a truncation, another key's valid entry swapped or linked in, a FIFO, a directory,
a planted line) gives the right answer with exit 0, never hangs, and leaves a rebuilt, sealed entry."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
H200 = REPO / "reports" / "h200"
SHAPE = "b1_h64_s1024_d128_fp16"
A = H200 / "v10_warp_specialized" / f"{SHAPE}.ncu-rep"
B = H200 / "ext-sdpa-cudnn" / f"{SHAPE}.ncu-rep"
ENTRY = "import sys; sys.argv[0] = 'whowaits'; from profiler.fastcli import main; main()"
DIFF = ("diff", str(A), str(B), "--format", "json")
DAMAGES = ["flip", "truncate", "garbage", "swap", "link", "fifo", "directory", "planted"]


def cli(*args: str, cache: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), WHOWAITS_CACHE_DIR=str(cache))
    env.pop("WHOWAITS_NO_RESULT_CACHE", None)
    return subprocess.run([sys.executable, "-c", ENTRY, *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A cache folder holding the frames, summaries and replay entries of `show A` and `show B` (json), and
    their outputs."""
    from conftest import seeded_cache

    cache = seeded_cache(tmp_path_factory.mktemp("cache"), A, B)
    outs = {}
    for rep in (A, B):
        cp = cli("show", str(rep), "--format", "json", cache=cache)
        assert cp.returncode == 0, cp.stderr
        outs[rep] = cp.stdout
    cp = cli(*DIFF, cache=cache)  # the summaries cache is diff's and migration's
    assert cp.returncode == 0, cp.stderr
    outs["diff"] = cp.stdout
    return cache, outs


def _copy(warm, tmp_path) -> tuple[Path, dict]:
    cache, outs = warm
    dst = tmp_path / "cache"
    shutil.copytree(cache, dst)
    return dst, outs


def _damage(entry: Path, other: Path, how: str) -> None:
    """Damage the cache entry ``entry`` (``other``: a valid entry of another key, same kind)."""
    data = entry.read_bytes()
    if how == "flip":
        b = bytearray(data)
        i = next(i for i in range(len(b) - 1, 0, -1) if chr(b[i]).isdigit() and b[i] != ord("9"))
        b[i] += 1  # a digit of a number: still decodes, only the seal can tell
        entry.write_bytes(bytes(b))
    elif how == "truncate":
        entry.write_bytes(data[: len(data) // 2])
    elif how == "garbage":
        entry.write_bytes(b"\0" * 100)
    elif how == "swap":
        shutil.copy2(other, entry)  # another report's valid, sealed entry under this key's name
    elif how == "link":
        entry.unlink()
        entry.symlink_to(other)
    elif how == "fifo":
        entry.unlink()
        os.mkfifo(entry)
    elif how == "directory":
        entry.unlink()
        entry.mkdir()
        (entry / "x").write_text("x")
    elif how == "planted":  # an entry written by someone else, in the old unsealed layout
        entry.write_bytes(json.dumps({"stdout": "{}\n", "stderr": "whowaits: planted\n"}).encode())


def _entries(cache: Path, kind: str) -> dict[str, Path]:
    return {p.name: p for p in sorted({"replay": (cache / "results").glob("*.json"),
                                       "frames": cache.glob("*.frames"),
                                       "summaries": (cache / "summaries").glob("*.json")}[kind])}


def _entry_of(cache: Path, kind: str, rep: Path) -> tuple[Path, Path]:
    """(the entry of ``rep``, the entry of the other report) in the cache folder."""
    from profiler.provenance import sha256_file

    if kind == "replay":
        from profiler.fastcli import command_key

        def path(r):
            return cache / "results" / f"{command_key(['show', str(r), '--format', 'json'])}.json"

        return path(rep), path(B if rep == A else A)
    sha_a, sha_b = sha256_file(rep), sha256_file(B if rep == A else A)
    entries = list(_entries(cache, kind).values())
    mine = [p for p in entries if p.name.startswith(sha_a)]
    theirs = [p for p in entries if p.name.startswith(sha_b)]
    assert len(mine) == 1 and len(theirs) == 1, entries
    return mine[0], theirs[0]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["replay", "frames", "summaries"])
@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_or_foreign_entry_is_never_replayed(warm, tmp_path, kind, how, monkeypatch):
    if kind != "replay" and how == "planted":
        pytest.skip("the planted stdout/stderr entry is the replay cache's")
    cache, outs = _copy(warm, tmp_path)
    monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(cache))
    entry, other = _entry_of(cache, kind, A)
    good = entry.read_bytes()
    if kind != "replay":  # the replay entry would answer before the frames/summaries are read
        shutil.rmtree(cache / "results")
    _damage(entry, other, how)
    args, want = (DIFF, outs["diff"]) if kind == "summaries" else (("show", str(A), "--format", "json"), outs[A])
    cp = cli(*args, cache=cache, timeout=120)  # a FIFO must not hang it
    assert cp.returncode == 0 and not cp.stderr, cp.stderr
    assert cp.stdout == want  # A's own answer, never B's, never a flipped digit
    if kind != "summaries":
        assert json.loads(cp.stdout)[0]["kernel"] != json.loads(outs[B])[0]["kernel"]
    assert entry.is_file() and not entry.is_symlink()
    if kind == "frames":
        assert entry.read_bytes() == good  # rebuilt byte for byte
    if kind == "replay":  # and what is stored now replays
        again = cli("show", str(A), "--format", "json", cache=cache)
        assert again.returncode == 0 and again.stdout == outs[A] and not again.stderr
    assert other.is_file()  # the other report's entry is untouched
    assert not list(cache.rglob("*.tmp"))


def test_the_seal_binds_the_key():
    from profiler import cachefile

    blob = cachefile.seal(b"payload", "a.json")
    assert cachefile.unseal(blob, "a.json") == b"payload"
    assert cachefile.unseal(blob, "b.json") is None and cachefile.unseal(blob) is None
    # a key and payload cannot be re-split: the key's length is part of the digest
    assert cachefile.unseal(cachefile.seal(b"bc", "a"), "ab") is None


def test_read_never_blocks_on_a_fifo_and_removes_what_is_not_a_file(tmp_path):
    from profiler import cachefile

    fifo = tmp_path / "x.json"
    os.mkfifo(fifo)
    assert cachefile.read(fifo) is None and not fifo.exists()
    d = tmp_path / "y.json"
    d.mkdir()
    assert cachefile.read(d) is None and not d.exists()
    target = tmp_path / "t.json"
    cachefile.write(target, b"[1]")
    link = tmp_path / "z.json"
    link.symlink_to(target)
    assert cachefile.read(link) is None and not link.is_symlink() and cachefile.read(target) == b"[1]"
    cachefile.write(d, b"[2]")  # a folder in the entry's place is replaced
    assert cachefile.read(d) == b"[2]"
