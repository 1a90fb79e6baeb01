// Tensor-core MMA wrappers: mma.sync.aligned.m16n8k16, fp32 accumulate, fp16 or bf16 operands.
//
// Fragment layout (PTX ISA "Matrix fragments for mma.m16n8k16"), lane = 4*g + t (g = group 0..7, t = 0..3):
//   A (16x16, row-major)  a[0] = (row g,   cols 2t..2t+1)   a[1] = (row g+8, cols 2t..2t+1)
//                         a[2] = (row g,   cols 2t+8..+9)   a[3] = (row g+8, cols 2t+8..+9)
//   B (16x8,  "col")      b0 = (rows 2t..2t+1, col g)       b1 = (rows 2t+8..+9, col g)
//   C/D (16x8, fp32)      c[0..1] = (row g, cols 2t..2t+1)  c[2..3] = (row g+8, cols 2t..2t+1)
// Each A/B register holds two 16-bit elements, the lower column/row in the low half.
#pragma once
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

// @region inherit
namespace whowaits { namespace common {

template <typename Element>
struct Mma16816;

template <>
struct Mma16816<__half> {
    static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};

template <>
struct Mma16816<__nv_bfloat16> {
    static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};

// c += a * b for one m16n8k16 tile.
template <typename Element>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    Mma16816<Element>::run(c, a, b0, b1);
}

}}  // namespace whowaits::common
