#!/usr/bin/env bash
# One device call for v14_cross_tile_qk (target: b1_h64_s1024 >= 1.0x cuDNN): its correctness on the default
# check shapes (two with more tiles than SMs) and with the persistent grid capped to 1 CTA, compute-sanitizer
# synccheck + racecheck on a multi-tile grid (run in the background beside the checks), a same-run bench of
# v12 v13 v14 with the baselines (SDPA cuDNN/flash, flex-attention, dense GEMM) at the three target shapes in
# one process, and v14's whowaits-set report at b1_h64_s1024 (cubin built on the device so ncu embeds the
# sources). Every step runs under `timeout -k 5 N`; steps stop starting after $BUDGET s; v14 joins the bench
# and the profile only if its checks passed. Everything lands in $OUT/results.tgz.
#   WHOWAITS_GIT_COMMIT=<commit> bash scripts/device/h200_v14.sh
set -u
: "${WHOWAITS_GIT_COMMIT:?set WHOWAITS_GIT_COMMIT=<commit of the code>}"
export WHOWAITS_GIT_COMMIT
BUDGET=${BUDGET:-200}
R=/tmp/v14run; rm -rf "$R"; mkdir -p "$R"
export PYTHONUNBUFFERED=1 WHOWAITS_CACHE_DIR=/tmp/whowaits-parse
T0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
stamp() { echo "== $1 at +$(( $(date +%s) - T0 ))s"; }
finish() { stamp done; tar czf "$OUT/results.tgz" -C "$R" . && ls -la "$OUT"; exit 0; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$R/nvidia-smi.txt" 2>&1
stamp install
timeout -k 5 60 python3 -m pip install -q --no-deps --no-build-isolation -e . > "$R/pip.txt" 2>&1; echo "pip rc=$?"
stamp sanitize-start
for tool in synccheck racecheck; do
  # 9 tiles (3 query blocks x 3 heads, the last ragged) of 3 key blocks on 2 CTAs: every CTA crosses tiles
  ( WHOWAITS_MAX_CTAS=2 timeout -k 5 80 compute-sanitizer --tool $tool python3 -m kernels.runner v14 \
      --shape b1_h3_s320_d128_fp16 --warmup 0 > "$R/$tool.txt" 2>&1; echo "rc=$?" >> "$R/$tool.txt" ) &
done
stamp check
timeout -k 5 60 python3 -m kernels.correctness v14 > "$R/check.txt" 2>&1; rc=$?
echo "check v14 rc=$rc"; tail -12 "$R/check.txt" | cut -c1-150
V14=
if [ $rc = 0 ]; then
  WHOWAITS_MAX_CTAS=1 timeout -k 5 45 python3 -m kernels.correctness v14 --shapes b2_h3_s200_d128_fp16 \
    b1_h8_s1024_d128_fp16 b2_h2_s333_d128_fp16_causal b1_h3_s190_d64_bf16_causal b1_h4_s515_d128_bf16 \
    > "$R/check-1cta.txt" 2>&1; rc1=$?
  echo "check v14 1 CTA rc=$rc1"; tail -6 "$R/check-1cta.txt" | cut -c1-150
  [ $rc1 = 0 ] && V14=v14
fi
stamp sanitize-wait
wait
for tool in synccheck racecheck; do echo "$tool:"; tail -3 "$R/$tool.txt"; done
[ -z "$V14" ] && finish
stamp bench
timeout -k 5 130 whowaits bench v12 v13 $V14 --repeat ${REPEAT:-3} --shape b1_h64_s1024_d128_fp16 \
  --shape b4_h16_s4096_d128_fp16 --shape b4_h16_s4096_d128_fp16_causal --out "$R/bench" --format csv \
  > "$R/bench.txt" 2>&1
echo "bench rc=$?"; grep -E "^(v1|sdpa-(cudnn|flash)|flex|shape|#)" "$R/bench.txt" | cut -c1-120
if [ "$(left)" -gt 25 ]; then
  stamp profile
  WHOWAITS_BUILD_DIR=/tmp/whowaits-devbuild timeout -k 5 $(( $(left) - 5 )) whowaits profile v14 \
    --shape b1_h64_s1024_d128_fp16 --out "$R/reports" --gpu h200 > "$R/profile-v14.txt" 2>&1
  echo "profile v14 rc=$?"; tail -2 "$R/profile-v14.txt"
fi
finish
