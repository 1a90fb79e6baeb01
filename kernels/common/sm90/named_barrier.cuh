// Named barriers (bar.sync / bar.arrive with an id and a thread count), sm_70+; used on Hopper to sync a
// subset of warps (one warpgroup, or two in pingpong) without stopping the whole CTA. Id 0 is
// __syncthreads(); use ids 1..15. `threads` is a multiple of 32 and counts every participating thread.
#pragma once
#include <cstdint>

namespace whowaits { namespace sm90 {

// @region inherit

__device__ __forceinline__ void named_bar_sync(uint32_t id, uint32_t threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void named_bar_arrive(uint32_t id, uint32_t threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}}  // namespace whowaits::sm90
