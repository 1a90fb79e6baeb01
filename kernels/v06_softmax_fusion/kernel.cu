// v06: softmax FP fusion (seed 001, chapter 6, kernel 6). Same loads, tiles and tensor-core products as
// v05; the softmax does fewer FP32 instructions per score:
//  - no separate scaling pass: the row max is taken on raw scores and p = 2^(s * c - m * c), c = scale * log2(e),
//    is one FFMA + one MUFU.EX2 (ex2.approx.ftz) per score instead of FMUL (scale) + FADD + FMUL + EX2 and
//    __expf's denormal fix-ups;
//  - row sums stay per-thread partial sums, quad-reduced once after the last tile (not 2 SHFL per row per tile);
//  - 1/l is computed once per row (one MUFU.RCP) and applied with FMUL, not a division per element;
//  - the first tile skips the rescale of O and l (both are still zero).
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

// v07_tuned compiles this same file in its own namespace (its version.toml: source = "v06_softmax_fusion").
#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v06_softmax_fusion
#endif

namespace whowaits { namespace WHOWAITS_NAMESPACE {

template <typename Element, int kHeadDim, int kBlockM, int kBlockN, int kWarps, int kStages, bool kCausal>
__global__ void __launch_bounds__(kWarps * 32)
    flash_fwd(const Element* __restrict__ q, const Element* __restrict__ k, const Element* __restrict__ v,
              Element* __restrict__ o, int seqlen, float softmax_scale) {
    using namespace whowaits::common;
    constexpr int kThreads = kWarps * 32;
    constexpr int kMTiles = kBlockM / (16 * kWarps);  // m16 tiles per warp
    static_assert(kMTiles >= 1 && kMTiles * 16 * kWarps == kBlockM, "kBlockM must be a multiple of 16 * kWarps");
    static_assert(kBlockN % 16 == 0 && kHeadDim % 16 == 0, "tiles are built from 16x16 MMA steps");
    static_assert(kStages == 1 || kStages == 2, "one K/V buffer each (FA2 overlap) or two (double buffering)");
    constexpr int kNTiles = kBlockN / 8, kDTiles = kHeadDim / 8, kKSteps = kHeadDim / 16;
    constexpr bool kQInRegs = kMTiles * kKSteps * 4 <= 32;  // keep Q fragments resident when they are cheap
    constexpr bool kSwizzle = true;

    extern __shared__ __align__(128) unsigned char smem_raw[];
    Element* sQ = reinterpret_cast<Element*>(smem_raw);
    Element* sK = sQ + kBlockM * kHeadDim;
    Element* sV = sK + kStages * kBlockN * kHeadDim;
    constexpr uint32_t kStageBytes = kBlockN * kHeadDim * sizeof(Element);

    // @region other
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int m_block = gridDim.x - 1 - blockIdx.x;  // heaviest (causal) blocks first
    const size_t slab = (static_cast<size_t>(blockIdx.z) * gridDim.y + blockIdx.y) * static_cast<size_t>(seqlen) * kHeadDim;
    q += slab; k += slab; v += slab; o += slab;
    const int cta_row0 = m_block * kBlockM;
    const int warp_row0 = warp * kMTiles * 16;
    const auto q_addr = q_lane_addr<kHeadDim, kSwizzle>(smem_u32(sQ), warp_row0, lane);
    auto k_addr = k_lane_addr<kHeadDim, kSwizzle>(smem_u32(sK), lane);  // moved to the current stage in place
    auto v_addr = v_lane_addr<kHeadDim, kSwizzle>(smem_u32(sV), lane);

    const float scale_log2 = softmax_scale * 1.4426950408889634f;  // exp(x) = 2^(x log2 e)
    int n_blocks = (seqlen + kBlockN - 1) / kBlockN;
    if (kCausal) n_blocks = min(n_blocks, (cta_row0 + kBlockM + kBlockN - 1) / kBlockN);

    // @region load_q
    // Prologue: Q and the first K tile, then the first V tile, as separate groups.
    load_tile_async<Element, kBlockM, kHeadDim, kThreads, kSwizzle>(sQ, q, cta_row0, seqlen, tid);
    load_tile_async<Element, kBlockN, kHeadDim, kThreads, kSwizzle>(sK, k, 0, seqlen, tid);  // @region load_kv
    cp_async_commit();
    // @region load_kv
    if constexpr (kStages == 2) {
        load_tile_async<Element, kBlockN, kHeadDim, kThreads, kSwizzle>(sV, v, 0, seqlen, tid);
        cp_async_commit();
        cp_async_wait<1>();  // @region sync
    } else {
        cp_async_wait<0>();  // @region sync
    }
    __syncthreads();  // @region sync
    // @region load_q
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
        const bool has_next = n + 1 < n_blocks;
        const int stage = kStages == 2 ? (n & 1) : 0;
        const int next_stage = kStages == 2 ? (stage ^ 1) : 0;
        if constexpr (kStages == 2) {
            if (n > 0) {
                cp_async_wait<0>();  // K_n and V_n landed (issued one iteration ago)  // @region sync
                __syncthreads();     // ... for every thread; and every warp is done with iteration n-1  // @region sync
            }
            // @region load_kv
            if (has_next) {  // prefetch the whole next tile into the other stage, a full iteration ahead
                load_tile_async<Element, kBlockN, kHeadDim, kThreads, kSwizzle>(
                    sK + next_stage * kBlockN * kHeadDim, k, key0 + kBlockN, seqlen, tid);
                load_tile_async<Element, kBlockN, kHeadDim, kThreads, kSwizzle>(
                    sV + next_stage * kBlockN * kHeadDim, v, key0 + kBlockN, seqlen, tid);
                cp_async_commit();
            }
        } else {
            cp_async_wait<0>();  // K_n landed  // @region sync
            __syncthreads();     // every warp is done with P V_{n-1}: the V buffer is free  // @region sync
            load_tile_async<Element, kBlockN, kHeadDim, kThreads, kSwizzle>(sV, v, key0, seqlen, tid);
            cp_async_commit();
        }

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
        // Online softmax, fused.
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
                const float m_scaled = mx == -CUDART_INF_F ? 0.f : mx * scale_log2;  // fully masked row: p = 0
                if (n > 0) {  // tile 0: O and l are zero, nothing to rescale
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
                row_sum[mt][h] += sum;  // this thread's partial sum; the quad is reduced once, at the end
            }
        }

        // @region pv
        // O += P V, once V_n has landed.
        if constexpr (kStages == 2) {
            if (n == 0) {  // V_0 was a separate group of the prologue, so Q K_0^T did not wait for it
                if (has_next) cp_async_wait<1>(); else cp_async_wait<0>();  // @region sync
                __syncthreads();  // @region sync
            }  // later V_n landed with K_n at the top of the iteration
        } else {
            cp_async_wait<0>();  // @region sync
            __syncthreads();  // V_n visible to all; every warp is done with Q K_n^T: the K buffer is free  // @region sync
            // @region load_kv
            if (has_next) {
                load_tile_async<Element, kBlockN, kHeadDim, kThreads, kSwizzle>(sK, k, key0 + kBlockN, seqlen, tid);
                cp_async_commit();
            }
        }
        // @region pv
        gemm_pv<Element, kHeadDim, kBlockN, kMTiles, kSwizzle>(acc_o, s, v_addr);
        if constexpr (kStages == 2) {  // next tile's stage: +/- one stage, updating the lane bases in place
            const uint32_t delta = stage ? 0u - kStageBytes : kStageBytes;
            k_addr = k_addr.shifted(delta);
            v_addr = v_addr.shifted(delta);
        }
    }

    // @region epilogue
    // O *= 1/l: reduce the partial row sums over the quad, one reciprocal per row.
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float l = quad_sum(row_sum[mt][h]);
            const float inv_l = l > 0.f ? __fdividef(1.f, l) : 0.f;
#pragma unroll
            for (int j = 0; j < kDTiles; ++j) {
                acc_o[mt][j][2 * h] *= inv_l;
                acc_o[mt][j][2 * h + 1] *= inv_l;
            }
        }
    }
    store_o_tile<Element, kHeadDim, kMTiles, kSwizzle>(acc_o, sQ, o, warp_row0, cta_row0, seqlen, lane);
}

}}  // namespace whowaits::WHOWAITS_NAMESPACE
