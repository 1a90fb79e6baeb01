// v36: v34 with v35's warp-local epilogue alone (ladder IV): each consumer warp writes its own 16 finished O rows with
// stmatrix and TMA-stores them itself (common/sm90/epilogue_warp.cuh, ABI tensor_maps_persistent_o16), and zeroes
// its O as v34's epilogue did; the steady loop is v34's (O's rescale at every key block, the PV wgmmas with scale-d
// 1). The kernel is v34's kernel.cu (v27's with v34's macros) with WHOWAITS_EPI_WARP 1.
//
// Why: v35 changed two things and lost 2-6% at the long shapes, where tile boundaries are rare; its PM timeline at
// the seed shape shows the boundary dips shallower (the tensor-activity deficit at the three boundaries 175 -> 130
// percent-samples) and the steady level lower (82 -> 79%). v36 keeps the part that acts at the boundary only.
#pragma once
#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v36_warp_epilogue_only
#endif
#define WHOWAITS_EPI_WARP 1
#define WHOWAITS_PV_ZERO_START 0
#include "v34_q_regs/kernel.cu"
