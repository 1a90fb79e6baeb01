#!/usr/bin/env bash
# Re-profile the committed data set on the H200 with the current sections/ (the `whowaits` set), and
# re-measure what collecting it costs. Run on the device machine (it has ncu and the GPU, no .git):
#
#   whowaits kernels build --all                      # here, with WHOWAITS_BUILD_DIR=$PWD/.devcarry/build
#   # device tool, carry [".devcarry/build"], from the repo root:
#   WHOWAITS_GIT_COMMIT=<commit of the code> WHOWAITS_GIT_DIRTY=0 OUT=$OUT bash scripts/device/h200_profile_dataset.sh
#   # back here:  tar xzf <files_at>/reports.tgz -C reports/
#   #             cp <files_at>/collection-cost.json reports/h200/
#
# What it does, in one process tree (one cold start of the device machine):
#   scripts/collection_cost.py on the newest ladder version at SHAPE: the runner under ncu with LaunchStats
#   only / `--set whowaits` / `--set full`, interleaved twice (passes, wall, overhead), then
#   `whowaits profile VERSION` and `whowaits profile --all --ext --force` (every ladder version + torch SDPA
#   flash / cuDNN, one ncu session, split per subject into <subject>/<SHAPE>.ncu-rep + sidecar .json).
# Results under $OUT: collection-cost.json, reports.tgz (h200/<subject>/<SHAPE>.{ncu-rep,json}), passes.txt.
# The `--set full` starters (reports/h200/ext-sdpa-*-fullset/) are golden test fixtures: not touched.
# The sidecars' git commit is $WHOWAITS_GIT_COMMIT (the device copy has no .git): commit before the call.
set -u
# sidecars record $WHOWAITS_GIT_COMMIT (the device copy has no .git of its own, or sits inside another checkout's):
#   pass WHOWAITS_GIT_COMMIT=$(git rev-parse HEAD) [WHOWAITS_GIT_DIRTY=0] in the device command, after committing
: "${WHOWAITS_GIT_COMMIT:?set WHOWAITS_GIT_COMMIT=<commit of the code> (the device copy has no .git of its own)}"
export WHOWAITS_GIT_COMMIT
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
[ -d .devcarry/build ] && export WHOWAITS_BUILD_DIR=$PWD/.devcarry/build  # cubins built here (same nvcc)
OUT=${OUT:-/tmp/whowaits-dataset}; mkdir -p "$OUT"
SHAPE=${SHAPE:-b1_h64_s1024_d128_fp16}
REP=$(mktemp -d /tmp/whowaits-rep.XXXXXX)
echo "commit ${WHOWAITS_GIT_COMMIT:-unset} dirty ${WHOWAITS_GIT_DIRTY:-unset} shape $SHAPE"
ncu --version | tail -1; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
ncu --list-sets --section-folder sections | grep whowaits
timeout 420 python3 scripts/collection_cost.py --shape "$SHAPE" --out "$OUT/collection-cost.json" --all-out "$REP" 2>&1 \
  | grep -vE '^\s+|━' | tail -40
grep -h '"passes"' "$OUT/collection-cost.json" | head -3 | tee "$OUT/passes.txt"
ls -la "$REP"/h200/*/
tar czf "$OUT/reports.tgz" -C "$REP" h200
ls -la "$OUT"
