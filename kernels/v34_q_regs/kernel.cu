// v34: v32 with Q in registers at head_dim 128 (ladder IV). Each consumer warp loads its 16 query rows' A fragments
// once per tile with ldmatrix (common/sm90/q_regs.cuh) and every QK^T of the tile is an RS wgmma that reads only K
// from shared memory; at d64 the kernel is v32's, instruction for instruction. The kernel is v27's, compiled with
// WHOWAITS_P_SMEM 0, WHOWAITS_POLY_EVERY 0, WHOWAITS_L2_PREFETCH 2 at head_dim 64 and WHOWAITS_Q_REGS 1.
//
// Why: the H200 runs every kernel here at its 700 W power cap, where v21 (= v32 at d128) does cuDNN's work per
// clock and leads only by its lower power per FLOP (docs/ladder-iv.md, "The card runs at its power cap"). v21's SS
// QK^T re-reads the consumer's 16 KB Q slice from shared memory for every key block: with Q in registers a key
// block's wgmma operand reads from shared memory fall from 80 KB to 64 KB per consumer (-20%), for 32 more registers
// per consumer thread (it has 240) and 8 ldmatrix per warp per tile.
#pragma once
#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v34_q_regs
#endif
#define WHOWAITS_POLY_EVERY 0
#define WHOWAITS_P_SMEM 0
#define WHOWAITS_L2_PREFETCH 2
#define WHOWAITS_L2_PREFETCH_HEAD_DIM 64
#define WHOWAITS_Q_REGS 1
#include "v27_p_smem/kernel.cu"
