// v33: v32 with the L2 prefetch at head_dim 128 too, staggered over the tile (ladder IV). At d128 each CTA's producer
// issues the prefetches of its next tile's key/value blocks right after loading key block blockIdx.x mod n_blocks of
// its current tile, so the 132 CTAs of a round, which start and end their tiles together, spread them over the
// whole tile instead of issuing them at one moment. d64: v32's prefetch halfway through the tile. The consumers'
// instructions are v21's. The kernel is v27's, compiled with WHOWAITS_P_SMEM 0, WHOWAITS_POLY_EVERY 0,
// WHOWAITS_L2_PREFETCH_D64 2 and WHOWAITS_L2_PREFETCH_D128 3.
//
// Why: v31's same-session timeline at the seed shape: the prefetch at half the tile made the round boundaries'
// dips shallower (tensor pipe 24 / 35 / 30% -> 38 / 52 / 50%) but its own DRAM burst (92% for a sample, every CTA
// at the same point of its tile) dipped the tensor pipe to 17% mid-tile.
#pragma once
#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v33_l2_prefetch_staggered
#endif
#define WHOWAITS_POLY_EVERY 0
#define WHOWAITS_P_SMEM 0
#define WHOWAITS_L2_PREFETCH_D64 2
#define WHOWAITS_L2_PREFETCH_D128 3
#include "v27_p_smem/kernel.cu"
