// Measured role trace (issue 12): a compile-time switch, off by default. Built with -DWHOWAITS_TRACE, the
// leader thread of each warpgroup (threadIdx.x % 128 == 0) stamps clock64() at every wait's begin and end
// (mbarrier try-wait loop, named barrier, wgmma group), every arrive (mbarrier arrive, arrive.expect_tx =
// a TMA issue, bar.arrive) and every wgmma commit, into a buffer that the host hands the kernel through the
// __device__ global `whowaits_trace` (cuModuleGetGlobal + a copy before the launch, kernels/trace.py), so
// the launch ABI is unchanged; WHOWAITS_TRACE_INIT() at the top of each ws kernel reads that descriptor once
// and keeps each warpgroup's cursor in shared memory, so a stamp makes no global load. The first event of each warpgroup's slot also records %smid and one
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
    uint32_t* counts;            // unused by the device (kept for the layout): the host counts non-zero stamps
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

// Each warpgroup slot's cursor (next event, end of the slot) lives in shared memory, set once per CTA by
// WHOWAITS_TRACE_INIT() (which alone reads the global descriptor and writes the start events): a stamp is
// clock64, one shared load, one 16-byte global store, one shared store; no global load, no counter in global
// memory (the host counts a slot's events as its non-zero timestamps, the buffer zeroed before the launch).
// The cursors sit in the last WHOWAITS_TRACE_SLOTS * 16 bytes of the dynamic shared memory (the traced launch
// asks for that much more than the kernel's own), not in a __shared__ variable of their own: ptxas would
// place one first and move the kernel's mbarriers, whose addresses the static graph names.
struct __align__(16) WhowaitsTraceCursor {
    WhowaitsTraceEvent* next;  // null: nothing recorded (no buffer, or a CTA past max_ctas)
    WhowaitsTraceEvent* end;
};
extern __shared__ __align__(16) unsigned char whowaits_trace_dsmem[];

namespace whowaits { namespace trace {

__device__ __forceinline__ unsigned long long clock() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%clock64;\n" : "=l"(t)::"memory");
    return t;
}

// The shared-window address of warpgroup wg's cursor (a constant plus %dynamic_smem_size, a uniform value).
__device__ __forceinline__ uint32_t cursor(uint32_t wg) {
    uint32_t dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;\n" : "=r"(dyn));  // not volatile: read once, kept in a register
    return static_cast<uint32_t>(__cvta_generic_to_shared(whowaits_trace_dsmem)) + dyn +
           (wg - WHOWAITS_TRACE_SLOTS) * static_cast<uint32_t>(sizeof(WhowaitsTraceCursor));
}

__device__ __forceinline__ void put(WhowaitsTraceEvent* p, unsigned long long t, uint32_t kind, uint32_t arg) {
    asm volatile("st.global.v2.u64 [%0], {%1, %2};\n" ::"l"(p), "l"(t),
                 "l"(static_cast<unsigned long long>(kind) | (static_cast<unsigned long long>(arg) << 32))
                 : "memory");
}

// Once per CTA, first thing in the kernel, every thread: each warpgroup's leader sets its own slot's cursor
// (no other thread reads it, so no barrier is needed) and writes the slot's start events (%smid, and one
// %globaltimer reading beside a clock64, to place SMs on one time axis).
__device__ __forceinline__ void init() {
    if ((threadIdx.x & 127u) != 0u) return;
    const uint32_t wg = threadIdx.x >> 7;
    if (wg >= WHOWAITS_TRACE_SLOTS) return;
    const WhowaitsTraceBuffer b = whowaits_trace;
    const uint32_t cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    WhowaitsTraceCursor c = {nullptr, nullptr};
    if (b.events != nullptr && cta < b.max_ctas && b.capacity >= 2) {
        WhowaitsTraceEvent* ev = b.events + static_cast<size_t>(cta * WHOWAITS_TRACE_SLOTS + wg) * b.capacity;
        uint32_t smid;
        unsigned long long gt;
        const unsigned long long t = clock();
        asm volatile("mov.u32 %0, %%smid;\n" : "=r"(smid));
        asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(gt)::"memory");
        put(ev, t, kTraceStart, smid);
        put(ev + 1, gt, kTraceGlobal, 0);
        c = {ev + 2, ev + b.capacity};
    }
    asm volatile("st.shared.v2.u64 [%0], {%1, %2};\n" ::"r"(cursor(wg)), "l"(c.next), "l"(c.end) : "memory");
}

// Stamp first (the clock of the event itself), then file it away on the leader thread only.
__device__ __forceinline__ void record(uint32_t kind, uint32_t arg) {
    const unsigned long long t = clock();
    if ((threadIdx.x & 127u) == 0u) {
        const uint32_t c = cursor((threadIdx.x >> 7) & (WHOWAITS_TRACE_SLOTS - 1));
        WhowaitsTraceEvent *next, *end;
        asm volatile("ld.shared.v2.u64 {%0, %1}, [%2];\n" : "=l"(next), "=l"(end) : "r"(c));
        if (next < end) {
            put(next, t, kind, arg);
            asm volatile("st.shared.u64 [%0], %1;\n" ::"r"(c), "l"(next + 1) : "memory");
        }
    }
}

}}  // namespace whowaits::trace

#define WHOWAITS_TRACE_INIT() ::whowaits::trace::init()
#define WHOWAITS_TRACE_EVENT(kind, arg) ::whowaits::trace::record((kind), (arg))
#else
#define WHOWAITS_TRACE_INIT() ((void)0)
#define WHOWAITS_TRACE_EVENT(kind, arg) ((void)0)
#endif
