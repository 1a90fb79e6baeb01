// Shared-memory tile addressing: row-major tiles of kCols 16-bit elements, in 16-byte chunks.
//
// Plain layout: chunk c of row r at r*kCols + 8c. An ldmatrix reads one 16-byte chunk from each of 8
// consecutive rows; with rows of 128 or 256 bytes those 8 chunks share the same 4 banks (8-way conflict).
// XOR swizzle: chunk c of row r is stored at chunk c ^ (r & 7), so the 8 rows of one ldmatrix land in 8
// different bank groups (conflict free), and a row's 16-byte global loads still map to whole chunks.
#pragma once

// @region inherit
namespace whowaits { namespace common {

// Element offset of (row, col) in a [rows][kCols] tile; col must be a multiple of 8 plus an offset < 8.
template <int kCols, bool kSwizzle>
__device__ __forceinline__ int tile_offset(int row, int col) {
    static_assert(kCols % 64 == 0, "rows must hold a multiple of 8 chunks for the 3-bit XOR swizzle");
    const int chunk = col >> 3;
    const int phys = kSwizzle ? (chunk ^ (row & 7)) : chunk;
    return row * kCols + phys * 8 + (col & 7);
}

}}  // namespace whowaits::common

namespace whowaits { namespace common {

// Per-lane shared-memory addresses for ldmatrix on a [rows][kCols] tile, precomputed once per kernel.
//
// Every ldmatrix in the FA2 loops reads chunk c + lb of row r0 + lr, where r0 (a multiple of 8) and c (even)
// are compile-time constants of the unrolled loops and lr, lb in {0, 1} depend on the lane only. Because the
// swizzle XORs only the low 3 chunk bits with (lr & 7), the physical chunk is (c & ~7) + (((c & 6) + lb) ^
// (lr & 7)): four per-lane bases (one per value of c & 6) plus an immediate offset cover every access, so
// the unrolled loops need no per-access address arithmetic and few registers.
template <int kCols, bool kSwizzle>
struct LdsmAddr {
    uint32_t base[4];

    __device__ __forceinline__ LdsmAddr(uint32_t tile, int row_lane, int chunk_lane) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int chunk = 2 * i + chunk_lane;
            const int phys = kSwizzle ? (chunk ^ (row_lane & 7)) : chunk;
            base[i] = tile + 2u * static_cast<uint32_t>(row_lane * kCols + phys * 8);
        }
    }

    // The same lane pattern on another buffer `bytes` further on (a K/V pipeline stage).
    __device__ __forceinline__ LdsmAddr shifted(uint32_t bytes) const {
        LdsmAddr out = *this;
#pragma unroll
        for (int i = 0; i < 4; ++i) out.base[i] += bytes;
        return out;
    }

    // Byte address for row r0 + row_lane, chunk c + chunk_lane (r0 multiple of 8, c even: both constants).
    __device__ __forceinline__ uint32_t at(int r0, int c) const {
        return base[(c >> 1) & 3] + 2u * static_cast<uint32_t>(r0 * kCols + (c & ~7) * 8);
    }
};

}}  // namespace whowaits::common
