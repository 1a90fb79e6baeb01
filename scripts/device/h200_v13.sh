#!/usr/bin/env bash
# One device call for ladder III step 4 (v13) and the seed's baseline table: v13's
# correctness on shapes with more tiles than SMs (and with the persistent grid capped to 1-2 CTAs, so every
# CTA walks many tiles), compute-sanitizer on a multi-tile grid, the same-run bench (all rungs, SDPA, flex,
# dense GEMM) per target shape, v13's whowaits-set report, the also-reported shapes, a v13 tune.
# Run from the repo root on the H200 with $OUT set; prebuilt cubins travel in .cache/whowaits/build; the
# profiled cubin is built on the device (WHOWAITS_BUILD_DIR) so ncu embeds the marked sources. Every step runs
# under `timeout -k 5 N` (a hung persistent kernel is killed within ~60 s) and the script stops starting
# steps after $BUDGET seconds. v13 joins the bench only if its check passed. Everything lands in
# $OUT/results.tgz.
# On the H200 install with `python3 -m pip install --no-deps --no-build-isolation -e .` (the plain pip is another
# Python's; NCU-NOTES.md). Sidecars/bench provenance: $WHOWAITS_GIT_COMMIT (required; it wins over main's .git
# that a tree carried under /work/main/.devcarry/NAME finds upward: profiler.provenance.git_state).
#   WHOWAITS_GIT_COMMIT=<commit> STEPS="check sanitize bench profile extra tune gputest" bash scripts/device/h200_v13.sh
set -u
: "${WHOWAITS_GIT_COMMIT:?set WHOWAITS_GIT_COMMIT=<commit of the code> (the device copy has no .git of its own)}"
export WHOWAITS_GIT_COMMIT
STEPS=${STEPS:-"check sanitize bench profile extra tune gputest"}
BUDGET=${BUDGET:-540}
R=/tmp/v13run; rm -rf "$R"; mkdir -p "$R"
export PYTHONUNBUFFERED=1 WHOWAITS_CACHE_DIR=/tmp/whowaits-parse
T0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
stamp() { echo "== $1 at +$(( $(date +%s) - T0 ))s"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$R/nvidia-smi.txt" 2>&1
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" > "$R/versions.txt" 2>&1
V13=${V13:-}  # set to v13 to skip the check gate (a later call of the same tree)
ALL="v01 v02 v03 v04 v05 v06 v07 v08 v09 v10 v11 v12"
for step in $STEPS; do
  if [ "$(left)" -lt 30 ]; then echo "skip $step (budget)"; continue; fi
  stamp "$step"
  case $step in
    check)
      timeout -k 5 60 python3 -m kernels.correctness v13 > "$R/check.txt" 2>&1; rc=$?
      echo "check v13 rc=$rc"; tail -16 "$R/check.txt" | cut -c1-150
      if [ $rc = 0 ]; then
        # every tile through 1 CTA (the ring, q_empty and the scheduler barriers cross many tile boundaries)
        WHOWAITS_MAX_CTAS=1 timeout -k 5 60 python3 -m kernels.correctness v13 --shapes b2_h3_s200_d128_fp16 \
          b1_h8_s1024_d128_fp16 b2_h2_s333_d128_fp16_causal b1_h3_s190_d64_bf16_causal b1_h4_s515_d128_bf16 \
          > "$R/check-1cta.txt" 2>&1; rc1=$?
        echo "check v13 1 CTA rc=$rc1"; tail -3 "$R/check-1cta.txt" | cut -c1-150
        [ $rc1 = 0 ] && V13=v13
      fi
      timeout -k 5 60 python3 -m kernels.correctness v10 v11 v12 --shapes b1_h64_s1024_d128_fp16 b2_h40_s700_d64_bf16_causal \
        > "$R/check-v10-v12.txt" 2>&1
      echo "check v10-v12 new shapes rc=$?"; tail -1 "$R/check-v10-v12.txt" ;;
    sanitize)
      [ -z "$V13" ] && { echo "skip sanitize (v13 check failed)"; continue; }
      for tool in synccheck racecheck; do
        [ "$(left)" -lt 40 ] && { echo "skip $tool (budget)"; continue; }
        # 9 tiles (3 query blocks x 3 heads, the last one ragged) of 3 key blocks on 2 CTAs
        WHOWAITS_MAX_CTAS=2 timeout -k 5 90 compute-sanitizer --tool $tool python3 -m kernels.runner v13 \
          --shape b1_h3_s320_d128_fp16 --warmup 0 > "$R/$tool.txt" 2>&1
        echo "$tool rc=$?"; tail -2 "$R/$tool.txt"
      done ;;
    bench)
      # one process per shape (a hang costs one shape, not the run); each file is one same-run table
      for s in b1_h64_s1024_d128_fp16 b4_h16_s4096_d128_fp16 b4_h16_s4096_d128_fp16_causal; do
        [ "$(left)" -lt 60 ] && { echo "skip bench $s (budget)"; continue; }
        timeout -k 5 170 whowaits bench $ALL $V13 --repeat ${REPEAT:-3} --shape $s --out "$R/bench" --format csv \
          > "$R/bench-$s.txt" 2>&1
        echo "bench $s rc=$?"; grep -E "^(v0[7-9]|v1|sdpa-(cudnn|flash)|flex|flashinfer)" "$R/bench-$s.txt" | cut -c1-120
      done ;;
    profile)
      [ -z "$V13" ] && { echo "skip profile (v13 check failed)"; continue; }
      WHOWAITS_BUILD_DIR=/tmp/whowaits-devbuild timeout -k 5 150 whowaits profile v13 --shape b1_h64_s1024_d128_fp16 \
        --out "$R/reports" --gpu h200 > "$R/profile-v13.txt" 2>&1
      echo "profile v13 rc=$?"; tail -2 "$R/profile-v13.txt"
      rep=$(ls "$R"/reports/h200/v13_*/b1_h64_s1024_d128_fp16.ncu-rep 2>/dev/null | head -1)
      [ -n "$rep" ] && timeout 60 whowaits roles "$rep" > "$R/roles-v13.txt" 2>&1 && head -40 "$R/roles-v13.txt" | cut -c1-150 ;;
    extra)
      # the "also reported, not gated" shapes: the fastest rungs and the fast baselines
      timeout -k 5 170 whowaits bench v09 v11 v12 $V13 sdpa-cudnn sdpa-flash flex-attention --no-baselines \
        --repeat ${REPEAT:-3} --shape b4_h16_s4096_d128_bf16 --shape b4_h32_s4096_d64_fp16 --shape b1_h16_s16384_d128_fp16 \
        --out "$R/bench-extra" --format csv > "$R/bench-extra.txt" 2>&1
      echo "extra rc=$?"; grep -E "^(v09|v1|sdpa|flex)" "$R/bench-extra.txt" | cut -c1-110 ;;
    tune)
      [ -z "$V13" ] && { echo "skip tune (v13 check failed)"; continue; }
      timeout -k 5 90 whowaits tune v13 --shape b1_h64_s1024_d128_fp16 --out "$R/tune" --format csv > "$R/tune-v13.txt" 2>&1
      echo "tune v13 rc=$?"; grep ',ok,' "$R/tune-v13.txt" | head -4 | cut -c1-120 ;;
    gputest)
      # the GPU test file's new tests (the persistent grid, the seed's bench columns)
      timeout -k 5 120 python3 -m pytest -q tests/test_kernels_gpu.py -k "persistent or seed" -p no:cacheprovider \
        > "$R/gputest.txt" 2>&1
      echo "gputest rc=$?"; tail -3 "$R/gputest.txt" ;;
  esac
done
stamp done
tar czf "$OUT/results.tgz" -C "$R" . && ls -la "$OUT"
