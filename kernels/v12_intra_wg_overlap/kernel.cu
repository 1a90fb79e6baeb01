// v12: intra-warpgroup overlap (ladder III, step 3). v11's producer + 2 pingpong consumers, and inside each
// consumer the softmax of tile n now runs while that warpgroup's own PV[n-1] is still on the tensor cores:
//  - each batch issues QK^T[n] FIRST, then PV[n-1] (two wgmma groups); wgmma.wait_group 1 returns as soon
//    as QK^T[n] completed (groups retire in order), so the softmax of S[n] (max, exp2, row sums, packing
//    P[n]) overlaps PV[n-1];
//  - the softmax exponentiates S[n] in place (fp32) without touching O or P: PV[n-1] still reads P[n-1]
//    and accumulates into O. Only after wait_group 0 is S[n] packed into P (FlashAttention-3's order: one
//    P buffer, no extra registers), and the O rescale by alpha[n] is deferred to just before the next
//    batch is issued;
//  - named-barrier pingpong between the consumers and the split K/V ring as in v11.
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>

#include "common/sm80/attn_mask.cuh"
#include "common/sm80/softmax_math.cuh"
#include "common/sm90/mbarrier.cuh"
#include "common/sm90/named_barrier.cuh"
#include "common/sm90/pipeline.cuh"
#include "common/sm90/setmaxnreg.cuh"
#include "common/sm90/tma.cuh"
#include "common/sm90/wgmma.cuh"

#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v12_intra_wg_overlap
#endif

namespace whowaits { namespace WHOWAITS_NAMESPACE {

template <typename Element, int kHeadDim, int kBlockM, int kBlockN, int kConsumers, int kStages, bool kCausal>
__global__ void __launch_bounds__((kConsumers + 1) * 128, 1)
    flash_fwd(const __grid_constant__ CUtensorMap tmap_q, const __grid_constant__ CUtensorMap tmap_k,
              const __grid_constant__ CUtensorMap tmap_v, Element* __restrict__ o, int seqlen, float softmax_scale) {
    using namespace whowaits::common;
    using namespace whowaits::sm90;
    static_assert(kConsumers == 2, "pingpong between exactly 2 consumer warpgroups");
    static_assert(kBlockM == 64 * kConsumers, "64 query rows per consumer warpgroup");
    static_assert(kHeadDim == 64 || kHeadDim == 128, "head_dim 64 or 128 (wgmma N of the PV product)");
    static_assert(kBlockN == 64 || kBlockN == 128, "block_n 64 or 128 (wgmma N of the QK product)");
    static_assert(kStages >= 2 && kStages <= 4, "a ring of 2 to 4 K/V stages");
    constexpr int kNTiles = kBlockN / 8, kDTiles = kHeadDim / 8;
    constexpr uint32_t kQBytes = kBlockM * kHeadDim * sizeof(Element);
    constexpr uint32_t kTileBytes = kBlockN * kHeadDim * sizeof(Element);
    constexpr uint32_t kSchedThreads = 2 * 128;  // both consumers take part in each scheduler barrier
    constexpr uint32_t kSchedBar0 = 1;           // ids 1, 2 (0 is __syncthreads)

    // @region other
    WHOWAITS_TRACE_INIT();  // issue 12: the measured trace's per-warpgroup cursors (nothing when off)
    extern __shared__ __align__(128) unsigned char smem_raw[];
    Element* sQ = reinterpret_cast<Element*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    Element* sK = sQ + kBlockM * kHeadDim;
    Element* sV = sK + kStages * kBlockN * kHeadDim;
    __shared__ uint64_t full_k[kStages], full_v[kStages], empty_k[kStages], empty_v[kStages];
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
#pragma unroll
        for (int s = 0; s < kStages; ++s) {
            mbar_init(&full_k[s], 1);
            mbar_init(&full_v[s], 1);
            mbar_init(&empty_k[s], kConsumers * 4);  // one release per consumer warp
            mbar_init(&empty_v[s], kConsumers * 4);
        }
        mbar_fence_init();
    }
    __syncthreads();  // the last CTA-wide barrier

    if (wg == 0) {
        // ---------------- producer warpgroup ----------------
        setmaxnreg_dec<RegSplit<kConsumers>::kProducer>();
        if (tid == 0) {
            // @region load_q
            mbar_arrive_expect_tx(&q_full, kQBytes);
            tma_load_tile<kBlockM, kHeadDim>(sQ, &tmap_q, &q_full, cta_row0, bh);
            // @region load_kv
            for (int t = 0; t < n_blocks; ++t) {
                const auto st = PipeState<kStages>::at(t);
                if (t >= kStages) mbar_wait(&empty_k[st.index], st.phase ^ 1u);  // @region sync
                mbar_arrive_expect_tx(&full_k[st.index], kTileBytes);
                tma_load_tile<kBlockN, kHeadDim>(sK + st.index * kBlockN * kHeadDim, &tmap_k, &full_k[st.index],
                                                 t * kBlockN, bh);
                if (t >= kStages) mbar_wait(&empty_v[st.index], st.phase ^ 1u);  // @region sync
                mbar_arrive_expect_tx(&full_v[st.index], kTileBytes);
                tma_load_tile<kBlockN, kHeadDim>(sV + st.index * kBlockN * kHeadDim, &tmap_v, &full_v[st.index],
                                                 t * kBlockN, bh);
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
    float s[1][kNTiles][4];
    uint32_t pa[kBlockN / 16][4];  // P[n-1] packed to 16 bits: the A fragments of PV[n-1]
    float alpha[2] = {1.f, 1.f};                           // O's pending rescale for rows g, g + 8

    // @region qk
    auto issue_qk = [&](int n) {
        uint32_t k_stage = k_base + (n % kStages) * kTileBytes, q_addr = q_base;
        // Opaque to the optimiser: otherwise it may hoist every (stage, k-step) descriptor out of the loop and keep
        // them all live (64 registers for two stages) beside S, O and P.
        asm volatile("" : "+r"(k_stage), "+r"(q_addr));
#pragma unroll
        for (int kk = 0; kk < kHeadDim / 16; ++kk) {
            const uint64_t da = make_desc_sw128(q_addr + (kk >> 2) * kBlockM * 128 + (kk & 3) * 32, 16, 1024);
            const uint64_t db = make_desc_sw128(k_stage + (kk >> 2) * kBlockN * 128 + (kk & 3) * 32, 16, 1024);
            WgmmaSS<Element, kBlockN>::run(s[0], da, db, kk > 0 ? 1 : 0);
        }
        wgmma_commit();
    };
    // @region pv
    auto issue_pv = [&](int n) {
        uint32_t v_stage = v_base + (n % kStages) * kTileBytes;
        asm volatile("" : "+r"(v_stage));
#pragma unroll
        for (int kk = 0; kk < kBlockN / 16; ++kk) {
            const uint64_t dv = make_desc_sw128(v_stage + kk * 16 * 128, kBlockN * 128, 1024);
            WgmmaRS<Element, kHeadDim, true>::run(acc_o, pa[kk], dv, 1);
        }
        wgmma_commit();
    };
    // @region sync
    auto release = [&](uint64_t* bars, int n) {
        __syncwarp();
        if (lane == 0) mbar_arrive(&bars[n % kStages]);
    };
    // @region softmax
    // Online softmax of S[n] on the warp's 16 rows (rows g and g + 8 of each quad), touching neither O nor P
    // (PV[n-1] may still be reading P[n-1] and accumulating into O): new row max, alpha[h] for the deferred
    // rescale, row sums, exponentiate in place (fp32, in the S registers).
    auto softmax = [&](int n) {
        const int key0 = n * kBlockN;
        if (tile_needs_mask<kBlockM, kBlockN, kCausal>(key0, cta_row0, seqlen))
            apply_mask<kBlockN, 1, kCausal>(s, key0, cta_row0 + warp_row0, seqlen, lane);
        WHOWAITS_TRACE_PV_WAIT_AS_COMPILED();  // issue 12: the wait-log build waits for PV[n-1] here, as ptxas does
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float mx = row_max[h];
#pragma unroll
            for (int j = 0; j < kNTiles; ++j) mx = fmaxf(mx, fmaxf(s[0][j][2 * h], s[0][j][2 * h + 1]));
            mx = quad_max(mx);
            const float m_scaled = mx == -CUDART_INF_F ? 0.f : mx * scale_log2;
            alpha[h] = n > 0 ? fast_exp2(fmaf(row_max[h], scale_log2, -m_scaled)) : 1.f;
            row_sum[h] *= alpha[h];
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
    };
    // P = exp'd S packed to 16 bits (only once PV[n-1], which reads the previous P, has completed).
    auto pack_p = [&]() {
#pragma unroll
        for (int kk = 0; kk < kBlockN / 16; ++kk) {
            pa[kk][0] = pack2<Element>(s[0][2 * kk][0], s[0][2 * kk][1]);
            pa[kk][1] = pack2<Element>(s[0][2 * kk][2], s[0][2 * kk][3]);
            pa[kk][2] = pack2<Element>(s[0][2 * kk + 1][0], s[0][2 * kk + 1][1]);
            pa[kk][3] = pack2<Element>(s[0][2 * kk + 1][2], s[0][2 * kk + 1][3]);
        }
    };
    // O *= alpha (after the PV that wrote O last has completed).
    auto rescale_o = [&]() {
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int j = 0; j < kDTiles; ++j) {
                acc_o[j][2 * h] *= alpha[h];
                acc_o[j][2 * h + 1] *= alpha[h];
            }
    };

    // @region sync
    // Scheduler barriers: my turn = bar.sync on my id; after issuing, hand the turn to the other consumer.
    const uint32_t my_bar = kSchedBar0 + c, other_bar = kSchedBar0 + (1 - c);
    if (c == 1) named_bar_arrive(kSchedBar0, kSchedThreads);  // consumer 0 issues first
    mbar_wait(&q_full, 0);

    // Batch 0: QK^T[0] alone.
    mbar_wait(&full_k[0], 0);
    named_bar_sync(my_bar, kSchedThreads);
    wgmma_fence();
    issue_qk(0);  // @region qk
    named_bar_arrive(other_bar, kSchedThreads);
    wgmma_wait<0>();
    fence_operands(s[0]);
    release(empty_k, 0);
    softmax(0);  // @region softmax  (alpha = 1: O is still zero)
    pack_p();    // @region softmax

    // Batch n: QK^T[n] then PV[n-1]; softmax[n] as soon as QK^T[n] is done, while PV[n-1] runs.
    for (int n = 1; n < n_blocks; ++n) {
        const auto prev = PipeState<kStages>::at(n - 1);
        const auto cur = PipeState<kStages>::at(n);
        rescale_o();  // @region softmax  (alpha[n-1]: PV[n-2] completed in the last iteration)
        mbar_wait(&full_k[cur.index], cur.phase);    // @region sync
        mbar_wait(&full_v[prev.index], prev.phase);  // @region sync
        named_bar_sync(my_bar, kSchedThreads);       // @region sync
        fence_operands(acc_o);
        wgmma_fence();
        issue_qk(n);      // @region qk
        issue_pv(n - 1);  // @region pv
        named_bar_arrive(other_bar, kSchedThreads);  // @region sync
        wgmma_wait<1>();  // QK^T[n] done (groups complete in order), PV[n-1] may still run
        fence_operands(s[0]);
        release(empty_k, n);  // @region sync
        softmax(n);           // @region softmax
        wgmma_wait<0>();      // PV[n-1] done: O and P[n-1]'s registers are free again
        fence_operands(acc_o);
        release(empty_v, n - 1);  // @region sync
        pack_p();                 // @region softmax
    }

    // Last batch: PV[n_blocks-1] alone. Consumer 1 skips its final arrive so both barriers end balanced.
    {
        const auto last = PipeState<kStages>::at(n_blocks - 1);
        rescale_o();  // @region softmax
        mbar_wait(&full_v[last.index], last.phase);  // @region sync
        named_bar_sync(my_bar, kSchedThreads);       // @region sync
        fence_operands(acc_o);
        wgmma_fence();
        issue_pv(n_blocks - 1);  // @region pv
        if (c == 0) named_bar_arrive(other_bar, kSchedThreads);  // @region sync
        wgmma_wait<0>();
        fence_operands(acc_o);
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
