// v10: warp specialisation (ladder III, step 1). v09's wgmma math, with the roles split by warpgroup:
//  - warpgroup 0 is the PRODUCER: it gives its registers away (setmaxnreg.dec), and one thread of its
//    first warp issues every TMA load: Q once, then K and V tile n into ring stage n % kStages as soon
//    as that stage's EMPTY barrier says the consumers are done with it (full/empty mbarrier ring,
//    common/sm90/pipeline.cuh). It never touches the math, so loads are issued the moment a stage frees,
//    not between a consumer thread's own GEMMs as in v08/v09;
//  - warpgroups 1..kConsumers are CONSUMERS (setmaxnreg.inc): each owns 64 query rows and runs v09's loop
//    (wait FULL_K -> QK^T SS wgmma -> online softmax -> wait FULL_V -> PV RS wgmma -> release EMPTY);
//  - causal: key tiles wholly above the diagonal are never loaded nor computed (the producer and the
//    consumers agree on n_blocks), the tiles that cross it (or the ragged end) are masked; CTAs start with
//    the heaviest query blocks (m_block reversed), so the long causal rows are scheduled first.
// No pingpong, no intra-warpgroup overlap yet (v11, v12): the two consumers run free of each other.
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>

#include "common/sm80/attn_mask.cuh"
#include "common/sm80/softmax_math.cuh"
#include "common/sm90/mbarrier.cuh"
#include "common/sm90/pipeline.cuh"
#include "common/sm90/setmaxnreg.cuh"
#include "common/sm90/tma.cuh"
#include "common/sm90/wgmma.cuh"

#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v10_warp_specialized
#endif

namespace whowaits { namespace WHOWAITS_NAMESPACE {

template <typename Element, int kHeadDim, int kBlockM, int kBlockN, int kConsumers, int kStages, bool kCausal>
__global__ void __launch_bounds__((kConsumers + 1) * 128, 1)
    flash_fwd(const __grid_constant__ CUtensorMap tmap_q, const __grid_constant__ CUtensorMap tmap_k,
              const __grid_constant__ CUtensorMap tmap_v, Element* __restrict__ o, int seqlen, float softmax_scale) {
    using namespace whowaits::common;
    using namespace whowaits::sm90;
    static_assert(kConsumers == 2 || kConsumers == 3, "2 or 3 consumer warpgroups (register split, setmaxnreg.cuh)");
    static_assert(kBlockM == 64 * kConsumers, "64 query rows per consumer warpgroup");
    static_assert(kHeadDim == 64 || kHeadDim == 128, "head_dim 64 or 128 (wgmma N of the PV product)");
    static_assert(kBlockN == 64 || kBlockN == 128, "block_n 64 or 128 (wgmma N of the QK product)");
    static_assert(kStages >= 2 && kStages <= 4, "a ring of 2 to 4 K/V stages");
    constexpr int kNTiles = kBlockN / 8, kDTiles = kHeadDim / 8;
    constexpr uint32_t kQBytes = kBlockM * kHeadDim * sizeof(Element);
    constexpr uint32_t kTileBytes = kBlockN * kHeadDim * sizeof(Element);

    // @region other
    WHOWAITS_TRACE_INIT();  // issue 12: the measured trace's per-warpgroup cursors (nothing when off)
    extern __shared__ __align__(128) unsigned char smem_raw[];
    Element* sQ = reinterpret_cast<Element*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    Element* sK = sQ + kBlockM * kHeadDim;
    Element* sV = sK + kStages * kBlockN * kHeadDim;
    __shared__ KVPipeline<kStages> pipe;
    __shared__ uint64_t q_full;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wg = warp >> 2, warp_in_wg = warp & 3;
    const int m_block = gridDim.x - 1 - blockIdx.x;  // heaviest (causal) blocks first
    const int bh = blockIdx.z * gridDim.y + blockIdx.y;
    const int cta_row0 = m_block * kBlockM;
    int n_blocks = (seqlen + kBlockN - 1) / kBlockN;
    if (kCausal) n_blocks = min(n_blocks, (cta_row0 + kBlockM + kBlockN - 1) / kBlockN);  // skip above-diagonal

    // @region sync
    if (tid == 0) {
        prefetch_tensor_map(&tmap_q);
        prefetch_tensor_map(&tmap_k);
        prefetch_tensor_map(&tmap_v);
        mbar_init(&q_full, 1);
        pipe.init(kConsumers * 4);  // one release per consumer warp
        mbar_fence_init();
    }
    __syncthreads();  // the last CTA-wide barrier: from here on the roles never wait for each other but on mbarriers

    if (wg == 0) {
        // ---------------- producer warpgroup ----------------
        setmaxnreg_dec<RegSplit<kConsumers>::kProducer>();
        if (tid == 0) {
            // @region load_q
            mbar_arrive_expect_tx(&q_full, kQBytes);
            tma_load_tile<kBlockM, kHeadDim>(sQ, &tmap_q, &q_full, cta_row0, bh);
            // @region load_kv
            for (int t = 0; t < n_blocks; ++t) {
                const auto prod = PipeState<kStages>::at(t);
                pipe.producer_acquire(prod);  // @region sync
                tma_load_tile<kBlockN, kHeadDim>(sK + prod.index * kBlockN * kHeadDim, &tmap_k,
                                                 pipe.producer_arm_k(prod, kTileBytes), t * kBlockN, bh);
                tma_load_tile<kBlockN, kHeadDim>(sV + prod.index * kBlockN * kHeadDim, &tmap_v,
                                                 pipe.producer_arm_v(prod, kTileBytes), t * kBlockN, bh);
            }
        }
        return;
    }

    // ---------------- consumer warpgroups ----------------
    // @region other
    setmaxnreg_inc<RegSplit<kConsumers>::kConsumer>();
    const int c = wg - 1;                             // consumer index: query rows c*64 .. c*64 + 63
    const int warp_row0 = c * 64 + warp_in_wg * 16;  // CTA-relative first row of this warp's 16
    const uint32_t q_base = smem_addr(sQ) + c * 64 * 128;
    const uint32_t k_base = smem_addr(sK), v_base = smem_addr(sV);
    const float scale_log2 = softmax_scale * 1.4426950408889634f;

    float acc_o[kDTiles][4];
    float row_max[2], row_sum[2];
#pragma unroll
    for (int j = 0; j < kDTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_o[j][e] = 0.f;
    row_max[0] = row_max[1] = -CUDART_INF_F;
    row_sum[0] = row_sum[1] = 0.f;

    mbar_wait(&q_full, 0);  // @region sync
    for (int n = 0; n < n_blocks; ++n) {
        const int key0 = n * kBlockN;
        const auto cons = PipeState<kStages>::at(n);
        const uint32_t k_stage = k_base + cons.index * kTileBytes;
        const uint32_t v_stage = v_base + cons.index * kTileBytes;

        // @region qk
        // S = Q K^T (SS), one wgmma group.
        float s[1][kNTiles][4];
        pipe.consumer_wait_k(cons);  // @region sync
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kHeadDim / 16; ++kk) {
            const uint64_t da = make_desc_sw128(q_base + (kk >> 2) * kBlockM * 128 + (kk & 3) * 32, 16, 1024);
            const uint64_t db = make_desc_sw128(k_stage + (kk >> 2) * kBlockN * 128 + (kk & 3) * 32, 16, 1024);
            WgmmaSS<Element, kBlockN>::run(s[0], da, db, kk > 0 ? 1 : 0);
        }
        wgmma_commit();
        wgmma_wait<0>();
        fence_operands(s[0]);

        // @region softmax
        // Online softmax on the warp's 16 rows: rows g and g + 8 of each quad; the diagonal / ragged tile masked.
        if (tile_needs_mask<kBlockM, kBlockN, kCausal>(key0, cta_row0, seqlen))
            apply_mask<kBlockN, 1, kCausal>(s, key0, cta_row0 + warp_row0, seqlen, lane);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float mx = row_max[h];
#pragma unroll
            for (int j = 0; j < kNTiles; ++j) mx = fmaxf(mx, fmaxf(s[0][j][2 * h], s[0][j][2 * h + 1]));
            mx = quad_max(mx);
            const float m_scaled = mx == -CUDART_INF_F ? 0.f : mx * scale_log2;
            if (n > 0) {
                const float alpha = fast_exp2(fmaf(row_max[h], scale_log2, -m_scaled));
                row_sum[h] *= alpha;
#pragma unroll
                for (int j = 0; j < kDTiles; ++j) {
                    acc_o[j][2 * h] *= alpha;
                    acc_o[j][2 * h + 1] *= alpha;
                }
            }
            row_max[h] = mx;
            float sum = 0.f;
#pragma unroll
            for (int j = 0; j < kNTiles; ++j) {
                s[0][j][2 * h] = fast_exp2(fmaf(s[0][j][2 * h], scale_log2, -m_scaled));
                s[0][j][2 * h + 1] = fast_exp2(fmaf(s[0][j][2 * h + 1], scale_log2, -m_scaled));
                sum += s[0][j][2 * h] + s[0][j][2 * h + 1];
            }
            row_sum[h] += sum;
        }
        uint32_t pa[kBlockN / 16][4];
#pragma unroll
        for (int kk = 0; kk < kBlockN / 16; ++kk) {
            pa[kk][0] = pack2<Element>(s[0][2 * kk][0], s[0][2 * kk][1]);
            pa[kk][1] = pack2<Element>(s[0][2 * kk][2], s[0][2 * kk][3]);
            pa[kk][2] = pack2<Element>(s[0][2 * kk + 1][0], s[0][2 * kk + 1][1]);
            pa[kk][3] = pack2<Element>(s[0][2 * kk + 1][2], s[0][2 * kk + 1][3]);
        }

        // @region pv
        // O += P V (RS, V N-major), one wgmma group; then the stage goes back to the producer.
        pipe.consumer_wait_v(cons);  // @region sync
        fence_operands(acc_o);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBlockN / 16; ++kk) {
            const uint64_t dv = make_desc_sw128(v_stage + kk * 16 * 128, kBlockN * 128, 1024);
            WgmmaRS<Element, kHeadDim, true>::run(acc_o, pa[kk], dv, 1);
        }
        wgmma_commit();
        wgmma_wait<0>();
        fence_operands(acc_o);
        __syncwarp();  // @region sync
        if (lane == 0) pipe.consumer_release(cons);  // @region sync
    }

    // @region epilogue
    // O *= 1/l; each thread stores its pairs straight to global memory (rows below seqlen).
    o += static_cast<size_t>(bh) * seqlen * kHeadDim;
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const float l = quad_sum(row_sum[h]);
        const float inv_l = l > 0.f ? __fdividef(1.f, l) : 0.f;
        const int row = cta_row0 + warp_row0 + g + 8 * h;
        if (row < seqlen) {
            Element* dst = o + static_cast<size_t>(row) * kHeadDim + 2 * t;
#pragma unroll
            for (int j = 0; j < kDTiles; ++j)
                *reinterpret_cast<uint32_t*>(dst + 8 * j) = pack2<Element>(acc_o[j][2 * h] * inv_l, acc_o[j][2 * h + 1] * inv_l);
        }
    }
    WHOWAITS_TRACE_FINISH();  // issue 12: the events still parked after the last wait (nothing when off)
}

}}  // namespace whowaits::WHOWAITS_NAMESPACE
