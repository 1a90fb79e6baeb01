// v14: the next tile's first QK^T under the current tile's last PV (ladder III, after step 4). v13's persistent
// kernel (producer + 2 pingpong consumers, softmax under the consumer's own PV, one CTA per SM walking the
// (query block, head) tiles), with the tile boundary removed from each consumer's batch sequence:
//  - Q is double-buffered (sQ[2], q_full[2], q_empty[2]; 2 x 32 KB Q + 2 x 2 x 32 KB K/V = 192 KB at d128),
//    so the producer loads tile it+1's Q while tile it still reads its own (v13 waited for the last QK^T);
//  - a consumer's batches run across tiles without a break: the batch that issues PV[last] of tile it issues
//    QK^T[0] of tile it+1 first, so the first QK^T of every tile but the CTA's first one runs on the tensor
//    cores beside the previous tile's last PV, and its softmax runs while that PV finishes (v13: batch 0 of
//    each tile had QK^T[0] alone and the last batch PV alone, one pingpong turn each);
//  - the epilogue (direct O stores of the finished tile) follows that batch's PV wait, while the other
//    consumer holds the tensor cores; the pingpong alternation runs over the whole CTA life (consumer 1
//    arrives once up front and skips its very last arrive).
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
#define WHOWAITS_NAMESPACE v14_cross_tile_qk
#endif

namespace whowaits { namespace WHOWAITS_NAMESPACE {

template <typename Element, int kHeadDim, int kBlockM, int kBlockN, int kConsumers, int kStages, bool kCausal>
__global__ void __launch_bounds__((kConsumers + 1) * 128, 1)
    flash_fwd(const __grid_constant__ CUtensorMap tmap_q, const __grid_constant__ CUtensorMap tmap_k,
              const __grid_constant__ CUtensorMap tmap_v, Element* __restrict__ o, int seqlen, float softmax_scale,
              int num_bh) {
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
    Element* sK = sQ + 2 * kBlockM * kHeadDim;  // sQ[0], sQ[1]: two Q buffers
    Element* sV = sK + kStages * kBlockN * kHeadDim;
    __shared__ uint64_t full_k[kStages], full_v[kStages], empty_k[kStages], empty_v[kStages];
    __shared__ uint64_t q_full[2], q_empty[2];  // Q buffer b = tile counter & 1

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wg = warp >> 2, warp_in_wg = warp & 3;
    // Static tile scheduler: tile -> (bh, m_block); consecutive tiles share a head, heaviest query blocks first.
    const int m_blocks = (seqlen + kBlockM - 1) / kBlockM;
    const int num_tiles = m_blocks * num_bh;
    auto tile_bh = [&](int tile) { return tile / m_blocks; };
    auto tile_row0 = [&](int tile) { return (m_blocks - 1 - tile % m_blocks) * kBlockM; };
    auto kv_blocks = [&](int row0) {
        const int nb = (seqlen + kBlockN - 1) / kBlockN;
        return kCausal ? min(nb, (row0 + kBlockM + kBlockN - 1) / kBlockN) : nb;  // skip above-diagonal
    };

    // @region sync
    if (tid == 0) {
        prefetch_tensor_map(&tmap_q);
        prefetch_tensor_map(&tmap_k);
        prefetch_tensor_map(&tmap_v);
#pragma unroll
        for (int b = 0; b < 2; ++b) {
            mbar_init(&q_full[b], 1);
            mbar_init(&q_empty[b], kConsumers * 4);  // one release per consumer warp once its last QK^T of a tile is done
        }
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
            int kv = 0;  // K/V tiles issued so far by this CTA: ring index and phase continue across tiles
            int it = 0;
            for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x, ++it) {
                const int bh = tile_bh(tile), row0 = tile_row0(tile), n_blocks = kv_blocks(row0);
                {
                    // @region load_q
                    // Q of this tile into buffer it & 1, before its K/V: that buffer was last read by tile it - 2
                    // (phase (it >> 1) - 1 of q_empty[it & 1]), long done by the time the ring lets us get here.
                    const int b = it & 1;
                    if (it >= 2) mbar_wait(&q_empty[b], ((it >> 1) - 1) & 1);  // @region sync
                    mbar_arrive_expect_tx(&q_full[b], kQBytes);
                    tma_load_tile<kBlockM, kHeadDim>(sQ + b * kBlockM * kHeadDim, &tmap_q, &q_full[b], row0, bh);
                }
                for (int t = 0; t < n_blocks; ++t, ++kv) {
                    // @region load_kv
                    const auto st = PipeState<kStages>::at(kv);
                    if (kv >= kStages) mbar_wait(&empty_k[st.index], st.phase ^ 1u);  // @region sync
                    mbar_arrive_expect_tx(&full_k[st.index], kTileBytes);
                    tma_load_tile<kBlockN, kHeadDim>(sK + st.index * kBlockN * kHeadDim, &tmap_k, &full_k[st.index],
                                                     t * kBlockN, bh);
                    if (kv >= kStages) mbar_wait(&empty_v[st.index], st.phase ^ 1u);  // @region sync
                    mbar_arrive_expect_tx(&full_v[st.index], kTileBytes);
                    tma_load_tile<kBlockN, kHeadDim>(sV + st.index * kBlockN * kHeadDim, &tmap_v, &full_v[st.index],
                                                     t * kBlockN, bh);
                }
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
    int cta_row0 = 0, n_blocks = 0, kv_base = 0;  // the current tile's first query row, key tiles, ring offset
    float s[1][kNTiles][4];
    uint32_t pa[kBlockN / 16][4];  // P[n-1] packed to 16 bits: the A fragments of PV[n-1]
    float alpha[2] = {1.f, 1.f};                           // O's pending rescale for rows g, g + 8

    // @region qk
    auto issue_qk = [&](int kv_abs, int qbuf) {
        uint32_t k_stage = k_base + (kv_abs % kStages) * kTileBytes, q_addr = q_base + qbuf * kQBytes;
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
        uint32_t v_stage = v_base + ((kv_base + n) % kStages) * kTileBytes;
        asm volatile("" : "+r"(v_stage));
#pragma unroll
        for (int kk = 0; kk < kBlockN / 16; ++kk) {
            const uint64_t dv = make_desc_sw128(v_stage + kk * 16 * 128, kBlockN * 128, 1024);
            WgmmaRS<Element, kHeadDim, true>::run(acc_o, pa[kk], dv, 1);
        }
        wgmma_commit();
    };
    // @region sync
    auto release = [&](uint64_t* bars, int kv_abs) {
        __syncwarp();
        if (lane == 0) mbar_arrive(&bars[kv_abs % kStages]);
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

    // @region epilogue
    // O *= 1/l of the finished tile (inv_l computed before the next tile's softmax overwrote row_sum); each
    // thread stores its pairs straight to global memory (rows below seqlen), then O restarts from zero.
    auto store_o = [&](int bh, int row0, const float (&inv_l)[2]) {
        Element* o_bh = o + static_cast<size_t>(bh) * seqlen * kHeadDim;
        const int g = lane >> 2, t = lane & 3;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = row0 + warp_row0 + g + 8 * h;
            if (row < seqlen) {
                Element* dst = o_bh + static_cast<size_t>(row) * kHeadDim + 2 * t;
#pragma unroll
                for (int j = 0; j < kDTiles; ++j)
                    *reinterpret_cast<uint32_t*>(dst + 8 * j) =
                        pack2<Element>(acc_o[j][2 * h] * inv_l[h], acc_o[j][2 * h + 1] * inv_l[h]);
            }
        }
#pragma unroll
        for (int j = 0; j < kDTiles; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc_o[j][e] = 0.f;
    };
    auto finish_sums = [&](float (&inv_l)[2]) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float l = quad_sum(row_sum[h]);
            inv_l[h] = l > 0.f ? __fdividef(1.f, l) : 0.f;
        }
    };

    // @region sync
    // Scheduler barriers: my turn = bar.sync on my id; after issuing, hand the turn to the other consumer. The
    // alternation runs over the CTA's whole life: consumer 1 arrives once here, and skips its very last arrive.
    const uint32_t my_bar = kSchedBar0 + c, other_bar = kSchedBar0 + (1 - c);
    int tile = blockIdx.x;
    if (tile >= num_tiles) return;
    int it = 0, bh = tile_bh(tile);
    cta_row0 = tile_row0(tile);
    n_blocks = kv_blocks(cta_row0);
#pragma unroll
    for (int j = 0; j < kDTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_o[j][e] = 0.f;
    row_max[0] = row_max[1] = -CUDART_INF_F;
    row_sum[0] = row_sum[1] = 0.f;
    if (c == 1) named_bar_arrive(kSchedBar0, kSchedThreads);  // consumer 0 issues first

    // The CTA's first batch: QK^T[0] of its first tile alone.
    mbar_wait(&q_full[0], 0);
    {
        const auto first = PipeState<kStages>::at(kv_base);
        mbar_wait(&full_k[first.index], first.phase);
    }
    named_bar_sync(my_bar, kSchedThreads);
    wgmma_fence();
    issue_qk(kv_base, 0);  // @region qk
    named_bar_arrive(other_bar, kSchedThreads);
    wgmma_wait<0>();
    fence_operands(s[0]);
    release(empty_k, kv_base);
    softmax(0);  // @region softmax  (alpha = 1: O is still zero)
    pack_p();    // @region softmax

    for (;;) {
        const int qb = it & 1;
        // Batch n: QK^T[n] then PV[n-1]; softmax[n] as soon as QK^T[n] is done, while PV[n-1] runs.
        for (int n = 1; n < n_blocks; ++n) {
            const auto prev = PipeState<kStages>::at(kv_base + n - 1);
            const auto cur = PipeState<kStages>::at(kv_base + n);
            rescale_o();  // @region softmax  (alpha[n-1]: PV[n-2] completed in the last iteration)
            mbar_wait(&full_k[cur.index], cur.phase);    // @region sync
            mbar_wait(&full_v[prev.index], prev.phase);  // @region sync
            named_bar_sync(my_bar, kSchedThreads);       // @region sync
            fence_operands(acc_o);
            wgmma_fence();
            issue_qk(kv_base + n, qb);  // @region qk
            issue_pv(n - 1);            // @region pv
            named_bar_arrive(other_bar, kSchedThreads);  // @region sync
            wgmma_wait<1>();  // QK^T[n] done (groups complete in order), PV[n-1] may still run
            fence_operands(s[0]);
            release(empty_k, kv_base + n);  // @region sync
            softmax(n);                     // @region softmax
            wgmma_wait<0>();                // PV[n-1] done: O and P[n-1]'s registers are free again
            fence_operands(acc_o);
            release(empty_v, kv_base + n - 1);  // @region sync
            pack_p();                           // @region softmax
        }

        // Every QK^T of this tile has completed: Q buffer qb may take tile it + 2's Q.
        __syncwarp();                              // @region sync
        if (lane == 0) mbar_arrive(&q_empty[qb]);  // @region sync

        const auto last = PipeState<kStages>::at(kv_base + n_blocks - 1);
        const int next = tile + gridDim.x;
        float inv_l[2];
        if (next < num_tiles) {
            // Cross-tile batch: QK^T[0] of the next tile, then PV[last] of this one.
            const int next_bh = tile_bh(next), next_row0 = tile_row0(next), next_kv = kv_base + n_blocks;
            const auto first = PipeState<kStages>::at(next_kv);
            rescale_o();                                     // @region softmax
            mbar_wait(&q_full[qb ^ 1], ((it + 1) >> 1) & 1);  // @region sync
            mbar_wait(&full_k[first.index], first.phase);    // @region sync
            mbar_wait(&full_v[last.index], last.phase);      // @region sync
            named_bar_sync(my_bar, kSchedThreads);           // @region sync
            fence_operands(acc_o);
            wgmma_fence();
            issue_qk(next_kv, qb ^ 1);  // @region qk
            issue_pv(n_blocks - 1);     // @region pv
            named_bar_arrive(other_bar, kSchedThreads);  // @region sync
            wgmma_wait<1>();  // QK^T[0] of the next tile done, PV[last] may still run
            fence_operands(s[0]);
            release(empty_k, next_kv);  // @region sync
            finish_sums(inv_l);         // @region epilogue  (this tile's row sums are final)
            const int done_bh = bh, done_row0 = cta_row0;
            bh = next_bh;
            cta_row0 = next_row0;
            row_max[0] = row_max[1] = -CUDART_INF_F;
            row_sum[0] = row_sum[1] = 0.f;
            softmax(0);       // @region softmax  (the next tile's S[0]; alpha = 1)
            wgmma_wait<0>();  // PV[last] done: O of this tile is final
            fence_operands(acc_o);
            release(empty_v, kv_base + n_blocks - 1);  // @region sync
            store_o(done_bh, done_row0, inv_l);        // @region epilogue
            pack_p();                                  // @region softmax
            kv_base = next_kv;
            n_blocks = kv_blocks(cta_row0);
            tile = next;
            ++it;
            continue;
        }

        // The CTA's last batch: PV[last] alone. Consumer 1 skips its final arrive so both barriers end balanced.
        rescale_o();                                 // @region softmax
        mbar_wait(&full_v[last.index], last.phase);  // @region sync
        named_bar_sync(my_bar, kSchedThreads);       // @region sync
        fence_operands(acc_o);
        wgmma_fence();
        issue_pv(n_blocks - 1);  // @region pv
        if (c == 0) named_bar_arrive(other_bar, kSchedThreads);  // @region sync
        wgmma_wait<0>();
        fence_operands(acc_o);
        release(empty_v, kv_base + n_blocks - 1);  // @region sync
        finish_sums(inv_l);                        // @region epilogue
        store_o(bh, cta_row0, inv_l);              // @region epilogue
        break;
    }
    WHOWAITS_TRACE_FINISH();  // issue 12: the events still parked after the last wait (nothing when off)
}

}}  // namespace whowaits::WHOWAITS_NAMESPACE
