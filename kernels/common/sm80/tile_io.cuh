// Moving [rows][kHeadDim] tiles between global memory (B, H, S, D layout) and shared memory.
//
// Every thread of the CTA copies 16-byte chunks; chunk i of the tile goes to thread i % kThreads, so a
// warp reads 512 contiguous bytes per step (coalesced). Rows at or past `seqlen` are zero-filled, so
// masked keys contribute exactly 0 * V = 0 and tail query rows compute harmless zeros.
#pragma once
#include <cstdint>

#include "common/sm80/cp_async.cuh"
#include "common/sm80/ldmatrix.cuh"
#include "common/sm80/softmax_math.cuh"
#include "common/sm80/swizzle.cuh"

namespace whowaits { namespace common {

// @region inherit
// Thread `tid` copies chunks tid, tid + kThreads, ...: chunk column tid % kChunksPerRow of rows
// tid / kChunksPerRow + i * kRowStep. kRowStep is a multiple of 8, so the swizzle pattern (row & 7) is the
// same for all of a thread's chunks: one shared and one global base per thread plus immediate offsets.
template <int kRows, int kHeadDim, int kThreads>
struct TileCopyPlan {
    static constexpr int kChunksPerRow = kHeadDim / 8;
    static constexpr int kRowStep = kThreads / kChunksPerRow;
    static constexpr int kPerThread = kRows * kChunksPerRow / kThreads;
    static_assert(kThreads % kChunksPerRow == 0 && kRowStep % 8 == 0,
                  "each copy step must cover a multiple of 8 whole rows (kThreads >= 8 * kHeadDim / 8)");
    static_assert(kRows % kRowStep == 0, "tile rows must split evenly over the copy steps");
};

// Synchronous copy through registers (LDG.128 then STS.128): all loads are issued before the first
// store, so the tile costs one memory round trip, not one per chunk.
template <typename Element, int kRows, int kHeadDim, int kThreads, bool kSwizzle>
__device__ __forceinline__ void load_tile_sync(Element* smem, const Element* gmem, int row0, int seqlen, int tid) {
    using Plan = TileCopyPlan<kRows, kHeadDim, kThreads>;
    const int r = tid / Plan::kChunksPerRow, c = tid % Plan::kChunksPerRow;
    const Element* src = gmem + static_cast<size_t>(row0) * kHeadDim + tid * 8;
    Element* dst = smem + tile_offset<kHeadDim, kSwizzle>(r, c * 8);
    const int rows_left = seqlen - row0 - r;
    uint4 regs[Plan::kPerThread];
#pragma unroll
    for (int i = 0; i < Plan::kPerThread; ++i) {
        regs[i] = make_uint4(0u, 0u, 0u, 0u);
        if (i * Plan::kRowStep < rows_left) regs[i] = *reinterpret_cast<const uint4*>(src + i * kThreads * 8);
    }
#pragma unroll
    for (int i = 0; i < Plan::kPerThread; ++i) *reinterpret_cast<uint4*>(dst + i * kThreads * 8) = regs[i];
}

// Asynchronous copy (LDGSTS, .cg: L2 only); the caller commits and waits. Rows past seqlen copy 0 bytes
// (zero fill): their address is formed but never read, as in CUTLASS's ZFILL copies.
template <typename Element, int kRows, int kHeadDim, int kThreads, bool kSwizzle>
__device__ __forceinline__ void load_tile_async(Element* smem, const Element* gmem, int row0, int seqlen, int tid) {
    using Plan = TileCopyPlan<kRows, kHeadDim, kThreads>;
    const int r = tid / Plan::kChunksPerRow, c = tid % Plan::kChunksPerRow;
    const Element* src = gmem + static_cast<size_t>(row0) * kHeadDim + tid * 8;
    const uint32_t dst = smem_u32(smem) + 2u * tile_offset<kHeadDim, kSwizzle>(r, c * 8);
    const int rows_left = seqlen - row0 - r;
#pragma unroll
    for (int i = 0; i < Plan::kPerThread; ++i)
        cp_async_16_zfill(dst + 2u * i * kThreads * 8, src + i * kThreads * 8, i * Plan::kRowStep < rows_left);
}

// @region epilogue
// Epilogue: a warp's normalised O accumulators (kMTiles m16 tiles x kHeadDim) -> 16-bit -> the warp's own
// rows of the Q tile in shared memory (Q is dead by now and only this warp read those rows) -> 16-byte
// coalesced global stores of the rows below `seqlen`.
template <typename Element, int kHeadDim, int kMTiles, bool kSwizzle>
__device__ __forceinline__ void store_o_tile(const float (&o)[kMTiles][kHeadDim / 8][4], Element* smem_q,
                                             Element* gmem_o, int warp_row0, int cta_row0, int seqlen, int lane) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int j = 0; j < kHeadDim / 8; ++j) {
            const int r = warp_row0 + mt * 16 + g;
            *reinterpret_cast<uint32_t*>(smem_q + tile_offset<kHeadDim, kSwizzle>(r, j * 8 + 2 * t)) =
                pack2<Element>(o[mt][j][0], o[mt][j][1]);
            *reinterpret_cast<uint32_t*>(smem_q + tile_offset<kHeadDim, kSwizzle>(r + 8, j * 8 + 2 * t)) =
                pack2<Element>(o[mt][j][2], o[mt][j][3]);
        }
    }
    __syncwarp();
    constexpr int kChunksPerRow = kHeadDim / 8;
    constexpr int kChunks = kMTiles * 16 * kChunksPerRow;
#pragma unroll
    for (int i = 0; i < kChunks / 32; ++i) {
        const int idx = lane + 32 * i;
        const int r = warp_row0 + idx / kChunksPerRow, c = idx % kChunksPerRow;
        const uint4 val = *reinterpret_cast<const uint4*>(smem_q + tile_offset<kHeadDim, kSwizzle>(r, c * 8));
        if (cta_row0 + r < seqlen) *reinterpret_cast<uint4*>(gmem_o + (cta_row0 + r) * kHeadDim + c * 8) = val;
    }
}

}}  // namespace whowaits::common
