#!/usr/bin/env bash
# Profile the zoo (scripts/zoo_subjects.py: cuBLAS, CUTLASS, Triton, FlexAttention, inductor, cuDNN) on the
# H200, one ncu session per subject with the `whowaits` section set, in one device call (< 400 s).
#
#   git commit …; rsync the checkout to /work/main/.dev/zoo (COMMON.md), then on the device tool:
#   cd .dev/zoo && WHOWAITS_GIT_COMMIT=<commit> WHOWAITS_GIT_DIRTY=0 OUT=$OUT bash scripts/device/h200_zoo.sh
#   # back here:
#   cat <files_at>/zoo-reports.tgz.* | tar xz -C reports/h200/   # zoo/<name>/<shape>.{ncu-rep,json}
#   tar xzf <files_at>/zoo-golden.tgz -C tests/golden/      # zoo/<name>_<shape>.{raw.csv,source-sass.csv}.gz
#   cp <files_at>/zoo.log reports/h200/zoo/device-<date>.log
#
# Each subject: `whowaits profile --cmd "python3 scripts/zoo_subjects.py NAME" --nvtx whowaits:zoo-NAME
# --kernel REGEX --name NAME --shape SHAPE --problem-flops F` (parameters from `zoo_subjects.py --plan`):
# 3 warm-up calls, then the one call inside the NVTX range is profiled (--clock-control none, --cache-control
# all, --import-source yes: collect.py's defaults). Then ncu's own pages of every report (raw; source with
# SASS) are exported for the tests' golden values. Subjects run in --plan's order until BUDGET_S seconds
# have passed; a subject that fails is logged and the others go on.
set -u
: "${WHOWAITS_GIT_COMMIT:?set WHOWAITS_GIT_COMMIT=<commit of the code> (the device copy has no .git of its own)}"
export WHOWAITS_GIT_COMMIT PYTHONUNBUFFERED=1 PYTHONPATH=$PWD TORCHINDUCTOR_COMPILE_THREADS=1
OUT=${OUT:-/tmp/whowaits-zoo}; mkdir -p "$OUT"
BUDGET_S=${BUDGET_S:-250}
REP=$(mktemp -d /tmp/whowaits-zoo.XXXXXX)
main() {
t_start=$SECONDS
echo "zoo: $(date -u +%FT%TZ) commit $WHOWAITS_GIT_COMMIT dirty ${WHOWAITS_GIT_DIRTY:-unset}"
ncu --version | tail -1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
python3 - <<'PY'
import importlib.metadata as md
import torch, triton
v = lambda p: (md.version(p) if any(True for _ in md.distributions(name=p)) else "-")
print(f"torch {torch.__version__} cuda {torch.version.cuda} cudnn {torch.backends.cudnn.version()} "
      f"triton {triton.__version__} nvidia-cublas {v('nvidia-cublas')} nvidia-cudnn-cu13 {v('nvidia-cudnn-cu13')}")
PY
WW=(python3 -c 'import sys; from profiler.cli import main; sys.argv[0] = "whowaits"; main()')
while IFS=$'\t' read -r name shape regex nvtx flops bytes; do
  if (( SECONDS - t_start > BUDGET_S )); then echo "== $name: skipped (budget ${BUDGET_S} s spent)"; continue; fi
  extra=()
  [ "$flops" != - ] && extra+=(--problem-flops "$flops")
  [ "$bytes" != - ] && extra+=(--problem-bytes "$bytes")
  t0=$SECONDS
  timeout 120 "${WW[@]}" profile --cmd "python3 scripts/zoo_subjects.py $name" --nvtx "$nvtx" --kernel "$regex" \
    --name "$name" --shape "$shape" --out "$REP" --gpu zoo "${extra[@]}" --verbose < /dev/null
  echo "== $name: rc=$? $((SECONDS - t0)) s"
done < <(python3 scripts/zoo_subjects.py --plan)

GOLD=$REP/golden/zoo; mkdir -p "$GOLD"
export GOLD
ls "$REP"/zoo/*/*.ncu-rep 2>/dev/null | xargs -r -P 8 -I{} bash -c '
  r={}; s=$(basename "$(dirname "$r")")_$(basename "$r" .ncu-rep)
  ncu --import "$r" --page raw --csv | gzip -9 > "$GOLD/$s.raw.csv.gz"
  ncu --import "$r" --page source --csv --print-source sass | gzip -9 > "$GOLD/$s.source-sass.csv.gz"'
ls -la "$REP"/zoo/*/ "$GOLD"
tar czf "$REP/zoo-reports.tgz" -C "$REP" zoo
split -b 15M -d -a 1 "$REP/zoo-reports.tgz" "$OUT/zoo-reports.tgz."  # the device returns files of <= 16 MiB
tar czf "$OUT/zoo-golden.tgz" -C "$REP/golden" zoo
echo "zoo: done in $((SECONDS - t_start)) s"
}
main 2>&1 | tee "$OUT/zoo.log"
ls -la "$OUT"
