"""Backfill the provenance fields added in the second wave into committed sidecars.

``whowaits profile`` now writes ``build_hash``, ``problem_flops``, ``ladder_order``, ``title``, ``change`` and
``expected_bottleneck`` into every sidecar (:func:`profiler.collect.subject_provenance`). Reports profiled
before that lack them. This script computes them for each sidecar from the code **of the commit the report
was profiled at** (the sidecar's ``git_commit``): it extracts ``kernels/`` and ``profiler/`` of that commit
with ``git archive`` into a temporary folder and runs that commit's own ``kernels.build`` key function and
``version.toml`` files there (nvcc must be on PATH: the key covers ``nvcc --version``). So a backfilled
``build_hash`` is the key the profiled build had, and a later header edit shows up as a mismatch
(``tests/test_provenance.py``).

Each backfilled sidecar's ``note`` says so. Only the sidecar is rewritten (atomically); the report and its
``report_sha256`` stay as they are. Sidecars that already have a ``build_hash`` are left alone unless
``--force``.

    python scripts/backfill_provenance.py [--reports reports/h200] [--force] [--dry-run]
    python scripts/backfill_provenance.py --restamp [--dry-run]

``--restamp`` instead takes the *current* build key into the sidecars of ladder reports whose key changed
while their SASS did not (:mod:`profiler.freshness` status ``restamp``: every instruction of the profiled
kernel is the current build's, offset by offset), and refuses any whose SASS changed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from profiler.io import write_json_atomic  # noqa: E402
from profiler.names import EXT_PREFIX, EXT_RUNNER_TITLES  # noqa: E402
from profiler.provenance import SIDECAR_KEYS  # noqa: E402

FIELDS = ("build_hash", "problem_flops", "ladder_order", "title", "change", "expected_bottleneck")

# Run inside the extracted tree of the recorded commit: that commit's kernels package computes the fields.
_PROBE = r"""
import json, sys
from kernels import build, registry
from kernels.config import Shape
version, shape = sys.argv[1], sys.argv[2]
s = Shape.parse(shape)
out = {"problem_flops": s.flops()}
ladder = {v.id: v for v in registry.versions()}
if version in ladder:
    v = ladder[version]
    out.update(build_hash=build._source_hash(v, v.config_for(s.head_dim, s.dtype, s.causal)),
               ladder_order=v.number, title=v.title, change=v.change, expected_bottleneck=v.expected_bottleneck)
print(json.dumps(out))
"""


def extract(commit: str, dest: Path) -> None:
    """``kernels/`` and ``profiler/`` of ``commit`` into ``dest``."""
    with tempfile.TemporaryFile() as tar:
        subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit, "kernels", "profiler"],
                       stdout=tar, check=True)
        tar.seek(0)
        with tarfile.open(fileobj=tar) as tf:
            tf.extractall(dest, filter="data")


def probe(tree: Path, version: str, shape: str) -> dict:
    cp = subprocess.run([sys.executable, "-c", _PROBE, version, shape], cwd=tree, capture_output=True, text=True,
                        env={"PYTHONPATH": str(tree), "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/local/cuda/bin"})
    if cp.returncode != 0:
        raise SystemExit(f"probe failed for {version} at {tree}: {cp.stderr.strip().splitlines()[-1:]}")
    return json.loads(cp.stdout)


def runner_name(folder: str) -> str | None:
    """``ext-sdpa-flash-fullset`` -> ``sdpa-flash`` (the runner subject a report folder was taken from)."""
    if not folder.startswith(EXT_PREFIX):
        return None
    name = folder[len(EXT_PREFIX):]
    for known in EXT_RUNNER_TITLES:
        if name == known or name.startswith(known + "-"):
            return known
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", default=str(REPO / "reports" / "h200"))
    ap.add_argument("--force", action="store_true", help="recompute sidecars that already have a build_hash")
    ap.add_argument("--dry-run", action="store_true", help="print what would be written, write nothing")
    ap.add_argument("--restamp", action="store_true",
                    help="take the current build key where the key changed but the SASS did not")
    args = ap.parse_args(argv)
    if args.restamp:
        return restamp(Path(args.reports), args.dry_run)

    trees: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="whowaits-backfill-") as tmp:
        for rep in sorted(Path(args.reports).glob("*/*.ncu-rep")):
            side_path = rep.with_name(rep.name[: -len(".ncu-rep")] + ".json")
            if not side_path.is_file():
                print(f"skip {rep}: no sidecar")
                continue
            side = json.loads(side_path.read_text())
            if side.get("build_hash") is not None and not args.force:
                print(f"skip {side_path}: already has build_hash")
                continue
            commit, shape, folder = side.get("git_commit"), side.get("shape"), rep.parent.name
            at = "git_commit"
            if not commit and runner_name(folder):  # a starter report taken by hand: no build of ours to
                at = "HEAD"                        # hash; its problem FLOPs come from the shape alone
                commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                                        text=True, check=True).stdout.strip()
            if not commit or not shape:
                print(f"skip {side_path}: no git_commit/shape to backfill from")
                continue
            if commit not in trees:
                trees[commit] = Path(tmp) / commit
                trees[commit].mkdir()
                extract(commit, trees[commit])
            fields = dict.fromkeys(FIELDS) | probe(trees[commit], side.get("version") or folder, shape)
            ext = runner_name(folder)
            if ext:
                fields["title"] = EXT_RUNNER_TITLES[ext]
            note = (f"build_hash, problem_flops, ladder_order, title, change and expected_bottleneck backfilled "
                    f"on {date.today().isoformat()} by scripts/backfill_provenance.py from kernels/ at {at} "
                    f"{commit[:12]} (that commit's kernels.build key function, config.Shape.flops and "
                    f"version.toml); the report itself is unchanged.")
            old_note = side.get("note")
            side.update(fields)
            if not old_note or "backfilled" not in old_note:
                side["note"] = f"{old_note} {note}" if old_note else note
            ordered = {k: side.get(k) for k in SIDECAR_KEYS} | {k: v for k, v in side.items() if k not in SIDECAR_KEYS}
            print(f"{side_path}: " + ", ".join(f"{k}={fields[k]!r}" for k in ("build_hash", "problem_flops",
                                                                                 "ladder_order", "title")))
            if not args.dry_run:
                write_json_atomic(side_path, ordered)
    return 0


def restamp(rdir: Path, dry_run: bool) -> int:
    from profiler import freshness

    bad = 0
    for f in freshness.check(rdir):
        if f.status == "stale":
            print(f"refuse {f.report}: {f.detail}; re-profile it (whowaits profile {f.version} --force)")
            bad += 1
        elif f.status in ("restamp", "unknown") and f.current:
            side_path = f.report.with_name(f.report.name[: -len(".ncu-rep")] + ".json")
            side = json.loads(side_path.read_text())
            if f.status == "unknown":
                print(f"refuse {f.report}: no recorded build_hash (run without --restamp first)")
                bad += 1
                continue
            side["build_hash"] = f.current
            side["note"] = (f"{side.get('note') or ''} build_hash re-stamped {f.recorded} -> {f.current} on "
                            f"{date.today().isoformat()} by scripts/backfill_provenance.py --restamp: the "
                            f"current build's SASS is the profiled SASS instruction by instruction.").strip()
            print(f"{side_path}: build_hash {f.recorded} -> {f.current}")
            if not dry_run:
                write_json_atomic(side_path, side)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
