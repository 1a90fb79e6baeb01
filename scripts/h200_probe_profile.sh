#!/usr/bin/env bash
# Device probe for `whowaits profile` (run on the lent H200 through the device tool, results under $OUT):
# validates sections/ with ncu itself, profiles torch SDPA flash + cuDNN with the whowaits set through the
# real CLI, checks how ncu splits a combined report, and records ncu's real messages for the error paths
# that tests/fake_ncu/ncu replays. Usage: OUT=/some/dir bash scripts/h200_probe_profile.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
[ -d .devcarry/build ] && export WHOWAITS_BUILD_DIR=$PWD/.devcarry/build  # cubins built here (same nvcc 13.0.88)
OUT=${OUT:-/tmp/whowaits-probe}; mkdir -p "$OUT"
ww() { python3 -c 'import sys; from profiler.cli import main; sys.argv[0] = "whowaits"; main()' "$@"; }
sec() { echo; echo "### $*"; }
TIMEFORMAT='wall %R s'
SUBJ="python3 scripts/sdpa_subject.py --warmup 3"

sec env
ncu --version | tail -1; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
real=$(readlink -f "$(which ncu)"); echo "ncu -> $real"
ls -d "$(dirname "$real")"/../nsight-compute*/sections "$(dirname "$real")"/sections \
      "$HOME/Documents/NVIDIA Nsight Compute"/*/Sections /usr/local/cuda*/nsight-compute*/sections 2>/dev/null

sec list-sections
ncu --list-sections --section-folder sections 2>&1 | tee "$OUT/list-sections.txt"
ncu --list-sets --section-folder sections 2>&1
for c in launch device; do ncu --query-metrics-collection $c --chips gh100 > "$OUT/query-$c.txt" 2>&1; echo "query $c rc=$? lines=$(wc -l < "$OUT/query-$c.txt")"; done

sec profile ext-sdpa-flash whowaits
rm -rf reports/h200/ext-sdpa-flash/*.probe; mkdir -p /tmp/rep
time ww profile -v --out /tmp/rep --gpu h200 --cmd "$SUBJ --backend flash" --kernel flash_fwd_kernel --name ext-sdpa-flash --launch-skip 3 2>&1 | grep -v "^  " | tail -25
sec profile ext-sdpa-cudnn whowaits
time ww profile -v --out /tmp/rep --gpu h200 --cmd "$SUBJ --backend cudnn" --kernel 'cudnn_generated.*sdpa.*fprop' --name ext-sdpa-cudnn --launch-skip 3 2>&1 | grep -E '==(PROF|ERROR|WARNING)==|passes|error|wall' | tail -12
sec refuse overwrite
ww profile --out /tmp/rep --gpu h200 --cmd "$SUBJ --backend flash" --kernel flash_fwd_kernel --name ext-sdpa-flash --launch-skip 3; echo "rc=$?"
cat /tmp/rep/h200/ext-sdpa-flash/*.json

sec ladder --all --ext
ls kernels
time ww profile -v --all --ext --out /tmp/rep --gpu h200 --force 2>&1 | grep -E "==(PROF|ERROR|WARNING)==|passes|error|failed|wall|ran |^  " | tail -30
ls -la /tmp/rep/h200/*

sec combined report split by hand
ncu --section-folder sections --set whowaits --clock-control none --kernel-name-base demangled -k 'regex:flash_fwd_kernel|cudnn_generated' \
    --nvtx --nvtx-include 'whowaits:ext-sdpa-flash/' --nvtx-include 'whowaits:ext-sdpa-cudnn/' --launch-count 2 -f -o /tmp/combined \
    $SUBJ --backend flash --backend cudnn 2>&1 | grep -E "==(PROF|ERROR|WARNING)=="
ncu -i /tmp/combined.ncu-rep --kernel-name-base demangled -k regex:cudnn -f --export /tmp/part 2>&1 | tail -3; echo "split rc=$?"
ls -la /tmp/combined.ncu-rep /tmp/part* 2>&1
ncu -i /tmp/part.ncu-rep --page raw --csv --metrics gpu__time_duration.sum 2>&1 | tail -3

sec messages: no kernel matched
ncu --clock-control none --section-folder sections --set whowaits -k regex:no_such_kernel $SUBJ --backend flash > "$OUT/msg-nokernel.txt" 2>&1; echo "rc=$?" | tee -a "$OUT/msg-nokernel.txt"
sec messages: program crashes
ncu --clock-control none --section-folder sections --set whowaits python3 -c 'import sys; print("boom", file=sys.stderr); sys.exit(3)' > "$OUT/msg-crash.txt" 2>&1; echo "rc=$?" | tee -a "$OUT/msg-crash.txt"
sec messages: no GPU visible
CUDA_VISIBLE_DEVICES= ncu --clock-control none --section-folder sections --set whowaits $SUBJ --backend flash > "$OUT/msg-nogpu.txt" 2>&1; echo "rc=$?" | tee -a "$OUT/msg-nogpu.txt"
sec messages: bad section metric
mkdir -p /tmp/badsec && sed 's/dram__bytes.sum.per_second/dram__bites.sum.per_second/' sections/WhowaitsRoofline.section > /tmp/badsec/Bad.section
ncu --list-sections --section-folder /tmp/badsec > "$OUT/msg-badsection.txt" 2>&1; echo "rc=$?" >> "$OUT/msg-badsection.txt"
tail -n 30 "$OUT"/msg-*.txt

sec bring reports back
(cd /tmp/rep && tar czf "$OUT/reports.tgz" h200)
ls -la "$OUT"
