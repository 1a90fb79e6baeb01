#!/usr/bin/env bash
# One device call for ladder II (v08-v09): correctness, barrier checks, the same-run bench, the reports.
# Run from the repo root on the H200 machine with $OUT set; the cubin cache travels in .cache/whowaits/build.
#   STEPS="check sanitize bench profile" bash scripts/device/h200_run.sh     (also: gputest, tune)
# Everything lands in $OUT/results.tgz (logs, bench JSON/CSV, reports + sidecars); a summary is printed last.
set -u
# sidecars record $WHOWAITS_GIT_COMMIT (the device copy has no .git of its own, or sits inside another checkout's):
#   pass WHOWAITS_GIT_COMMIT=$(git rev-parse HEAD) [WHOWAITS_GIT_DIRTY=0] in the device command, after committing
: "${WHOWAITS_GIT_COMMIT:?set WHOWAITS_GIT_COMMIT=<commit of the code> (the device copy has no .git of its own)}"
export WHOWAITS_GIT_COMMIT
STEPS=${STEPS:-"check sanitize bench profile"}
R=/tmp/ladder2; rm -rf "$R"; mkdir -p "$R"
export PYTHONUNBUFFERED=1 WHOWAITS_CACHE_DIR=/tmp/whowaits-parse
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$R/nvidia-smi.txt" 2>&1
for step in $STEPS; do
  case $step in
    check)
      timeout 300 python3 -m kernels.correctness ${CHECK_VERSIONS:-v07 v08 v09} > "$R/check.txt" 2>&1
      echo "check rc=$?"; tail -4 "$R/check.txt" ;;
    sanitize)
      for tool in synccheck racecheck; do
        timeout 240 compute-sanitizer --tool $tool python3 -m kernels.runner v08 v09 --shape b1_h2_s256_d128_fp16 --warmup 1 > "$R/$tool.txt" 2>&1
        echo "$tool rc=$?"; tail -2 "$R/$tool.txt"
      done ;;
    bench)
      timeout 420 whowaits bench ${BENCH_VERSIONS:-v01 v02 v03 v04 v05 v06 v07 v08 v09} ${BENCH_FLAGS:-} \
        --shape b1_h64_s1024_d128_fp16 --shape b4_h16_s4096_d128_fp16 --out "$R/bench" --format csv > "$R/bench.txt" 2>&1
      echo "bench rc=$?"; cat "$R/bench.txt" | cut -c1-160 ;;
    gputest)
      timeout 300 python3 -m pytest -q tests/test_kernels_gpu.py -p no:cacheprovider > "$R/gputest.txt" 2>&1
      echo "gputest rc=$?"; tail -2 "$R/gputest.txt" ;;
    tune)
      for v in ${TUNE_VERSIONS:-v08 v09}; do
        for s in b1_h64_s1024_d128_fp16 b4_h16_s4096_d128_fp16; do
          timeout 240 whowaits tune $v --shape $s --out "$R/tune" --format csv > "$R/tune-$v-$s.txt" 2>&1
          echo "tune $v $s rc=$?"; grep ',ok,' "$R/tune-$v-$s.txt" | head -4 | cut -c1-120
        done
      done ;;
    profile)
      # Build the profiled cubins HERE: -lineinfo records the source paths nvcc saw, and ncu's --import-source
      # embeds only files it finds at those paths, so a cubin carried from another machine yields a report
      # without sources (and without declared @region markers).
      for v in ${PROFILE_VERSIONS:-v08 v09}; do
        WHOWAITS_BUILD_DIR=/tmp/whowaits-devbuild timeout 240 whowaits profile $v --shape b1_h64_s1024_d128_fp16 --out "$R/reports" --gpu h200 > "$R/profile-$v.txt" 2>&1
        echo "profile $v rc=$?"; tail -3 "$R/profile-$v.txt"
      done ;;
  esac
done
tar czf "$OUT/results.tgz" -C "$R" . && ls -la "$OUT"
