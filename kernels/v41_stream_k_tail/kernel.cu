// v41: v34 with stream-K over the last round only, at head_dim 128 without a causal mask (ladder IV). The full rounds
// keep v34's strided order (CTA b's k-th tile b + k G, so a round's CTAs share ~4 heads' K/V in the L2); the tiles of
// the last, partial round are split into key-block units shared evenly by all CTAs and merged through the workspace
// (common/sm90/stream_k.cuh, StreamKTailScheduler; a tile may be split among several CTAs, its last piece's CTA
// merges the others). d64 and causal: v34's instructions. ABI tensor_maps_persistent_o_ws (v40's).
//
// Why: v40 balanced the whole schedule and showed both halves of the lever: +4% work per clock at the cap (the tail
// gone), and DRAM at 4 TB/s because each CTA's contiguous run of tiles spread every round over all heads.
#pragma once
#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v41_stream_k_tail
#endif
#define WHOWAITS_STREAM_K 2
#include "v34_q_regs/kernel.cu"
