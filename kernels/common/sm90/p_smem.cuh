// P staged in shared memory for an SS PV wgmma (v27 on, at head_dim 64): each consumer warpgroup writes its
// [64 rows][kBlockN keys] P tile with stmatrix, in the 128-byte-swizzled K-major layout wgmma reads an A operand in
// (tma.cuh's layout: 64-key sub-tiles 64 x 128 bytes apart, 16-byte chunk c of row r at chunk c ^ (r & 7)), and PV
// reads it through a descriptor instead of 4 registers per k16 step. FlashAttention-3 does this at head_dim 64
// without a causal mask (MmaPV_is_RS = false): P's 32 registers (block_n 128) are free for the softmax.
//
// Protocol: P[n] is written only after wgmma_wait<0>() has seen PV[n-1] complete (the PV that read P[n-1] from the
// same buffer; each warp writes exactly the 16 rows its own part of that wgmma read). Every writing thread then does
// fence_proxy_async_smem() (store() does it after the last chunk), and the PV that reads P[n] is issued only after a
// barrier all 128 threads of the warpgroup pass (the pingpong turn's bar.sync), so every warp's rows are written and
// visible to the async proxy before any warp's wgmma reads them.
#pragma once
#include <cstdint>

#include "common/sm90/tma.cuh"
#include "common/sm90/wgmma.cuh"

namespace whowaits { namespace sm90 {

// @region inherit

// Four 8 x 8 16-bit matrices from the mma fragment layout (thread 4g + t holds row g, columns 2t, 2t + 1 of matrix
// i in register i) to shared memory; lanes 8i .. 8i + 7 give the row addresses of matrix i.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0),
                 "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}

template <int kBlockN>
struct PStage {
    static_assert(kBlockN % 64 == 0, "P's keys come in 64-key (128-byte) sub-tiles");
    static constexpr uint32_t kSubTileBytes = 64 * 128;  // one 64-key sub-tile of the warpgroup's 64 rows
    uint32_t base;       // the warpgroup's [64][kBlockN] tile (1024-byte aligned)
    uint32_t lane_base;  // base + this lane's stmatrix row, and its chunk's low bit already swizzled
    uint32_t row_xor;    // (row & 6): the swizzle of the chunk's upper two bits

    // Lane 8i + r gives row 16 w + 8 (i & 1) + r, chunk 2 kk + (i >> 1) of k16 step kk (registers 0..3 of a P
    // fragment = rows +0 / +8, keys +0 / +8, in that order).
    __device__ __forceinline__ PStage(uint32_t tile_addr, int warp_in_wg, int lane) : base(tile_addr) {
        const int i = lane >> 3, r = lane & 7;
        const int row = warp_in_wg * 16 + (i & 1) * 8 + r;
        lane_base = tile_addr + row * 128 + ((((i >> 1) ^ r) & 1) << 4);
        row_xor = static_cast<uint32_t>(r & 6);
    }

    // P's k16 step kk (its 4 fragment registers) into the tile.
    __device__ __forceinline__ void store(int kk, const uint32_t (&p)[4]) const {
        const uint32_t chunk_hi = (static_cast<uint32_t>(2 * (kk & 3)) ^ row_xor) << 4;
        stmatrix_x4(lane_base + (kk >> 2) * kSubTileBytes + chunk_hi, p[0], p[1], p[2], p[3]);
    }

    // The A descriptor of k16 step kk, from desc_lo = the low word of desc(): the step adds its byte offset >> 4 to
    // the start-address field (bits 0-13, no carry: every shared address < 0x40000).
    __device__ __forceinline__ uint64_t desc() const { return make_desc_sw128(base, 16, 1024); }
    static __device__ __forceinline__ uint64_t step(uint32_t desc_lo, uint32_t desc_hi, int kk) {
        return (static_cast<uint64_t>(desc_hi) << 32) | (desc_lo + (((kk >> 2) * kSubTileBytes + (kk & 3) * 32) >> 4));
    }
};

}}  // namespace whowaits::sm90
