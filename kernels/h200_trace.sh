#!/usr/bin/env bash
# One device call for issue 12's measured role trace: the traced builds of v10-v12 on the H200 (whowaits trace:
# correctness vs the untraced build, overhead in the same run, raw events + Perfetto JSON + summary), and ncu's
# own per-PC samples of the committed v10-v12 reports (golden for tests/test_roles.py). Run from the repo root
# with $OUT set; every step has a time limit and the script stops starting steps after $BUDGET seconds. Everything
# lands in $OUT/results.tgz (the device returns at most 8 files).
#   BUDGET=240 bash kernels/h200_trace.sh
set -u
BUDGET=${BUDGET:-240}
SHAPES=${SHAPES:-"b1_h64_s1024_d128_fp16"}
R=/tmp/trace-out; rm -rf "$R"; mkdir -p "$R"
export PYTHONUNBUFFERED=1 WHOWAITS_CACHE_DIR=/tmp/whowaits-parse
T0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
mkdir -p "$R/traces" "$R/golden"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$R/nvidia-smi.txt" 2>&1
for v in ${VERSIONS:-v10 v11 v12}; do
  for s in $SHAPES; do
    [ "$(left)" -lt 30 ] && { echo "skip trace $v $s (budget)"; continue; }
    timeout 90 whowaits trace $v --shape $s --out "$R/traces" > "$R/traces/$v-$s.txt" 2>&1
    echo "trace $v $s rc=$? at +$(( $(date +%s) - T0 ))s"; head -4 "$R/traces/$v-$s.txt" | cut -c1-160
  done
done
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for rep in ${REPORTS_ROOT:-reports}/h200/v1[012]_*/b1_h64_s1024_d128_fp16.ncu-rep; do
  [ "$(left)" -lt 15 ] && { echo "skip ncu export (budget)"; break; }
  name=$(basename "$(dirname "$rep")")
  timeout 60 "$NCU" --import "$rep" --page source --csv --print-source sass 2> "$R/golden/$name.err" \
    | gzip -9 > "$R/golden/${name}_b1_h64_s1024_d128_fp16.source-sass.csv.gz"
  echo "ncu source $name rc=${PIPESTATUS[0]}"
done
timeout 20 python3 -c "from kernels import build as B; print(B.nvcc_version())" > "$R/nvcc.txt" 2>&1
tar czf "$OUT/results.tgz" -C "$R" . && ls -la "$OUT"
echo "done at +$(( $(date +%s) - T0 ))s"
