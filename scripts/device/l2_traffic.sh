#!/usr/bin/env bash
# L2 traffic of ladder rungs by source and direction, one ncu run per rung (v26: did the K/V multicast halve the L2
# reads?; v35-v37: where does the epilogue change's +25-42% lts2xbar at b4 come from? the GCC (instruction and
# constant) source unit and the write sectors were added for it). whowaits' own set carries lts2xbar (L2 -> crossbar bytes and cycles) but no L2 sector counts; this asks
# ncu for the L2 sectors read for the SMs (TEX/TMA), all L2 sectors, the sectors crossing between the L2 partitions
# (ltcfabric), the bytes the SMs' L1TEX received from the crossbar and lts2xbar, each kept only where this ncu lists
# it (--query-metrics), with the whowaits profile's clock and cache control (none / all).
#
#   RUNGS="v21_causal_pairs v26_kv_multicast" SHAPE=b4_h16_s4096_d128_fp16 bash scripts/device/l2_traffic.sh OUTDIR
#
# Writes OUTDIR/query.txt (the matching metric names) and OUTDIR/l2-<rung>.csv (ncu --csv --page raw).
set -u
OUTDIR=${1:?usage: l2_traffic.sh OUTDIR}
RUNGS=${RUNGS:-"v21_causal_pairs v26_kv_multicast"}
SHAPE=${SHAPE:-b4_h16_s4096_d128_fp16}
mkdir -p "$OUTDIR"
WANT="lts__t_sectors_srcunit_tex_op_read.sum lts__t_requests_srcunit_tex_op_read.sum lts__t_sectors_op_read.sum
lts__t_sectors.sum lts__t_sectors_srcunit_ltcfabric.sum lts__t_sectors_srcunit_tex_lookup_hit.sum
lts__t_sectors_srcunit_tex_lookup_miss.sum lts__lts2xbar_cycles_active.sum l1tex__m_xbar2l1tex_read_bytes.sum
lts__t_bytes.sum gpu__time_duration.sum sm__cycles_elapsed.avg.per_second lts__t_sectors_srcunit_tex_op_write.sum
lts__t_sectors_op_write.sum lts__t_sectors_srcunit_gcc.sum lts__t_requests_srcunit_gcc.sum lts__t_sectors_srcunit_tex.sum
lts__t_requests_srcunit_tex.sum lts__t_sectors_srcunit_l1.sum lts__xbar2lts_cycles_active.sum
smsp__warp_issue_stalled_no_instruction.sum"
timeout -k 5 60 ncu --query-metrics > "$OUTDIR/query-all.txt" 2>&1
: > "$OUTDIR/query.txt"
LIST=""
for m in $WANT; do
  base=${m%.*}
  if grep -q "^$base " "$OUTDIR/query-all.txt"; then LIST="$LIST,$m"; echo "$m" >> "$OUTDIR/query.txt"; fi
done
grep -E "^(lts__t_sectors_srcunit|lts__t_requests_srcunit|l1tex__m_xbar2l1tex|lts__lts2xbar|lts__xbar2lts|sm__icc|gcc__|smsp__icc)" \
  "$OUTDIR/query-all.txt" | cut -c1-160 >> "$OUTDIR/query.txt"
rm -f "$OUTDIR/query-all.txt"
LIST=${LIST#,}
echo "metrics: $LIST"
for v in $RUNGS; do
  timeout -k 5 120 ncu --clock-control none --cache-control all --nvtx --nvtx-include "whowaits:$v/" \
    --metrics "$LIST" --csv --page raw python3 -m kernels.runner "$v" --shape "$SHAPE" > "$OUTDIR/l2-$v.csv" 2>&1
  echo "ncu $v rc=$?"; grep -v "^==" "$OUTDIR/l2-$v.csv" | tail -2 | cut -c1-400
done
