// v38: v34 with each K/V tile shared by a cluster of 4 CTAs through TMA multicast at head_dim 128 without a causal
// mask (ladder IV). The four CTAs of a cluster take query blocks 4j .. 4j + 3 of one head
// (common/sm90/tile_scheduler_cluster.cuh) and walk the same key blocks; each producer TMA-loads one 32-row slice of
// every K and V tile with .multicast::cluster, so every CTA's full barrier receives the whole tile, and each consumer
// warp releases a stage on the empty barrier of all four CTAs (v26's scheme, common/sm90/cluster.cuh, generalised by
// v27's kernel.cu under WHOWAITS_KV_CLUSTER). d64 and causal: v34's instructions (a cluster of 1).
//
// Why: at the 700 W cap the energy per FLOP sets the clock (docs/ladder-iv.md). The L2 reads for the SMs are an
// energy term: the epilogue variants v35-v37 read 32-40% more L2 sectors for the same bytes delivered and paid 3%
// more W per TFLOPS at b4. v34's L2 serves 2.44 SMs per sector read (requests of CTAs sharing a head merge when they
// meet); v26 showed that multicast in pairs gives exactly 2 and loses that merging. A cluster of 4 makes the
// sharing 4 by construction: 1/4 of the deliveries as L2 reads (~34 M sectors at b4 against v34's 56 M).
#pragma once
#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v38_kv_multicast4
#endif
#define WHOWAITS_KV_CLUSTER 4
#include "v34_q_regs/kernel.cu"
