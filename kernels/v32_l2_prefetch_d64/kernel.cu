// v32: v31's L2 prefetch at head_dim 64 only (ladder IV). At d64 the producer prefetches its next tile's key/value
// blocks into the L2 halfway through the current tile, as v31 does; at d128 the kernel is v21's, instruction for
// instruction. The kernel is v27's, compiled with WHOWAITS_P_SMEM 0, WHOWAITS_POLY_EVERY 0, WHOWAITS_L2_PREFETCH 2 and
// WHOWAITS_L2_PREFETCH_HEAD_DIM 64.
//
// Why: in v31's same-run bench (T0352) the prefetch gained 4.9% at b4_h32_s4096_d64_fp16 (501.3 vs 477.8 TFLOPS,
// 1.072x cuDNN) and lost 1-4.5% at every d128 shape: under ncu at b4 d128 it changed nothing but the L2 traffic
// (+24% lts2xbar bytes, the same duration), which the card pays for at its power cap; at the seed shape its own
// burst of prefetches made a dip mid-tile.
#pragma once
#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v32_l2_prefetch_d64
#endif
#define WHOWAITS_POLY_EVERY 0
#define WHOWAITS_P_SMEM 0
#define WHOWAITS_L2_PREFETCH 2
#define WHOWAITS_L2_PREFETCH_HEAD_DIM 64
#include "v27_p_smem/kernel.cu"
