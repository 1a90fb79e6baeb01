// Named-barrier ids and the pingpong turn ring of a warp-specialised kernel with kConsumers consumer warpgroups
// (v20 on; v11-v19 hard-code the two-consumer case).
//
// Ids: 0 is __syncthreads; consumer c's turn is id kSched0 + c (1 .. kConsumers); consumer c's O staging buffer is
// guarded by id kStore0 + c (kConsumers + 1 .. 2 kConsumers). Each turn barrier counts 256 threads: the 128 of the
// consumer that waits for its turn (bar.sync) and the 128 of the one before it in the ring, which hands the turn on
// (bar.arrive) right after issuing its own wgmma batch. The ring is 0 -> 1 -> ... -> kConsumers - 1 -> 0: so the
// tensor cores take one consumer's batch after another while the others run their softmax (with 3 consumers each
// has two turns' time for it). Every consumer of a CTA takes the same number of turns (they share the CTA's tiles),
// so the barriers balance if the last consumer arrives once up front (consumer 0 goes first) and skips its very last
// hand-on; pass_final_turn() does that.
#pragma once
#include <cstdint>

#include "common/sm90/named_barrier.cuh"

namespace whowaits { namespace sm90 {

// @region inherit

template <int kConsumers>
struct BarrierIds {
    static_assert(kConsumers >= 2 && kConsumers <= 3, "2 or 3 consumer warpgroups");
    static constexpr uint32_t kSched0 = 1;               // consumer c's turn: kSched0 + c
    static constexpr uint32_t kStore0 = 1 + kConsumers;  // consumer c's O staging: kStore0 + c
    static_assert(kStore0 + kConsumers <= 16, "16 named barriers per CTA");
};

template <int kConsumers>
struct PingpongRing {
    static constexpr uint32_t kThreads = 2 * 128;  // the waiting consumer and the one handing the turn on
    uint32_t my_bar, next_bar;
    bool last;

    __device__ __forceinline__ explicit PingpongRing(int c)
        : my_bar(BarrierIds<kConsumers>::kSched0 + c),
          next_bar(BarrierIds<kConsumers>::kSched0 + (c + 1) % kConsumers),
          last(c == kConsumers - 1) {}

    // Once, before the first turn: the last consumer lets consumer 0 go first.
    __device__ __forceinline__ void start() const {
        if (last) named_bar_arrive(BarrierIds<kConsumers>::kSched0, kThreads);
    }
    __device__ __forceinline__ void wait_turn() const { named_bar_sync(my_bar, kThreads); }
    __device__ __forceinline__ void pass_turn() const { named_bar_arrive(next_bar, kThreads); }
    // After the CTA's very last batch: everyone but the last consumer hands on (balances start()).
    __device__ __forceinline__ void pass_final_turn() const {
        if (!last) named_bar_arrive(next_bar, kThreads);
    }
};

}}  // namespace whowaits::sm90
