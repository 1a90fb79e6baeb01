// Q in registers for an RS QK^T wgmma (v34, at head_dim 128): each consumer warp loads the A fragments of its 16
// query rows once per tile with ldmatrix from the TMA-written Q tile, and every QK^T of the tile reads them from
// registers instead of shared memory. v21's SS QK^T re-reads the consumer's 64 x 128 Q slice (16 KB) from shared
// memory for every key block: 16 of the 48 KB a QK^T reads, a third of the QK^T's and a fifth of the key block's
// shared-memory operand bytes (QK^T 48 KB + PV 32 KB, P already in registers).
//
// Layout read (tma.cuh): the Q tile is kHeadDim / 64 boxes of [kBlockM rows][128 bytes], 1024-byte aligned, with the
// 128-byte swizzle: the 16-byte chunk c of row r sits at chunk c ^ (r & 7). The k16 step kk of row r is in box kk / 4,
// chunks 2 (kk % 4) and 2 (kk % 4) + 1. ldmatrix.x4: lanes 8i .. 8i + 7 address the rows of matrix i, and matrices
// 0..3 = (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) are registers a0..a3 of the
// mma.sync m16n8k16 A fragment, which is wgmma's A-from-registers fragment of the warp's 16 rows (wgmma.cuh).
//
// Protocol: load() after the tile's q_full wait and only when no wgmma that reads the previous tile's fragments is
// pending (the caller's wgmma_wait<0> / <1> after the last QK^T); the caller's wgmma_fence() before the next batch
// orders these register writes before the wgmma reads them.
#pragma once
#include <cstdint>

namespace whowaits { namespace sm90 {

// @region qk
template <int kHeadDim, int kBlockM>
struct QRegs {
    uint32_t a[kHeadDim / 16][4];

    // q_tile: shared address of the Q buffer; row0: the warp's first row in the tile (consumer c, warp w: 64c + 16w)
    __device__ __forceinline__ void load(uint32_t q_tile, int row0, int lane) {
        const int r = row0 + (lane & 7) + ((lane >> 3) & 1) * 8;  // matrix i = lane / 8: rows 8-15 for i odd
        const int khalf = lane >> 4;                              // matrices 2, 3: k 8-15 of the step
        const uint32_t row_addr = q_tile + static_cast<uint32_t>(r) * 128u;
#pragma unroll
        for (int kk = 0; kk < kHeadDim / 16; ++kk) {
            const int chunk = ((kk & 3) * 2 + khalf) ^ (r & 7);
            const uint32_t addr = row_addr + static_cast<uint32_t>((kk >> 2) * kBlockM * 128 + chunk * 16);
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                         : "=r"(a[kk][0]), "=r"(a[kk][1]), "=r"(a[kk][2]), "=r"(a[kk][3])
                         : "r"(addr));
        }
    }
};

// @endregion
}}  // namespace whowaits::sm90
