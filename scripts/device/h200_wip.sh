#!/usr/bin/env bash
# One device call for the wip rungs (kernels/wip/, targets: >= 1.0x cuDNN at b1_h64_s1024 and b4_h16_s4096, >= 1.3x
# flex): RUNGS="v17_tma_store_o" (default: every kernels/wip/v*/ folder, in order). Each rung's hypothesis is in its
# version.toml, written before the call. The script first moves the rungs into kernels/ IN THE DEVICE'S COPY (every
# tool then runs them as landed rungs there; nothing here changes), then per rung: correctness on the default check
# shapes (two with more tiles than SMs) and with the persistent grid capped to 1 CTA, compute-sanitizer synccheck +
# racecheck on a multi-tile grid (in the background beside the checks); then a same-run bench of v12 v14 + the rungs
# that passed both checks with the baselines (SDPA cuDNN/flash/auto, flex-attention, dense GEMM) at the three target
# shapes in one process, their whowaits-set reports at b1_h64_s1024 (one ncu session; cubins built on the device so
# ncu embeds the marked sources) and, if time is left, v14's and theirs at b4_h16_s4096, a bench at the also-reported
# shapes, and their measured traces (WITH_TRACE=0: none). A rung failing stops nothing of the others.
# Every step runs under `timeout -k 5 N`; steps stop starting after $BUDGET s. Everything lands in $OUT/results.tgz.
# (kernels/h200_v15.sh until 2026-12-01 23:20 UTC: the v15 + v16 call, measured at c1c9c6e, ran 173.5 s of command time.)
#
# How to call it:
#   0. here, no GPU: RUNGS="..." bash scripts/device/h200_wip.sh --prebuild   (builds every cubin the call needs, with the
#      rungs already in kernels/, i.e. under the device's build keys, and copies just those builds into
#      .cache/whowaits/build-carry: the tracked tree (57 MB) and the whole build cache exceed the 64 MiB carry);
#      commit the tree (the sidecars record the commit).
#      The committed reports and fixtures alone exceed the device's 64 MiB (76 MiB tracked at 23:45 UTC): first
#        bash scripts/device/device_tree.sh slim     (untracks reports/, tests/public-reports, tests/golden; index only)
#      and right after the call: bash scripts/device/device_tree.sh restore.
#   1. device run, carry [".cache/whowaits/build-carry"], timeout_s 600:
#        RUNGS="..." WHOWAITS_GIT_COMMIT=<commit> bash scripts/device/h200_wip.sh
#   2. here: tar xzf results.tgz; whowaits diff <v14 report> <rung report>; land the rung (git mv kernels/wip/<id>
#      kernels/, verdict, gate rows, ladder_table CHANGES) or write what failed into its version.toml.
# A second call (optional, ~2-3 min: every rung at the ladder table's two shapes) regenerates docs/ladder.md's table:
#        RUNGS="..." WHOWAITS_GIT_COMMIT=<commit> bash scripts/device/h200_wip.sh --full-bench
#   then here: copy results/bench-full/<date>-<shape>.{json,csv} into reports/h200/bench/, python -m
#   kernels.ladder_table <date>.
set -u
REPO0=$(cd "$(dirname "$0")/../.." && pwd)
RUNGS=${RUNGS:-$(cd "$REPO0/kernels/wip" && ls -d v[0-9]*/ 2>/dev/null | tr -d / | tr '\n' ' ')}
export RUNGS
if [ "${1:-}" = "--prebuild" ]; then
  # Here, no GPU: build in a copy of the committed tree with the rungs moved, into this checkout's cache.
  set -e
  REPO=$(git rev-parse --show-toplevel); PY=${PYTHON:-$REPO/.venv/bin/python}; [ -x "$PY" ] || PY=python3
  T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
  git -C "$REPO" archive HEAD | tar x -C "$T"
  for v in $RUNGS; do [ -d "$T/kernels/wip/$v" ] && mv "$T/kernels/wip/$v" "$T/kernels/"; done
  cd "$T"
  CARRY="$REPO/.cache/whowaits/build-carry"; rm -rf "$CARRY"; mkdir -p "$CARRY"
  WHOWAITS_CARRY_DIR="$CARRY" WHOWAITS_BUILD_DIR="$REPO/.cache/whowaits/build" "$PY" - <<'EOF'
import kernels
from kernels import build, registry
from kernels.correctness import DEFAULT_SHAPES
from kernels.config import Shape
assert kernels.__file__.startswith(__import__("os").getcwd()), kernels.__file__  # the moved copy, not the checkout
jobs = {}
bench = ["b1_h64_s1024_d128_fp16", "b4_h16_s4096_d128_fp16", "b4_h16_s4096_d128_fp16_causal", "b1_h3_s320_d128_fp16"]
extra = ["b4_h16_s4096_d128_bf16", "b4_h32_s4096_d64_fp16", "b1_h16_s16384_d128_fp16"]
new = [(r, list(DEFAULT_SHAPES) + bench + extra) for r in __import__("os").environ["RUNGS"].split()]
for vid, shapes in new + [("v12", bench), ("v14", bench + extra)]:
    v = registry.get(vid)
    for key in shapes:
        s = Shape.parse(key)
        cfg = v.config_for(s.head_dim, s.dtype, s.causal)
        jobs[(v.id, cfg.short_form())] = (v, cfg)
import os, shutil
from pathlib import Path
carry = Path(os.environ["WHOWAITS_CARRY_DIR"])
for r in build.build_many(list(jobs.values())):
    if isinstance(r, Exception):
        raise SystemExit(f"prebuild failed: {r}")
    print(f"{r.version:24s} {r.config.short_form():36s} {r.registers} regs, {r.spill_bytes} B spills, cached={r.cached}")
    shutil.copytree(r.cubin.parent, carry / r.cubin.parent.name)
print(f"{len(list(carry.iterdir()))} builds in {carry} (carry it: the whole build cache with the tracked tree is over 64 MiB)")
EOF
  exit 0
fi

: "${WHOWAITS_GIT_COMMIT:?set WHOWAITS_GIT_COMMIT=<commit of the code> (the device copy has no .git of its own)}"
export WHOWAITS_GIT_COMMIT
BUDGET=${BUDGET:-420}
R=/tmp/wiprun; rm -rf "$R"; mkdir -p "$R"
export PYTHONUNBUFFERED=1 WHOWAITS_CACHE_DIR=/tmp/whowaits-parse
# the prebuilt cubins this call needs (only those: the whole build cache and the tracked tree exceed the 64 MiB carry)
[ -d .cache/whowaits/build-carry ] && export WHOWAITS_BUILD_DIR=$PWD/.cache/whowaits/build-carry
T0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
stamp() { echo "== $1 at +$(( $(date +%s) - T0 ))s"; }
finish() { stamp done; tar czf "$OUT/results.tgz" -C "$R" . && ls -la "$OUT"; exit 0; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$R/nvidia-smi.txt" 2>&1
stamp move
NEW="$RUNGS"
for v in $NEW; do
  if [ -d "kernels/wip/$v" ] && [ ! -d "kernels/$v" ]; then mv "kernels/wip/$v" kernels/; fi
  ls -d "kernels/$v" || { echo "no kernels/$v"; finish; }
done
stamp install
timeout -k 5 60 python3 -m pip install -q --no-deps --no-build-isolation -e . > "$R/pip.txt" 2>&1; echo "pip rc=$?"
python3 -c "from kernels import registry; print([registry.get(v).id for v in '$NEW'.split()])" || finish

if [ "${1:-}" = "--full-bench" ]; then
  # Second call: every rung (the landed ones and $RUNGS, moved) and the baselines at the ladder table's two shapes, one process
  # per shape (v13's call: the 13-rung bench at b1 took ~23 s, at b4 about a minute).
  for s in b1_h64_s1024_d128_fp16 b4_h16_s4096_d128_fp16; do
    stamp "full bench $s"
    timeout -k 5 280 whowaits bench --repeat ${REPEAT:-3} --shape $s --out "$R/bench-full" --format csv \
      > "$R/bench-full-$s.txt" 2>&1
    echo "bench $s rc=$?"; grep -E "^(v[01]|sdpa-(cudnn|flash)|flex|#)" "$R/bench-full-$s.txt" | cut -c1-120
  done
  finish
fi

stamp sanitize-start
for v in $NEW; do
  for tool in synccheck racecheck; do
    # 9 tiles (3 query blocks x 3 heads, the last ragged) of 3 key blocks on 2 CTAs: every CTA crosses tiles, and
    # every batch crosses a tile boundary (v15's fence, v17's store protocol with a ragged last query block)
    ( WHOWAITS_MAX_CTAS=2 timeout -k 5 80 compute-sanitizer --tool $tool python3 -m kernels.runner $v \
        --shape b1_h3_s320_d128_fp16 --warmup 0 > "$R/$tool-${v%%_*}.txt" 2>&1; echo "rc=$?" >> "$R/$tool-${v%%_*}.txt" ) &
  done
done
OK=
for v in $NEW; do
  n=${v%%_*}
  stamp "check $n"
  timeout -k 5 60 python3 -m kernels.correctness $n > "$R/check-$n.txt" 2>&1; rc=$?
  echo "check $n rc=$rc"; tail -12 "$R/check-$n.txt" | cut -c1-150
  if [ $rc = 0 ]; then
    WHOWAITS_MAX_CTAS=1 timeout -k 5 45 python3 -m kernels.correctness $n --shapes b2_h3_s200_d128_fp16 \
      b1_h8_s1024_d128_fp16 b2_h2_s333_d128_fp16_causal b1_h3_s190_d64_bf16_causal b1_h4_s515_d128_bf16 \
      > "$R/check-1cta-$n.txt" 2>&1; rc1=$?
    echo "check $n 1 CTA rc=$rc1"; tail -6 "$R/check-1cta-$n.txt" | cut -c1-150
    [ $rc1 = 0 ] && OK="$OK $n"
  fi
done
stamp sanitize-wait
wait
for f in "$R"/synccheck-*.txt "$R"/racecheck-*.txt; do echo "$(basename "$f"):"; tail -3 "$f"; done
echo "passed both checks:${OK:- none}"
[ -z "$OK" ] && finish
stamp bench
timeout -k 5 170 whowaits bench v12 v14 $OK --repeat ${REPEAT:-3} --shape b1_h64_s1024_d128_fp16 \
  --shape b4_h16_s4096_d128_fp16 --shape b4_h16_s4096_d128_fp16_causal --out "$R/bench" --format csv \
  > "$R/bench.txt" 2>&1
echo "bench rc=$?"; grep -E "^(v1|sdpa-(cudnn|flash)|flex|shape|#)|best version" "$R/bench.txt" | cut -c1-140
if [ "$(left)" -gt 30 ]; then
  stamp profile-b1
  # the rungs that passed, in one ncu session
  WHOWAITS_BUILD_DIR=/tmp/whowaits-devbuild timeout -k 5 $(( $(left) - 5 )) whowaits profile $OK \
    --shape b1_h64_s1024_d128_fp16 --out "$R/reports" --gpu h200 > "$R/profile-b1.txt" 2>&1
  echo "profile$OK b1 rc=$?"; tail -2 "$R/profile-b1.txt"
fi
if [ "$(left)" -gt 60 ]; then
  stamp profile-b4
  WHOWAITS_BUILD_DIR=/tmp/whowaits-devbuild timeout -k 5 $(( $(left) - 5 )) whowaits profile v14 $OK \
    --shape b4_h16_s4096_d128_fp16 --out "$R/reports-b4" --gpu h200 > "$R/profile-b4.txt" 2>&1
  echo "profile v14$OK b4 rc=$?"; tail -2 "$R/profile-b4.txt"
fi
if [ "$(left)" -gt 90 ]; then
  stamp extra
  timeout -k 5 $(( $(left) - 5 )) whowaits bench v14 $OK --repeat 1 --shape b4_h16_s4096_d128_bf16 \
    --shape b4_h32_s4096_d64_fp16 --shape b1_h16_s16384_d128_fp16 --out "$R/bench-extra" --format csv \
    > "$R/bench-extra.txt" 2>&1
  echo "bench extra rc=$?"; grep -E "^(v1|sdpa-cudnn|flex|shape)|best version" "$R/bench-extra.txt" | cut -c1-140
fi
if [ "$(left)" -gt 40 ] && [ "${WITH_TRACE:-1}" = 1 ]; then
  # the rungs' measured traces (format 2, end pairs)
  # ~20-30 s each. Commit their summaries under reports/h200/traces-format2/.
  stamp trace
  for v in $OK; do
    [ "$(left)" -lt 30 ] && break
    timeout -k 5 $(( $(left) - 5 )) whowaits trace "$v" --shape b1_h64_s1024_d128_fp16 --out "$R/traces" \
      > "$R/trace-$v.txt" 2>&1
    echo "trace $v rc=$?"; head -4 "$R/trace-$v.txt" | cut -c1-160
  done
fi
finish
