// ldmatrix wrappers (LDSM): four 8x8 16-bit matrices per instruction, one row address per lane.
//
// Lanes 8i..8i+7 give the 8 row addresses (16 bytes each) of matrix i; afterwards register i of lane
// 4*g + t holds row g, columns 2t..2t+1 of matrix i (or, with .trans, column g, rows 2t..2t+1).
#pragma once
#include <cstdint>

// @region inherit
namespace whowaits { namespace common {

__device__ __forceinline__ uint32_t smem_u32(const void* ptr) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

// In this ladder the plain ldmatrix only ever loads Q and K fragments (for Q K^T) and the transposed one
// only V fragments (for P V): so each declares its region, and the MMAs after them inherit it.
// @region qk
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t smem_addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr));
}

// @region pv
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t smem_addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr));
}

// @endregion
}}  // namespace whowaits::common
