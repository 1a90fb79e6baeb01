// A K/V ring of kStages shared-memory stages guarded by mbarriers, with named operations and an
// explicit phase (the CUTLASS PipelineTmaAsync idea, written small):
//
//   full_k[s], full_v[s]  arrival count 1 (the producer's arrive.expect_tx) + the TMA bytes of the tile
//   empty[s]              arrival count kConsumers (one arrive per consumer warp when it is done)
//
//   producer: producer_acquire(st)  wait until stage st.index is free (empty, parity st.phase ^ 1)
//             producer_commit_k/v   arrive.expect_tx + issue the TMA load(s) onto full_*[st.index]
//   consumer: consumer_wait_k/v(st) wait until the tile landed (full_*, parity st.phase)
//             consumer_release(st)  one arrive on empty[st.index] per consumer warp
//   PipeState::advance()            next stage; the phase flips each time the index wraps to 0
//
// The producer's first pass over the ring must not wait (the stages start empty): its state starts at
// phase 1 relative to the consumers' (see producer_start_state), so producer_acquire waits parity 0 of
// empty only on the second pass, i.e. after the consumers' first release of that stage.
#pragma once
#include <cstdint>

#include "common/sm90/mbarrier.cuh"

namespace whowaits { namespace sm90 {

// @region inherit

template <int kStages>
struct PipeState {
    int index = 0;
    uint32_t phase = 0;
    int count = 0;  // uses so far (tile number)

    // The state of the t-th use of the ring (t = tile number), computed rather than carried: no registers
    // live across the loop beyond the tile counter.
    static __device__ __forceinline__ PipeState at(int t) {
        PipeState st;
        st.index = t % kStages;
        st.phase = static_cast<uint32_t>(t / kStages) & 1u;
        st.count = t;
        return st;
    }

    __device__ __forceinline__ void advance() {
        ++count;
        if (++index == kStages) {
            index = 0;
            phase ^= 1u;
        }
    }
};

template <int kStages>
struct KVPipeline {
    uint64_t full_k[kStages];
    uint64_t full_v[kStages];
    uint64_t empty[kStages];

    // One thread, before the CTA-wide barrier that follows mbar_fence_init().
    __device__ __forceinline__ void init(uint32_t consumers) {
#pragma unroll
        for (int s = 0; s < kStages; ++s) {
            mbar_init(&full_k[s], 1);
            mbar_init(&full_v[s], 1);
            mbar_init(&empty[s], consumers);
        }
    }

    // Producer side: wait for stage st.index to be free on every pass but the first.
    __device__ __forceinline__ void producer_acquire(const PipeState<kStages>& st) {
        if (st.count >= kStages) mbar_wait(&empty[st.index], st.phase ^ 1u);
    }
    __device__ __forceinline__ uint64_t* producer_arm_k(const PipeState<kStages>& st, uint32_t bytes) {
        mbar_arrive_expect_tx(&full_k[st.index], bytes);
        return &full_k[st.index];
    }
    __device__ __forceinline__ uint64_t* producer_arm_v(const PipeState<kStages>& st, uint32_t bytes) {
        mbar_arrive_expect_tx(&full_v[st.index], bytes);
        return &full_v[st.index];
    }

    // Consumer side.
    __device__ __forceinline__ void consumer_wait_k(const PipeState<kStages>& st) { mbar_wait(&full_k[st.index], st.phase); }
    __device__ __forceinline__ void consumer_wait_v(const PipeState<kStages>& st) { mbar_wait(&full_v[st.index], st.phase); }
    // Call from lane 0 of each consumer warp after __syncwarp() (every lane's reads of the stage are done;
    // for wgmma: after wgmma.wait_group retired the groups that read it).
    __device__ __forceinline__ void consumer_release(const PipeState<kStages>& st) { mbar_arrive(&empty[st.index]); }
};

}}  // namespace whowaits::sm90
