#!/usr/bin/env bash
# 1 GPU against 2 GPUs on nvidia-h200-x2, one device call: scripts/sweeps/two-gpus.toml (every ladder version x 2 shapes,
# 4 ncu sessions) with the local backend on 1 GPU (CUDA_VISIBLE_DEVICES=0), then on 2 GPUs (0,1), then through
# Ray (a head started on this host with 2 GPUs) when `import ray` works there; each run --force into a reports
# root of its own, each with its own logs (sweep.jsonl: lock/unlock per GPU, the proof that no GPU ran two ncu
# sessions at once; read with scripts/sweep_gpus.py). Run from the repo root with $OUT set:
#   WHOWAITS_GIT_COMMIT=<commit> WHOWAITS_GIT_DIRTY=0 BUDGET=300 bash scripts/device/h200_two_gpus.sh
# Prebuilt cubins may travel in .devbuild (built at the same path: -lineinfo names absolute paths).
set -u
: "${WHOWAITS_GIT_COMMIT:?set WHOWAITS_GIT_COMMIT=<commit of the code> (the device copy has no .git of its own)}"
export WHOWAITS_GIT_COMMIT
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD WHOWAITS_CACHE_DIR=/tmp/whowaits-parse
[ -d .devbuild ] && export WHOWAITS_BUILD_DIR=$PWD/.devbuild
[ -w /run/lock ] || export WHOWAITS_LOCK_DIR=/tmp/whowaits-lock
OUT=${OUT:-/tmp/whowaits-two-out}; mkdir -p "$OUT"
BUDGET=${BUDGET:-300}
MANIFEST=${MANIFEST:-scripts/sweeps/two-gpus.toml}
S=/tmp/whowaits-two; rm -rf "$S"; mkdir -p "$S"
T0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
WW=(python3 -c "import sys; from profiler.cli import main; sys.argv[0] = 'whowaits'; main()")

echo "commit $WHOWAITS_GIT_COMMIT budget ${BUDGET}s build ${WHOWAITS_BUILD_DIR:-default}"
nvidia-smi --query-gpu=index,name,uuid,clocks.sm,temperature.gpu,power.draw --format=csv,noheader | tee "$S/gpus.txt"
nvidia-smi topo -m > "$S/topo.txt" 2>&1
ncu --version | tail -1
# builds (cache hits when .devbuild came along) and a warm GPU, so no run below pays for them
timeout 150 python3 -c "
from kernels import build, registry
from kernels.config import Shape
s = Shape.parse('b1_h64_s1024_d128_fp16')
res = build.build_many([(v, v.config_for(s.head_dim, s.dtype, s.causal)) for v in registry.versions()])
print('builds:', len(res), 'failed:', [str(r) for r in res if isinstance(r, Exception)])
" 2>&1 | tail -2
timeout 60 python3 -c "import torch; [torch.zeros(1, device=f'cuda:{i}') for i in range(torch.cuda.device_count())]; torch.cuda.synchronize()"

run() {  # run NAME CUDA_VISIBLE_DEVICES [sweep args...]
  local name=$1 devs=$2; shift 2
  if [ "$(left)" -lt 40 ]; then echo "skip $name (budget: $(left) s left)"; return; fi
  echo "== $name (CUDA_VISIBLE_DEVICES=$devs) at +$(( $(date +%s) - T0 ))s"
  CUDA_VISIBLE_DEVICES=$devs timeout $(( $(left) - 10 )) "${WW[@]}" sweep "$MANIFEST" --force \
    --out "$S/$name/reports" --logs "$S/$name/logs" --format json "$@" > "$S/$name.json" 2> "$S/$name.err"
  echo "$name rc=$?"; tail -c 600 "$S/$name.err"
  python3 - "$S/$name.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
    print(f"wall {r['wall_s']} s, done {r['done']}, skipped {r['skipped']}, failed {r['failed']}")
except Exception as err:
    print("no JSON result:", err)
PY
}
run gpu1 0
run gpu2 0,1
if python3 -c "import ray" 2>/dev/null; then
  ray start --head --num-gpus=2 --disable-usage-stats > "$S/ray-start.txt" 2>&1; echo "ray start rc=$?"
  run ray 0,1 --backend ray --address auto
  ray stop --force > /dev/null 2>&1
else
  echo "ray: not importable on this host (python3 -c 'import ray' failed): the Ray run was not made" | tee "$S/ray-missing.txt"
fi
python3 scripts/sweep_gpus.py "$S" --out "$S/two-gpus.json" || true
du -sh "$S"/*/reports 2>/dev/null
tar czf "$OUT/two-gpus-logs.tgz" -C "$S" --exclude reports .
ls -la "$OUT"
echo "== done at +$(( $(date +%s) - T0 ))s"
