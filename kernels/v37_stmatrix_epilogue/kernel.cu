// v37: v34 with its warpgroup epilogue's rows written by stmatrix (ladder IV): TmaStoreEpilogue<..., kStmatrix>
// (common/sm90/epilogue.cuh) writes each warp's 16 finished O rows with kHeadDim / 16 stmatrix.x4 instead of
// 2 kHeadDim / 8 st.shared.b32 at per-element swizzled addresses; the protocol is v34's (two 128-thread bar.syncs,
// one issuer, 64-row boxes, ABI tensor_maps_persistent_o). The kernel is v34's kernel.cu (v27's with v34's macros)
// with WHOWAITS_EPI_STSM 1.
//
// Why: v36 (the warp-local epilogue: stmatrix, no bar.sync, each warp's own 16-row TMA boxes) gained 0.8-0.9% at
// the seed shape in two same-run benches but raised ncu's L2-to-crossbar activity by 14% (seed) and 42% (b4), and at
// the power cap used 3% more energy per FLOP at b4. v37 keeps the part of v36 that changes only the instructions.
#pragma once
#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v37_stmatrix_epilogue
#endif
#define WHOWAITS_EPI_STSM 1
#include "v34_q_regs/kernel.cu"
