#!/usr/bin/env python3
"""Fault run: the whowaits console script under damaged inputs, damaged caches, a damaged store, bad SQL, bad
policies and signals, each run judged against the contract (docs/reliability.md).

Method. A work folder gets copies of three committed reports (ext-sdpa-cudnn, v10_warp_specialized,
v04_swizzle_cp_async at b1_h64_s1024_d128_fp16), a cache folder warmed with their entries (frames, summaries,
replayed results) and a store indexed from them. Every run then copies what it damages into a folder of its own,
starts the real console script (``profiler.fastcli.main``: replay cache, supervisor fork, CLI) in a fresh
process under a per-run timeout, and checks the outcome. Runs are drawn from a seeded generator (``--seed``), so
a failure is reproduced by the same seed and run number. Kinds:

  mutant      a report with bytes flipped / zeroed / truncated / appended / emptied: ``show --format json``
              exits 0 with JSON on stdout, or 2 with one ``whowaits: error:`` line
  sidecar     a sidecar not UTF-8, not JSON, not an object, or with a value of the wrong type: ``diff`` exits 2
              with one line naming the sidecar
  cache       an entry of the replay, frames or summaries cache flipped, truncated, replaced by garbage, by another
              key's valid entry (swap), by a link to one, by a FIFO or a directory: the answer is byte for byte
              the undamaged one, exit 0, nothing on stderr, no hang
  store       the DuckDB file or a parquet part flipped, truncated, replaced by garbage / a directory / a FIFO /
              a link, ``index.json`` damaged, rows deleted behind the store's back: ``index`` exits 0 (warnings:
              ``whowaits: warning: repaired: …``) and a query then counts every launch (3)
  sql         a statement that writes, attaches, installs, sets, copies or reads a file outside the store, or
              random SQL-ish text: exit 2 with one line (or 0 for a read), and no file changed outside the store
              (a temporary HOME, another store, an output folder and the store itself are hashed before/after)
  policy      a policy with a byte-order mark, deep nesting, random bytes or wrong types: ``check`` exits 0, 1 or
              2 with at most one error line, and ``--format junit`` always prints well-formed XML
  signal      SIGINT or SIGTERM at a random moment (start-up included) to the whowaits process alone or to its
              whole group, during ``profile`` (tests/fake_ncu, sleeping), ``index --full`` or ``show``: exit
              130/143 (or 0 if it finished) with at most one line, ncu never outlives whowaits, no report or
              temporary file is left, and the store stays usable

Every run ends as ``ok`` or a failure with a reason (exit code, stderr, timeout); the summary JSON has the runs
and failures by kind and the first failures in full. ``--fast`` is a small sample (one or two runs a kind, under
30 s on an idle core) that tests/test_reliability_fault_run.py runs in the suite.

Usage::

    python scripts/fault_run.py --seed 27 --runs 300 --jobs 2 --out reports/fault-run.json
    python scripts/fault_run.py --fast
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
H200 = REPO / "reports" / "h200"
SHAPE = "b1_h64_s1024_d128_fp16"
SUBJECTS = ("ext-sdpa-cudnn", "v10_warp_specialized", "v04_swizzle_cp_async")
FAKE_NCU = REPO / "tests" / "fake_ncu"
ENTRY = "import sys; sys.argv[0] = 'whowaits'; from profiler.fastcli import main; main()"
KINDS = ("mutant", "sidecar", "cache", "store", "sql", "policy", "signal")
#: share of the runs each kind gets (the rest of a --runs budget is spread the same way)
WEIGHTS = {"mutant": 4, "sidecar": 1, "cache": 3, "store": 3, "sql": 3, "policy": 1, "signal": 3}


@dataclass
class Outcome:
    kind: str
    case: str
    ok: bool
    reason: str = ""
    code: int | None = None
    seconds: float = 0.0


@dataclass
class World:
    """What every run starts from (built once): the reports root, a warmed cache, an indexed store, and the
    undamaged answers."""

    work: Path
    root: Path
    cache: Path
    store: Path
    timeout: float
    answers: dict = field(default_factory=dict)

    def report(self, subject: str) -> Path:
        return self.root / "h200" / subject / f"{SHAPE}.ncu-rep"


def whowaits(args: list[str], env: dict, cwd: Path, timeout: float, **kw) -> subprocess.CompletedProcess:
    """The console script in a fresh process; a timeout kills its whole group and says so (rc None)."""
    e = dict(os.environ, PYTHONPATH=str(REPO), **env)
    proc = subprocess.Popen([sys.executable, "-c", ENTRY, *args], cwd=cwd, env=e, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True, **kw)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return subprocess.CompletedProcess(args, None, out, err)  # type: ignore[arg-type]
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def contract(cp: subprocess.CompletedProcess, ok_codes=(0, 2), need_json: bool = False) -> str:
    """"" when ``cp`` keeps the contract: an allowed exit code; exit 2 with exactly one ``whowaits: error:``
    line; no traceback, no internal error; with ``need_json``, exit 0 prints JSON. Else the reason."""
    if cp.returncode is None:
        return "timeout"
    err = cp.stderr.strip().splitlines()
    if "Traceback" in cp.stderr or "internal error" in cp.stderr:
        return f"exit {cp.returncode}: {(err or [''])[-1][:200]}"
    if cp.returncode not in ok_codes:
        return f"exit {cp.returncode}: {' | '.join(err)[:200]}"
    if cp.returncode == 2 and (len(err) != 1 or not err[0].startswith("whowaits: error: ")):
        return f"exit 2 with {len(err)} stderr lines: {' | '.join(err)[:200]}"
    if cp.returncode == 0 and need_json:
        try:
            json.loads(cp.stdout)
        except ValueError:
            return "exit 0 without JSON on stdout"
    return ""


def snapshot(*folders: Path) -> dict[str, str]:
    out = {}
    for top in folders:
        for dirpath, dirs, files in os.walk(top):
            for n in dirs + files:
                p = Path(dirpath) / n
                if p.is_symlink() or not p.is_file():
                    out[str(p)] = "dir" if p.is_dir() else "special"
                else:
                    out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


# --- the world ------------------------------------------------------------------------------------------------

def _source_cache() -> Path:
    env = os.environ.get("WHOWAITS_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "whowaits"


def build_world(work: Path, timeout: float) -> World:
    from profiler.provenance import sha256_file

    root = work / "reports"
    for s in SUBJECTS:
        shutil.copytree(H200 / s, root / "h200" / s, ignore=shutil.ignore_patterns("*.html", "*.csv"))
    cache = work / "cache"
    cache.mkdir()
    src = _source_cache()
    shas = [sha256_file(H200 / s / f"{SHAPE}.ncu-rep") for s in SUBJECTS]
    if src.is_dir():  # a warm start: this machine's entries of these reports (and the SASS texts)
        for f in src.glob("*"):
            if f.is_file() and (f.suffix == ".sass" or any(f.name.startswith(h) for h in shas)):
                shutil.copy2(f, cache / f.name)
        if (src / "summaries").is_dir():
            (cache / "summaries").mkdir()
            for f in (src / "summaries").glob("*.json"):
                if any(f.name.startswith(h) for h in shas):
                    shutil.copy2(f, cache / "summaries" / f.name)
    w = World(work, root, cache, work / "store", timeout)
    env = {"WHOWAITS_CACHE_DIR": str(cache)}
    for s in SUBJECTS:
        cp = whowaits(["show", str(w.report(s)), "--format", "json"], env, work, 600)
        if cp.returncode != 0:
            raise SystemExit(f"setup: show {s} failed: {cp.stderr}")
        w.answers[("show", s)] = cp.stdout
    cp = whowaits(["diff", str(w.report(SUBJECTS[0])), str(w.report(SUBJECTS[1])), "--format", "json"], env, work, 600)
    if cp.returncode != 0:
        raise SystemExit(f"setup: diff failed: {cp.stderr}")
    w.answers["diff"] = cp.stdout
    # the replay entries' names (the key holds the working folder: cache runs run in ``work`` too)
    from profiler.fastcli import command_key  # noqa: PLC0415

    here, saved = os.getcwd(), os.environ.get("WHOWAITS_CACHE_DIR")
    os.chdir(work)
    os.environ["WHOWAITS_CACHE_DIR"] = str(cache)
    try:
        from profiler.compare.cache import _disk_path  # noqa: PLC0415
        from profiler.report import _cache_path  # noqa: PLC0415

        for s in SUBJECTS:
            w.answers[("key", s)] = command_key(["show", str(w.report(s)), "--format", "json"])
            sha = sha256_file(w.report(s))
            w.answers[("frames", s)] = _cache_path(sha).name  # the entries this code reads
            w.answers[("summaries", s)] = _disk_path(sha, None).name
    finally:
        os.chdir(here)
        if saved is None:
            os.environ.pop("WHOWAITS_CACHE_DIR", None)
        else:
            os.environ["WHOWAITS_CACHE_DIR"] = saved
    cp = whowaits(["index", str(root), "--store", str(w.store)], env, work, 600)
    if cp.returncode != 0:
        raise SystemExit(f"setup: index failed: {cp.stderr}")
    return w


def _copy_world(w: World, run: Path, *, cache: bool = False, store: bool = False, reports: bool = False) -> dict:
    out = {}
    if cache:
        shutil.copytree(w.cache, run / "cache", symlinks=True)
        out["cache"] = run / "cache"
    if reports:
        shutil.copytree(w.root, run / "reports", symlinks=True)
        out["reports"] = run / "reports"
    if store:
        shutil.copytree(w.store, run / "store", symlinks=True)
        out["store"] = run / "store"
    return out


# --- damage ---------------------------------------------------------------------------------------------------

def mutate_bytes(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    how = rng.choice(["flip", "flips", "zero", "truncate", "append", "empty", "head"])
    b = bytearray(data)
    n = len(b)
    if how == "flip":
        i = rng.randrange(n)
        b[i] ^= 1 << rng.randrange(8)
    elif how == "flips":
        for _ in range(rng.randint(2, 64)):
            b[rng.randrange(n)] = rng.randrange(256)
    elif how == "zero":
        i = rng.randrange(n)
        b[i:i + rng.randint(1, 4096)] = bytes(min(n - i, rng.randint(1, 4096)))
    elif how == "truncate":
        b = b[: rng.randrange(n)]
    elif how == "append":
        b += bytes(rng.randrange(256) for _ in range(rng.randint(1, 512)))
    elif how == "empty":
        b = bytearray()
    else:  # damage in the first 4 KiB (the container's header)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(min(n, 4096))] = rng.randrange(256)
    return bytes(b), how


def damage_path(p: Path, how: str, rng: random.Random, other: Path | None = None) -> None:
    """Damage whatever is at ``p``: flip, truncate, garbage, swap (``other``'s bytes), link (to ``other``), fifo,
    directory."""
    if how == "flip":
        b = bytearray(p.read_bytes())
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
        p.write_bytes(bytes(b))
        return
    if how == "truncate":
        data = p.read_bytes()
        p.write_bytes(data[: rng.randrange(max(1, len(data)))])
        return
    if how == "garbage":
        p.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randint(0, 300))))
        return
    if how == "swap":
        assert other is not None
        shutil.copyfile(other, p)
        return
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    else:
        p.unlink()
    if how == "link":
        p.symlink_to(other if other is not None else p.with_name("nowhere"))
    elif how == "fifo":
        os.mkfifo(p)
    elif how == "directory":
        p.mkdir()
        (p / "x").write_text("x")


CACHE_DAMAGE = ("flip", "truncate", "garbage", "swap", "link", "fifo", "directory")


# --- the kinds of run -----------------------------------------------------------------------------------------

def run_mutant(w: World, run: Path, rng: random.Random) -> Outcome:
    subject = rng.choice(SUBJECTS)
    rep = run / "h200" / subject / f"{SHAPE}.ncu-rep"
    rep.parent.mkdir(parents=True)
    data, how = mutate_bytes(w.report(subject).read_bytes(), rng)
    rep.write_bytes(data)
    shutil.copy2(w.report(subject).with_suffix(".json"), rep.with_suffix(".json"))
    cp = whowaits(["show", str(rep), "--format", "json"], {"WHOWAITS_CACHE_DIR": str(run / "cache")}, run, w.timeout)
    why = contract(cp, need_json=True)
    return Outcome("mutant", f"{subject}:{how}", not why, why, cp.returncode)


SIDECAR_VALUES = [("ladder_order", "x"), ("ladder_order", [1]), ("problem_flops", "abc"), ("title", 5),
                  ("ncu_command", [1, 2]), ("git_dirty", "yes"), ("launch_count", 1.5), ("nvtx_include", "a"),
                  ("problem_flops", True), ("time", {"a": 1})]


def run_sidecar(w: World, run: Path, rng: random.Random) -> Outcome:
    paths = _copy_world(w, run, reports=True)
    side = paths["reports"] / "h200" / SUBJECTS[1] / f"{SHAPE}.json"
    how = rng.choice(["not_utf8", "not_json", "not_object", "value", "value", "directory"])
    if how == "not_utf8":
        side.write_bytes(b"\xff\xfe" + side.read_bytes())
    elif how == "not_json":
        side.write_text(side.read_text()[: rng.randrange(10, 200)])
    elif how == "not_object":
        side.write_text("[1, 2, 3]")
    elif how == "directory":
        side.unlink()
        side.mkdir()
    else:
        key, value = rng.choice(SIDECAR_VALUES)
        how = f"{key}={json.dumps(value)}"
        side.write_text(json.dumps(json.loads(side.read_text()) | {key: value}))
    h200 = paths["reports"] / "h200"
    cp = whowaits(["diff", SUBJECTS[0], SUBJECTS[1], "--reports", str(h200), "--format", "json"],
                  {"WHOWAITS_CACHE_DIR": str(w.cache), "WHOWAITS_NO_RESULT_CACHE": "1"}, run, w.timeout)
    why = contract(cp, ok_codes=(2,))
    if not why and str(side) not in cp.stderr:
        why = f"the error does not name the sidecar: {cp.stderr.strip()[:200]}"
    return Outcome("sidecar", how, not why, why, cp.returncode)


def run_cache(w: World, run: Path, rng: random.Random) -> Outcome:
    paths = _copy_world(w, run, cache=True)
    cache = paths["cache"]
    layer = rng.choice(["replay", "frames", "summaries"])
    how = rng.choice(CACHE_DAMAGE)
    a, b = rng.sample(SUBJECTS[:2], 2)
    if layer == "summaries":
        args, want = ["diff", str(w.report(SUBJECTS[0])), str(w.report(SUBJECTS[1])), "--format", "json"], w.answers["diff"]
    else:
        args, want = ["show", str(w.report(a)), "--format", "json"], w.answers[("show", a)]
    env = {"WHOWAITS_CACHE_DIR": str(cache)}
    if layer == "replay":
        mine = cache / "results" / f"{w.answers[('key', a)]}.json"
        theirs = cache / "results" / f"{w.answers[('key', b)]}.json"
    else:
        shutil.rmtree(cache / "results", ignore_errors=True)  # else the replay answers first
        folder = cache / "summaries" if layer == "summaries" else cache
        mine, theirs = folder / w.answers[(layer, a)], folder / w.answers[(layer, b)]
    if not mine.exists() or not theirs.exists():
        return Outcome("cache", f"{layer}:{how}", False, "setup: no entry to damage")
    damage_path(mine, how, rng, theirs)
    cp = whowaits(args, env, w.work, w.timeout)  # the folder the replay keys were made in
    why = contract(cp, ok_codes=(0,))
    if not why and cp.stderr.strip():
        why = f"stderr: {cp.stderr.strip()[:200]}"
    if not why and cp.stdout != want:
        why = "a different answer than the undamaged cache's"
    if not why and not (mine.is_file() and not mine.is_symlink()):
        why = "the entry was not rebuilt"
    if not why:  # and what is stored now is sound: the same answer again
        again = whowaits(args, env, w.work, w.timeout)
        if again.returncode != 0 or again.stdout != want or again.stderr.strip():
            why = f"second run: exit {again.returncode}, {again.stderr.strip()[:200]}"
    return Outcome("cache", f"{layer}:{how}", not why, why, cp.returncode)


def _count(w: World, store: Path, run: Path, env: dict) -> tuple[int | None, str]:
    cp = whowaits(["query", "SELECT count(*) AS n FROM launches", "--store", str(store), "--format", "json"], env,
                  run, w.timeout)
    if cp.returncode != 0:
        return None, f"query: exit {cp.returncode}: {cp.stderr.strip()[:200]}"
    return json.loads(cp.stdout)[0]["n"], cp.stderr


def run_store(w: World, run: Path, rng: random.Random) -> Outcome:
    paths = _copy_world(w, run, store=True)
    store = paths["store"]
    target = rng.choice(["db", "part", "state", "rows", "wal"])
    how = rng.choice(CACHE_DAMAGE)
    parts = sorted(store.glob("launches/*/*/*/part-0.parquet"))
    if target == "db":
        damage_path(store / "launches.duckdb", how, rng, parts[0])
    elif target == "part":
        p = rng.choice(parts)
        damage_path(p, how, rng, rng.choice([q for q in parts if q != p]))
    elif target == "state":
        damage_path(store / "index.json", how, rng, parts[0])
    elif target == "wal":
        how = "garbage"
        (store / "launches.duckdb.wal").write_bytes(bytes(rng.randrange(256) for _ in range(rng.randint(1, 300))))
    else:
        import duckdb  # noqa: PLC0415

        how = "deleted"
        con = duckdb.connect(str(store / "launches.duckdb"))
        con.execute("DELETE FROM launches WHERE subject = ?", [rng.choice(SUBJECTS)])
        con.close()
    env = {"WHOWAITS_CACHE_DIR": str(w.cache)}
    first = rng.choice(["query", "index"])
    if first == "query":  # a query first: it may rebuild from the parts, dropping damaged ones (said)
        n, err = _count(w, store, run, env)
        if n is None and "whowaits: error:" not in err:
            return Outcome("store", f"{target}:{how}:query", False, err)
    cp = whowaits(["index", str(w.root), "--store", str(store)], env, run, w.timeout)
    why = contract(cp, ok_codes=(0,))
    if not why and any(not ln.startswith("whowaits: warning: repaired: ") for ln in cp.stderr.strip().splitlines()):
        why = f"stderr: {cp.stderr.strip()[:300]}"
    if not why:
        n, err = _count(w, store, run, env)
        if n != len(SUBJECTS):
            why = f"after index: {n} launches, not {len(SUBJECTS)} ({err.strip()[:200]})"
    return Outcome("store", f"{target}:{how}:{first}", not why, why, cp.returncode)


SQL_REFUSED = [
    "COPY launches TO '{out}/x.csv'", "COPY (SELECT 1 AS x) TO '{store}/index.json'", "EXPORT DATABASE '{out}/exp'",
    "IMPORT DATABASE '{out}'", "ATTACH '{other}/launches.duckdb' AS v (READ_WRITE)", "DETACH launches",
    "INSTALL httpfs", "LOAD httpfs", "SET enable_external_access = true", "SET threads = 1", "RESET ALL",
    "PRAGMA enable_profiling", "CREATE TABLE t AS SELECT 1", "INSERT INTO launches SELECT * FROM launches",
    "UPDATE launches SET kernel = 'x'", "DELETE FROM launches WHERE true", "ALTER TABLE launches RENAME TO l",
    "DROP TABLE launches", "CHECKPOINT", "VACUUM", "BEGIN", "USE memory", "CALL pragma_version()",
    "SELECT 1; DROP TABLE launches", "CREATE MACRO m(x) AS x", "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('/etc/hostname')", "SELECT * FROM read_blob('{home}/secret')",
    "SELECT * FROM glob('{home}/*')", "SELECT * FROM read_parquet('{other}/launches/**/*.parquet')",
    "SELECT * FROM read_json_auto('{other}/index.json')", "SELECT * FROM '{home}/secret'",
    "FROM read_csv_auto('/etc/passwd')", " ", ";", ";;", "-- a comment", "/* */",
]
SQL_READS = ["SELECT subject, top_waiter FROM launches", "FROM launches SELECT count(*)", "DESCRIBE launches",
             "SUMMARIZE launches", "EXPLAIN SELECT * FROM launches", "SELECT 'COPY x TO y' AS s",
             "WITH a AS (SELECT * FROM launches) SELECT max(duration_ns) FROM a"]
SQL_TOKENS = ["SELECT", "FROM", "launches", "WHERE", "(", ")", ",", "'", "*", "COPY", "TO", "ATTACH", ";",
              "read_csv", "'/etc/passwd'", "1", "--", "/*", "subject", "=", "UNION", "SET", "glob", "PIVOT"]


def run_sql(w: World, run: Path, rng: random.Random) -> Outcome:
    paths = _copy_world(w, run, store=True)
    store = paths["store"]
    home, out, other = run / "home", run / "out", run / "other"
    home.mkdir()
    out.mkdir()
    shutil.copytree(w.store, other)
    (home / "secret").write_text("secret")
    pick = rng.random()
    if pick < 0.6:
        sql, case = rng.choice(SQL_REFUSED), "refused"
    elif pick < 0.8:
        sql, case = rng.choice(SQL_READS), "read"
    else:
        sql, case = " ".join(rng.choice(SQL_TOKENS) for _ in range(rng.randint(1, 12))), "random"
    sql = sql.format(out=out, store=store, other=other, home=home)
    before = snapshot(home, out, other, store)
    env = {"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), "WHOWAITS_CACHE_DIR": str(w.cache)}
    cp = whowaits(["query", sql, "--store", str(store), "--format", "json"], env, run, w.timeout)
    why = contract(cp, ok_codes=(0, 2) if case != "refused" else (2,), need_json=True)
    if not why and case == "read" and cp.returncode != 0:
        why = f"a read was refused: {cp.stderr.strip()[:200]}"
    if not why:
        after = snapshot(home, out, other, store)
        if after != before:
            changed = sorted(set(after.items()) ^ set(before.items()))[:3]
            why = f"files changed: {changed}"
    return Outcome("sql", f"{case}:{sql[:60]}", not why, why, cp.returncode)


def run_policy(w: World, run: Path, rng: random.Random) -> Outcome:
    pol = run / "whowaits.toml"
    good = (f'[check]\nreports = "{w.root / "h200"}"\n[[check.rule]]\nversion = "{SUBJECTS[1]}"\nshape = "{SHAPE}"\n'
            'no_missing = true\nmax_share = { "wait" = 0.9 }\n')
    how = rng.choice(["bom", "deep", "bytes", "types", "control", "missing"])
    if how == "bom":
        pol.write_bytes(b"\xef\xbb\xbf" + good.encode())
    elif how == "deep":
        d = rng.choice([500, 2000, 50000])
        pol.write_text("[check]\nalpha = " + "[" * d + "]" * d + "\n")
    elif how == "bytes":
        b = bytearray(good.encode())
        for _ in range(rng.randint(1, 10)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        pol.write_bytes(bytes(b))
    elif how == "types":
        key, value = rng.choice([("alpha", '"x"'), ("no_missing", "3"), ("max_share", "[1]"), ("shape", "5"),
                                 ("version", "{ a = 1 }"), ("reports", "true")])
        pol.write_text(good.replace("no_missing = true\n", f"no_missing = true\n{key} = {value}\n")
                       if key not in ("alpha", "reports") else good.replace("[check]\n", f"[check]\n{key} = {value}\n", 1)
                       .replace(f'reports = "{w.root / "h200"}"\n', "" if key == "reports" else f'reports = "{w.root / "h200"}"\n'))
    elif how == "control":
        pol.write_text(good.replace(f'version = "{SUBJECTS[1]}"', f'version = "{SUBJECTS[1]}\\u0001\\u001b"'))
    fmt = rng.choice(["table", "junit", "json"])
    cp = whowaits(["check", "--policy", str(pol), "--format", fmt],
                  {"WHOWAITS_CACHE_DIR": str(w.cache), "COLUMNS": "200"}, run, w.timeout)
    why = contract(cp, ok_codes=(0, 1, 2))
    if not why and fmt == "junit":
        try:
            ET.fromstring(cp.stdout)
        except ET.ParseError as err:
            why = f"junit not well-formed: {err}"
    return Outcome("policy", f"{how}:{fmt}", not why, why, cp.returncode)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except (OSError, ProcessLookupError):
        return False


def run_signal(w: World, run: Path, rng: random.Random) -> Outcome:
    what = rng.choice(["profile", "profile", "index", "show"])
    sig = rng.choice([signal.SIGINT, signal.SIGTERM])
    group = rng.random() < 0.4
    delay = rng.choice([0.0, 0.05, 0.2, rng.uniform(0.3, 3.0)])
    env = {"WHOWAITS_CACHE_DIR": str(w.cache)}
    timeline = run / "timeline"
    store = None
    if what == "profile":
        env.update(PATH=f"{FAKE_NCU}{os.pathsep}{os.environ.get('PATH', '')}", FAKE_NCU_MODE="ok",
                   FAKE_NCU_REPORT=str(w.report(SUBJECTS[0])), FAKE_NCU_SLEEP="30", FAKE_NCU_TIMELINE=str(timeline))
        args = ["profile", "--cmd", "python3 -c pass", "--kernel", "k", "--name", "ext-x", "--out", str(run / "out")]
    elif what == "index":
        store = _copy_world(w, run, store=True)["store"]
        args = ["index", str(w.root), "--store", str(store), "--full"]
    else:
        env["WHOWAITS_CACHE_DIR"] = str(run / "cache")  # cold: it is still parsing when the signal comes
        args = ["show", str(w.report(rng.choice(SUBJECTS))), "--format", "json"]
    e = dict(os.environ, PYTHONPATH=str(REPO), **env)
    e.pop("WHOWAITS_NCU", None)
    proc = subprocess.Popen([sys.executable, "-c", ENTRY, *args], cwd=run, env=e, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    case = f"{what}:{signal.Signals(sig).name}:{'group' if group else 'alone'}:{delay:.2f}s"
    time.sleep(delay)
    ncu = None
    if timeline.exists():
        starts = [ln.split() for ln in timeline.read_text().splitlines() if ln.startswith("start")]
        ncu = int(starts[0][2]) if starts else None
    try:
        if group:
            os.killpg(proc.pid, sig)
        else:
            os.kill(proc.pid, sig)
    except ProcessLookupError:
        pass
    try:
        out, err = proc.communicate(timeout=w.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return Outcome("signal", case, False, "timeout after the signal")
    if ncu is None and timeline.exists():
        starts = [ln.split() for ln in timeline.read_text().splitlines() if ln.startswith("start")]
        ncu = int(starts[0][2]) if starts else None
    lines = err.strip().splitlines()
    why = ""
    if proc.returncode in (-sig, 1) and "profiler" not in err and ncu is None and \
            (proc.returncode == -sig or "Fatal Python error: init_import_site" in err):
        # killed before any of whowaits' code ran (the interpreter was still starting): Python's own handling,
        # nothing started, nothing written; counted apart in the summary ("-2"/"-15")
        case += ":before-start"
    elif proc.returncode not in (0, 128 + sig):
        why = f"exit {proc.returncode}: {' | '.join(lines)[:200]}"
    elif "Traceback" in err or "Exception ignored" in err or len(lines) > 1:
        why = f"stderr: {' | '.join(lines)[:300]}"
    elif proc.returncode == 128 + sig and lines and lines[0] not in ("whowaits: interrupted", "whowaits: terminated"):
        why = f"stderr: {lines[0][:200]}"
    elif what == "profile" and proc.returncode == 0:
        why = "profile completed after the signal"
    if not why and ncu is not None:
        for _ in range(20):
            if not _alive(ncu):
                break
            time.sleep(0.1)
        else:
            why = "ncu outlived whowaits"
            try:
                os.kill(ncu, signal.SIGKILL)
            except ProcessLookupError:
                pass
    if not why and what == "profile" and (run / "out").exists():
        left = [str(p) for p in (run / "out").rglob("*") if p.is_file()]
        if left:
            why = f"left behind: {left[:3]}"
    if not why and store is not None:
        cp = whowaits(["index", str(w.root), "--store", str(store)], env, run, w.timeout)
        n, qerr = _count(w, store, run, env)
        if cp.returncode != 0 or n != len(SUBJECTS):
            why = f"store after the signal: index exit {cp.returncode} {cp.stderr.strip()[:150]}; count {n} {qerr[:100]}"
    if not why and any(p.name.endswith(".tmp") for p in run.rglob("*")):
        why = "a temporary file was left behind"
    return Outcome("signal", case, not why, why, proc.returncode)


RUNNERS = {"mutant": run_mutant, "sidecar": run_sidecar, "cache": run_cache, "store": run_store, "sql": run_sql,
           "policy": run_policy, "signal": run_signal}


def plan(runs: int, rng: random.Random, fast: bool, only: list[str] | None = None) -> list[str]:
    """The kind of each run, shuffled: ``runs`` split by :data:`WEIGHTS` (over ``only`` when given)."""
    if fast:
        kinds = ["mutant", "sidecar", "cache", "cache", "store", "sql", "sql", "policy", "signal"]
        return [k for k in kinds if not only or k in only]
    weights = {k: v for k, v in WEIGHTS.items() if not only or k in only}
    total = sum(weights.values())
    kinds = [k for k in weights for _ in range(max(1, round(runs * weights[k] / total)))]
    rng.shuffle(kinds)
    return kinds[:runs]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds a run may take (then it is a failure)")
    ap.add_argument("--fast", action="store_true", help="one or two runs of each kind (the test suite's sample)")
    ap.add_argument("--only", choices=KINDS, action="append", help="only these kinds")
    ap.add_argument("--out", type=Path, help="summary JSON (default: stdout only)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="whowaits-fault-"))
    try:
        w = build_world(work, args.timeout)
        setup_s = time.perf_counter() - t0
        kinds = plan(args.runs, rng, args.fast, args.only)
        seeds = [rng.randrange(2**32) for _ in kinds]
        lock = threading.Lock()
        results: list[tuple[int, Outcome]] = []

        def one(i: int) -> None:
            run = work / f"run{i:05d}"
            run.mkdir()
            t = time.perf_counter()
            try:
                o = RUNNERS[kinds[i]](w, run, random.Random(seeds[i]))
            except Exception as err:  # noqa: BLE001 - a failure of the harness is a failure of the run
                o = Outcome(kinds[i], "harness", False, f"{type(err).__name__}: {err}")
            o.seconds = round(time.perf_counter() - t, 2)
            shutil.rmtree(run, ignore_errors=True)
            with lock:
                results.append((i, o))
                if not o.ok:
                    print(f"FAIL run {i} [{o.kind}] {o.case}: {o.reason}", file=sys.stderr, flush=True)

        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            list(pool.map(one, range(len(kinds))))
        results.sort(key=lambda r: r[0])
        by_kind: dict[str, dict] = {}
        for _, o in results:
            k = by_kind.setdefault(o.kind, {"runs": 0, "failures": 0, "exit_codes": {}, "cases": {}})
            k["runs"] += 1
            k["failures"] += 0 if o.ok else 1
            code = "timeout" if o.code is None and not o.ok and o.reason.startswith("timeout") else str(o.code)
            k["exit_codes"][code] = k["exit_codes"].get(code, 0) + 1
            parts = o.case.split(":")
            case = (":".join(parts[:2]) if o.kind == "cache" else
                    f"{parts[0]}:{parts[2]}" + (":before-start" if parts[-1] == "before-start" else "")
                    if o.kind == "signal" and len(parts) > 2 else parts[0])
            k["cases"][case] = k["cases"].get(case, 0) + 1
        summary = {
            "command": "python scripts/fault_run.py " + " ".join(sys.argv[1:] if argv is None else argv),
            "seed": args.seed, "fast": args.fast, "jobs": args.jobs, "timeout_s": args.timeout,
            "runs": len(results), "failures": sum(1 for _, o in results if not o.ok),
            "by_kind": dict(sorted(by_kind.items())),
            "failed_runs": [{"run": i, "kind": o.kind, "case": o.case, "reason": o.reason, "exit": o.code}
                            for i, o in results if not o.ok][:50],
            "slowest_run_s": max((o.seconds for _, o in results), default=0.0),
            "setup_s": round(setup_s, 1), "wall_s": round(time.perf_counter() - t0, 1),
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(summary, indent=1)
    if args.out:
        from profiler.io import write_atomic  # noqa: PLC0415

        write_atomic(args.out, text + "\n")
    print(text)
    return 1 if summary["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
