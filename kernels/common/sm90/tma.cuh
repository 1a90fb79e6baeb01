// TMA (cp.async.bulk.tensor) loads of [rows][64] 16-bit tiles with the 128-byte swizzle, sm_90.
//
// The host encodes each (B, H, S, D) tensor as a 3-D tensor map (D, S, B*H) with box (64, rows, 1) and
// CU_TENSOR_MAP_SWIZZLE_128B (kernels/launch.py: tensor_map). One box lands as `rows` rows of 128 bytes;
// within each 1024-byte atom (8 rows) the 16-byte chunk c of row r sits at chunk c ^ (r & 7). The swizzle
// is a function of the shared address bits, so every tile base is 1024-byte aligned (the `tma_q_kv` layout
// reserves the slack). A head dimension of 128 is two such sub-tiles, one after the other:
//   element (r, col) of a [kRows][kD] tile -> sub-tile col / 64, row r, chunk ((col % 64) / 8) ^ (r & 7).
// Rows past the map's S extent are zero-filled by TMA and still count toward the transaction bytes.
#pragma once
#include <cstdint>
#include <cuda.h>

#include "common/sm90/mbarrier.cuh"

namespace whowaits { namespace sm90 {

// @region inherit

// Issue a 3-D tile load completing on `bar` (complete_tx of the box's bytes). One thread issues it.
__device__ __forceinline__ void tma_load_3d(void* smem_dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1,
                                            int c2) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
        ::"r"(smem_addr(smem_dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2),
        "r"(smem_addr(bar))
        : "memory");
}

// Load a [kRows][kD] tile (kD / 64 boxes) of (b*H + h, rows row0...) into a 1024-aligned buffer.
template <int kRows, int kD, typename Element>
__device__ __forceinline__ void tma_load_tile(Element* smem_dst, const CUtensorMap* map, uint64_t* bar, int row0,
                                              int bh) {
#pragma unroll
    for (int sub = 0; sub < kD / 64; ++sub)
        tma_load_3d(smem_dst + sub * kRows * 64, map, bar, sub * 64, row0, bh);
}

// Rows [part * kBoxRows, (part + 1) * kBoxRows) of a [kRows][kD] tile, from a map whose boxes are kBoxRows rows
// (v47: one box per consumer warpgroup): each 64-column sub-tile's rows land where tma_load_tile puts them, so the
// tile's layout is the same (kBoxRows a multiple of 8: the 128-byte swizzle's period is 8 rows = 1024 bytes).
template <int kRows, int kBoxRows, int kD, typename Element>
__device__ __forceinline__ void tma_load_rows(Element* tile_dst, const CUtensorMap* map, uint64_t* bar, int row0,
                                              int part, int bh) {
    static_assert(kBoxRows % 8 == 0 && kRows % kBoxRows == 0, "whole 8-row swizzle periods, whole boxes");
#pragma unroll
    for (int sub = 0; sub < kD / 64; ++sub)
        tma_load_3d(tile_dst + sub * kRows * 64 + part * kBoxRows * 64, map, bar, sub * 64, row0 + part * kBoxRows,
                    bh);
}

// An L2 prefetch of one 3-D box (v30): no shared memory, no barrier, nothing to wait for; the box's lines are read
// from DRAM into the L2 so that a later load of them hits. One thread issues it.
__device__ __forceinline__ void tma_prefetch_3d(const CUtensorMap* map, int c0, int c1, int c2) {
    asm volatile("cp.async.bulk.prefetch.tensor.3d.L2.global.tile [%0, {%1, %2, %3}];\n"
                 ::"l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}

// The L2 prefetch of a [kRows][kD] tile of (b*H + h, rows row0...): the boxes tma_load_tile would load.
template <int kRows, int kD>
__device__ __forceinline__ void tma_prefetch_tile(const CUtensorMap* map, int row0, int bh) {
#pragma unroll
    for (int sub = 0; sub < kD / 64; ++sub) tma_prefetch_3d(map, sub * 64, row0, bh);
}

__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Ordinary (generic-proxy) shared-memory writes that the async proxy (TMA store, wgmma) reads next need
// this in every writing thread before the barrier that publishes them.
__device__ __forceinline__ void fence_proxy_async_smem() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Element offset of (r, col) in a [kRows][kD] TMA tile (layout above).
template <int kRows>
__device__ __forceinline__ int sw128_offset(int r, int col) {
    return (col >> 6) * kRows * 64 + r * 64 + ((((col & 63) >> 3) ^ (r & 7)) << 3) + (col & 7);
}

// Per-lane ldmatrix addresses into a [kRows][kD] TMA tile, the sm80 LdsmAddr idea for this layout: every
// access is row r0 + row_lane (r0 a multiple of 8), 16-byte chunk c + chunk_lane (c even), both r0 and c
// compile-time constants of unrolled loops. The XOR touches only the low 3 chunk bits, and r0 % 8 == 0,
// so the physical chunk is (((c & 6) + chunk_lane) ^ (row_lane & 7)) in sub-tile c / 8: four per-lane
// bases (c & 6 = 0, 2, 4, 6) plus an immediate offset.
template <int kRows>
struct Sw128LdsmAddr {
    uint32_t base[4];

    __device__ __forceinline__ Sw128LdsmAddr(uint32_t tile, int row_lane, int chunk_lane) {
#pragma unroll
        for (int i = 0; i < 4; ++i)
            base[i] = tile + static_cast<uint32_t>(row_lane * 128 + (((2 * i + chunk_lane) ^ (row_lane & 7)) << 4));
    }

    __device__ __forceinline__ Sw128LdsmAddr shifted(uint32_t bytes) const {
        Sw128LdsmAddr out = *this;
#pragma unroll
        for (int i = 0; i < 4; ++i) out.base[i] += bytes;
        return out;
    }

    __device__ __forceinline__ uint32_t at(int r0, int c) const {
        return base[(c >> 1) & 3] + static_cast<uint32_t>(r0 * 128 + (c >> 3) * kRows * 128);
    }
};

}}  // namespace whowaits::sm90
