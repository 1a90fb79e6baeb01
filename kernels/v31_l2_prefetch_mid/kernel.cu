// v31: v30 with the next tile's L2 prefetch issued halfway through the current tile (ladder IV). The producer issues
// the prefetches of its next tile's key/value blocks (block m, m + m_blocks, ... for the next tile's query block m,
// common/sm90/tma.cuh: tma_prefetch_tile) right after the load of key block n_blocks / 2 of the current tile, when
// the consumers are about kStages blocks behind it; v30 issued them as the tile began. The consumers' instructions
// are v21's. The kernel is v27's, compiled with WHOWAITS_P_SMEM 0, WHOWAITS_POLY_EVERY 0 and WHOWAITS_L2_PREFETCH 2.
//
// Why: v30's timeline at the seed shape: issued at the start of a tile, i.e. at a round boundary, the prefetches
// piled onto the burst of the round's own cold K/V reads (DRAM 97-100% per 1.5 us sample) and onto the cold start,
// and left DRAM at 2-6% between boundaries. Halfway through a tile the DRAM is idle and the next boundary is half a
// tile away (~7 us at the seed shape), time enough for the reads to land in the L2.
#pragma once
#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v31_l2_prefetch_mid
#endif
#define WHOWAITS_POLY_EVERY 0
#define WHOWAITS_P_SMEM 0
#define WHOWAITS_L2_PREFETCH 2
#include "v27_p_smem/kernel.cu"
