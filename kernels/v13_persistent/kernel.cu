// v13: persistent CTAs (ladder III, step 4). v12's kernel (producer + 2 pingpong consumers, softmax under the
// consumer's own PV) on a grid of one CTA per SM that walks the ceil(S / kBlockM) x (B*H) tiles with a static
// round-robin scheduler (tile = blockIdx.x, + gridDim.x, ...), so each CTA's prologue and epilogue overlap
// with work instead of leaving the SM idle between CTAs:
//  - the producer runs ahead across tile boundaries: the K/V ring's tile counter and phases continue from one
//    tile to the next, so the next tile's first K/V stages load while the consumers still finish the current
//    tile; its Q load waits only for a new Q_EMPTY barrier (each consumer warp arrives once its last QK^T of
//    the tile has completed);
//  - tile -> (bh, m_block): consecutive tiles share a head (K/V reuse in L2), query blocks heaviest-first
//    (causal); the launch ABI `tensor_maps_persistent` appends `int num_bh` (B*H) to the arguments and the
//    launcher sizes the grid min(tiles, SMs) (kernels/launch.py);
//  - the epilogue (direct O stores from registers) needs no shared memory, so it overlaps the producer's
//    loads for the next tile.
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
#define WHOWAITS_NAMESPACE v13_persistent
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
    Element* sK = sQ + kBlockM * kHeadDim;
    Element* sV = sK + kStages * kBlockN * kHeadDim;
    __shared__ uint64_t full_k[kStages], full_v[kStages], empty_k[kStages], empty_v[kStages];
    __shared__ uint64_t q_full, q_empty;

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
        mbar_init(&q_full, 1);
        mbar_init(&q_empty, kConsumers * 4);  // one release per consumer warp once its last QK^T of a tile is done
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
                    if (t == 0) {
                        // @region load_q
                        // Q of this tile, after its first K/V stage is on its way: wait until both consumers
                        // finished the previous tile's QK^T (the it-th use of sQ, phase (it - 1) & 1 of q_empty).
                        if (it > 0) mbar_wait(&q_empty, (it - 1) & 1);  // @region sync
                        mbar_arrive_expect_tx(&q_full, kQBytes);
                        tma_load_tile<kBlockM, kHeadDim>(sQ, &tmap_q, &q_full, row0, bh);
                    }
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
    auto issue_qk = [&](int n) {
        uint32_t k_stage = k_base + ((kv_base + n) % kStages) * kTileBytes, q_addr = q_base;
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
    auto release = [&](uint64_t* bars, int n) {
        __syncwarp();
        if (lane == 0) mbar_arrive(&bars[(kv_base + n) % kStages]);
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
    int it = 0;
    for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x, ++it) {
    const int bh = tile_bh(tile);
    cta_row0 = tile_row0(tile);
    n_blocks = kv_blocks(cta_row0);
#pragma unroll
    for (int j = 0; j < kDTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_o[j][e] = 0.f;
    row_max[0] = row_max[1] = -CUDART_INF_F;
    row_sum[0] = row_sum[1] = 0.f;
    // Each tile's turn-taking is balanced on its own, so it restarts per tile.
    if (c == 1) named_bar_arrive(kSchedBar0, kSchedThreads);  // consumer 0 issues first
    mbar_wait(&q_full, it & 1);

    // Batch 0: QK^T[0] alone.
    {
        const auto first = PipeState<kStages>::at(kv_base);
        mbar_wait(&full_k[first.index], first.phase);
    }
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
        const auto prev = PipeState<kStages>::at(kv_base + n - 1);
        const auto cur = PipeState<kStages>::at(kv_base + n);
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

    // Every QK^T of this tile has completed: sQ may take the next tile's Q.
    __syncwarp();                       // @region sync
    if (lane == 0) mbar_arrive(&q_empty);  // @region sync

    // Last batch: PV[n_blocks-1] alone. Consumer 1 skips its final arrive so both barriers end balanced.
    {
        const auto last = PipeState<kStages>::at(kv_base + n_blocks - 1);
        rescale_o();  // @region softmax
        mbar_wait(&full_v[last.index], last.phase);  // @region sync
        named_bar_sync(my_bar, kSchedThreads);       // @region sync
        fence_operands(acc_o);
        wgmma_fence();
        issue_pv(n_blocks - 1);  // @region pv
        if (c == 0) named_bar_arrive(other_bar, kSchedThreads);  // @region sync
        wgmma_wait<0>();
        fence_operands(acc_o);
        // Unlike v11/v12 (one tile per CTA, the producer done by now), the producer of a persistent CTA goes on
        // to the next tile and will wait for this V stage: release it. (The first device run lacked this line
        // and hung as soon as a CTA had a second tile; see version.toml.)
        release(empty_v, n_blocks - 1);  // @region sync
    }

    // @region epilogue
    // O *= 1/l; each thread stores its pairs straight to global memory (rows below seqlen).
    Element* o_bh = o + static_cast<size_t>(bh) * seqlen * kHeadDim;
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const float l = quad_sum(row_sum[h]);
        const float inv_l = l > 0.f ? __fdividef(1.f, l) : 0.f;
        const int row = cta_row0 + warp_row0 + g + 8 * h;
        if (row < seqlen) {
            Element* dst = o_bh + static_cast<size_t>(row) * kHeadDim + 2 * t;
#pragma unroll
            for (int j = 0; j < kDTiles; ++j)
                *reinterpret_cast<uint32_t*>(dst + 8 * j) = pack2<Element>(acc_o[j][2 * h] * inv_l, acc_o[j][2 * h + 1] * inv_l);
        }
    }
    kv_base += n_blocks;
    }  // tile loop
    WHOWAITS_TRACE_FINISH();  // issue 12: the events still parked after the last wait (nothing when off)
}

}}  // namespace whowaits::WHOWAITS_NAMESPACE
