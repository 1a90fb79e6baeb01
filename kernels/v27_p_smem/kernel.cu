// v27: v21 with P staged through shared memory at head_dim 64 (ladder IV). At d64 each consumer writes its exp'd
// and packed P[n] with stmatrix into a [64][128] tile of its own (common/sm90/p_smem.cuh) and PV reads it through a
// descriptor (SS wgmma, V MN-major) instead of 4 A registers per k16 step; at d128 nothing changes (v21's
// instructions). The d64 softmax may also compute one exponential column tile in WHOWAITS_POLY_EVERY on the FMA pipe
// (common/sm90/exp2_poly.cuh, exp2_poly_fmul): 0 here (v27 measures the staging alone); the rungs that include this
// file set it, WHOWAITS_P_SMEM = 0 keeps P in registers, and WHOWAITS_L2_PREFETCH = 1 (v30) or 2 (v31) has the producer
// prefetch the CTA's next tile's K/V into the L2 (at one head dim only with WHOWAITS_L2_PREFETCH_HEAD_DIM, v32).
//
// Why: at d64 the XU (MUFU) pipe is 58% busy beside a 56% tensor pipe, with MUFU x mio_throttle 14% of the samples:
// one MUFU.EX2 per 256 tensor FLOPs, so the tensor cores wait on the exponentials. Moving some of them to the FMA pipe
// (v23) serialised the wgmma pipeline (C7511): a consumer's 160 registers (3 consumers) hold S (64), P[n-1] (32),
// O (32) and the softmax. With P in shared memory P[n-1] holds no registers while softmax[n] runs; FlashAttention-3
// stages P this way at d64 (MmaPV_is_RS = false). Cost: 8 STSM + a proxy fence per key block per thread, and 16 KB
// more shared memory per consumer (PV reads P from shared memory, as QK^T reads Q).
//
// From v21:
// v21: v20 with causal tiles handed out in heavy/light pairs (ladder IV). v20's kernel with one change, the
// persistent grid's tile order (common/sm90/tile_scheduler_pairs.cuh, PairedTileScheduler): under a causal mask each
// head's query blocks are ordered last, first, second-to-last, second, ... and CTA b takes positions 2b and 2b + 1
// of every chunk of 2 x gridDim.x positions, so each CTA's tiles come as pairs (m_blocks - 1 - j, j) of one head
// that read m_blocks + 1 key blocks together. Without a causal mask (or with fewer than two tiles per CTA) the
// order is v20's, and so are the instructions of every loop.
//
// Why: v20 (and v13-v19) walk tiles b, b + G, b + 2G, ... of the head-major order, so the key blocks a CTA reads
// depend on b mod (query blocks per head): at b4_h16_s4096_d128 causal (32 blocks a head, G = 132 CTAs) the busiest
// CTA reads 12% more key blocks than the mean and the kernel's end waits for it (a count of the schedule; 3% with
// pairs, the last partial round). FlashAttention-3 gets the same balance from a dynamic scheduler (an atomic tile
// counter, heaviest tiles first); a static pairing needs no counter, no extra argument and no reset.
//
// From v20:
// v20: v18 with 2 or 3 consumer warpgroups, the pingpong generalised to a ring (ladder IV). At head_dim 64 the
// default tile is 192 query rows (3 consumer warpgroups x 64 rows) x 128 keys, the producer at 32 registers and
// the consumers at 160 (setmaxnreg, RegSplit<3>), as FlashAttention-3, FlashInfer and ThunderKittens do at d64;
// at head_dim 128 it is v18's 128 x 128 tile with 2 consumers (24 / 240 registers), v18's instructions.
//
// Why: at d64 a consumer's key tile is half v18's tensor work (QK^T 64x128x64 + PV 64x64x128) for the same softmax
// (64 x 128 exponentials per warpgroup), so with 2 consumers the tensor cores wait for the softmax: v18 reached
// 0.97x cuDNN at b4_h32_s4096_d64 (1.02x at d128). A third consumer gives each one two turns' time for its softmax
// while the tensor cores run the other two's batches, and a 192-row Q tile reads each K/V tile for 1.5x the rows.
//
// Structure: v18's kernel (double-buffered Q, the next tile's first QK^T under the current tile's last PV,
// softmax of S[n] under PV[n-1], descriptor iterator, TMA-store epilogue) with its per-rung copies replaced by
// shared headers: common/sm90/tile_scheduler.cuh (the persistent static scheduler), common/sm90/pingpong.cuh
// (named-barrier ids and the turn ring 0 -> 1 -> ... -> kConsumers - 1 -> 0), common/sm90/epilogue.cuh (the
// staging tile + TMA store, and 1/l). Shared memory (tma_q2_kv_o) at d64, 192 x 128, 2 stages: 2 x 24 KB Q +
// 2 x 2 x 16 KB K/V + 24 KB O staging + 1 KB slack = 140,288 B.
//
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>

#include <type_traits>

#include "common/sm80/attn_mask.cuh"
#include "common/sm80/softmax_math.cuh"
#include "common/sm90/cluster.cuh"
#include "common/sm90/mbarrier.cuh"
#include "common/sm90/epilogue.cuh"
#include "common/sm90/epilogue_warp.cuh"
#include "common/sm90/exp2_poly.cuh"
#include "common/sm90/named_barrier.cuh"
#include "common/sm90/p_smem.cuh"
#include "common/sm90/pingpong.cuh"
#include "common/sm90/pipeline.cuh"
#include "common/sm90/q_regs.cuh"
#include "common/sm90/setmaxnreg.cuh"
#include "common/sm90/stream_k.cuh"
#include "common/sm90/tile_scheduler_cluster.cuh"
#include "common/sm90/tile_scheduler_pairs.cuh"
#include "common/sm90/tma.cuh"
#include "common/sm90/tma_store.cuh"
#include "common/sm90/wgmma.cuh"

#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v27_p_smem
#endif

#ifndef WHOWAITS_POLY_EVERY
#define WHOWAITS_POLY_EVERY 0  // d64: every WHOWAITS_POLY_EVERY-th 8-key column tile's exponentials on the FMA pipe
#endif
#ifndef WHOWAITS_P_SMEM
#define WHOWAITS_P_SMEM 1  // d64: P through shared memory (0: in registers, as v21)
#endif
#ifndef WHOWAITS_L2_PREFETCH_HEAD_DIM
#define WHOWAITS_L2_PREFETCH_HEAD_DIM 0  // the head dim the prefetch applies to (v32: 64); 0: every head dim
#endif
#ifndef WHOWAITS_L2_PREFETCH
#define WHOWAITS_L2_PREFETCH 0  // the producer prefetches the CTA's next tile's K/V into the L2: 1 at the tile's
                                // start (v30), 2 halfway through its K/V loads (v31), 3 after key block
                                // blockIdx.x mod n_blocks (v33: the CTAs' prefetches spread over the tile); 0: no
#endif
#ifndef WHOWAITS_Q_REGS
#define WHOWAITS_Q_REGS 0  // d128: Q's A fragments in registers, loaded once per tile, and QK^T as an RS wgmma (v34)
#endif
#ifndef WHOWAITS_EPI_WARP
#define WHOWAITS_EPI_WARP 0  // each consumer warp stores its own 16 O rows (common/sm90/epilogue_warp.cuh, ABI
                             // tensor_maps_persistent_o16) (v35, v36)
#endif
#ifndef WHOWAITS_EPI_STSM
#define WHOWAITS_EPI_STSM 0  // v34's warpgroup epilogue, its rows written with stmatrix (v37)
#endif
#ifndef WHOWAITS_PV_ZERO_START
#define WHOWAITS_PV_ZERO_START 0  // a tile's first PV starts O from zero (scale-d 0): no zeroing in the epilogue,
                                  // no rescale at n = 1 (v35)
#endif
#ifndef WHOWAITS_STREAM_K
#define WHOWAITS_STREAM_K 0  // d128 without a causal mask: stream-K over (tile, key block) units, the split tiles merged
                             // through a workspace, the kernel's last argument (common/sm90/stream_k.cuh): 1 over
                             // all tiles (v40), 2 over the last round's only (v41)
#endif
#ifndef WHOWAITS_IDLE_ROWS
#define WHOWAITS_IDLE_ROWS 0  // a consumer whose 64 rows of a tile all lie beyond S issues no wgmma and no softmax for
                              // it, only the barrier protocol (v44; the steady loop compiled apart for it)
#endif
#ifndef WHOWAITS_PV_WAIT_LATE
#define WHOWAITS_PV_WAIT_LATE 0  // the steady loop waits on V[n-1]'s (complete) full barrier after the softmax, so that
                                 // ptxas keeps PV[n-1]'s wait_group 0 after it: softmax under PV (v46)
#endif
#ifndef WHOWAITS_Q_SPLIT
#define WHOWAITS_Q_SPLIT 0  // Q as one 64-row box per consumer warpgroup, each with its own full barrier, and the CTA's
                            // first tile's loads in the order its consumers need them: consumer 0's Q rows, K[0], the
                            // other consumers' rows, then V[0], ... (v47; version.toml q_box_rows = 64)
#endif
#ifndef WHOWAITS_KV_CLUSTER
#define WHOWAITS_KV_CLUSTER 1  // d128 without a causal mask: CTAs per cluster sharing each K/V tile by TMA multicast
                               // (v26's scheme, common/sm90/cluster.cuh; v38: 4); 1: no cluster, no attribute
#endif
// Per head dim (v33 sets them apart); by default WHOWAITS_L2_PREFETCH where WHOWAITS_L2_PREFETCH_HEAD_DIM allows.
#ifndef WHOWAITS_L2_PREFETCH_D64
#define WHOWAITS_L2_PREFETCH_D64 \
    (WHOWAITS_L2_PREFETCH_HEAD_DIM == 0 || WHOWAITS_L2_PREFETCH_HEAD_DIM == 64 ? WHOWAITS_L2_PREFETCH : 0)
#endif
#ifndef WHOWAITS_L2_PREFETCH_D128
#define WHOWAITS_L2_PREFETCH_D128 \
    (WHOWAITS_L2_PREFETCH_HEAD_DIM == 0 || WHOWAITS_L2_PREFETCH_HEAD_DIM == 128 ? WHOWAITS_L2_PREFETCH : 0)
#endif

namespace whowaits { namespace WHOWAITS_NAMESPACE {

// CTAs per cluster (v38): WHOWAITS_KV_CLUSTER at head_dim 128 without a causal mask, else 1. The launcher reads it
// back from the function (CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH) to size the grid and the K/V boxes.
template <int kHeadDim, bool kCausal>
struct KvCluster {
    static constexpr int value = kHeadDim == 128 && !kCausal ? WHOWAITS_KV_CLUSTER : 1;
};

template <typename Element, int kHeadDim, int kBlockM, int kBlockN, int kConsumers, int kStages, bool kCausal>
__global__ void
#if WHOWAITS_KV_CLUSTER > 1
    __cluster_dims__(KvCluster<kHeadDim, kCausal>::value, 1, 1)
#endif
    __launch_bounds__((kConsumers + 1) * 128, 1)
    flash_fwd(const __grid_constant__ CUtensorMap tmap_q, const __grid_constant__ CUtensorMap tmap_k,
              const __grid_constant__ CUtensorMap tmap_v, const __grid_constant__ CUtensorMap tmap_o,
              Element* __restrict__ o, int seqlen, float softmax_scale,
              int num_bh
#if WHOWAITS_STREAM_K
              , float* __restrict__ ws
#endif
              ) {
    using namespace whowaits::common;
    using namespace whowaits::sm90;
    static_assert(kConsumers == 2 || kConsumers == 3, "a pingpong ring of 2 or 3 consumer warpgroups");
    static_assert(kBlockM == 64 * kConsumers, "64 query rows per consumer warpgroup");
    static_assert(kHeadDim == 64 || kHeadDim == 128, "head_dim 64 or 128 (wgmma N of the PV product)");
    static_assert(kBlockN == 64 || kBlockN == 128, "block_n 64 or 128 (wgmma N of the QK product)");
    static_assert(kStages >= 2 && kStages <= 4, "a ring of 2 to 4 K/V stages");
    constexpr int kNTiles = kBlockN / 8, kDTiles = kHeadDim / 8;
    constexpr uint32_t kQBytes = kBlockM * kHeadDim * sizeof(Element);
    // v47: Q in kQParts boxes of 64 rows, one per consumer, each completing its own barrier q_full[b * kQParts + c].
    constexpr int kQParts = WHOWAITS_Q_SPLIT ? kConsumers : 1;
    constexpr uint32_t kTileBytes = kBlockN * kHeadDim * sizeof(Element);
    // d64: P through shared memory (smem_layout tma_q2_kv_o_p64 adds kBlockM x kBlockN elements), and the
    // exponentials of every kPolyEvery-th column tile on the FMA pipe (0: none); d128: P in registers, as v21.
    constexpr bool kPSmem = kHeadDim == 64 && WHOWAITS_P_SMEM;
    constexpr int kPolyEvery = kHeadDim == 64 ? WHOWAITS_POLY_EVERY : 0;
    // The next tile's K/V prefetch into the L2 (0 none, 1 as a tile begins, 2 halfway, 3 at a block set by blockIdx.x).
    constexpr int kPrefetch = kHeadDim == 64 ? WHOWAITS_L2_PREFETCH_D64 : WHOWAITS_L2_PREFETCH_D128;
    // d128 (v34): Q in registers (common/sm90/q_regs.cuh), QK^T reads only K from shared memory.
    constexpr bool kQRegs = kHeadDim == 128 && WHOWAITS_Q_REGS;
    // v35, v36: the warp-local epilogue. v35 also: O is not zeroed after a store, the tile's first PV overwrites it
    // (scale-d 0), and the rescale before it (alpha = 1) is skipped.
    constexpr bool kEpiWarp = WHOWAITS_EPI_WARP;
    constexpr bool kPvZeroStart = WHOWAITS_PV_ZERO_START;
    static_assert(kEpiWarp || !kPvZeroStart, "WHOWAITS_PV_ZERO_START needs the warp epilogue (which does not zero O)");
    // v38: the CTAs of a cluster take consecutive query blocks of one head (common/sm90/tile_scheduler_cluster.cuh),
    // walk the same key blocks, and each loads one kBlockN / kCluster-row slice of every K/V tile multicast to all.
    constexpr int kCluster = KvCluster<kHeadDim, kCausal>::value;
    static_assert(kCluster == 1 || kPrefetch == 0, "the L2 prefetch walks the paired scheduler's blocks");
    // v40: stream-K (common/sm90/stream_k.cuh): a CTA's tiles are whole tiles between a tail and a head of key blocks.
    constexpr bool kStreamK = WHOWAITS_STREAM_K && kHeadDim == 128 && !kCausal;
    // v44: consumers with no row below S in a tile skip its work (the partial last tile of a head at d64, S = 4096).
    constexpr bool kIdleRows = WHOWAITS_IDLE_ROWS && kHeadDim == 64;
    static_assert(!kIdleRows || (!kStreamK && kCluster == 1), "idle rows: no stream-K, no cluster");
    static_assert(!kStreamK || (kCluster == 1 && kPrefetch == 0), "stream-K: no cluster, no L2 prefetch");
    static_assert(kQParts == 1 || (kCluster == 1 && !kStreamK), "Q in parts: no cluster, no stream-K");

    // @region other
    WHOWAITS_TRACE_INIT();  // issue 12: the measured trace's per-warpgroup cursors (nothing when off)
    extern __shared__ __align__(128) unsigned char smem_raw[];
    Element* sQ = reinterpret_cast<Element*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    Element* sK = sQ + 2 * kBlockM * kHeadDim;  // sQ[0], sQ[1]: two Q buffers
    Element* sV = sK + kStages * kBlockN * kHeadDim;
    Element* sO = sV + kStages * kBlockN * kHeadDim;  // sO[c]: consumer c's 64 x kHeadDim staging tile (1024-aligned)
    Element* sP = sO + kBlockM * kHeadDim;            // sP[c]: consumer c's 64 x kBlockN P tile (d64; 1024-aligned)
    __shared__ uint64_t full_k[kStages], full_v[kStages], empty_k[kStages], empty_v[kStages];
    __shared__ uint64_t q_full[2 * kQParts], q_empty[2];  // Q buffer b = tile counter & 1 (v47: a full barrier per part)

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wg = warp >> 2, warp_in_wg = warp & 3;
    // Tile scheduler (common/sm90/tile_scheduler_pairs.cuh): under a causal mask a CTA takes one head's heavy and
    // light query blocks as a pair; the CTA's k-th tile is sched.tile_at(k).
    using Scheduler = std::conditional_t<
        (kCluster > 1), ClusterTileScheduler<kBlockM, kBlockN, kCluster>,
        std::conditional_t<kStreamK,
                           std::conditional_t<WHOWAITS_STREAM_K == 2, StreamKTailScheduler<kBlockM, kBlockN>,
                                              StreamKScheduler<kBlockM, kBlockN>>,
                           PairedTileScheduler<kBlockM, kBlockN, kCausal>>>;
    const Scheduler sched(seqlen, num_bh);
    const int num_tiles = sched.num_tiles;
    auto tile_bh = [&](int tile) { return sched.bh(tile); };
    auto tile_row0 = [&](int tile) { return sched.row0(tile); };
    auto kv_blocks = [&](int row0) { return sched.kv_blocks(row0); };
    // A tile's first key block and its number of key blocks (stream-K: a tile's head or tail is a part of them).
    auto seg_kv0 = [&](int tile) {
        if constexpr (kStreamK) return sched.kv_begin(tile);
        else return 0;
    };
    auto seg_blocks = [&](int tile, int row0) {
        if constexpr (kStreamK) return sched.kv_end(tile) - sched.kv_begin(tile);
        else return kv_blocks(row0);
    };

    // @region sync
    if (tid == 0) {
        prefetch_tensor_map(&tmap_q);
        prefetch_tensor_map(&tmap_k);
        prefetch_tensor_map(&tmap_v);
        prefetch_tensor_map(&tmap_o);
        if constexpr (kQParts == 1) {
#pragma unroll
            for (int b = 0; b < 2; ++b) {
                mbar_init(&q_full[b], 1);
                mbar_init(&q_empty[b], kConsumers * 4);  // one release per consumer warp once its last QK^T of a tile is done
            }
        } else {  // v47: a full barrier per (buffer, part)
#pragma unroll
            for (int b = 0; b < 2; ++b) mbar_init(&q_empty[b], kConsumers * 4);
#pragma unroll
            for (int b = 0; b < 2 * kQParts; ++b) mbar_init(&q_full[b], 1);
        }
#pragma unroll
        for (int s = 0; s < kStages; ++s) {
            mbar_init(&full_k[s], 1);
            mbar_init(&full_v[s], 1);
            mbar_init(&empty_k[s], kCluster * kConsumers * 4);  // one release per consumer warp (of each CTA)
            mbar_init(&empty_v[s], kCluster * kConsumers * 4);
        }
        mbar_fence_init();
    }
    if constexpr (kCluster > 1)
        cluster_sync_aligned();  // the peers' barriers are initialised before any multicast or remote arrive
    else
        __syncthreads();  // the last CTA-wide barrier
    // The end of every thread's work: with a cluster, wait until the peers are done with this CTA's barriers.
    auto leave = [&]() {
        if constexpr (kCluster > 1) cluster_arrive_wait();
    };

    if (wg == 0) {
        // ---------------- producer warpgroup ----------------
        setmaxnreg_dec<RegSplit<kConsumers>::kProducer>();
        if (tid == 0) {
            int kv = 0;  // K/V tiles issued so far by this CTA: ring index and phase continue across tiles
            int it = 0;
            // Q's part `part` of tile (row0, bh) into buffer b (v47: the part's 64 rows; else the whole tile).
            auto load_q_part = [&](int b, int part, int row0, int bh) {
                mbar_arrive_expect_tx(&q_full[b * kQParts + part], kQBytes / kQParts);
                if constexpr (kQParts == 1)
                    tma_load_tile<kBlockM, kHeadDim>(sQ + b * kBlockM * kHeadDim, &tmap_q, &q_full[b], row0, bh);
                else
                    tma_load_rows<kBlockM, 64, kHeadDim>(sQ + b * kBlockM * kHeadDim, &tmap_q,
                                                         &q_full[b * kQParts + part], row0, part, bh);
            };
            for (int tile = sched.tile_at(0); tile < num_tiles; tile = sched.tile_at(++it)) {
                const int bh = tile_bh(tile), row0 = tile_row0(tile), n_blocks = seg_blocks(tile, row0);
                const int kv0 = seg_kv0(tile);
                {
                    // @region load_q
                    // Q of this tile into buffer it & 1, before its K/V: that buffer was last read by tile it - 2
                    // (phase (it >> 1) - 1 of q_empty[it & 1]), long done by the time the ring lets us get here.
                    const int b = it & 1;
                    if (it >= 2) mbar_wait(&q_empty[b], ((it >> 1) - 1) & 1);  // @region sync
                    // v47, the CTA's first tile: consumer 0's rows now, the others' after K[0] (below).
#pragma unroll
                    for (int part = 0; part < (kQParts > 1 && it == 0 ? 1 : kQParts); ++part)
                        load_q_part(b, part, row0, bh);
                }
#if WHOWAITS_L2_PREFETCH_D64 || WHOWAITS_L2_PREFETCH_D128
                // @region load_kv
                // The CTA's next tile's K/V into the L2 ahead of its loads: every CTA starts a tile at about the
                // same time, so without this the first K/V blocks of each round's new heads come from DRAM in one
                // burst while the tensor cores wait. The CTAs whose next tiles share a head split the work: query
                // block m prefetches key blocks m, m + m_blocks, ... Mode 1 (v30) issues them as this tile begins,
                // mode 2 (v31) once half of this tile's K/V loads are issued (the consumers are then about
                // kStages blocks behind), between two rounds' bursts, mode 3 (v33) after key block
                // blockIdx.x mod n_blocks, so the CTAs of a round do not all prefetch at once.
                auto prefetch_next = [&]() {
                    const int next = sched.tile_at(it + 1);
                    if (next < num_tiles) {
                        const int nbh = tile_bh(next), nrow0 = tile_row0(next), nblk = kv_blocks(nrow0);
                        for (int t = nrow0 / kBlockM; t < nblk; t += sched.m_blocks) {
                            tma_prefetch_tile<kBlockN, kHeadDim>(&tmap_k, t * kBlockN, nbh);
                            tma_prefetch_tile<kBlockN, kHeadDim>(&tmap_v, t * kBlockN, nbh);
                        }
                    }
                };
                if (kPrefetch == 1) prefetch_next();
#endif
                if constexpr (kCluster > 1) {
                    // v38: this CTA's slice of every K/V tile, multicast to the cluster; the full barrier expects
                    // the whole tile (every CTA's slice). Not unrolled: the unrolled copies' shared::cluster
                    // addresses do not fit the producer's registers (v26: 192 B spilled at d128).
#pragma unroll 1
                    for (int t = 0; t < n_blocks; ++t, ++kv) {
                        // @region load_kv
                        const auto st = PipeState<kStages>::at(kv);
                        const int rank = static_cast<int>(blockIdx.x) % kCluster;
                        if (kv >= kStages) mbar_wait(&empty_k[st.index], st.phase ^ 1u);  // @region sync
                        mbar_arrive_expect_tx(&full_k[st.index], kTileBytes);
                        tma_load_tile_slice_multicast<kBlockN, kHeadDim, kCluster>(
                            sK + st.index * kBlockN * kHeadDim, &tmap_k, &full_k[st.index], t * kBlockN, bh, rank);
                        if (kv >= kStages) mbar_wait(&empty_v[st.index], st.phase ^ 1u);  // @region sync
                        mbar_arrive_expect_tx(&full_v[st.index], kTileBytes);
                        tma_load_tile_slice_multicast<kBlockN, kHeadDim, kCluster>(
                            sV + st.index * kBlockN * kHeadDim, &tmap_v, &full_v[st.index], t * kBlockN, bh, rank);
                    }
                    continue;
                }
                for (int t = 0; t < n_blocks; ++t, ++kv) {
                    // @region load_kv
                    const auto st = PipeState<kStages>::at(kv);
                    if (kv >= kStages) mbar_wait(&empty_k[st.index], st.phase ^ 1u);  // @region sync
                    mbar_arrive_expect_tx(&full_k[st.index], kTileBytes);
                    tma_load_tile<kBlockN, kHeadDim>(sK + st.index * kBlockN * kHeadDim, &tmap_k, &full_k[st.index],
                                                     (kv0 + t) * kBlockN, bh);
                    if (kQParts > 1 && it == 0 && t == 0) {
                        // @region load_q
#pragma unroll
                        for (int part = 1; part < kQParts; ++part) load_q_part(0, part, row0, bh);
                    }
                    // @region load_kv
                    if (kv >= kStages) mbar_wait(&empty_v[st.index], st.phase ^ 1u);  // @region sync
                    mbar_arrive_expect_tx(&full_v[st.index], kTileBytes);
                    tma_load_tile<kBlockN, kHeadDim>(sV + st.index * kBlockN * kHeadDim, &tmap_v, &full_v[st.index],
                                                     (kv0 + t) * kBlockN, bh);
#if WHOWAITS_L2_PREFETCH_D64 || WHOWAITS_L2_PREFETCH_D128
                    if ((kPrefetch == 2 && t == n_blocks / 2) ||
                        (kPrefetch == 3 && t == static_cast<int>(blockIdx.x) % n_blocks))
                        prefetch_next();  // @region load_kv
#endif
                }
            }
        }
        leave();
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
    int kv0 = 0;                                  // the current tile's first key block (stream-K: its tail's)
    float s[1][kNTiles][4];
    uint32_t pa[kPSmem ? 1 : kBlockN / 16][4];  // P[n-1] packed to 16 bits: the A fragments of PV[n-1] (d128)
    // d64: P[n-1] in sP[c]. The tile address through a shuffle from lane 0, so ptxas sees it warp-uniform and keeps
    // PV's A descriptors in uniform registers (computed per thread, each k16 step costs R2UR + integer ops in the turn).
    const PStage<kBlockN> pst(smem_addr(sP) + __shfl_sync(0xffffffffu, c, 0) * (64 * kBlockN * int(sizeof(Element))),
                              warp_in_wg, lane);
    float alpha[2] = {1.f, 1.f};                           // O's pending rescale for rows g, g + 8
    QRegs<kQRegs ? kHeadDim : 16, kBlockM> qr;             // Q's A fragments of the warp's rows (v34, d128)
    // @region qk
    auto load_q = [&](int qbuf) {
        if constexpr (kQRegs) qr.load(smem_addr(sQ) + qbuf * kQBytes, warp_row0, lane);
    };

    // @region qk
    auto issue_qk = [&](int kv_abs, int qbuf) {
        const uint64_t qa = make_desc_sw128(q_base + qbuf * kQBytes, 16, 1024);
        const uint64_t kb = make_desc_sw128(k_base + (kv_abs % kStages) * kTileBytes, 16, 1024);
        uint32_t qa_lo = static_cast<uint32_t>(qa), kb_lo = static_cast<uint32_t>(kb);
        const uint32_t hi = static_cast<uint32_t>(qa >> 32);  // SBO + swizzle bits: the same for A and B
        // Opaque to the optimiser (one register per operand): otherwise it may hoist every (stage, k-step)
        // descriptor out of the loop and keep them all live beside S, O and P. Each k16 step below adds its byte
        // offset >> 4 to the start-address field (bits 0-13: no carry, every address < 0x40000).
        asm volatile("" : "+r"(qa_lo), "+r"(kb_lo));
#pragma unroll
        for (int kk = 0; kk < kHeadDim / 16; ++kk) {
            const uint64_t db = (static_cast<uint64_t>(hi) << 32) | (kb_lo + (((kk >> 2) * kBlockN * 128 + (kk & 3) * 32) >> 4));
            if constexpr (kQRegs) {
                WgmmaRS<Element, kBlockN, false>::run(s[0], qr.a[kk], db, kk > 0 ? 1 : 0);
            } else {
                const uint64_t da = (static_cast<uint64_t>(hi) << 32) | (qa_lo + (((kk >> 2) * kBlockM * 128 + (kk & 3) * 32) >> 4));
                WgmmaSS<Element, kBlockN>::run(s[0], da, db, kk > 0 ? 1 : 0);
            }
        }
        wgmma_commit();
    };
    // @region pv
    auto issue_pv = [&](int n) {
        const int scale_d0 = kPvZeroStart && n == 0 ? 0 : 1;  // v35: PV[0] of a tile starts O from zero
        const uint64_t vb = make_desc_sw128(v_base + ((kv_base + n) % kStages) * kTileBytes, kBlockN * 128, 1024);
        uint32_t vb_lo = static_cast<uint32_t>(vb);
        const uint32_t hi = static_cast<uint32_t>(vb >> 32);
        if constexpr (kPSmem) {
            const uint64_t pd = pst.desc();
            uint32_t pd_lo = static_cast<uint32_t>(pd);
            const uint32_t pd_hi = static_cast<uint32_t>(pd >> 32);
            asm volatile("" : "+r"(vb_lo), "+r"(pd_lo));
#pragma unroll
            for (int kk = 0; kk < kBlockN / 16; ++kk) {
                const uint64_t dv = (static_cast<uint64_t>(hi) << 32) | (vb_lo + ((kk * 16 * 128) >> 4));
                WgmmaSST<Element, kHeadDim>::run(acc_o, PStage<kBlockN>::step(pd_lo, pd_hi, kk), dv,
                                                 kk > 0 ? 1 : scale_d0);
            }
        } else {
            asm volatile("" : "+r"(vb_lo));
#pragma unroll
            for (int kk = 0; kk < kBlockN / 16; ++kk) {
                const uint64_t dv = (static_cast<uint64_t>(hi) << 32) | (vb_lo + ((kk * 16 * 128) >> 4));
                WgmmaRS<Element, kHeadDim, true>::run(acc_o, pa[kk], dv, kk > 0 ? 1 : scale_d0);
            }
        }
        wgmma_commit();
    };
    // @region sync
    // With a cluster (v38) a stage is released on the empty barrier of every CTA of it (lane r arrives on CTA r's).
    auto release = [&](uint64_t* bars, int kv_abs) {
        __syncwarp();
        if constexpr (kCluster > 1) {
            if (lane < kCluster) mbar_arrive_cluster(&bars[kv_abs % kStages], static_cast<uint32_t>(lane));
        } else {
            if (lane == 0) mbar_arrive(&bars[kv_abs % kStages]);
        }
    };
    // @region softmax
    // Online softmax of S[n] on the warp's 16 rows (rows g and g + 8 of each quad), touching neither O nor P
    // (PV[n-1] may still be reading P[n-1] and accumulating into O): new row max, alpha[h] for the deferred
    // rescale, row sums, exponentiate in place (fp32, in the S registers).
    auto softmax = [&](int n, bool pv_waits_late = false) {
        const int key0 = (kv0 + n) * kBlockN;
        if (tile_needs_mask<kBlockM, kBlockN, kCausal>(key0, cta_row0, seqlen))
            apply_mask<kBlockN, 1, kCausal>(s, key0, cta_row0 + warp_row0, seqlen, lane);
        // issue 12: the wait-log build waits for PV[n-1] here, as ptxas does (but in v46's steady loop, where
        // ptxas keeps that wait after the softmax)
        if (!pv_waits_late) WHOWAITS_TRACE_PV_WAIT_AS_COMPILED();
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
                if (kPolyEvery > 0 && j % (kPolyEvery > 0 ? kPolyEvery : 1) == kPolyEvery - 1) {
                    s[0][j][2 * h] = exp2_poly_fmul(fmaf(s[0][j][2 * h], scale_log2, -m_scaled));
                    s[0][j][2 * h + 1] = exp2_poly_fmul(fmaf(s[0][j][2 * h + 1], scale_log2, -m_scaled));
                } else {
                    s[0][j][2 * h] = fast_exp2(fmaf(s[0][j][2 * h], scale_log2, -m_scaled));
                    s[0][j][2 * h + 1] = fast_exp2(fmaf(s[0][j][2 * h + 1], scale_log2, -m_scaled));
                }
                sum += s[0][j][2 * h] + s[0][j][2 * h + 1];
            }
            row_sum[h] += sum;
        }
    };
    // P = exp'd S packed to 16 bits (only once PV[n-1], which reads the previous P, has completed): into the A
    // registers (d128) or, at d64, into sP[c] (common/sm90/p_smem.cuh; read by PV only after the next turn's barrier).
    auto pack_p = [&]() {
#pragma unroll
        for (int kk = 0; kk < kBlockN / 16; ++kk) {
            uint32_t(&p)[4] = pa[kPSmem ? 0 : kk];
            p[0] = pack2<Element>(s[0][2 * kk][0], s[0][2 * kk][1]);
            p[1] = pack2<Element>(s[0][2 * kk][2], s[0][2 * kk][3]);
            p[2] = pack2<Element>(s[0][2 * kk + 1][0], s[0][2 * kk + 1][1]);
            p[3] = pack2<Element>(s[0][2 * kk + 1][2], s[0][2 * kk + 1][3]);
            if constexpr (kPSmem) pst.store(kk, p);
        }
        if constexpr (kPSmem) fence_proxy_async_smem();  // the stmatrix above, before PV's wgmma reads them
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
    // O *= 1/l of the finished tile into this consumer's staging tile sO[c], one TMA store (common/sm90/epilogue.cuh;
    // inv_l is computed before the next tile's softmax overwrites row_sum).
    const TmaStoreEpilogue<Element, kHeadDim, 64, WHOWAITS_EPI_STSM != 0> epi{
        sO + c * 64 * kHeadDim, smem_addr(sO + c * 64 * kHeadDim), BarrierIds<kConsumers>::kStore0 + c,
        warp_in_wg == 0 && lane == 0};
    const WarpStoreEpilogue<Element, kHeadDim, !kPvZeroStart> epi_warp{sO + c * 64 * kHeadDim,
                                                                       smem_addr(sO + c * 64 * kHeadDim), warp_in_wg,
                                                                       lane};
    auto store_o = [&](int bh, int row0, const float (&inv_l)[2]) {
        if constexpr (kEpiWarp)
            epi_warp.store(acc_o, inv_l, &tmap_o, row0 + c * 64 + warp_in_wg * 16, bh, seqlen);
        else
            epi.store(acc_o, inv_l, &tmap_o, row0 + c * 64, bh, seqlen, warp_in_wg, lane);
    };
    auto finish_sums = [&](float (&inv_l)[2]) { finish_row_sums(row_sum, inv_l); };
    // v40 (stream-K): a tile's finished rows go to the workspace (the head of a tile the next CTA finishes), or are
    // merged with the previous CTA's head first (the tail of a tile it began), or are stored as they are. m_done /
    // l_done: the finished tile's raw row maxima and full row sums, kept before the next tile's softmax resets them.
    const StreamKSlots<kConsumers * 128, kDTiles> slots{
#if WHOWAITS_STREAM_K
        ws
#else
        nullptr
#endif
    };
    float m_done[2] = {0.f, 0.f}, l_done[2] = {0.f, 0.f};
    auto keep_done = [&]() {
        if constexpr (kStreamK) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                m_done[h] = row_max[h];
                l_done[h] = whowaits::common::quad_sum(row_sum[h]);
            }
        }
    };
    auto finish_tile = [&](int done_tile, int done_bh, int done_row0, float (&inv_l)[2]) {
        const int slot = static_cast<int>(blockIdx.x), ct = tid - 128, cw = warp - 4;
        if constexpr (kStreamK) {
            if (sched.writes_partial(done_tile)) {
                slots.write_partial(slot, ct, cw, lane, acc_o, m_done, l_done);
                zero_o(acc_o);
                return;
            }
            if constexpr (WHOWAITS_STREAM_K == 2) {
                if (sched.combines(done_tile)) {
                    for (int j = sched.merge_from(done_tile); j < slot; ++j)
                        if (sched.has_units(j)) slots.merge(j, ct, cw, acc_o, m_done, l_done, scale_log2);
#pragma unroll
                    for (int h = 0; h < 2; ++h) inv_l[h] = l_done[h] > 0.f ? __fdividef(1.f, l_done[h]) : 0.f;
                }
            } else {
                if (sched.combines(done_tile))
                    slots.combine(slot - 1, ct, cw, acc_o, m_done, l_done, scale_log2, inv_l);
            }
        }
        store_o(done_bh, done_row0, inv_l);
    };

    // @region sync
    // Scheduler barriers (common/sm90/pingpong.cuh): my turn = bar.sync on my id; after issuing, hand the turn to
    // the next consumer of the ring. The ring runs over the CTA's whole life: the last consumer arrives once up
    // front, and skips its very last hand-on.
    const PingpongRing<kConsumers> ring(c);
    int tile = sched.tile_at(0);
    if (tile >= num_tiles) {
        leave();
        return;
    }
    int it = 0, bh = tile_bh(tile);
    cta_row0 = tile_row0(tile);
    n_blocks = seg_blocks(tile, cta_row0);
    kv0 = seg_kv0(tile);
#pragma unroll
    for (int j = 0; j < kDTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_o[j][e] = 0.f;
    row_max[0] = row_max[1] = -CUDART_INF_F;
    row_sum[0] = row_sum[1] = 0.f;
    ring.start();  // consumer 0 issues first
    // v44: this consumer's rows of the tile all lie beyond S. Its steady loop (all but the tile's first QK^T and last
    // PV, which the cross-tile batches issue as before) keeps every K/V wait, release and turn, and issues no product
    // and no softmax (no wgmma group is open across it: the batches before and after it wait for all of theirs).
    // (through a shuffle from lane 0, so that ptxas sees the branch on it warp-uniform and keeps the loop's
    // descriptors in uniform registers, as for pst above)
    auto idle_at = [&](int row0) {
        return kIdleRows && __shfl_sync(0xffffffffu, static_cast<int>(row0 + c * 64 >= seqlen), 0) != 0;
    };
    bool idle = idle_at(cta_row0);

    // The CTA's first batch: QK^T[0] of its first tile alone.
    mbar_wait(&q_full[kQParts > 1 ? c : 0], 0);
    load_q(0);  // @region qk
    {
        const auto first = PipeState<kStages>::at(kv_base);
        mbar_wait(&full_k[first.index], first.phase);
    }
    ring.wait_turn();
    wgmma_fence();
    issue_qk(kv_base, 0);  // @region qk
    ring.pass_turn();
    wgmma_wait<0>();
    fence_operands(s[0]);
    release(empty_k, kv_base);
    softmax(0);  // @region softmax  (alpha = 1: O is still zero)
    pack_p();    // @region softmax

    // Batch n: QK^T[n] then PV[n-1]; softmax[n] as soon as QK^T[n] is done, while PV[n-1] runs. Compiled once per
    // idle state (v44), so that a working consumer's loop has no branch of its own.
    auto steady = [&](auto idle_tag, int qb) {
        constexpr bool kIdle = decltype(idle_tag)::value;
        for (int n = 1; n < n_blocks; ++n) {
            const auto prev = PipeState<kStages>::at(kv_base + n - 1);
            const auto cur = PipeState<kStages>::at(kv_base + n);
            if (!kIdle && (!kPvZeroStart || n > 1)) rescale_o();  // @region softmax  (alpha[n-1]: PV[n-2] completed
                                                    // in the last iteration; at n = 1 alpha is 1, v35's PV[0] ignores O)
            mbar_wait(&full_k[cur.index], cur.phase);    // @region sync
            mbar_wait(&full_v[prev.index], prev.phase);  // @region sync
            ring.wait_turn();       // @region sync
            if constexpr (kIdle) {  // no product: the turn and the K/V releases only
                ring.pass_turn();               // @region sync
                release(empty_k, kv_base + n);  // @region sync
                release(empty_v, kv_base + n - 1);  // @region sync
                continue;
            }
            fence_operands(acc_o);
            wgmma_fence();
            issue_qk(kv_base + n, qb);  // @region qk
            issue_pv(n - 1);            // @region pv
            ring.pass_turn();  // @region sync
            wgmma_wait<1>();  // QK^T[n] done (groups complete in order), PV[n-1] may still run
            fence_operands(s[0]);
            release(empty_k, kv_base + n);  // @region sync
            softmax(n, WHOWAITS_PV_WAIT_LATE != 0);  // @region softmax
#if WHOWAITS_PV_WAIT_LATE
            // v46: V[n-1]'s full barrier, complete since PV[n-1] was issued: its try-wait loop ends the basic
            // block, so ptxas cannot hoist PV[n-1]'s wait_group 0 above the softmax (v15's switch, on v34)
            mbar_wait(&full_v[prev.index], prev.phase);  // @region sync
#endif
            wgmma_wait<0>();                // PV[n-1] done: O and P[n-1]'s registers are free again
            fence_operands(acc_o);
            release(empty_v, kv_base + n - 1);  // @region sync
            pack_p();                           // @region softmax
        }
    };

    for (;;) {
        const int qb = it & 1;
        if (kIdleRows && idle)
            steady(std::true_type{}, qb);
        else
            steady(std::false_type{}, qb);

        // Every QK^T of this tile has completed: Q buffer qb may take tile it + 2's Q.
        __syncwarp();                              // @region sync
        if (lane == 0) mbar_arrive(&q_empty[qb]);  // @region sync

        const auto last = PipeState<kStages>::at(kv_base + n_blocks - 1);
        const int next = sched.tile_at(it + 1);
        float inv_l[2];
        if (next < num_tiles) {
            // Cross-tile batch: QK^T[0] of the next tile, then PV[last] of this one.
            const int next_bh = tile_bh(next), next_row0 = tile_row0(next), next_kv = kv_base + n_blocks;
            const auto first = PipeState<kStages>::at(next_kv);
            rescale_o();                                     // @region softmax
            mbar_wait(&q_full[(qb ^ 1) * kQParts + (kQParts > 1 ? c : 0)], ((it + 1) >> 1) & 1);  // @region sync
            load_q(qb ^ 1);  // @region qk  (every QK^T of this tile has completed: the fragments are free)
            mbar_wait(&full_k[first.index], first.phase);    // @region sync
            mbar_wait(&full_v[last.index], last.phase);      // @region sync
            ring.wait_turn();           // @region sync
            fence_operands(acc_o);
            wgmma_fence();
            issue_qk(next_kv, qb ^ 1);  // @region qk
            issue_pv(n_blocks - 1);     // @region pv
            ring.pass_turn();  // @region sync
            wgmma_wait<1>();  // QK^T[0] of the next tile done, PV[last] may still run
            fence_operands(s[0]);
            release(empty_k, next_kv);  // @region sync
            finish_sums(inv_l);         // @region epilogue  (this tile's row sums are final)
            keep_done();                // @region epilogue
            const int done_bh = bh, done_row0 = cta_row0, done_tile = tile;
            bh = next_bh;
            cta_row0 = next_row0;
            kv0 = seg_kv0(next);
            row_max[0] = row_max[1] = -CUDART_INF_F;
            row_sum[0] = row_sum[1] = 0.f;
            softmax(0);       // @region softmax  (the next tile's S[0]; alpha = 1)
            wgmma_wait<0>();  // PV[last] done: O of this tile is final
            fence_operands(acc_o);
            release(empty_v, kv_base + n_blocks - 1);  // @region sync
            finish_tile(done_tile, done_bh, done_row0, inv_l);  // @region epilogue
            pack_p();                                  // @region softmax
            idle = idle_at(cta_row0);
            kv_base = next_kv;
            n_blocks = seg_blocks(next, cta_row0);
            tile = next;
            ++it;
            continue;
        }

        // The CTA's last batch: PV[last] alone. The last consumer skips its final hand-on: the barriers end balanced.
        rescale_o();                                 // @region softmax
        mbar_wait(&full_v[last.index], last.phase);  // @region sync
        ring.wait_turn();       // @region sync
        fence_operands(acc_o);
        wgmma_fence();
        issue_pv(n_blocks - 1);  // @region pv
        ring.pass_final_turn();  // @region sync
        wgmma_wait<0>();
        fence_operands(acc_o);
        release(empty_v, kv_base + n_blocks - 1);  // @region sync
        finish_sums(inv_l);                        // @region epilogue
        keep_done();                               // @region epilogue
        finish_tile(tile, bh, cta_row0, inv_l);    // @region epilogue
        if constexpr (kEpiWarp)
            epi_warp.drain();  // @region epilogue  (this warp's rows of sO[c] stay valid until its store is done)
        else
            epi.drain();  // @region epilogue  (sO[c] stays valid until the store is done)
        break;
    }
    WHOWAITS_TRACE_FINISH();  // issue 12: the events still parked after the last wait (nothing when off)
    leave();                  // @region sync
}

}}  // namespace whowaits::WHOWAITS_NAMESPACE
