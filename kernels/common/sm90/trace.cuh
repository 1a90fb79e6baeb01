// Measured role trace (issue 12): a compile-time switch, off by default. Built with -DWHOWAITS_TRACE, the
// leader thread of each warpgroup (threadIdx.x % 128 == 0) stamps clock64() at every wait's begin and end
// (mbarrier try-wait loop, named barrier, wgmma group), every arrive (mbarrier arrive, arrive.expect_tx =
// a TMA issue, bar.arrive) and every wgmma commit, into a buffer that the host hands the kernel through the
// __device__ global `whowaits_trace` (cuModuleGetGlobal + a copy before the launch, kernels/trace.py), so
// the launch ABI is unchanged; WHOWAITS_TRACE_INIT() at the top of each ws kernel reads that descriptor once
// and keeps each warpgroup's cursor in shared memory, so a stamp makes no global load. The first event of each warpgroup's slot also records %smid and one
// %globaltimer reading beside its clock64 (to place SMs on one time axis; %globaltimer ticks too coarsely for
// a loop iteration, clock64 is per SM). Without WHOWAITS_TRACE every macro here expands to nothing: the
// cubin's SASS is identical to a build without this header (tests/test_trace.py compiles v10-v14 both ways).
#pragma once
#include <cstdint>

// @region inherit

#if defined(WHOWAITS_TRACE_WAITS)
// Wait-log mode (issue 12, `whowaits trace --waits`): the same macros, a much lighter stamp. The leader thread of
// each warpgroup reads clock64 at a wait's begin (into the PTX register whowaits_t0: no store) and at its end, and
// writes one 8-byte record, (entry << 40) | (end - begin), with one predicated global store at the address held in
// the PTX register whowaits_wp (then advanced by 8); an arrive, an arrive.expect_tx (a TMA issue) and a bar.arrive
// write (entry << 40) alone; a wgmma commit writes nothing. No load, no branch: the store is predicated on
// whowaits_wp < whowaits_wl, the end of the leader's row (0 on every other thread, so only the leader stores and a
// full row stores nothing more). A predicated STG stays one instruction, where a predicated reduction (REDG)
// becomes a branch around it (ptxas, sm_90a), and a branch ends a basic block: ptxas then cannot move a
// wgmma.wait_group across it, so the traced schedule is not the kernel's (the event mode below: +29..70% on
// v10-v19 and the softmax kept inside the PV window). A wait's interval holds the wait and one clock read; a wgmma
// commit -> wait window gains one clock read (CS2R); scripts/trace_windows.py --waits; tests/test_trace.py.
// Entries (the record's bits 40..47; the host, profiler/analyze/trace_waits.py, maps them back): kWait* below.
// An mbarrier is keyed by (shared address >> 3) & 31 (the host maps that to the static graph's addresses and says
// where two collide), a named barrier by its id, a wgmma wait by its N. A row's first two records are the start
// clock64 and %globaltimer, its last two (written by WHOWAITS_TRACE_FINISH, where the warpgroup reaches it) the end
// ones, each tagged with its entry; the host counts records up to the first zero.
#ifndef WHOWAITS_TRACE_SLOTS
#define WHOWAITS_TRACE_SLOTS 4
#endif

struct WhowaitsWaitBuffer {
    unsigned long long* records;  // [max_ctas * WHOWAITS_TRACE_SLOTS][capacity]
    uint32_t max_ctas;
    uint32_t capacity;  // records per row (8 bytes each)
};

extern "C" {
__device__ WhowaitsWaitBuffer whowaits_waits;  // zero (nothing recorded) until the host sets it
}

enum WhowaitsTraceKind : uint32_t {  // the event kinds the headers pass (the wait log keys its entries on them)
    kTraceMbarWaitBegin = 2, kTraceMbarWaitEnd = 3, kTraceMbarArrive = 4, kTraceMbarExpectTx = 5,
    kTraceBarSyncBegin = 6, kTraceBarSyncEnd = 7, kTraceBarArrive = 8,
    kTraceWgmmaWaitBegin = 9, kTraceWgmmaWaitEnd = 10, kTraceWgmmaCommit = 11,
};
constexpr uint32_t kWaitMbar = 0;         // + (addr >> 3) & 31: an mbarrier wait, cycles
constexpr uint32_t kWaitBarSync = 32;     // + id & 15: a named-barrier wait, cycles
constexpr uint32_t kWaitWgmma = 48;       // + N & 3: a wgmma group wait, cycles
constexpr uint32_t kWaitMbarArrive = 64;  // + (addr >> 3) & 31
constexpr uint32_t kWaitExpectTx = 96;    // + (addr >> 3) & 31
constexpr uint32_t kWaitBarArrive = 128;  // + id & 15
constexpr uint32_t kWaitClock = 240;      // the low 40 bits of clock64 (start, then end)
constexpr uint32_t kWaitGlobal = 241;     // the low 40 bits of %globaltimer (ns; start, then end)
constexpr uint32_t kWaitSmid = 242;       // %smid

namespace whowaits { namespace trace {

__device__ __forceinline__ uint32_t mbar_key(uint32_t arg) { return ((arg & 0x7FFFFFFFu) >> 3) & 31u; }

__device__ __forceinline__ void waits_begin() { asm volatile("mov.u64 whowaits_t0, %clock64;\n"); }  // no operands: one %

__device__ __forceinline__ void waits_put(unsigned long long rec) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.lt.u64 p, whowaits_wp, whowaits_wl;\n\t@p st.global.u64 [whowaits_wp], %0;\n\t"
        "add.u64 whowaits_wp, whowaits_wp, 8;\n\t}\n" ::"l"(rec));
}

// The wait's end: one record, its entry and the cycles since whowaits_t0.
__device__ __forceinline__ void waits_end(uint32_t entry) {
    unsigned long long t0, t1;
    asm volatile("mov.u64 %0, %%clock64;\n\tmov.u64 %1, whowaits_t0;\n" : "=l"(t1), "=l"(t0));
    waits_put((static_cast<unsigned long long>(entry) << 40) | ((t1 - t0) & 0xFFFFFFFFFFull));
}

// The record classes a build logs (a bit mask, default all): 1 mbarrier waits, 2 named-barrier waits, 4 wgmma
// waits, 8 arrivals. A class left out costs nothing (no clock read, no store), so one class logged alone perturbs
// the kernel least: `whowaits trace --waits --class wgmma` (kernels/trace.py builds one cubin per mask).
#ifndef WHOWAITS_TRACE_WAITS_CLASSES
#define WHOWAITS_TRACE_WAITS_CLASSES 15u
#endif
constexpr uint32_t kWaitClasses = WHOWAITS_TRACE_WAITS_CLASSES;

__device__ __forceinline__ void waits_event(uint32_t kind, uint32_t arg) {
    if ((kind == kTraceMbarWaitBegin && (kWaitClasses & 1u)) || (kind == kTraceBarSyncBegin && (kWaitClasses & 2u)) ||
        (kind == kTraceWgmmaWaitBegin && (kWaitClasses & 4u)))
        waits_begin();
    else if (kind == kTraceMbarWaitEnd && (kWaitClasses & 1u)) waits_end(kWaitMbar + mbar_key(arg));
    else if (kind == kTraceBarSyncEnd && (kWaitClasses & 2u)) waits_end(kWaitBarSync + (arg & 15u));
    else if (!(kWaitClasses & 8u)) return;
    else if (kind == kTraceMbarArrive) waits_put(static_cast<unsigned long long>(kWaitMbarArrive + mbar_key(arg)) << 40);
    else if (kind == kTraceMbarExpectTx) waits_put(static_cast<unsigned long long>(kWaitExpectTx + mbar_key(arg)) << 40);
    else if (kind == kTraceBarArrive) waits_put(static_cast<unsigned long long>(kWaitBarArrive + (arg & 15u)) << 40);
}

__device__ __forceinline__ void waits_wgmma_end(uint32_t n) {
    if (kWaitClasses & 4u) waits_end(kWaitWgmma + (n & 3u));
}

__device__ __forceinline__ void waits_clock_pair() {
    unsigned long long t, gt;
    asm volatile("mov.u64 %0, %%clock64;\n" : "=l"(t));
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(gt));
    waits_put((static_cast<unsigned long long>(kWaitClock) << 40) | (t & 0xFFFFFFFFFFull));
    waits_put((static_cast<unsigned long long>(kWaitGlobal) << 40) | (gt & 0xFFFFFFFFFFull));
}

// Once per CTA, first thing in the kernel, every thread: declares whowaits_t0, whowaits_wp and whowaits_wl (the
// leader's row and its end; 0 and 0 on every other thread and past max_ctas), then the leader's start records.
// WHOWAITS_TRACE_WAITS_PER_WARP: lane 0 of every warp keeps a row (4 per warpgroup, warp order), not the
// warpgroup's leader alone: the warps of one warpgroup do not wait alike (the first warp's wgmma waits are the
// shortest), so the leader's row is not its warpgroup's (`whowaits trace --waits --per-warp`).
#ifdef WHOWAITS_TRACE_WAITS_PER_WARP
constexpr uint32_t kWaitRowMask = 31u, kWaitRowShift = 5u, kWaitRowsPerSlot = 4u;
#else
constexpr uint32_t kWaitRowMask = 127u, kWaitRowShift = 7u, kWaitRowsPerSlot = 1u;
#endif

__device__ __forceinline__ void waits_init() {
    unsigned long long* row = nullptr;
    uint32_t cap = 0;
    const uint32_t wg = threadIdx.x >> 7;
    if ((threadIdx.x & kWaitRowMask) == 0u && wg < WHOWAITS_TRACE_SLOTS) {
        const WhowaitsWaitBuffer b = whowaits_waits;
        const uint32_t cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
        if (b.records != nullptr && cta < b.max_ctas) {
            row = b.records + static_cast<size_t>(cta * WHOWAITS_TRACE_SLOTS * kWaitRowsPerSlot +
                                                  (threadIdx.x >> kWaitRowShift)) * b.capacity;
            cap = b.capacity;
        }
    }
    asm volatile(".reg .u64 whowaits_t0;\n\t.reg .u64 whowaits_wp;\n\t.reg .u64 whowaits_wl;\n\t"
                 "mov.u64 whowaits_t0, 0;\n\tmov.u64 whowaits_wp, %0;\n\tmov.u64 whowaits_wl, %1;\n"
                 ::"l"(row), "l"(row == nullptr ? 0ull : reinterpret_cast<unsigned long long>(row + cap)) : "memory");
    uint32_t smid;
    asm volatile("mov.u32 %0, %%smid;\n" : "=r"(smid));
    waits_put((static_cast<unsigned long long>(kWaitSmid) << 40) | smid);
    waits_clock_pair();
}

__device__ __forceinline__ void waits_finish() { waits_clock_pair(); }

}}  // namespace whowaits::trace

#define WHOWAITS_TRACE_INIT() ::whowaits::trace::waits_init()
#define WHOWAITS_TRACE_EVENT(kind, arg) ::whowaits::trace::waits_event((kind), (arg))
#define WHOWAITS_TRACE_FINISH() ::whowaits::trace::waits_finish()
#define WHOWAITS_TRACE_PARKED(kind, arg) ::whowaits::trace::waits_event((kind), (arg))
#define WHOWAITS_TRACE_FLUSH(kind, arg) ::whowaits::trace::waits_event((kind), (arg))
#define WHOWAITS_TRACE_WGMMA_WAIT_END(N) ::whowaits::trace::waits_wgmma_end(N)
// In the untraced build of v12-v14 and v17-v19 ptxas moves the softmax's PV[n-1] wait (wgmma_wait<0>, written
// after the softmax) up to the start of the basic block after the mask, before the row max, so the softmax runs
// after PV[n-1] completes (scripts/trace_windows.py: a PV window of 137-148 instructions untraced); a clock read
// pins a wait where the source has it, and the traced build would keep the softmax inside the window (421-436).
// The wait-log build therefore waits there itself (this macro, placed after the mask in those rungs' softmax),
// and the wait the source has after the softmax finds nothing in flight. Nothing in the other builds.
#define WHOWAITS_TRACE_PV_WAIT_AS_COMPILED() ::whowaits::sm90::wgmma_wait<0>()

#elif defined(WHOWAITS_TRACE)

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
// WHOWAITS_TRACE_INIT() (which alone reads the global descriptor and writes the start events). The cursors sit
// in the last WHOWAITS_TRACE_SLOTS * 16 bytes of the dynamic shared memory, and each warpgroup's parking area
// (WHOWAITS_TRACE_PARK events of 16 bytes) just before them: the traced launch asks for TAIL_BYTES more than the
// kernel's own (kernels/trace.py), not for a __shared__ variable of its own: ptxas would place one first and
// move the kernel's mbarriers, whose addresses the static graph names.
//
// Two kinds of stamp (issue 12, trace format 2):
// * ordinary (every wait's begin and end but the wgmma ones below, arrive.expect_tx): clock64, one shared load
//   (the cursor), the parked events copied out (shared load + global store each; before the clock read of a
//   wait's begin, after that of a wait's end), one 16-byte global store, one shared store (the cursor);
//   no global load;
// * parked (a wgmma commit, a wgmma wait's begin, the end of a wait_group N > 0, every mbarrier arrive and
//   bar.arrive: the events that sit between a commit and the wait that retires it): clock64 and one 16-byte
//   shared store into the warpgroup's parking area at the address held in the PTX register whowaits_np
//   (declared by WHOWAITS_TRACE_INIT, so every kernel that stamps must call it first); no load, no branch
//   (the store is predicated on whowaits_np < whowaits_lim, which is 0 on all but the leader). The next ordinary stamp (a wait_group 0's end, an mbarrier or
//   named-barrier wait's begin) copies the parked events to the slot, in order, with their own timestamps,
//   then its own; WHOWAITS_TRACE_FINISH() at the end of the kernel copies what the last wait left parked
//   (arrives after it). A parked event's kind carries kTraceParkedBit. Past WHOWAITS_TRACE_PARK parked
//   events between two ordinary stamps the rest are not stored but counted: the flush writes one
//   kTraceParkDropped event (arg = how many), which the host adds to dropped_events.
// scripts/trace_windows.py counts what this leaves between each HGMMA group and its DEPBAR in the SASS.
struct __align__(16) WhowaitsTraceCursor {
    WhowaitsTraceEvent* next;  // null: nothing recorded (no buffer, or a CTA past max_ctas)
    WhowaitsTraceEvent* end;
};
extern __shared__ __align__(16) unsigned char whowaits_trace_dsmem[];

#ifndef WHOWAITS_TRACE_PARK
#define WHOWAITS_TRACE_PARK 16  // parked events per warpgroup (a window of the ladder parks at most 7)
#endif
constexpr uint32_t kTraceParkedBit = 0x100u;   // kind | this: the event was parked (its stamp had no load)
constexpr uint32_t kTraceParkDropped = 12u;    // arg = parked events lost to a full parking area
constexpr uint32_t kTraceEnd = 13u;            // arg = %smid; the slot's last clock64, a kTraceGlobal event after it
constexpr uint32_t kTraceTailBytes =
    WHOWAITS_TRACE_SLOTS * (16u + WHOWAITS_TRACE_PARK * static_cast<uint32_t>(sizeof(WhowaitsTraceEvent)));

namespace whowaits { namespace trace {

__device__ __forceinline__ unsigned long long clock() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%clock64;\n" : "=l"(t)::"memory");
    return t;
}

__device__ __forceinline__ uint32_t tail_end() {
    uint32_t dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;\n" : "=r"(dyn));  // not volatile: read once, kept in a register
    return static_cast<uint32_t>(__cvta_generic_to_shared(whowaits_trace_dsmem)) + dyn;
}

// The shared-window address of warpgroup wg's cursor (a constant plus %dynamic_smem_size, a uniform value).
__device__ __forceinline__ uint32_t cursor(uint32_t wg) {
    return tail_end() + (wg - WHOWAITS_TRACE_SLOTS) * static_cast<uint32_t>(sizeof(WhowaitsTraceCursor));
}

// The shared-window address of warpgroup wg's parking area (WHOWAITS_TRACE_PARK events, before the cursors).
__device__ __forceinline__ uint32_t parking(uint32_t wg) {
    return tail_end() - WHOWAITS_TRACE_SLOTS * static_cast<uint32_t>(sizeof(WhowaitsTraceCursor)) -
           (WHOWAITS_TRACE_SLOTS - wg) * WHOWAITS_TRACE_PARK * static_cast<uint32_t>(sizeof(WhowaitsTraceEvent));
}

// The parking state lives in two PTX registers of the kernel (not memory), declared by init(): whowaits_np, the
// shared address the next parked event goes to, and whowaits_lim, the end of the leader's parking area (0 on
// every other thread, so only the leader stores). A parked stamp needs no load and no branch to find its place.
constexpr uint32_t kTraceParkBytes = WHOWAITS_TRACE_PARK * static_cast<uint32_t>(sizeof(WhowaitsTraceEvent));
__device__ __forceinline__ uint32_t park_next() {
    uint32_t n;
    asm volatile("mov.u32 %0, whowaits_np;\n" : "=r"(n));
    return n;
}
__device__ __forceinline__ uint32_t park_lim() {
    uint32_t n;
    asm volatile("mov.u32 %0, whowaits_lim;\n" : "=r"(n));
    return n;
}

__device__ __forceinline__ void put(WhowaitsTraceEvent* p, unsigned long long t, uint32_t kind, uint32_t arg) {
    asm volatile("st.global.v2.u64 [%0], {%1, %2};\n" ::"l"(p), "l"(t),
                 "l"(static_cast<unsigned long long>(kind) | (static_cast<unsigned long long>(arg) << 32))
                 : "memory");
}

// A clock pair at ev[0..1]: clock64 (kind, arg %smid), then a %globaltimer read right after it (kTraceGlobal):
// one point on the SM's clock line, written at a slot's start (kTraceStart) and end (kTraceEnd).
__device__ __forceinline__ void put_clock_pair(WhowaitsTraceEvent* ev, uint32_t kind) {
    uint32_t smid;
    unsigned long long gt;
    const unsigned long long t = clock();
    asm volatile("mov.u32 %0, %%smid;\n" : "=r"(smid));
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(gt)::"memory");
    put(ev, t, kind, smid);
    put(ev + 1, gt, kTraceGlobal, 0);
}

// Once per CTA, first thing in the kernel, every thread: declares the parked-event count (every thread keeps
// one, only the leader's is used), then each warpgroup's leader sets its own slot's cursor (no other thread
// reads it, so no barrier is needed) and writes the slot's start events (%smid, and one %globaltimer reading
// beside a clock64, to place SMs on one time axis).
__device__ __forceinline__ void init() {
    {
        const uint32_t p = parking((threadIdx.x >> 7) & (WHOWAITS_TRACE_SLOTS - 1));
        const bool leader = (threadIdx.x & 127u) == 0u && (threadIdx.x >> 7) < WHOWAITS_TRACE_SLOTS;
        asm volatile(".reg .u32 whowaits_np;\n\t.reg .u32 whowaits_lim;\n\tmov.u32 whowaits_np, %0;\n\t"
                     "mov.u32 whowaits_lim, %1;\n" ::"r"(p), "r"(leader ? p + kTraceParkBytes : 0u) : "memory");
    }
    if ((threadIdx.x & 127u) != 0u) return;
    const uint32_t wg = threadIdx.x >> 7;
    if (wg >= WHOWAITS_TRACE_SLOTS) return;
    const WhowaitsTraceBuffer b = whowaits_trace;
    const uint32_t cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    WhowaitsTraceCursor c = {nullptr, nullptr};
    if (b.events != nullptr && cta < b.max_ctas && b.capacity >= 2) {
        WhowaitsTraceEvent* ev = b.events + static_cast<size_t>(cta * WHOWAITS_TRACE_SLOTS + wg) * b.capacity;
        put_clock_pair(ev, kTraceStart);
        c = {ev + 2, ev + b.capacity};
    }
    asm volatile("st.shared.v2.u64 [%0], {%1, %2};\n" ::"r"(cursor(wg)), "l"(c.next), "l"(c.end) : "memory");
}

// Ordinary stamp, on the leader thread only: the cursor, the parked events copied out, this event, the cursor
// back. A wait's end reads the clock first (right after the wait: the copying is work after it); every other
// ordinary event (a wait's begin, arrive.expect_tx) copies the parked events out first and reads its clock
// after, so a wait's interval holds one ordinary stamp's bookkeeping whatever was parked (the calibration in
// profiler/analyze/trace.py), and the copying counts as work before the wait. own = false: only the parked
// events (WHOWAITS_TRACE_FINISH).
template <bool kClockFirst>
__device__ __forceinline__ void record_(uint32_t kind, uint32_t arg, bool own) {
    unsigned long long t = kClockFirst ? clock() : 0ull;
    if ((threadIdx.x & 127u) == 0u) {
        const uint32_t wg = (threadIdx.x >> 7) & (WHOWAITS_TRACE_SLOTS - 1);
        const uint32_t c = cursor(wg);
        WhowaitsTraceEvent *next, *end;
        asm volatile("ld.shared.v2.u64 {%0, %1}, [%2];\n" : "=l"(next), "=l"(end) : "r"(c));
        const uint32_t p = parking(wg), n = (park_next() - p) >> 4;  // events parked since the last flush
        if (n != 0u) {
            const uint32_t kept = n < WHOWAITS_TRACE_PARK ? n : WHOWAITS_TRACE_PARK;
            for (uint32_t i = 0; i < kept && next < end; ++i, ++next) {
                unsigned long long pt, pk;
                asm volatile("ld.shared.v2.u64 {%0, %1}, [%2];\n" : "=l"(pt), "=l"(pk) : "r"(p + 16u * i));
                asm volatile("st.global.v2.u64 [%0], {%1, %2};\n" ::"l"(next), "l"(pt), "l"(pk) : "memory");
            }
            if (n > WHOWAITS_TRACE_PARK && next < end)
                put(next++, kClockFirst ? t : clock(), kTraceParkDropped, n - WHOWAITS_TRACE_PARK);
            asm volatile("mov.u32 whowaits_np, %0;\n" ::"r"(p) : "memory");
        }
        if (!kClockFirst) t = clock();
        if (own && next < end) {
            put(next, t, kind, arg);
            ++next;
        }
        asm volatile("st.shared.u64 [%0], %1;\n" ::"r"(c), "l"(next) : "memory");
    }
}
__device__ __forceinline__ void record(uint32_t kind, uint32_t arg, bool own = true) {
    if (kind == kTraceMbarWaitEnd || kind == kTraceBarSyncEnd || kind == kTraceWgmmaWaitEnd)
        record_<true>(kind, arg, own);
    else
        record_<false>(kind, arg, own);
}

// Parked stamp: clock64 and one predicated shared store at whowaits_np (module comment); past the parking
// area's end the store is skipped and whowaits_np still advances (the flush counts the dropped ones).
__device__ __forceinline__ void park(uint32_t kind, uint32_t arg) {
    const unsigned long long t = clock();
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.lt.u32 p, whowaits_np, whowaits_lim;\n\t"
        "@p st.shared.v2.u64 [whowaits_np], {%0, %1};\n\tadd.u32 whowaits_np, whowaits_np, 16;\n\t}\n" ::"l"(t),
        "l"(static_cast<unsigned long long>(kind | kTraceParkedBit) | (static_cast<unsigned long long>(arg) << 32))
        : "memory");
}

// The last thing each ws kernel does (every thread): what is still parked (arrives after the last wait), then
// the slot's end pair: a clock64 (kTraceEnd, arg %smid) and a %globaltimer reading beside it, as init() wrote at
// the start. With the start pair that is two points per slot on each SM's clock line, so the host fits the SM
// clock from one CTA alone (v13/v14 run one persistent CTA per SM: without it their fit fell back to the
// nominal clock). A warpgroup that returns before the end (the producer of v10-v14) writes no end pair.
__device__ __forceinline__ void finish() {
    if ((threadIdx.x & 127u) != 0u) return;
    if (park_next() != park_lim() - kTraceParkBytes) record(0u, 0u, false);
    const uint32_t c = cursor((threadIdx.x >> 7) & (WHOWAITS_TRACE_SLOTS - 1));
    WhowaitsTraceEvent *next, *end;
    asm volatile("ld.shared.v2.u64 {%0, %1}, [%2];\n" : "=l"(next), "=l"(end) : "r"(c));
    if (next != nullptr && next + 1 < end) {
        put_clock_pair(next, kTraceEnd);
        asm volatile("st.shared.u64 [%0], %1;\n" ::"r"(c), "l"(next + 2) : "memory");
    }
}

}}  // namespace whowaits::trace

#define WHOWAITS_TRACE_INIT() ::whowaits::trace::init()
#define WHOWAITS_TRACE_EVENT(kind, arg) ::whowaits::trace::record((kind), (arg))
#define WHOWAITS_TRACE_FINISH() ::whowaits::trace::finish()
#define WHOWAITS_TRACE_PARKED(kind, arg) ::whowaits::trace::park((kind), (arg))
#define WHOWAITS_TRACE_FLUSH(kind, arg) ::whowaits::trace::record((kind), (arg))
#define WHOWAITS_TRACE_WGMMA_WAIT_END(N) \
    ((N) > 0 ? ::whowaits::trace::park(kTraceWgmmaWaitEnd, (N)) : ::whowaits::trace::record(kTraceWgmmaWaitEnd, (N)))
#else
#define WHOWAITS_TRACE_INIT() ((void)0)
#define WHOWAITS_TRACE_EVENT(kind, arg) ((void)0)
#define WHOWAITS_TRACE_FINISH() ((void)0)
#define WHOWAITS_TRACE_PARKED(kind, arg) ((void)0)
#define WHOWAITS_TRACE_FLUSH(kind, arg) ((void)0)
#define WHOWAITS_TRACE_WGMMA_WAIT_END(N) ((void)0)
#endif
#ifndef WHOWAITS_TRACE_PV_WAIT_AS_COMPILED
#define WHOWAITS_TRACE_PV_WAIT_AS_COMPILED() ((void)0)
#endif
