// v40: v34 with stream-K at head_dim 128 without a causal mask (ladder IV): the persistent grid's CTAs take equal
// runs of (query tile, key block) units instead of whole tiles, so no CTA idles through a partial last round; a tile
// split between CTAs b and b + 1 is merged through a workspace (common/sm90/stream_k.cuh: b writes the head of the
// tile first, b + 1 merges it into the tail last). d64 and causal: v34's instructions (their kernels take the
// workspace argument and do not use it). The kernel is v34's kernel.cu (v27's with v34's macros) with
// WHOWAITS_STREAM_K 1; ABI tensor_maps_persistent_o_ws (kernels/CONTRACT.md).
//
// Why: v34's PM timeline at b4_h16_s4096_d128 (whowaits timeline, T1233) ends with a tail of 54 us, 6.8% of the
// kernel, at about half the tensor activity: 2,048 tiles on 132 CTAs are 15.5 rounds, and in the 16th only 68 CTAs
// work. Balanced, every CTA does 15.5 tiles' work.
#pragma once
#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v40_stream_k
#endif
#define WHOWAITS_STREAM_K 1
#include "v34_q_regs/kernel.cu"
