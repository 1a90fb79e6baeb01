// v44: v34 where a consumer's rows of a tile all lie beyond S (the partial last query tile of a head: at
// b4_h32_s4096_d64 the 22nd 192-row tile holds 64 valid rows, and consumers 1 and 2 computed zero-filled Q rows, 3.0%
// of the MMA work) skip that tile's wgmmas and softmax and keep only the barrier protocol (WHOWAITS_IDLE_ROWS; the
// steady loop is compiled once per idle state, so a working consumer's loop has no branch of its own), and the
// partial tiles move within their heads onto the CTAs that take one tile more (WHOWAITS_PARTIAL_SPREAD,
// common/sm90/tile_scheduler_pairs.cuh). Shapes whose S is a multiple of the tile run v34's order and work.
#pragma once
#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v44_d64_idle_rows
#endif
#define WHOWAITS_IDLE_ROWS 1
#define WHOWAITS_PARTIAL_SPREAD 1
#include "v34_q_regs/kernel.cu"
