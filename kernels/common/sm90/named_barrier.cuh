// Named barriers (bar.sync / bar.arrive with an id and a thread count), sm_70+; used on Hopper to sync a
// subset of warps (one warpgroup, or two in pingpong) without stopping the whole CTA. Id 0 is
// __syncthreads(); use ids 1..15. `threads` is a multiple of 32 and counts every participating thread.
#pragma once
#include <cstdint>

#include "common/sm90/trace.cuh"

namespace whowaits { namespace sm90 {

// @region inherit

__device__ __forceinline__ void named_bar_sync(uint32_t id, uint32_t threads) {
    WHOWAITS_TRACE_EVENT(kTraceBarSyncBegin, id);
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
    WHOWAITS_TRACE_EVENT(kTraceBarSyncEnd, id);
}

__device__ __forceinline__ void named_bar_arrive(uint32_t id, uint32_t threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
    WHOWAITS_TRACE_PARKED(kTraceBarArrive, id);
}

}}  // namespace whowaits::sm90
