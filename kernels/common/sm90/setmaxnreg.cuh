// setmaxnreg (sm_90a): hand registers from one warpgroup to another at run time.
//
// A CTA's register file share is fixed at launch (registers per thread from ptxas x threads). In a
// warp-specialised kernel the producer warpgroup (one thread issuing TMA) needs few and the consumer
// warpgroups (wgmma accumulators + softmax) many: the producer gives registers back with
// setmaxnreg.dec and each consumer takes them with setmaxnreg.inc (which blocks until the pool has
// them). Both are warpgroup-wide (.sync.aligned: all 128 threads execute the same one), the counts are
// multiples of 8 in [24, 256], and the sum over warpgroups must fit what the CTA got at launch:
//   2 consumers: 384 threads x 168 (launch bound) = 64512 = 128 x 24 + 256 x 240   (FlashAttention-3)
//   3 consumers: 512 threads x 128 (launch bound) = 65536 = 128 x 32 + 384 x 160   (ThunderKittens)
// ptxas needs __launch_bounds__(threads, 1) to know the count at entry (otherwise: warning C7508,
// "setmaxnreg ignored", which the build treats as an error). SASS: USETMAXREG.
#pragma once
#include <cstdint>

namespace whowaits { namespace sm90 {

// @region inherit

template <uint32_t kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
    static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg: multiple of 8 in [24, 256]");
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

template <uint32_t kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
    static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg: multiple of 8 in [24, 256]");
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// The (producer, consumer) register split for kConsumers consumer warpgroups beside one producer.
template <int kConsumers>
struct RegSplit;
template <>
struct RegSplit<2> {
    static constexpr uint32_t kProducer = 24, kConsumer = 240;
};
template <>
struct RegSplit<3> {
    static constexpr uint32_t kProducer = 32, kConsumer = 160;
};

}}  // namespace whowaits::sm90
