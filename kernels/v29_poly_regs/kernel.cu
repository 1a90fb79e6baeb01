// v29: v23's idea made to compile (ladder IV): v21 with one in eight of the d64 softmax's exponentials on the FMA
// pipe, P in registers as in v21. The 8-key column tiles j with j % 8 == 7 of S go through exp2_poly_fmul
// (common/sm90/exp2_poly.cuh) instead of MUFU.EX2. The kernel is v27's, compiled with WHOWAITS_P_SMEM 0 (v21's
// P registers and RS PV) and WHOWAITS_POLY_EVERY 8; d128: v21's instructions.
//
// Why: v23 (the same split, ending in an integer add) was serialised by ptxas (C7511); the cause was the integer
// result written into a wgmma accumulator register, not the registers (v28's comment). Beside v28 this rung says what
// the polynomial is worth without v27's P staging.
#pragma once
#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v29_poly_regs
#endif
#define WHOWAITS_POLY_EVERY 8
#define WHOWAITS_P_SMEM 0
#include "v27_p_smem/kernel.cu"
