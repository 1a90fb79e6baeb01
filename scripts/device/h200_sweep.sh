#!/usr/bin/env bash
# The ladder x 3 shapes on the H200, one device call: `whowaits sweep scripts/sweeps/ladder-3-shapes.toml` (local backend,
# every ladder version x 3 shapes, one worker on the one GPU) into a scratch reports root, then single
# `whowaits profile VERSION --shape SHAPE` runs of the same jobs (one process and one ncu session each, as a
# user without the sweep runs them) for SINGLE_SHAPES, each timed; the whole script stops starting singles when
# fewer than 30 s of BUDGET are left, and starts a second single shape only if the first one's time fits again.
# Run from the repo root (a copy without .git: pass the commit) with $OUT set:
#   WHOWAITS_GIT_COMMIT=<commit> WHOWAITS_GIT_DIRTY=0 BUDGET=360 bash scripts/device/h200_sweep.sh
# The cubins may be prebuilt at the same path (-lineinfo names absolute paths; ncu imports the sources from
# there): WHOWAITS_BUILD_DIR=$PWD/.devbuild whowaits kernels build --all here, then carry .devbuild.
# Back under $OUT: sweep-reports.tgz (h200/<version>/<shape>.{ncu-rep,json}), sweep-logs.tgz (logs/: sweep.jsonl,
# results.json, jobs/*.log; singles/<version>-<shape>.log; timings.jsonl: one line per step and per single run).
# Read them with scripts/sweep_vs_singles.py.
set -u
# sidecars record $WHOWAITS_GIT_COMMIT (the device copy has no .git of its own, or sits inside another checkout's):
#   pass WHOWAITS_GIT_COMMIT=$(git rev-parse HEAD) [WHOWAITS_GIT_DIRTY=0] in the device command, after committing
: "${WHOWAITS_GIT_COMMIT:?set WHOWAITS_GIT_COMMIT=<commit of the code> (the device copy has no .git of its own)}"
export WHOWAITS_GIT_COMMIT
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD WHOWAITS_CACHE_DIR=/tmp/whowaits-parse
[ -d .devbuild ] && export WHOWAITS_BUILD_DIR=$PWD/.devbuild
[ -w /run/lock ] || export WHOWAITS_LOCK_DIR=/tmp/whowaits-lock
OUT=${OUT:-/tmp/whowaits-sweep-out}; mkdir -p "$OUT"
BUDGET=${BUDGET:-360}
SINGLE_SHAPES=${SINGLE_SHAPES:-"b1_h64_s1024_d128_fp16 b4_h16_s4096_d128_fp16"}
MANIFEST=${MANIFEST:-scripts/sweeps/ladder-3-shapes.toml}
S=/tmp/whowaits-sweep; rm -rf "$S"; mkdir -p "$S/singles" "$S/single-reports"
T=$S/timings.jsonl
T0=$(date +%s.%N)
now() { date +%s.%N; }
left() { python3 -c "print(int($BUDGET - ($(now) - $T0)))"; }
stamp() {  # stamp NAME START END RC [EXTRA-JSON-FIELDS]
  python3 -c "import json,sys; print(json.dumps({'step': sys.argv[1], 'start': float(sys.argv[2]), 'end': float(sys.argv[3]),
    'wall_s': round(float(sys.argv[3]) - float(sys.argv[2]), 3), 'rc': int(sys.argv[4]), **json.loads(sys.argv[5] or '{}')}))" \
    "$1" "$2" "$3" "$4" "${5:-}" >> "$T"
}
WW=(python3 -c "import sys; from profiler.cli import main; sys.argv[0] = 'whowaits'; main()")  # = the whowaits command

echo "commit $WHOWAITS_GIT_COMMIT dirty ${WHOWAITS_GIT_DIRTY:-unset} budget ${BUDGET}s build ${WHOWAITS_BUILD_DIR:-default}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
ncu --version | tail -1
VERSIONS=$(python3 -c "from kernels import registry; print(' '.join(v.id for v in registry.versions()))")
echo "versions: $VERSIONS"

# 1. the builds (cache hits when .devbuild came along); timed apart so neither side pays for them
t=$(now); timeout 150 python3 -c "
from kernels import build, registry
from kernels.config import Shape
import tomllib
m = tomllib.load(open('$MANIFEST', 'rb'))
todo = {}
for v in registry.versions():
    for k in m['shapes']['keys']:
        s = Shape.parse(k + '_fp16')
        todo[(v.id, s.head_dim, s.dtype, s.causal)] = (v, v.config_for(s.head_dim, s.dtype, s.causal))
res = build.build_many(list(todo.values()))
print('builds:', len(res), 'cached:', sum(getattr(r, 'cached', False) for r in res),
      'failed:', [str(r) for r in res if isinstance(r, Exception)])
" 2>&1 | tail -3; rc=${PIPESTATUS[0]}; stamp build "$t" "$(now)" "$rc"

# 1b. the GPU and torch warmed once (first CUDA context, torch from disk), so neither side below pays for it
t=$(now); timeout 60 python3 -c "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"; stamp warm "$t" "$(now)" "$?"

# 2. the sweep (one worker: the one visible GPU)
echo "== sweep at +$(python3 -c "print(int($(now) - $T0))")s"
t=$(now); timeout 300 "${WW[@]}" sweep "$MANIFEST" --out "$S/reports" --logs "$S/logs" --format json \
  > "$S/sweep.json" 2> "$S/sweep.err"; rc=$?; stamp sweep "$t" "$(now)" "$rc"
python3 - "$S" <<'EOF'
import json, sys
try:
    r = json.load(open(sys.argv[1] + "/sweep.json"))
except Exception as err:
    print("sweep: no JSON result:", err); print(open(sys.argv[1] + "/sweep.err").read()[-3000:]); sys.exit()
print(f"sweep: wall {r['wall_s']} s, done {r['done']}, skipped {r['skipped']}, failed {r['failed']}")
for j in r["jobs"]:
    if j["status"] != "done":
        print("  ", j["job"], j["status"], j.get("error_kind"), (j.get("error") or "")[:160])
EOF

# 3. the singles: `whowaits profile VERSION --shape SHAPE`, one process each
first=""
for shape in $SINGLE_SHAPES; do
  if [ -n "$first" ] && [ "$(left)" -lt "$(python3 -c "print(int($first * 1.15) + 30)")" ]; then
    echo "skip singles at $shape (budget: $(left) s left, the first shape took ${first} s)"; continue
  fi
  echo "== singles $shape at +$(python3 -c "print(int($(now) - $T0))")s"
  ts=$(now); n=0
  for v in $VERSIONS; do
    if [ "$(left)" -lt 30 ]; then echo "skip single $v $shape (budget)"; continue; fi
    t=$(now)
    timeout 90 "${WW[@]}" profile "$v" --shape "$shape" --out "$S/single-reports" --gpu h200 --force \
      > "$S/singles/$v-$shape.log" 2>&1; rc=$?
    e=$(now); stamp single "$t" "$e" "$rc" "{\"version\": \"$v\", \"shape\": \"$shape\"}"; n=$((n + 1))
    echo "single $v $shape rc=$rc $(python3 -c "print(round($e - $t, 2))") s"
  done
  [ -z "$first" ] && first=$(python3 -c "print(int($(now) - $ts))")
done

# 4. back home
ls -la "$S/reports/h200" 2>/dev/null | head -20
du -sh "$S/reports" "$S/single-reports" 2>/dev/null
tar czf "$OUT/sweep-reports.tgz" -C "$S/reports" h200 2>/dev/null
cp "$S/sweep.json" "$S/sweep.err" "$S/timings.jsonl" "$S/logs/" 2>/dev/null
tar czf "$OUT/sweep-logs.tgz" -C "$S" logs singles timings.jsonl
ls -la "$OUT"
echo "== done at +$(python3 -c "print(int($(now) - $T0))")s"
