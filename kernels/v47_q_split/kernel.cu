// v47: v36 with Q loaded as one 64-row box per consumer warpgroup, each completing its own full barrier, and the CTA's
// first tile's loads issued in the order its consumers need them: consumer 0's Q rows, K[0], consumer 1's Q rows,
// then V[0], K[1], V[1] (ladder IV). Later tiles load Q's parts together, as before; every loop's instructions are
// v36's. The kernel is v36's kernel.cu (v27's with v34's macros and the warp epilogue) with WHOWAITS_Q_SPLIT 1, and
// the launcher gives Q's map boxes of 64 rows (version.toml q_box_rows = 64).
//
// Why: at the seed shape the first ~3 us of a 60 us launch run no MMA (whowaits timeline: tensor 0% in the first
// two PM samples of v34, v36, v43 and cuDNN alike), and v34's consumers wait for their first Q (183 samples on the
// prologue's q_full try-wait) and first K (34) while every CTA's first loads come from DRAM at once: 132 x 32 KB of Q
// plus the K/V of ~16 heads, ~6.3 MB at 37-80% of the DRAM's peak in the second sample. Consumer 0's first QK^T
// needs only its 16 KB of Q and K[0]; with one 128-row box per sub-tile it waits for all 32 KB (its rows are the
// first half of both column boxes) and, behind them in the TMA queue, nothing it needs is early.
#pragma once
#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v47_q_split
#endif
#define WHOWAITS_Q_SPLIT 1
#include "v36_warp_epilogue_only/kernel.cu"
