#!/usr/bin/env bash
# One device call that proves, with the real ncu on the H200, what CI cannot:
#   1. ncu parses every section file of sections/ (architecture filters included): --list-sections lists them all;
#   2. `whowaits profile` with the whowaits set takes a launch of a production kernel (cuBLAS, skinny GEMM) and
#      the report is not "partial" for Hopper-only metrics; `whowaits show` reads it;
#   3. a SIGTERM sent to the whowaits process ALONE (not its group) while ncu profiles leaves no ncu running.
# Usage (from a copy of the checkout on the device): WHOWAITS_GIT_COMMIT=<sha> OUT=$OUT bash scripts/device/h200_verify_sections.sh
set -u
: "${WHOWAITS_GIT_COMMIT:?set WHOWAITS_GIT_COMMIT=<commit of the code>}"
export WHOWAITS_GIT_COMMIT PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
OUT=${OUT:-/tmp/whowaits-verify}; mkdir -p "$OUT"
REP=$(mktemp -d /tmp/whowaits-verify.XXXXXX)
WW=(python3 -c 'import sys; from profiler.cli import main; sys.argv[0] = "whowaits"; main()')
main() {
echo "verify: $(date -u +%FT%TZ) commit $WHOWAITS_GIT_COMMIT"
ncu --version | tail -1
echo "== 1. ncu --list-sections --section-folder sections"
ncu --list-sections --section-folder sections; echo "rc=$?"
echo "== 1b. every section file is listed"
for f in sections/*.section; do id=$(grep -m1 '^Identifier' "$f" | sed 's/.*"\(.*\)".*/\1/'); \
  if ncu --list-sections --section-folder sections | grep -q "$id"; then echo "listed $id"; else echo "MISSING $id ($f)"; fi; done
echo "== 2. whowaits profile (cuBLAS skinny GEMM) with the whowaits set"
line=$(python3 scripts/zoo_subjects.py --plan | awk -F'\t' '$1 == "cublas-gemm-skinny"')
IFS=$'\t' read -r name shape regex nvtx flops bytes <<< "$line"
t0=$SECONDS
timeout 150 "${WW[@]}" profile --cmd "python3 scripts/zoo_subjects.py $name" --nvtx "$nvtx" --kernel "$regex" \
  --name "$name" --shape "$shape" --out "$REP" --gpu verify --problem-flops "$flops" --verbose < /dev/null
echo "profile rc=$? $((SECONDS - t0)) s"
r=$(ls "$REP"/verify/*/*.ncu-rep | head -1)
"${WW[@]}" show "$r"; echo "show rc=$?"
"${WW[@]}" show "$r" --format json > "$OUT/show.json"; echo "show json rc=$?"
cp "$r" "$OUT/verify-skinny.ncu-rep"
echo "== 3. SIGTERM to whowaits alone while ncu profiles"
setsid "${WW[@]}" profile --cmd "python3 scripts/zoo_subjects.py $name" --nvtx "$nvtx" --kernel "$regex" \
  --name "$name-sig" --shape "$shape" --out "$REP" --gpu verify < /dev/null > "$REP/sig.log" 2>&1 &
pid=$!
for _ in $(seq 1 60); do pgrep -x ncu > /dev/null && break; sleep 0.25; done
echo "ncu running before the signal: $(pgrep -x ncu | tr '\n' ' ')"
sleep 2
kill -TERM "$pid"; wait "$pid"; echo "whowaits exit: $?"
sleep 1
# a zombie is not a process left running: an ncu re-parented to PID 1 stays <defunct> until PID 1 reaps it, and the
# device VM's PID 1 (process_api) did not (2026-12-02 19:45 UTC: .dev/diag ncu_tree, reports/h200/verify/*ncu-tree.log)
live() { for p in $(pgrep -x ncu); do [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" = Z ] || echo "$p"; done | tr '\n' ' '; }
zombies() { for p in $(pgrep -x ncu); do [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" = Z ] && echo "$p"; done | tr '\n' ' '; }
left=$(live); echo "ncu left after whowaits exited: '${left}' (zombies, not running: '$(zombies)')"
pgrep -f "zoo_subjects.py $name" > /dev/null && echo "profiled program left: yes" || echo "profiled program left: no"
tail -3 "$REP/sig.log"
echo "verify: done"
}
main 2>&1 | tee "$OUT/verify.log"
