"""Bad input never crashes whowaits, as a test: mutated real reports, damaged cache entries, odd paths
and bad arguments through the CLI (in-process, :mod:`clirun`), with one contract for every case:

* exit 0 with a well-formed answer, or exit 2 with exactly one stderr line ``whowaits: error: …``
  and nothing on stdout (never a traceback, never an ``internal error``);
* nothing written on failure: no ``--html`` file, no temporary file left in the cache folder;
* the next good run is correct: after the mutants (and their cache entries), the good reports
  give exactly the answer they gave before.

The mutants are a fixed function of :data:`SEED`: bit flips, zeroed or random runs, truncations,
duplicated runs and splices of real committed reports, mostly the small public A10G report without
warp sampling (tests/fixtures/public/, the case ``report --html`` crashed on), some of the H200
ladder's. ``$WHOWAITS_FUZZ_N`` scales the count (default :data:`N_SMALL` + :data:`N_LARGE`,
bounded at ~10 s on the 2-core machine; a longer local run: ``WHOWAITS_FUZZ_N=2000``).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import time
from pathlib import Path

import pytest

from clirun import whowaits

from profiler import settings

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = ROOT / "tests" / "fixtures" / "public" / "esmm-a10g-e22c00d.ncu-rep"
SHAPE = "b1_h64_s1024_d128_fp16"
V03 = ROOT / "reports" / "h200" / "v03_tensor_cores" / f"{SHAPE}.ncu-rep"
V06 = ROOT / "reports" / "h200" / "v06_softmax_fusion" / f"{SHAPE}.ncu-rep"

SEED = 20261201
N_SMALL = 200  # mutants of the public A10G report (~190 kB: ~0.04 s CPU each)
N_LARGE = 4    # mutants of v03 / v06 (~1 MB: ~0.6 s CPU each when they parse)


def _count() -> tuple[int, int]:
    n = settings.text("WHOWAITS_FUZZ_N")
    if not n:
        return N_SMALL, N_LARGE
    total = max(int(n), 10)
    return total - total // 10, total // 10


def mutate(data: bytes, rng: random.Random, donor: bytes) -> tuple[str, bytes]:
    """One mutant of ``data`` and the name of the operator that made it."""
    b = bytearray(data)
    op = rng.choice(["flip", "flip", "flip", "zero", "random", "truncate", "duplicate", "splice",
                     "length"])
    if op == "flip":
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif op == "zero":
        i, n = rng.randrange(len(b)), rng.randint(1, 256)
        b[i:i + n] = bytes(len(b[i:i + n]))
    elif op == "random":
        i, n = rng.randrange(len(b)), rng.randint(1, 64)
        b[i:i + n] = bytes(rng.randrange(256) for _ in range(len(b[i:i + n])))
    elif op == "truncate":
        b = b[:rng.randrange(len(b))]
    elif op == "duplicate":
        i, n = rng.randrange(len(b)), rng.randint(1, 512)
        b[i:i] = b[i:i + n]
    elif op == "splice":
        i, j, n = rng.randrange(len(b)), rng.randrange(len(donor)), rng.randint(16, 4096)
        b[i:i + n] = donor[j:j + n]
    else:  # "length": rewrite the length word of the first block (the container's framing)
        if len(b) >= 8:
            b[4:8] = struct.pack("<I", rng.choice([0, 1, 0xFFFFFFFF, len(b), rng.randrange(1 << 32)]))
    return op, bytes(b)


def check_contract(proc, what: str) -> None:
    """Exit 0, or exit 2 with one ``whowaits: error:`` line and an empty stdout."""
    assert "Traceback" not in proc.stderr, (what, proc.stderr[-3000:])
    if proc.returncode == 0:
        return
    assert proc.returncode == 2, (what, proc.returncode, proc.stderr[-3000:])
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("whowaits: error: "), (what, proc.stderr[-3000:])
    assert proc.stdout == "", (what, proc.stdout[-500:])


def temp_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.endswith(".tmp")] if folder.exists() else []


def show_json(path, env) -> list:
    proc = whowaits("show", path, "--format", "json", env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _mutants(n_small: int, n_large: int):
    """(index, operator, source path, mutant bytes) for the whole run, a function of SEED alone."""
    rng = random.Random(SEED)
    sources = [PUBLIC] * n_small + [src for src in (V03, V06) for _ in range(n_large // 2)]
    data = {p: p.read_bytes() for p in set(sources)}
    donor = V06.read_bytes()[:200_000]
    for i, src in enumerate(sources):
        op, blob = mutate(data[src], rng, donor)
        yield i, op, src, blob


def drive(start: int, n_small: int, n_large: int, folder: str) -> None:
    """The fuzz loop, run in a child interpreter by the test below (a native crash of ncu_report
    must not take pytest down): mutants from ``start`` on through the in-process CLI, each checked
    against the contract; prints ``start <i>`` before each and ``done <i> <op> <rc>`` after."""
    tmp = Path(folder)
    env = {"WHOWAITS_CACHE_DIR": str(tmp / "cache")}
    for i, op, src, blob in _mutants(n_small, n_large):
        if i < start:
            continue
        path = tmp / f"m{i:04d}.ncu-rep"
        path.write_bytes(blob)
        print(f"start {i}", flush=True)
        if i % 200 == 7:  # once through `migration --html` beside a good report (~1.5 s CPU)
            out = tmp / f"m{i:04d}.html"
            proc = whowaits("migration", V03, path, "--kernel", ".", "--html", out, "--format", "json", env=env)
            check_contract(proc, f"migration --html, mutant {i} ({op} of {src.name})")
            assert out.exists() == (proc.returncode == 0), (i, op)
            out.unlink(missing_ok=True)
        elif i % 40 == 23:  # and through `diff`
            proc = whowaits("diff", PUBLIC, path, "--format", "json", env=env)
            check_contract(proc, f"diff, mutant {i} ({op} of {src.name})")
        else:
            proc = whowaits("show", path, "--format", "json", env=env)
            check_contract(proc, f"show, mutant {i} ({op} of {src.name})")
            if proc.returncode == 0:
                assert isinstance(json.loads(proc.stdout), list)
        path.unlink()
        print(f"done {i} {op} {proc.returncode}", flush=True)


def test_mutated_reports_keep_the_contract(tmp_path):
    import subprocess
    import sys

    cache = tmp_path / "cache"
    env = {"WHOWAITS_CACHE_DIR": str(cache)}
    good = {p: show_json(p, env) for p in (PUBLIC, V03)}
    n_small, n_large = _count()
    blobs = {i: (op, src, blob) for i, op, src, blob in _mutants(n_small, n_large)}
    outcomes: dict[str, int] = {}
    crashed = []
    start, t0 = 0, time.perf_counter()
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import test_fuzz; "
            "test_fuzz.drive(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])")
    while start < len(blobs):
        proc = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent), str(start), str(n_small),
                               str(n_large), str(tmp_path)], capture_output=True, text=True, timeout=600,
                              env=dict(os.environ, WHOWAITS_CACHE_DIR=str(cache)))
        last = start
        for line in proc.stdout.splitlines():
            word, *rest = line.split()
            if word == "start":
                last = int(rest[0])
            elif word == "done":
                key = f"{rest[1]}:{rest[2]}"
                outcomes[key] = outcomes.get(key, 0) + 1
        # whatever reached the driver's file descriptor 2 past clirun's capture (ncu_report's own
        # log lines, a worker's traceback) broke the one-line contract
        leaked = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        if proc.returncode == 0:
            assert leaked == [], leaked[:20]
            break
        assert proc.returncode < 0, proc.stderr[-4000:]
        assert leaked == [], leaked[:20]  # a contract failure: its assertion is above
        # ncu_report crashed the driver on mutant `last`: through the console script, whose
        # supervisor (profiler.cli._supervised) turns that into one line and exit 2
        op, src, blob = blobs[last]
        crashed.append((last, op, -proc.returncode))
        (tmp_path / f"m{last:04d}.ncu-rep").unlink(missing_ok=True)  # the driver's copy
        assert not (tmp_path / f"m{last:04d}.html").exists()
        path = tmp_path / f"crash{last:04d}.ncu-rep"
        path.write_bytes(blob)
        exe = Path(sys.executable).parent / "whowaits"
        cp = subprocess.run([str(exe), "show", str(path)], capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, WHOWAITS_CACHE_DIR=str(cache)))
        check_contract(cp, f"native crash, mutant {last} ({op} of {src.name})")
        assert cp.returncode == 2 and "ncu_report crashed reading it" in cp.stderr, cp.stderr
        outcomes[f"{op}:crash"] = outcomes.get(f"{op}:crash", 0) + 1
        path.unlink()
        start = last + 1
    elapsed = time.perf_counter() - t0
    assert sum(outcomes.values()) == len(blobs), outcomes
    assert temp_files(cache) == []
    assert {k.split(":")[1] for k in outcomes} <= {"0", "2", "crash"}
    assert sum(v for k, v in outcomes.items() if not k.endswith(":0")) >= len(blobs) // 4, outcomes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]  # no mutant, no HTML left
    # the next good runs are correct, through the cache the mutants shared
    for p, want in good.items():
        assert show_json(p, env) == want
    print(f"{len(blobs)} mutants in {elapsed:.1f} s: {dict(sorted(outcomes.items()))}; "
          f"native crashes (mutant, operator, signal): {crashed}")


def test_report_html_without_warp_sampling(tmp_path):
    """The public A10G report has no stall sampling (stall counts null): `report --html` and
    `migration --html` render it (they crashed in `_version_section`)."""
    out = tmp_path / "r.html"
    proc = whowaits("report", "--html", out, "v01_naive", PUBLIC, "--kernel", ".", "--kernel", r"multi\(")
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > 100_000
    s = show_json(PUBLIC, None)
    assert len(s) == 4 and all(v is None for v in s[0]["stall_samples"].values())
    assert any(m["section"] == "WarpStateStats" for m in s[0]["missing"])


# --- damaged cache entries ----------------------------------------------------------------------


def _flip(path: Path, where: float) -> None:
    b = bytearray(path.read_bytes())
    i = int(len(b) * where)
    b[i] ^= 0x01
    path.write_bytes(bytes(b))


@pytest.mark.parametrize("where", [0.01, 0.5, 0.999])
def test_a_damaged_frames_entry_is_rebuilt(tmp_path, where):
    env = {"WHOWAITS_CACHE_DIR": str(tmp_path)}
    want = show_json(PUBLIC, env)
    (entry,) = tmp_path.glob("*.frames")
    good_bytes = entry.read_bytes()
    _flip(entry, where)
    assert show_json(PUBLIC, env) == want  # and not a traceback, nor a wrong answer
    assert entry.read_bytes() == good_bytes  # rebuilt, byte for byte


def _sealed(payload: bytes, key: str) -> bytes:
    """``payload`` sealed for the entry's own name: it passes the seal, so only decoding can catch it."""
    from profiler import cachefile

    return cachefile.seal(payload, key)


@pytest.mark.parametrize("damage", ["digit", "list_of_ints", "list_of_empty", "not_json", "unsealed"])
def test_a_damaged_summary_entry_is_rebuilt(tmp_path, damage):
    from profiler.compare import cache

    from conftest import seeded_cache

    env = {"WHOWAITS_CACHE_DIR": str(seeded_cache(tmp_path, V03))}
    args = ("diff", PUBLIC, V03, "--kernel", "multi3", "--kernel", ".", "--format", "json")
    cache.clear_memo()  # so that both entries are written to this test's folder
    first = whowaits(*args, env=env)
    assert first.returncode == 0, first.stderr
    entries = sorted((tmp_path / "summaries").glob("*.json"))
    assert len(entries) == 2
    for e in entries:
        if damage == "digit":  # still valid JSON, still the right shape: only the seal can tell
            b = bytearray(e.read_bytes())
            i = next(i for i in range(len(b) - 1, 0, -1) if chr(b[i]).isdigit() and b[i] != ord("9"))
            b[i] += 1
            e.write_bytes(bytes(b))
        elif damage == "list_of_ints":
            e.write_bytes(_sealed(b"[1, 2]", e.name))
        elif damage == "list_of_empty":
            e.write_bytes(_sealed(b"[{}]", e.name))
        elif damage == "not_json":
            e.write_bytes(_sealed(b"\xff{not json", e.name))
        else:
            e.write_text(json.dumps(json.loads(first.stdout)))
    cache.clear_memo()
    again = whowaits(*args, env=env)
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout


# --- odd paths, bad arguments -------------------------------------------------------------------


def test_odd_paths_are_one_line_errors(tmp_path):
    cases = {}
    d = tmp_path / "dir.ncu-rep"
    d.mkdir()
    cases["a folder named .ncu-rep"] = (d, "is a directory")
    fifo = tmp_path / "fifo.ncu-rep"
    os.mkfifo(fifo)
    cases["a FIFO"] = (fifo, "not a regular file")
    zero = tmp_path / "zero.ncu-rep"
    zero.symlink_to("/dev/zero")
    cases["a link to /dev/zero"] = (zero, "not a regular file")
    loop = tmp_path / "loop.ncu-rep"
    loop.symlink_to(loop)
    cases["a symlink loop"] = (loop, "cannot read")
    empty = tmp_path / "empty.ncu-rep"
    empty.write_bytes(b"")
    cases["an empty file"] = (empty, "not an Nsight Compute report")
    text = tmp_path / "text.ncu-rep"
    text.write_text("hello\n")
    cases["a text file"] = (text, "not an Nsight Compute report")
    if os.geteuid() != 0:  # root reads anything
        locked = tmp_path / "locked.ncu-rep"
        shutil.copy(PUBLIC, locked)
        locked.chmod(0)
        cases["an unreadable file"] = (locked, "cannot read")
    for what, (path, needle) in cases.items():
        for args in (("show", path), ("diff", PUBLIC, path), ("migration", V03, path)):
            proc = whowaits(*args)
            check_contract(proc, f"{what}: {args[0]}")
            assert proc.returncode == 2 and needle in proc.stderr, (what, args[0], proc.stderr)


def test_a_folder_named_like_a_report_in_a_reports_tree(tmp_path):
    (tmp_path / "v01_a" / f"{SHAPE}.ncu-rep").mkdir(parents=True)  # not a report: ignored
    (tmp_path / "v02_b").mkdir()
    shutil.copy(V03, tmp_path / "v02_b" / f"{SHAPE}.ncu-rep")
    proc = whowaits("migration", "--reports", tmp_path, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["versions"] == ["v02_b"]


@pytest.mark.parametrize("args,needle", [
    (("show", V03, "--top", "-1"), "--top"),
    (("show", V03, "--format", "xml"), "--format"),
    (("show", V03, "--no-such-flag"), "--no-such-flag"),
    (("no-such-command",), "no-such-command"),
])
def test_bad_arguments_are_one_line(args, needle):
    proc = whowaits(*args)
    check_contract(proc, " ".join(map(str, args)))
    assert proc.returncode == 2 and needle in proc.stderr


def test_bad_html_targets_write_nothing(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    long_name = tmp_path / ("x" * 256 + ".html")
    for target, needle in ((folder, "is a folder"), (long_name, "too long"),
                           (tmp_path / "none" / "r.html", "does not exist")):
        for cmd in (("migration", "v03", "v04", "--html", target, "--force"),
                    ("report", "v03", "v04", "--html", target, "--force")):
            proc = whowaits(*cmd)
            check_contract(proc, f"{cmd[0]} --html {target.name[:20]}")
            assert proc.returncode == 2 and needle in proc.stderr
    assert list(folder.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_one_report_named_twice_is_two_labelled_columns():
    """`migration v01_naive v01_naive` raised on a non-unique index; now each gets its own label."""
    for args in (("v01_naive", "v01_naive"), ("v01", "v01_naive")):
        proc = whowaits("migration", *args, "--format", "json")
        assert proc.returncode == 0, proc.stderr
        versions = json.loads(proc.stdout)["versions"]
        assert len(versions) == 2 and len(set(versions)) == 2, versions


def test_columns_that_are_not_a_number_are_ignored():
    proc = whowaits("show", V03, "--top", "2", env={"COLUMNS": "abc"})
    assert proc.returncode == 0, proc.stderr
    assert "Stall breakdown" in proc.stdout
