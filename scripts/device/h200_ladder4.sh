#!/usr/bin/env bash
# One device call for ladder IV rungs: RUNGS="v21_causal_pairs v22_d64_stages4" (default: v20_three_consumers) against
# BASE rungs (default v18). Hypothesis of each rung: its version.toml, written before the call. In order, each step under `timeout`, no new step
# after $BUDGET s, everything into $OUT/results.tgz:
#   1. correctness: python -m kernels.check RUNG (the default shapes: d64 with 192-row tiles, causal tails, S a
#      multiple of no tile, more tiles than SMs) and again with the persistent grid capped at 1 CTA; beside it, in the
#      background, compute-sanitizer racecheck + synccheck at small shapes (d64 and d128, 2 CTAs walking every tile);
#   2. host cost of one forward() with the GPU kept busy (scripts/device/host_us.py: v18 and RUNG with and without
#      launch plans, two pointer sets, new pointers each call; SDPA auto / cuDNN) -> host_us.json;
#   3. the same-run bench of BASE + RUNG + sdpa-cudnn, sdpa-auto, sdpa-flash, flex-attention at the ladder IV target shapes (docs/ladder-iv.md),
#      --repeat 3, one process (SHAPES overrides);
#   4. (TUNE="VERSION:SHAPE ...") a whowaits tune sweep; then
#   5. RUNG's whowaits-set report at b1_h64_s1024_d128_fp16 and b4_h32_s4096_d64_fp16 (cubins built on the device so
#      ncu embeds the marked sources), if time is left.
#
# How to call it:
#   0. here, no GPU: bash scripts/device/h200_ladder4.sh --prebuild   (builds the cubins the call needs into
#      .cache/whowaits/build-carry); commit; then copy the tree to /work/main/.dev/<helper>/ (rsync, without .git,
#      reports/, tests/public-reports, tests/golden) with the build-carry folder inside it.
#   1. device run, carry [".dev/<helper>"], timeout_s 600:
#        cd .dev/<helper> && WHOWAITS_GIT_COMMIT=<commit> bash scripts/device/h200_ladder4.sh
#   2. here: tar xzf results.tgz; bench files -> reports/h200/bench/, reports -> reports/h200/<rung>/, host_us.json ->
#      reports/h200/host/, verdict into the rung's version.toml.
set -u
RUNGS=${RUNGS:-${RUNG:-v20_three_consumers}}
BASE=${BASE:-v18_desc_iterator_o}
PROFILES=${PROFILES:-"$(echo $RUNGS | awk '{print $NF}'):b1_h64_s1024_d128_fp16 $(echo $RUNGS | awk '{print $NF}'):b4_h32_s4096_d64_fp16"}
SHAPES=${SHAPES:-"b1_h64_s1024_d128_fp16 b4_h16_s4096_d128_fp16 b4_h16_s4096_d128_bf16 b4_h16_s4096_d128_fp16_causal b4_h32_s4096_d64_fp16 b1_h16_s16384_d128_fp16 b4_h16_s4096_d128_bf16_causal"}
SAN_SHAPES=${SAN_SHAPES:-"b1_h3_s320_d128_fp16_causal b1_h3_s450_d64_fp16_causal"}
if [ "${1:-}" = "--prebuild" ]; then
  set -e
  REPO=$(git rev-parse --show-toplevel); PY=${PYTHON:-/work/main/.venv/bin/python}
  CARRY="$REPO/.cache/whowaits/build-carry"; rm -rf "$CARRY"; mkdir -p "$CARRY"
  cd "$REPO"
  WHOWAITS_CARRY_DIR="$CARRY" RUNGS="$BASE $RUNGS" SHAPES="$SHAPES $SAN_SHAPES" PYTHONPATH="$REPO" "$PY" - <<'EOF'
import os, shutil
from pathlib import Path
from kernels import build, registry
from kernels.check import DEFAULT_SHAPES
from kernels.config import Shape
extra = ["b2_h3_s200_d128_fp16", "b1_h8_s1024_d128_fp16", "b2_h2_s333_d128_fp16_causal", "b1_h3_s190_d64_bf16_causal",
         "b1_h4_s515_d128_bf16"]
jobs = {}
for vid in os.environ["RUNGS"].split():
    v = registry.get(vid)
    for key in list(DEFAULT_SHAPES) + os.environ["SHAPES"].split() + extra:
        s = Shape.parse(key)
        cfg = v.config_for(s.head_dim, s.dtype, s.causal)
        jobs[(v.id, cfg.short_form())] = (v, cfg)
carry = Path(os.environ["WHOWAITS_CARRY_DIR"])
for r in build.build_many(list(jobs.values())):
    if isinstance(r, Exception):
        raise SystemExit(f"prebuild failed: {r}")
    print(f"{r.version:24s} {r.config.short_form():36s} {r.registers} regs, {r.spill_bytes} B spills, cached={r.cached}")
    shutil.copytree(r.cubin.parent, carry / r.cubin.parent.name)
print(f"{len(list(carry.iterdir()))} builds in {carry}")
EOF
  du -sh "$CARRY"
  exit 0
fi

: "${WHOWAITS_GIT_COMMIT:?set WHOWAITS_GIT_COMMIT=<commit of the code> (the device copy has no .git of its own)}"
export WHOWAITS_GIT_COMMIT
BUDGET=${BUDGET:-540}
R=/tmp/ladder4; rm -rf "$R"; mkdir -p "$R"
export PYTHONUNBUFFERED=1 WHOWAITS_CACHE_DIR=/tmp/whowaits-parse
[ -d .cache/whowaits/build-carry ] && export WHOWAITS_BUILD_DIR=$PWD/.cache/whowaits/build-carry
T0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
stamp() { echo "== $1 at +$(( $(date +%s) - T0 ))s"; }
finish() { stamp done; tar czf "$OUT/results.tgz" -C "$R" . && ls -la "$OUT"; exit 0; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$R/nvidia-smi.txt" 2>&1
stamp install
timeout -k 5 90 python3 -m pip install -q --no-deps --no-build-isolation -e . > "$R/pip.txt" 2>&1; echo "pip rc=$?"

stamp sanitize-start
for v in $RUNGS; do
  n=${v%%_*}
  for s in $SAN_SHAPES; do
    for tool in synccheck racecheck; do
      ( WHOWAITS_MAX_CTAS=2 timeout -k 5 120 compute-sanitizer --tool $tool python3 -m kernels.runner $v \
          --shape $s --warmup 0 > "$R/$tool-$n-$s.txt" 2>&1; echo "rc=$?" >> "$R/$tool-$n-$s.txt" ) &
    done
  done
done
OK=
for v in $RUNGS; do
  n=${v%%_*}
  stamp "check $n"
  timeout -k 5 90 python3 -m kernels.check $v > "$R/check-$n.txt" 2>&1; rc=$?
  echo "check $n rc=$rc"; grep -E "FAIL|ok /" "$R/check-$n.txt" | cut -c1-160
  WHOWAITS_MAX_CTAS=1 timeout -k 5 60 python3 -m kernels.check $v --shapes b2_h3_s200_d128_fp16 \
    b2_h2_s333_d128_fp16_causal b1_h3_s190_d64_bf16_causal b2_h5_s1000_d64_fp16_causal b3_h4_s577_d64_bf16 \
    > "$R/check-1cta-$n.txt" 2>&1; rc1=$?
  echo "check $n 1 CTA rc=$rc1"; grep -E "FAIL|ok /" "$R/check-1cta-$n.txt" | cut -c1-160
  [ $rc = 0 ] && [ $rc1 = 0 ] && OK="$OK $v"
done
stamp sanitize-wait
wait
for f in "$R"/synccheck-*.txt "$R"/racecheck-*.txt; do echo "$(basename "$f"): $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=" "$f" | tr '\n' ' ')"; done

if [ "${HOST:-1}" = 1 ]; then
  stamp host_us
  timeout -k 5 120 python3 scripts/device/host_us.py "$R/host_us.json" > "$R/host_us.txt" 2>&1; echo "host_us rc=$?"
  cut -c1-120 "$R/host_us.txt"
fi

echo "passed both checks:${OK:- none}"
stamp bench
ARGS=""; for s in $SHAPES; do ARGS="$ARGS --shape $s"; done
timeout -k 5 $(( $(left) - 60 )) whowaits bench $BASE $OK sdpa-cudnn sdpa-auto sdpa-flash flex-attention --no-baselines \
  --repeat ${REPEAT:-3} $ARGS --out "$R/bench" --format csv > "$R/bench.txt" 2>&1
echo "bench rc=$?"; grep -E "^bench |best version" "$R/bench.txt" | cut -c1-240

for vs in ${TUNE:-}; do  # VERSION:SHAPE: whowaits tune over the version's [tune] space (a config sweep, one process)
  [ "$(left)" -lt 60 ] && break
  stamp "tune $vs"
  timeout -k 5 $(( $(left) - 40 )) whowaits tune ${vs%%:*} --shape ${vs#*:} --out "$R/tune" > "$R/tune-${vs%%:*}.txt" 2>&1
  echo "tune $vs rc=$?"; tail -8 "$R/tune-${vs%%:*}.txt" | cut -c1-160
done

for vs in $PROFILES; do  # VERSION[,VERSION...]:SHAPE, the versions in one ncu session
  [ "$(left)" -lt 30 ] && break
  vers=${vs%%:*}; s=${vs#*:}
  stamp "profile $vers $s"
  WHOWAITS_BUILD_DIR=/tmp/whowaits-devbuild timeout -k 5 $(( $(left) - 5 )) whowaits profile ${vers//,/ } \
    --shape $s --out "$R/reports" --gpu h200 > "$R/profile-${vers//,/-}-$s.txt" 2>&1
  echo "profile $vers $s rc=$?"; tail -3 "$R/profile-${vers//,/-}-$s.txt" | cut -c1-200
done
finish
