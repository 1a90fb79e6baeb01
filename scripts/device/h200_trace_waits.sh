#!/usr/bin/env bash
# One device call for the wait log (`whowaits trace --waits`, trace.cuh's WHOWAITS_TRACE_WAITS): every
# warp-specialised rung (v10-v19) at b1_h64_s1024 (the shape of their committed ncu reports), then, budget left,
# at b4_h16_s4096. Hypothesis written before the call (2026-12-02 01:05 UTC): the wait log keeps each rung's
# untraced wgmma windows (scripts/trace_windows.py --waits: one clock read and no load per window, the softmax
# where ptxas puts it untraced), so its overhead is < 10% on every rung and its heaviest edge, warp-weighted, is
# the static graph's: consumer -[wgmma group]-> tensor core on v10-v14 and v16-v19, producer <- empty ring on v15.
# Verdict of that call (01:30 UTC, commit 570bfea, CLASSES=all): overhead +3.7% (v10) to +17.6% (v17) at b1,
# +5.1..+24.0% at b4, refuted; the heaviest edge agrees for v10, v11 and v15 only: v12-v14 and v16-v19's wgmma
# waits take 2.4-4.5% of warp-cycles (the QK waits a median 5 cycles) where ncu samples 15-24%: the records' own
# instructions (+10-18% of the kernel's time) lengthen the consumers' work and the tensor core's slack, which is
# what the wgmma wait is, shrinks by as much. Second call (hypothesis, 01:45 UTC): each class logged alone
# (CLASSES="wgmma mbarrier named", b1) costs a third of that or less, and the wgmma class alone gives the wgmma
# edge back its weight: heaviest by class = the static graph's on every rung.
# Verdict (01:45 UTC, commit 26b57e2): one class costs +1.4..+8.4%; heaviest by class = the static graph's on 8 of
# 10 rungs (v12: the Q wait 8.8% over wgmma 7.1%; v16: wgmma 1.0%). The wgmma edge stays at 7-8.5% where ncu
# samples 12.7-24.2%, and ncu on the wgmma-class binary itself (WHOWAITS_TRACED_BUILD=waits:wgmma, 01:50 UTC)
# still samples it at 12.6 / 6.8 / 11.8 / 17.7% (v12 / v16 / v17 / v18): the binary waits as the untraced one;
# the log under-measures. Third call (hypothesis, 02:00 UTC): the leader thread is warp 0 of its warpgroup, and
# the warps of a warpgroup do not leave a wgmma wait alike (warp 0's share of the group finishes first); one row per
# warp (PER_WARP=1) gives the wgmma edge ncu's weight within a few points, and the heaviest edge on all ten rungs.
#
# How to call it:
#   0. here, no GPU: bash scripts/device/h200_trace_waits.sh --prebuild   (the untraced and wait-log cubins of v10-v19
#      into .cache/whowaits/build-carry and .cache/whowaits/trace-waits); commit; bash scripts/device/device_tree.sh slim
#   1. device run, carry [".cache/whowaits/build-carry", ".cache/whowaits/trace-waits"], timeout_s 600:
#        WHOWAITS_GIT_COMMIT=<commit> bash scripts/device/h200_trace_waits.sh
#   2. here: bash scripts/device/device_tree.sh restore; unpack results.tgz into reports/h200/traces-waits/ and re-analyse
#      with the committed reports (whowaits trace <v> --raw <file>.trace-waits.npz).
set -u
VERSIONS=${VERSIONS:-"v10 v11 v12 v13 v14 v15 v16 v17 v18 v19"}
SHAPES=${SHAPES:-"b1_h64_s1024_d128_fp16 b4_h16_s4096_d128_fp16"}
CLASSES=${CLASSES:-"all"}  # the record classes, one log each (kernels.tracebuild.WAIT_CLASSES: all wgmma mbarrier named arrivals)
PER_WARP=${PER_WARP:-0}    # 1: a row per warp (--per-warp), not one per warpgroup
if [ "${1:-}" = "--prebuild" ]; then
  set -e
  REPO=$(git rev-parse --show-toplevel); PY=${PYTHON:-$REPO/.venv/bin/python}
  CARRY="$REPO/.cache/whowaits/build-carry"; rm -rf "$CARRY" "$REPO/.cache/whowaits/trace-waits"; mkdir -p "$CARRY"
  WHOWAITS_BUILD_DIR="$CARRY" CLASSES="$CLASSES" PER_WARP="$PER_WARP" "$PY" - $VERSIONS <<'PY'
import os, sys
from kernels import build, registry, trace
for vid in sys.argv[1:]:
    v = registry.get(vid)
    c = v.config_for(128, "fp16", False)
    p = build.build(v, c)
    for cl in os.environ["CLASSES"].split():
        t = trace.build_traced(v, c, "waits", cl, os.environ.get("PER_WARP") == "1")
        print(f"{v.id:24s} untraced {p.registers} regs, wait log ({cl}) {t.registers} regs, {t.spill_bytes} B spills")
PY
  du -sh "$CARRY" "$REPO/.cache/whowaits/trace-waits"
  exit 0
fi
: "${WHOWAITS_GIT_COMMIT:?set WHOWAITS_GIT_COMMIT=<commit of the code> (the device copy has no .git of its own)}"
export WHOWAITS_GIT_COMMIT PYTHONUNBUFFERED=1 WHOWAITS_CACHE_DIR=/tmp/whowaits-parse
export WHOWAITS_BUILD_DIR=$PWD/.cache/whowaits/build-carry
BUDGET=${BUDGET:-400}
R=/tmp/waits-out; rm -rf "$R"; mkdir -p "$R"
T0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$R/nvidia-smi.txt" 2>&1
timeout -k 5 60 python3 -m pip install -q --no-deps --no-build-isolation -e . > "$R/pip.txt" 2>&1; echo "pip rc=$?"
for s in $SHAPES; do
  for v in $VERSIONS; do
    for cl in $CLASSES; do
      [ "$(left)" -lt 25 ] && { echo "skip $v $s $cl (budget)"; continue; }
      PW=; [ "$PER_WARP" = 1 ] && PW=--per-warp
      timeout -k 5 90 whowaits trace $v --waits --class $cl $PW --shape $s --out "$R/$s" > "$R/$v-$s-$cl$PW.txt" 2>&1
      echo "waits $v $s $cl rc=$? at +$(( $(date +%s) - T0 ))s"; head -1 "$R/$v-$s-$cl.txt" | cut -c1-170
    done
  done
done
tar czf "$OUT/results.tgz" -C "$R" . && ls -la "$OUT"
echo "done at +$(( $(date +%s) - T0 ))s"
