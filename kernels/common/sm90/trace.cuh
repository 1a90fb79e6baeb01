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
    uint32_t smem_offset;        // the kernel's own dynamic smem bytes: the slots' counters sit right after
    uint32_t pad;
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
// Each slot's event counter lives in shared memory past the kernel's own dynamic smem (the traced launch asks
// for 8 bytes a slot more), so a stamp costs no global-memory round trip: the static __shared__ layout (the
// mbarrier addresses the static graph names) is untouched. A counter holds (CTA id + 1) << 32 | count, so a
// value left by an earlier CTA on the SM reads as count 0.
extern __shared__ __align__(16) unsigned char whowaits_trace_dsmem[];

namespace whowaits { namespace trace {

__device__ __forceinline__ unsigned long long clock() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%clock64;\n" : "=l"(t)::"memory");
    return t;
}

__device__ __forceinline__ void record_slow(uint32_t kind, uint32_t arg, unsigned long long t) {
    WhowaitsTraceEvent* events = reinterpret_cast<WhowaitsTraceEvent*>(
        __ldg(reinterpret_cast<const unsigned long long*>(&whowaits_trace.events)));
    if (events == nullptr) return;
    uint32_t* counts = reinterpret_cast<uint32_t*>(__ldg(reinterpret_cast<const unsigned long long*>(&whowaits_trace.counts)));
    const uint32_t capacity = __ldg(&whowaits_trace.capacity), max_ctas = __ldg(&whowaits_trace.max_ctas);
    const uint32_t cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    if (cta >= max_ctas) return;
    const uint32_t wg = threadIdx.x >> 7;
    const uint32_t slot = cta * WHOWAITS_TRACE_SLOTS + wg;
    unsigned long long* counter =
        reinterpret_cast<unsigned long long*>(whowaits_trace_dsmem + __ldg(&whowaits_trace.smem_offset)) + wg;
    const unsigned long long c = *reinterpret_cast<volatile unsigned long long*>(counter);
    const unsigned long long tag = static_cast<unsigned long long>(cta + 1) << 32;
    uint32_t n = (c & 0xFFFFFFFF00000000ull) == tag ? static_cast<uint32_t>(c) : 0u;
    WhowaitsTraceEvent* ev = events + static_cast<size_t>(slot) * capacity;
    const WhowaitsTraceBuffer b = {events, counts, capacity, max_ctas, 0, 0};
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
    *reinterpret_cast<volatile unsigned long long*>(counter) = tag | (n + 1);
    counts[slot] = n + 1;
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
