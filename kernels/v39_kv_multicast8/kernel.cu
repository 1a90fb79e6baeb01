// v39: v38 with clusters of 8 CTAs (ladder IV): each K/V tile is loaded as eight 16-row slices, one per CTA, each
// multicast to all eight, so one L2 read serves 8 SMs by construction; the eight CTAs take query blocks 8j .. 8j + 7
// of one head and walk its key blocks in lockstep. d64 and causal: v34's instructions (a cluster of 1).
//
// Why: v38 (clusters of 4) and v39 measure, in one device call, how the L2 reads, the energy per FLOP and the
// lockstep's cost move with the width of the sharing (v34: 1, merging of its own ~2.44 per read).
#pragma once
#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v39_kv_multicast8
#endif
#define WHOWAITS_KV_CLUSTER 8
#include "v34_q_regs/kernel.cu"
