// v30: v21 with the next tile's K/V prefetched into the L2 (ladder IV). At the start of each tile the producer issues
// L2 prefetches (cp.async.bulk.prefetch.tensor, common/sm90/tma.cuh: tma_prefetch_tile) of the key/value blocks of
// the CTA's next tile; the CTAs whose next tiles share a head split them by query block (block m takes key blocks m,
// m + m_blocks, ...: one block each when block_m = block_n). Nothing waits for a prefetch and no shared memory is
// touched; the consumers' instructions are v21's. The kernel is v27's, compiled with WHOWAITS_P_SMEM 0 and
// WHOWAITS_POLY_EVERY 0 (v21's consumers) and WHOWAITS_L2_PREFETCH 1.
//
// Why: the PM-sampled timeline of v21 at the seed shape (b1_h64_s1024_d128: 512 tiles of 8 key blocks on 132
// CTAs, 4 rounds) dips at every round: the tensor pipe falls from ~70% to 20-50% for 2-3 samples (1.5 us each)
// exactly when DRAM throughput spikes to 70%, because all CTAs start tiles of new heads together and the first
// K/V blocks of those heads come from DRAM at once. cuDNN's timeline has the same dips. A prefetch a tile ahead
// spreads those reads over the previous tile, when DRAM is idle.
#pragma once
#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v30_l2_prefetch
#endif
#define WHOWAITS_POLY_EVERY 0
#define WHOWAITS_P_SMEM 0
#define WHOWAITS_L2_PREFETCH 1
#include "v27_p_smem/kernel.cu"
