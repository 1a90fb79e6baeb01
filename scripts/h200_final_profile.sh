#!/usr/bin/env bash
# Final device step for `whowaits profile` (run through the device tool; results under $OUT):
#  1. replay passes of the current sections/ and of each trimmed candidate (scripts/section_candidates.py,
#     carried in .devcarry/candidates) on a tiny kernel; the first with <= 15 passes (0.4 x full's 38)
#     replaces sections/ for the rest of this run (the same files are then committed);
#  2. scripts/collection_cost.py on the newest version: LaunchStats-only / whowaits / full, interleaved,
#     then `whowaits profile VERSION` vs `whowaits profile --all --ext` (the committed data set).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
[ -d .devcarry/build ] && export WHOWAITS_BUILD_DIR=$PWD/.devcarry/build  # cubins built here (same nvcc 13.0.88)
T=.devcarry/probe/tiny
passes() { "$@" 2>&1 | grep -oE '[0-9]+ pass(es)?' | head -1 | grep -oE '[0-9]+'; }
for c in sections .devcarry/candidates/c*; do
  echo "$c $(passes ncu --clock-control none --section-folder $c --set whowaits $T)"
done | tee $OUT/passes.txt
chosen=$(awk '$2 != "" && $2 <= 15 {print $1; exit}' $OUT/passes.txt)
[ -z "$chosen" ] && chosen=$(sort -k2,2n $OUT/passes.txt | awk '$2 != "" {print $1; exit}')
echo "chosen: $chosen" | tee $OUT/chosen.txt
if [ "$chosen" != sections ]; then rm sections/*.section && cp $chosen/*.section sections/; fi
ncu --list-sets --section-folder sections | grep whowaits
ls kernels | grep '^v'
timeout 330 python3 scripts/collection_cost.py --out $OUT/collection-cost.json --all-out /tmp/rep --ext-suffix=-whowaits 2>&1 \
  | grep -vE '^\s+|━' | tail -40
tar czf $OUT/reports.tgz -C /tmp/rep h200
echo "ncu's own sections:"; ls -d "$HOME/Documents/NVIDIA Nsight Compute"/*/Sections 2>&1; file -L "$(which ncu)" | cut -c1-120
ls -d /usr/local/cuda/nsight-compute*/sections /opt/nvidia/nsight-compute/*/sections 2>/dev/null
ls -la $OUT
