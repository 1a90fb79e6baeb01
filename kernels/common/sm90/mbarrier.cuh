// mbarrier (shared-memory transaction barrier) primitives, sm_90.
//
// An mbarrier completes a phase when its pending arrival count reaches zero AND its transaction count
// (bytes announced with expect_tx, decremented by TMA's complete_tx) reaches zero. Waiters name the
// phase they wait for by its parity: the k-th completion of a barrier (k = 0, 1, ...) flips the phase
// bit from k & 1 to (k + 1) & 1, and try_wait.parity(P) returns true once the phase with parity P has
// completed. So the k-th use of a ring stage waits parity (k & 1); waiting the wrong parity either
// passes at once (reads a stage not yet written) or hangs.
#pragma once
#include <cstdint>

#include "common/sm90/trace.cuh"

namespace whowaits { namespace sm90 {

// @region inherit

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

// Make initialised barriers visible to the other threads and to the async proxy (TMA) before first use;
// follow it with __syncthreads(). Forgetting this is a classic: TMA may complete_tx on a barrier whose
// init it has not seen.
__device__ __forceinline__ void mbar_fence_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// One arrival that also announces `bytes` of transactions still to come (TMA completes them).
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
    WHOWAITS_TRACE_EVENT(kTraceMbarExpectTx, smem_addr(bar));
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
    WHOWAITS_TRACE_PARKED(kTraceMbarArrive, smem_addr(bar));
}

// @region sync
// Spin until the phase with parity `parity` has completed (SYNCS.PHASECHK.TRANS64.TRYWAIT in SASS).
__device__ __forceinline__ void mbar_spin(uint64_t* bar, uint32_t parity) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "WHOWAITS_MBAR_WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
        "@!p bra WHOWAITS_MBAR_WAIT_%=;\n"
        "}\n" ::"r"(smem_addr(bar)),
        "r"(parity)
        : "memory");
}

// A wait on the phase with parity `parity`, stamped at its begin and end in the traced build (issue 12).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
    WHOWAITS_TRACE_EVENT(kTraceMbarWaitBegin, smem_addr(bar) | (parity << 31));
    mbar_spin(bar, parity);
    WHOWAITS_TRACE_EVENT(kTraceMbarWaitEnd, smem_addr(bar) | (parity << 31));
}

// A wait known to pass at once, kept for its control flow: the spin loop ends the basic block, so ptxas cannot
// move an instruction across it (v15's scheduling fence keeps the PV wait_group 0 below the softmax). Never
// stamped: it sits inside a wgmma commit -> wait window, where an ordinary stamp's cursor load and global stores
// are what the traced build keeps out (trace format 2; tests/test_trace.py, the parked-windows proof), and a
// wait that cannot block has nothing to measure.
__device__ __forceinline__ void mbar_fence_wait(uint64_t* bar, uint32_t parity) { mbar_spin(bar, parity); }

}}  // namespace whowaits::sm90
