#!/usr/bin/env bash
# Usage (on the device, from a copy of the checkout): bash scripts/device/h200_ncu_tree.sh -- prints the process tree of a
# `whowaits profile` while ncu profiles, which processes carry the session token, and what is left after a SIGTERM
# sent to whowaits alone (2026-12-02 19:45 UTC: only the inner ncu, re-parented to PID 1 and <defunct>).
# diagnose: which ncu processes exist while whowaits profiles, their parents, sessions, groups, env token
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 WHOWAITS_GIT_COMMIT=${WHOWAITS_GIT_COMMIT:-unknown}
REP=$(mktemp -d)
line=$(python3 scripts/zoo_subjects.py --plan | awk -F'\t' '$1 == "cublas-gemm-skinny"')
IFS=$'\t' read -r name shape regex nvtx flops bytes <<< "$line"
setsid python3 -c 'import sys; from profiler.cli import main; sys.argv[0] = "whowaits"; main()' profile --cmd "python3 scripts/zoo_subjects.py $name" --nvtx "$nvtx" --kernel "$regex" \
  --name "$name-sig" --shape "$shape" --out "$REP" --gpu verify < /dev/null > "$REP/sig.log" 2>&1 &
pid=$!
for _ in $(seq 1 60); do pgrep -x ncu > /dev/null && break; sleep 0.25; done
sleep 2
echo "whowaits pid $pid"
ps -eo pid,ppid,pgid,sid,stat,comm,args --forest | grep -v "ps -eo" | tail -25
for p in $(pgrep -x ncu) $(pgrep -f zoo_subjects); do
  tok=$(tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep WHOWAITS_NCU_SESSION); echo "pid $p exe=$(readlink /proc/$p/exe) token=[$tok] nenv=$(tr '\0' '\n' < /proc/$p/environ 2>/dev/null | wc -l) uid=$(awk '/^Uid/{print $2}' /proc/$p/status)"
done
kill -TERM $pid; wait $pid; echo "exit $?"; sleep 1
echo "after:"; ps -eo pid,ppid,pgid,sid,stat,comm,args --forest | grep -v "ps -eo" | tail -12
pkill -9 -x ncu; true
