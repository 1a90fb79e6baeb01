// v08: TMA + mbarrier ring, compute unchanged (ladder II, step 1). v07's kernel (FA2 warp layout, mma.sync
// m16n8k16, ldmatrix, the fused exp2 softmax) with only the data movement replaced:
//  - Q, K and V tiles arrive by TMA (cp.async.bulk.tensor.3d, 128-byte swizzle) issued by ONE thread,
//    instead of every thread computing addresses and issuing LDGSTS;
//  - K and V share a kStages-deep ring; each stage has a full barrier for K and one for V (arrive.expect_tx
//    + the TMA bytes), and an empty barrier every warp arrives on when it is done with the stage; waits are
//    mbarrier try_wait (SYNCS) instead of cp.async.wait_group + __syncthreads (BAR);
//  - the shared-memory tiles use TMA's layout ([rows][64] sub-tiles, 128-byte swizzle: common/sm90/tma.cuh),
//    read with the same ldmatrix lane pattern as before (Sw128LdsmAddr).
// Thread 0 is the producer and also a consumer: it refills the stage freed in the previous iteration at
// the top of each iteration, so K/V tile n + kStages - 1 is in flight while tile n is computed.
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>

#include "common/sm80/attn_mask.cuh"
#include "common/sm80/ldmatrix.cuh"
#include "common/sm80/mma.cuh"
#include "common/sm80/softmax_math.cuh"
#include "common/sm90/mbarrier.cuh"
#include "common/sm90/pipeline.cuh"
#include "common/sm90/tma.cuh"

#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v08_tma_mbarrier
#endif

namespace whowaits { namespace WHOWAITS_NAMESPACE {

// The sm80 warp GEMMs (common/sm80/warp_gemm.cuh), over any ldmatrix address type (here Sw128LdsmAddr).
// @region load_q
template <int kMTiles, class Addr>
__device__ __forceinline__ void load_q_frag(uint32_t (&qa)[kMTiles][4], const Addr& qaddr, int kk) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) common::ldmatrix_x4(qa[mt], qaddr.at(mt * 16, 2 * kk));
}

// @region qk
template <typename Element, int kBlockN, int kMTiles, class Addr>
__device__ __forceinline__ void qk_step(float (&s)[kMTiles][kBlockN / 8][4], const uint32_t (&qa)[kMTiles][4],
                                        const Addr& kaddr, int kk) {
#pragma unroll
    for (int np = 0; np < kBlockN / 16; ++np) {
        uint32_t b[4];
        common::ldmatrix_x4(b, kaddr.at(np * 16, 2 * kk));
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
            common::mma_16816<Element>(s[mt][2 * np], qa[mt], b[0], b[1]);
            common::mma_16816<Element>(s[mt][2 * np + 1], qa[mt], b[2], b[3]);
        }
    }
}

// @region pv
template <typename Element, int kHeadDim, int kBlockN, int kMTiles, class Addr>
__device__ __forceinline__ void pv(float (&o)[kMTiles][kHeadDim / 8][4], const float (&s)[kMTiles][kBlockN / 8][4],
                                   const Addr& vaddr) {
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
        uint32_t pa[kMTiles][4];
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
            pa[mt][0] = common::pack2<Element>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
            pa[mt][1] = common::pack2<Element>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
            pa[mt][2] = common::pack2<Element>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
            pa[mt][3] = common::pack2<Element>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < kHeadDim / 16; ++dp) {
            uint32_t b[4];
            common::ldmatrix_x4_trans(b, vaddr.at(kk * 16, 2 * dp));
#pragma unroll
            for (int mt = 0; mt < kMTiles; ++mt) {
                common::mma_16816<Element>(o[mt][2 * dp], pa[mt], b[0], b[1]);
                common::mma_16816<Element>(o[mt][2 * dp + 1], pa[mt], b[2], b[3]);
            }
        }
    }
}

// @endregion
template <typename Element, int kHeadDim, int kBlockM, int kBlockN, int kWarps, int kStages, bool kCausal>
__global__ void __launch_bounds__(kWarps * 32)
    flash_fwd(const __grid_constant__ CUtensorMap tmap_q, const __grid_constant__ CUtensorMap tmap_k,
              const __grid_constant__ CUtensorMap tmap_v, Element* __restrict__ o, int seqlen, float softmax_scale) {
    using namespace whowaits::common;
    using namespace whowaits::sm90;
    constexpr int kMTiles = kBlockM / (16 * kWarps);  // m16 tiles per warp
    static_assert(kMTiles >= 1 && kMTiles * 16 * kWarps == kBlockM, "kBlockM must be a multiple of 16 * kWarps");
    static_assert(kBlockN % 16 == 0 && kHeadDim % 64 == 0, "K/V tiles of 16-key steps; head_dim a multiple of 64 (TMA box)");
    static_assert(kBlockM <= 256 && kBlockN <= 256, "a TMA box has at most 256 rows");
    static_assert(kStages >= 2 && kStages <= 4, "a ring of 2 to 4 K/V stages");
    constexpr int kNTiles = kBlockN / 8, kDTiles = kHeadDim / 8, kKSteps = kHeadDim / 16;
    constexpr bool kQInRegs = kMTiles * kKSteps * 4 <= 32;
    constexpr uint32_t kQBytes = kBlockM * kHeadDim * sizeof(Element);
    constexpr uint32_t kTileBytes = kBlockN * kHeadDim * sizeof(Element);  // one K or V stage

    // @region other
    extern __shared__ __align__(128) unsigned char smem_raw[];
    // The 128-byte swizzle is a function of address bits 4-9: tiles start on 1024-byte boundaries.
    Element* sQ = reinterpret_cast<Element*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    Element* sK = sQ + kBlockM * kHeadDim;
    Element* sV = sK + kStages * kBlockN * kHeadDim;
    __shared__ KVPipeline<kStages> pipe;
    __shared__ uint64_t q_full;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int m_block = gridDim.x - 1 - blockIdx.x;  // heaviest (causal) blocks first
    const int bh = blockIdx.z * gridDim.y + blockIdx.y;
    const int cta_row0 = m_block * kBlockM;
    const int warp_row0 = warp * kMTiles * 16;
    int n_blocks = (seqlen + kBlockN - 1) / kBlockN;
    if (kCausal) n_blocks = min(n_blocks, (cta_row0 + kBlockM + kBlockN - 1) / kBlockN);

    // @region sync
    if (tid == 0) {
        prefetch_tensor_map(&tmap_q);
        prefetch_tensor_map(&tmap_k);
        prefetch_tensor_map(&tmap_v);
        mbar_init(&q_full, 1);
        pipe.init(kWarps);  // one release per warp
        mbar_fence_init();
    }
    __syncthreads();

    // @region load_kv
    // Producer (thread 0): tile t into stage t % kStages, once the stage's previous tile was released.
    auto produce = [&](int t) {
        const auto prod = PipeState<kStages>::at(t);
        pipe.producer_acquire(prod);  // no wait on the first pass over the ring  // @region sync
        tma_load_tile<kBlockN, kHeadDim>(sK + prod.index * kBlockN * kHeadDim, &tmap_k,
                                         pipe.producer_arm_k(prod, kTileBytes), t * kBlockN, bh);
        tma_load_tile<kBlockN, kHeadDim>(sV + prod.index * kBlockN * kHeadDim, &tmap_v,
                                         pipe.producer_arm_v(prod, kTileBytes), t * kBlockN, bh);
    };
    if (tid == 0) {
        mbar_arrive_expect_tx(&q_full, kQBytes);  // @region load_q
        tma_load_tile<kBlockM, kHeadDim>(sQ, &tmap_q, &q_full, cta_row0, bh);  // @region load_q
        for (int t = 0; t < kStages && t < n_blocks; ++t) produce(t);
    }

    // @region other
    const Sw128LdsmAddr<kBlockM> q_addr(smem_addr(sQ) + warp_row0 * 128, lane & 15, lane >> 4);
    // moved to the current stage in place (one set of lane bases per operand, as in v06)
    Sw128LdsmAddr<kBlockN> k_addr(smem_addr(sK), (lane & 7) + (lane >> 4) * 8, (lane >> 3) & 1);
    Sw128LdsmAddr<kBlockN> v_addr(smem_addr(sV), lane & 15, lane >> 4);
    const float scale_log2 = softmax_scale * 1.4426950408889634f;

    mbar_wait(&q_full, 0);  // @region sync
    // @region load_q
    uint32_t qf[kQInRegs ? kMTiles : 1][kQInRegs ? kKSteps : 1][4];
    if constexpr (kQInRegs) {
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
            uint32_t qa[kMTiles][4];
            load_q_frag<kMTiles>(qa, q_addr, kk);
#pragma unroll
            for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
                for (int i = 0; i < 4; ++i) qf[mt][kk][i] = qa[mt][i];
        }
    }

    // @region other
    float acc_o[kMTiles][kDTiles][4];
    float row_max[kMTiles][2], row_sum[kMTiles][2];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int j = 0; j < kDTiles; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc_o[mt][j][e] = 0.f;
        row_max[mt][0] = row_max[mt][1] = -CUDART_INF_F;
        row_sum[mt][0] = row_sum[mt][1] = 0.f;
    }

    for (int n = 0; n < n_blocks; ++n) {
        const int key0 = n * kBlockN;
        const auto cons = PipeState<kStages>::at(n);
        // Producer: the stage released at the end of iteration n-1 gets tile n-1+kStages.
        if (tid == 0 && n > 0 && n + kStages - 1 < n_blocks) produce(n + kStages - 1);  // @region load_kv

        // S = Q K^T
        pipe.consumer_wait_k(cons);  // @region sync
        // @region qk
        float s[kMTiles][kNTiles][4];
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
            for (int j = 0; j < kNTiles; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[mt][j][e] = 0.f;
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
            uint32_t qa[kMTiles][4];
            if constexpr (kQInRegs) {
#pragma unroll
                for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
                    for (int i = 0; i < 4; ++i) qa[mt][i] = qf[mt][kk][i];
            } else {
                load_q_frag<kMTiles>(qa, q_addr, kk);
            }
            qk_step<Element, kBlockN, kMTiles>(s, qa, k_addr, kk);
        }

        // @region softmax
        // Online softmax, fused (v06).
        if (tile_needs_mask<kBlockM, kBlockN, kCausal>(key0, cta_row0, seqlen))
            apply_mask<kBlockN, kMTiles, kCausal>(s, key0, cta_row0 + warp_row0, seqlen, lane);
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float mx = row_max[mt][h];
#pragma unroll
                for (int j = 0; j < kNTiles; ++j) mx = fmaxf(mx, fmaxf(s[mt][j][2 * h], s[mt][j][2 * h + 1]));
                mx = quad_max(mx);
                const float m_scaled = mx == -CUDART_INF_F ? 0.f : mx * scale_log2;
                if (n > 0) {
                    const float alpha = fast_exp2(fmaf(row_max[mt][h], scale_log2, -m_scaled));
                    row_sum[mt][h] *= alpha;
#pragma unroll
                    for (int j = 0; j < kDTiles; ++j) {
                        acc_o[mt][j][2 * h] *= alpha;
                        acc_o[mt][j][2 * h + 1] *= alpha;
                    }
                }
                row_max[mt][h] = mx;
                float sum = 0.f;
#pragma unroll
                for (int j = 0; j < kNTiles; ++j) {
                    s[mt][j][2 * h] = fast_exp2(fmaf(s[mt][j][2 * h], scale_log2, -m_scaled));
                    s[mt][j][2 * h + 1] = fast_exp2(fmaf(s[mt][j][2 * h + 1], scale_log2, -m_scaled));
                    sum += s[mt][j][2 * h] + s[mt][j][2 * h + 1];
                }
                row_sum[mt][h] += sum;
            }
        }

        // O += P V
        pipe.consumer_wait_v(cons);  // @region sync
        // @region pv
        pv<Element, kHeadDim, kBlockN, kMTiles>(acc_o, s, v_addr);
        // @region sync
        __syncwarp();  // every lane's ldmatrix of this stage has completed
        if (lane == 0) pipe.consumer_release(cons);
        // @region other
        const uint32_t delta = cons.index == kStages - 1 ? 0u - (kStages - 1) * kTileBytes : kTileBytes;
        k_addr = k_addr.shifted(delta);
        v_addr = v_addr.shifted(delta);
    }

    // @region epilogue
    // O *= 1/l, then through the warp's own (dead) Q rows in shared memory to 16-byte global stores.
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float l = quad_sum(row_sum[mt][h]);
            const float inv_l = l > 0.f ? __fdividef(1.f, l) : 0.f;
            const int r = warp_row0 + mt * 16 + g + 8 * h;
#pragma unroll
            for (int j = 0; j < kDTiles; ++j)
                *reinterpret_cast<uint32_t*>(sQ + sw128_offset<kBlockM>(r, j * 8 + 2 * t)) =
                    pack2<Element>(acc_o[mt][j][2 * h] * inv_l, acc_o[mt][j][2 * h + 1] * inv_l);
        }
    }
    __syncwarp();
    o += static_cast<size_t>(bh) * seqlen * kHeadDim;  // formed here, not kept live across the loop
    constexpr int kChunksPerRow = kHeadDim / 8;
#pragma unroll
    for (int i = 0; i < kMTiles * 16 * kChunksPerRow / 32; ++i) {
        const int idx = lane + 32 * i;
        const int r = warp_row0 + idx / kChunksPerRow, c = idx % kChunksPerRow;
        const uint4 val = *reinterpret_cast<const uint4*>(sQ + sw128_offset<kBlockM>(r, c * 8));
        if (cta_row0 + r < seqlen) *reinterpret_cast<uint4*>(o + static_cast<size_t>(cta_row0 + r) * kHeadDim + c * 8) = val;
    }
}

}}  // namespace whowaits::WHOWAITS_NAMESPACE
