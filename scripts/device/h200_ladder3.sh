#!/usr/bin/env bash
# One device call for ladder III (v10-v12): correctness, barrier checks, the same-run bench (both target
# shapes + the causal one), the whowaits-set reports. Same conventions as scripts/device/h200_run.sh (ladder II):
# run from the repo root on the H200 with $OUT set; prebuilt cubins travel in .cache/whowaits/build; the
# profiled cubins are built on the device so ncu embeds the marked sources. Each step has a time limit and
# the whole script stops starting steps after $BUDGET seconds. Everything lands in $OUT/results.tgz.
#   STEPS="check bench causal profile sanitize" BUDGET=480 bash scripts/device/h200_ladder3.sh
set -u
# sidecars record $WHOWAITS_GIT_COMMIT (the device copy has no .git of its own, or sits inside another checkout's):
#   pass WHOWAITS_GIT_COMMIT=$(git rev-parse HEAD) [WHOWAITS_GIT_DIRTY=0] in the device command, after committing
: "${WHOWAITS_GIT_COMMIT:?set WHOWAITS_GIT_COMMIT=<commit of the code> (the device copy has no .git of its own)}"
export WHOWAITS_GIT_COMMIT
STEPS=${STEPS:-"check bench causal profile sanitize"}
BUDGET=${BUDGET:-480}
NEW=${NEW_VERSIONS:-"v10 v11"}
R=/tmp/ladder3; rm -rf "$R"; mkdir -p "$R"
export PYTHONUNBUFFERED=1 WHOWAITS_CACHE_DIR=/tmp/whowaits-parse
T0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$R/nvidia-smi.txt" 2>&1
for step in $STEPS; do
  if [ "$(left)" -lt 30 ]; then echo "skip $step (budget)"; continue; fi
  echo "== $step at +$(( $(date +%s) - T0 ))s"
  case $step in
    check)
      timeout 150 python3 -m kernels.correctness $NEW > "$R/check.txt" 2>&1
      echo "check rc=$?"; tail -20 "$R/check.txt" | cut -c1-150 ;;
    bench)
      timeout 240 whowaits bench ${BENCH_VERSIONS:-v01 v02 v03 v04 v05 v06 v07 v08 v09 v10 v11} --repeat ${REPEAT:-3} \
        --shape b1_h64_s1024_d128_fp16 --shape b4_h16_s4096_d128_fp16 --out "$R/bench" --format csv > "$R/bench.txt" 2>&1
      echo "bench rc=$?"; grep -E "^(v0[7-9]|v1|sdpa-(cudnn|flash))" "$R/bench.txt" | cut -c1-110 ;;
    causal)
      timeout 120 whowaits bench v07 v09 $NEW --repeat ${REPEAT:-3} --shape b4_h16_s4096_d128_fp16_causal \
        --out "$R/bench" --format csv > "$R/bench-causal.txt" 2>&1
      echo "causal rc=$?"; grep -E "^(v0[7-9]|v1|sdpa-(cudnn|flash))" "$R/bench-causal.txt" | cut -c1-110 ;;
    extra)
      # the "also reported, not gated" shapes (one round, the fastest rungs + cuDNN/flash only)
      timeout 150 whowaits bench v09 $NEW sdpa-cudnn sdpa-flash --no-baselines --shape b4_h16_s4096_d128_bf16 \
        --shape b4_h32_s4096_d64_fp16 --shape b1_h16_s16384_d128_fp16 --out "$R/bench-extra" --format csv > "$R/bench-extra.txt" 2>&1
      echo "extra rc=$?"; grep -E "^(v|sdpa)" "$R/bench-extra.txt" | cut -c1-100 ;;
    tune)
      for v in ${TUNE_VERSIONS:-v12}; do
        for s in b1_h64_s1024_d128_fp16 b4_h16_s4096_d128_fp16; do
          [ "$(left)" -lt 40 ] && { echo "skip tune $v $s (budget)"; continue; }
          timeout 90 whowaits tune $v --shape $s --out "$R/tune" --format csv > "$R/tune-$v-$s.txt" 2>&1
          echo "tune $v $s rc=$?"; grep ',ok,' "$R/tune-$v-$s.txt" | head -4 | cut -c1-120
        done
      done ;;
    profile)
      for v in ${PROFILE_VERSIONS:-$NEW}; do
        [ "$(left)" -lt 40 ] && { echo "skip profile $v (budget)"; continue; }
        WHOWAITS_BUILD_DIR=/tmp/whowaits-devbuild timeout 120 whowaits profile $v --shape b1_h64_s1024_d128_fp16 --out "$R/reports" --gpu h200 > "$R/profile-$v.txt" 2>&1
        echo "profile $v rc=$?"; tail -2 "$R/profile-$v.txt"
        rep=$(ls "$R"/reports/h200/${v}_*/b1_h64_s1024_d128_fp16.ncu-rep 2>/dev/null | head -1)
        [ -n "$rep" ] && timeout 60 whowaits roles "$rep" > "$R/roles-$v.txt" 2>&1 && cat "$R/roles-$v.txt" | cut -c1-150 | head -40
      done ;;
    sanitize)
      for tool in synccheck racecheck; do
        [ "$(left)" -lt 40 ] && { echo "skip $tool (budget)"; continue; }
        timeout 90 compute-sanitizer --tool $tool python3 -m kernels.runner $NEW --shape b1_h2_s256_d128_fp16 --warmup 1 > "$R/$tool.txt" 2>&1
        echo "$tool rc=$?"; tail -2 "$R/$tool.txt"
      done ;;
  esac
done
echo "== done at +$(( $(date +%s) - T0 ))s"
tar czf "$OUT/results.tgz" -C "$R" . && ls -la "$OUT"
