// v28: v27 with one in eight of the d64 softmax's exponentials on the FMA pipe (ladder IV): the 8-key column tiles j
// with j % 8 == 7 of S (2 of the 16 per key block: 8 of a thread's 64 exponentials) go through exp2_poly_fmul
// (common/sm90/exp2_poly.cuh: clamp, round, degree-3 polynomial, 2^j as a float, FMUL: 9 FMA/ALU-pipe instructions)
// instead of MUFU.EX2. d128: v21's instructions, as in v27. The kernel is v27's, compiled with WHOWAITS_POLY_EVERY 8.
//
// Why: v23 tried this on v21 and ptxas serialised the wgmma pipeline (C7511). v23's verdict blamed the registers;
// building it again with other polynomials shows the cause is the last step, an integer add whose result lands in
// a wgmma accumulator register (S is exponentiated in place): ending in an FMUL instead, no C7511 at 1 in 2 to 1 in 16,
// with P in registers (v29) or in shared memory (here).
#pragma once
#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v28_p_smem_poly
#endif
#define WHOWAITS_POLY_EVERY 8
#include "v27_p_smem/kernel.cu"
