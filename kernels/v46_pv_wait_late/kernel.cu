// v46: v34 with the softmax under its own PV (ladder IV). Each steady batch waits on V[n-1]'s full barrier (complete
// since PV[n-1] was issued) between softmax(n) and wgmma.wait_group 0: the try-wait's loop ends the basic block, so
// ptxas can no longer hoist the PV wait above the softmax (v15's switch, measured then at v14's 61% tensor pipe).
// The kernel is v34's kernel.cu (v27's with v34's macros) with WHOWAITS_PV_WAIT_LATE 1.
//
// Why: at v34's 80-82% steady tensor pipe the pingpong idles when a consumer's turnaround (PV done -> softmax ->
// pack -> rescale -> issue) exceeds the other consumer's batch; starting the softmax at QK^T's completion shortens it.
#pragma once
#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v46_pv_wait_late
#endif
#define WHOWAITS_PV_WAIT_LATE 1
#include "v34_q_regs/kernel.cu"
