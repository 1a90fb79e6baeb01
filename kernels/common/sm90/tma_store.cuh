// TMA (cp.async.bulk.tensor) stores of [rows][64] 16-bit tiles with the 128-byte swizzle, sm_90: the epilogue's
// way out of shared memory (v17 on). The layout is tma.cuh's (one box = `rows` rows of 128 bytes, 16-byte chunk c
// of row r at chunk c ^ (r & 7) inside each 1024-byte atom; a head dimension of 128 is two boxes one after the
// other), so sw128_offset<rows>(r, col) addresses an element, and the tensor map is the same kind the loads use
// (kernels/launch.py: tensor_map of O with box rows = the rows one store covers). Rows past the map's S extent
// are not written (TMA clips a store at the tensor's bounds), so a ragged last query block needs no mask.
//
// Protocol (one issuing thread per buffer): every writing thread does fence_proxy_async_smem() after its
// st.shared and before the barrier that hands the buffer to the issuer; the issuer issues the boxes and
// tma_store_commit(); before anyone writes the buffer again the issuer waits tma_store_wait_read<0>() (the
// bulk-async group has finished READING shared memory; the global writes may still be in flight) and a barrier
// tells the writers. Before the CTA exits the issuer waits tma_store_wait_all<0>().
#pragma once
#include <cstdint>
#include <cuda.h>

#include "common/sm90/mbarrier.cuh"

namespace whowaits { namespace sm90 {

// @region inherit

// One 32-bit st.shared at a shared-window address (a generic store through an Element* compiles to ST.E, which
// must first find out which window the address is in).
__device__ __forceinline__ void st_shared_b32(uint32_t addr, uint32_t value) {
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(value) : "memory");
}

// Issue a 3-D tile store of one box from shared memory (bulk-group completion; no mbarrier). One thread.
__device__ __forceinline__ void tma_store_3d(const void* smem_src, const CUtensorMap* map, int c0, int c1, int c2) {
    asm volatile(
        "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n"
        ::"l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(smem_src)), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
}

// Store a [kRows][kD] tile (kD / 64 boxes, tma.cuh's layout) to (bh, rows row0...) and commit it as one group.
template <int kRows, int kD, typename Element>
__device__ __forceinline__ void tma_store_tile(const Element* smem_src, const CUtensorMap* map, int row0, int bh) {
#pragma unroll
    for (int sub = 0; sub < kD / 64; ++sub) tma_store_3d(smem_src + sub * kRows * 64, map, sub * 64, row0, bh);
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

// Wait until at most N committed store groups still READ shared memory (their buffers may be written again).
template <int N>
__device__ __forceinline__ void tma_store_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

// Wait until at most N committed store groups are incomplete (reads and global writes done).
template <int N>
__device__ __forceinline__ void tma_store_wait_all() {
    asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

}}  // namespace whowaits::sm90
