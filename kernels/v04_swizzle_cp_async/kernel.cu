// v04: swizzled shared memory + cp.async. Same FA2 warp layout and softmax as v03; two changes:
// (1) tiles are stored with the XOR swizzle of common/swizzle.cuh, so each ldmatrix reads 8 rows from 8
// different bank groups instead of one (v03's 8-way conflicts); (2) Q, K and V are copied with cp.async
// (LDGSTS, global -> shared without registers). Still one K/V buffer and no overlap: issue, wait, barrier.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>

#include "common/sm80/attn_mask.cuh"
#include "common/sm80/cp_async.cuh"
#include "common/sm80/ldmatrix.cuh"
#include "common/sm80/softmax_math.cuh"
#include "common/sm80/tile_io.cuh"
#include "common/sm80/warp_gemm.cuh"

namespace whowaits { namespace v04_swizzle_cp_async {

template <typename Element, int kHeadDim, int kBlockM, int kBlockN, int kWarps, int kStages, bool kCausal>
__global__ void __launch_bounds__(kWarps * 32)
    flash_fwd(const Element* __restrict__ q, const Element* __restrict__ k, const Element* __restrict__ v,
              Element* __restrict__ o, int seqlen, float softmax_scale) {
    using namespace whowaits::common;
    constexpr int kThreads = kWarps * 32;
    constexpr int kMTiles = kBlockM / (16 * kWarps);  // m16 tiles per warp
    static_assert(kMTiles >= 1 && kMTiles * 16 * kWarps == kBlockM, "kBlockM must be a multiple of 16 * kWarps");
    static_assert(kBlockN % 16 == 0 && kHeadDim % 16 == 0, "tiles are built from 16x16 MMA steps");
    static_assert(kStages == 1, "v04 has one K/V buffer (no pipelining yet)");
    constexpr int kNTiles = kBlockN / 8, kDTiles = kHeadDim / 8, kKSteps = kHeadDim / 16;
    constexpr bool kQInRegs = kMTiles * kKSteps * 4 <= 32;  // keep Q fragments resident when they are cheap
    constexpr bool kSwizzle = true;

    extern __shared__ __align__(128) unsigned char smem_raw[];
    Element* sQ = reinterpret_cast<Element*>(smem_raw);
    Element* sK = sQ + kBlockM * kHeadDim;
    Element* sV = sK + kBlockN * kHeadDim;

    // @region other
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int m_block = gridDim.x - 1 - blockIdx.x;  // heaviest (causal) blocks first
    const size_t slab = (static_cast<size_t>(blockIdx.z) * gridDim.y + blockIdx.y) * static_cast<size_t>(seqlen) * kHeadDim;
    q += slab; k += slab; v += slab; o += slab;
    const int cta_row0 = m_block * kBlockM;
    const int warp_row0 = warp * kMTiles * 16;
    const auto q_addr = q_lane_addr<kHeadDim, kSwizzle>(smem_u32(sQ), warp_row0, lane);
    const auto k_addr = k_lane_addr<kHeadDim, kSwizzle>(smem_u32(sK), lane);
    const auto v_addr = v_lane_addr<kHeadDim, kSwizzle>(smem_u32(sV), lane);

    int n_blocks = (seqlen + kBlockN - 1) / kBlockN;
    if (kCausal) n_blocks = min(n_blocks, (cta_row0 + kBlockM + kBlockN - 1) / kBlockN);

    // @region load_q
    load_tile_async<Element, kBlockM, kHeadDim, kThreads, kSwizzle>(sQ, q, cta_row0, seqlen, tid);
    cp_async_commit();
    cp_async_wait<0>();  // @region sync
    __syncthreads();  // @region sync
    uint32_t qf[kQInRegs ? kMTiles : 1][kQInRegs ? kKSteps : 1][4];
    if constexpr (kQInRegs) {
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
            uint32_t qa[kMTiles][4];
            load_q_fragment<kHeadDim, kMTiles, kSwizzle>(qa, q_addr, kk);
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
        __syncthreads();  // every warp is done with the previous K/V tile  // @region sync
        // @region load_kv
        load_tile_async<Element, kBlockN, kHeadDim, kThreads, kSwizzle>(sK, k, key0, seqlen, tid);
        load_tile_async<Element, kBlockN, kHeadDim, kThreads, kSwizzle>(sV, v, key0, seqlen, tid);
        cp_async_commit();
        cp_async_wait<0>();  // @region sync
        __syncthreads();  // @region sync

        // @region qk
        // S = Q K^T
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
                load_q_fragment<kHeadDim, kMTiles, kSwizzle>(qa, q_addr, kk);
            }
            gemm_qk_step<Element, kHeadDim, kBlockN, kMTiles, kSwizzle>(s, qa, k_addr, kk);
        }

        // @region softmax
        // Online softmax, textbook form: scale every score, mask, row max, exp(s - max), rescale O and l.
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
            for (int j = 0; j < kNTiles; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[mt][j][e] *= softmax_scale;
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
                const float m_use = mx == -CUDART_INF_F ? 0.f : mx;  // a fully masked row stays all-zero
                const float alpha = __expf(row_max[mt][h] - m_use);
                row_max[mt][h] = mx;
                float sum = 0.f;
#pragma unroll
                for (int j = 0; j < kNTiles; ++j) {
                    s[mt][j][2 * h] = __expf(s[mt][j][2 * h] - m_use);
                    s[mt][j][2 * h + 1] = __expf(s[mt][j][2 * h + 1] - m_use);
                    sum += s[mt][j][2 * h] + s[mt][j][2 * h + 1];
                }
                row_sum[mt][h] = row_sum[mt][h] * alpha + quad_sum(sum);
#pragma unroll
                for (int j = 0; j < kDTiles; ++j) {
                    acc_o[mt][j][2 * h] *= alpha;
                    acc_o[mt][j][2 * h + 1] *= alpha;
                }
            }
        }

        // @region pv
        // O += P V
        gemm_pv<Element, kHeadDim, kBlockN, kMTiles, kSwizzle>(acc_o, s, v_addr);
    }

    // @region epilogue
    // O /= l (one fast division per element), then store through shared memory.
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int j = 0; j < kDTiles; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float l = row_sum[mt][e >> 1];
                acc_o[mt][j][e] = l > 0.f ? __fdividef(acc_o[mt][j][e], l) : 0.f;
            }
    store_o_tile<Element, kHeadDim, kMTiles, kSwizzle>(acc_o, sQ, o, warp_row0, cta_row0, seqlen, lane);
}

}}  // namespace whowaits::v04_swizzle_cp_async
