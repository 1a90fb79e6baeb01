// v35: v34 with a warp-local epilogue (ladder IV). Each consumer warp writes its own 16 finished O rows with
// stmatrix and TMA-stores them itself (common/sm90/epilogue_warp.cuh, boxes of 16 rows: ABI
// tensor_maps_persistent_o16), so no warpgroup-wide bar.sync sits in a tile boundary any more; a tile's first PV
// wgmma starts O from zero (scale-d 0) instead of the epilogue zeroing 64 registers, and the rescale of O before it
// (by alpha = 1) is skipped. The kernel is v34's kernel.cu (v27's with v34's macros) with WHOWAITS_EPI_WARP 1 and
// WHOWAITS_PV_ZERO_START 1.
//
// Why: at the seed shape (512 tiles on 132 CTAs, 4 rounds) v34's PM-sampled timeline drops from 82% tensor activity
// to 34-45% at every round boundary while issue rises, and in v34's SASS the out-of-turn work of the tile-boundary
// batch is 598 instructions against 332 in a steady batch: the next tile's softmax[0] interleaved with the epilogue's
// 32 st.shared, its swizzle arithmetic, a MEMBAR and two 128-thread bar.syncs (docs/ladder-iv.md, v35).
#pragma once
#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v35_warp_epilogue
#endif
#define WHOWAITS_EPI_WARP 1
#define WHOWAITS_PV_ZERO_START 1
#include "v34_q_regs/kernel.cu"
