// Measured role trace (issue 12): a compile-time switch, off by default. Built with -DWHOWAITS_TRACE, the
// leader thread of each warpgroup (threadIdx.x % 128 == 0) stamps clock64() at every wait's begin and end
// (mbarrier try-wait loop, named barrier, wgmma group), every arrive (mbarrier arrive, arrive.expect_tx =
// a TMA issue, bar.arrive) and every wgmma commit, into a buffer that the host hands the kernel through the
// __device__ global `whowaits_trace` (cuModuleGetGlobal + a copy before the launch, kernels/trace.py), so
// the launch ABI is unchanged. The first event of each warpgroup's slot also records %smid and one
// %globaltimer reading beside its clock64 (to place SMs on one time axis; %globaltimer ticks too coarsely for
// a loop iteration, clock64 is per SM). Without WHOWAITS_TRACE every macro here expands to nothing: the
// cubin's SASS is identical to a build without this header (tests/test_trace.py compiles v10-v12 both ways).
#pragma once
#include <cstdint>

// @region inherit

#ifdef WHOWAITS_TRACE

#ifndef WHOWAITS_TRACE_SLOTS
#define WHOWAITS_TRACE_SLOTS 4  // warpgroups per CTA with a slot of their own
#endif

struct WhowaitsTraceEvent {
    unsigned long long t;  // clock64 (kind 1: %globaltimer, ns)
    uint32_t kind;         // WhowaitsTraceKind
    uint32_t arg;          // mbarrier shared address | parity << 31, named-barrier id, wgmma N, or %smid
};

struct WhowaitsTraceBuffer {
    WhowaitsTraceEvent* events;  // [max_ctas * WHOWAITS_TRACE_SLOTS][capacity]
    uint32_t* counts;            // [max_ctas * WHOWAITS_TRACE_SLOTS] events written (may exceed capacity)
    uint32_t capacity;
    uint32_t max_ctas;
};

enum WhowaitsTraceKind : uint32_t {
    kTraceStart = 0,  // arg = %smid
    kTraceGlobal = 1,  // t = %globaltimer
    kTraceMbarWaitBegin = 2,
    kTraceMbarWaitEnd = 3,
    kTraceMbarArrive = 4,
    kTraceMbarExpectTx = 5,  // arrive.expect_tx: the TMA load it announces is issued next
    kTraceBarSyncBegin = 6,
    kTraceBarSyncEnd = 7,
    kTraceBarArrive = 8,
    kTraceWgmmaWaitBegin = 9,
    kTraceWgmmaWaitEnd = 10,
    kTraceWgmmaCommit = 11,
};

extern "C" {
__device__ WhowaitsTraceBuffer whowaits_trace;  // zero (no buffer: nothing recorded) until the host sets it
}

namespace whowaits { namespace trace {

__device__ __forceinline__ unsigned long long clock() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%clock64;\n" : "=l"(t)::"memory");
    return t;
}

__device__ __forceinline__ void record_slow(uint32_t kind, uint32_t arg, unsigned long long t) {
    const WhowaitsTraceBuffer b = whowaits_trace;
    if (b.events == nullptr) return;
    const uint32_t cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    if (cta >= b.max_ctas) return;
    const uint32_t slot = cta * WHOWAITS_TRACE_SLOTS + (threadIdx.x >> 7);
    uint32_t n = b.counts[slot];
    WhowaitsTraceEvent* ev = b.events + static_cast<size_t>(slot) * b.capacity;
    if (n == 0 && b.capacity >= 2) {
        uint32_t smid;
        unsigned long long gt;
        asm volatile("mov.u32 %0, %%smid;\n" : "=r"(smid));
        asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(gt)::"memory");
        ev[0] = {t, kTraceStart, smid};
        ev[1] = {gt, kTraceGlobal, 0};
        n = 2;
    }
    if (n < b.capacity) ev[n] = {t, kind, arg};
    b.counts[slot] = n + 1;
}

// Stamp first (the clock of the event itself), then file it away on the leader thread only.
__device__ __forceinline__ void record(uint32_t kind, uint32_t arg) {
    const unsigned long long t = clock();
    if ((threadIdx.x & 127u) == 0u) record_slow(kind, arg, t);
}

}}  // namespace whowaits::trace

#define WHOWAITS_TRACE_EVENT(kind, arg) ::whowaits::trace::record((kind), (arg))
#else
#define WHOWAITS_TRACE_EVENT(kind, arg) ((void)0)
#endif
