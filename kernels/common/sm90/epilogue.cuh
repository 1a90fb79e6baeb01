// The TMA-store epilogue of one consumer warpgroup (v17's protocol, shared from v20 on): its finished 64 x kHeadDim
// O tile, scaled by 1/l per row and packed to 16 bits, goes into the warpgroup's own staging buffer in
// tma.cuh's 128-byte-swizzled layout (for a quad's column pair the 8 rows g land in 8 different 16-byte chunks, so
// each st.shared.b32 of a warp is conflict-free), the writes are fenced for the async proxy, the warpgroup syncs
// on its store barrier, and one thread issues the box store(s) (rows past seqlen are clipped by the map) and
// everyone moves on; O restarts from zero. The buffer is written again only after the issuer has seen the previous
// store's shared-memory reads finish (tma_store_wait_read) and the same barrier. Before the CTA exits the issuer
// calls drain() so the buffer stays valid until the last store is done.
#pragma once
#include <cstdint>
#include <cuda.h>

#include "common/sm80/softmax_math.cuh"
#include "common/sm90/named_barrier.cuh"
#include "common/sm90/p_smem.cuh"
#include "common/sm90/tma.cuh"
#include "common/sm90/tma_store.cuh"

namespace whowaits { namespace sm90 {

// @region inherit

// 1/l of the warp's two rows (g, g + 8) from the per-thread partial row sums (0 for a row with no key).
__device__ __forceinline__ void finish_row_sums(const float (&row_sum)[2], float (&inv_l)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const float l = whowaits::common::quad_sum(row_sum[h]);
        inv_l[h] = l > 0.f ? __fdividef(1.f, l) : 0.f;
    }
}

// The warp's 16 finished O rows, scaled by 1/l and packed to 16 bits, into a [64][kHeadDim] staging tile with
// kHeadDim / 16 stmatrix.x4 (p_smem.cuh's PStage addressing: the mma fragment as it is). v35-v37's epilogues.
template <typename Element, int kHeadDim>
__device__ __forceinline__ void stmatrix_o_rows(const PStage<kHeadDim>& stage, const float (&acc_o)[kHeadDim / 8][4],
                                                const float (&inv_l)[2]) {
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        const uint32_t p[4] = {
            whowaits::common::pack2<Element>(acc_o[2 * kk][0] * inv_l[0], acc_o[2 * kk][1] * inv_l[0]),
            whowaits::common::pack2<Element>(acc_o[2 * kk][2] * inv_l[1], acc_o[2 * kk][3] * inv_l[1]),
            whowaits::common::pack2<Element>(acc_o[2 * kk + 1][0] * inv_l[0], acc_o[2 * kk + 1][1] * inv_l[0]),
            whowaits::common::pack2<Element>(acc_o[2 * kk + 1][2] * inv_l[1], acc_o[2 * kk + 1][3] * inv_l[1])};
        stage.store(kk, p);
    }
}

// O restarts from zero after its store.
template <int kDTiles>
__device__ __forceinline__ void zero_o(float (&acc_o)[kDTiles][4]) {
#pragma unroll
    for (int j = 0; j < kDTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_o[j][e] = 0.f;
}

// kTileRows: the rows of the [kTileRows][kHeadDim] tile the staging rows sit in (its 64-column sub-tiles lie
// kTileRows x 128 bytes apart). 64: a staging tile of its own (v17-v24). v25 stages a consumer's O in its own 64 rows
// of the finished tile's Q buffer ([kBlockM][kHeadDim]: kTileRows = kBlockM, `so` = the buffer + 64 c rows, a multiple
// of the 8-row swizzle atom, so the swizzle of row r is the same as in a tile of its own).
// kStmatrix (v37): the warp's 16 rows go in with kHeadDim / 16 stmatrix.x4 (p_smem.cuh's PStage addressing of a
// [64][64 k] tile, the mma fragment as it is) instead of 2 kHeadDim / 8 st.shared.b32 at per-element swizzled
// addresses; the protocol (two 128-thread bar.syncs, one issuer, 64-row boxes) is unchanged.
template <typename Element, int kHeadDim, int kTileRows = 64, bool kStmatrix = false>
struct TmaStoreEpilogue {
    static_assert(!kStmatrix || kTileRows == 64, "the stmatrix path writes a staging tile of its own (64 rows)");
    static constexpr int kDTiles = kHeadDim / 8;
    Element* so;         // this warpgroup's 64 x kHeadDim staging rows (1024-byte aligned)
    uint32_t so_addr;
    uint32_t bar_id;     // this warpgroup's store barrier (128 threads)
    bool issuer;         // warp 0, lane 0 of the warpgroup

    // acc_o[j][e]: row warp_in_wg * 16 + g + 8 (e >> 1), column 8 j + 2 t + (e & 1) of the warpgroup's 64 rows.
    // row0 = the warpgroup's first global query row (the tile's row0 + 64 c), bh = the tile's batch · head.
    __device__ __forceinline__ void store(float (&acc_o)[kDTiles][4], const float (&inv_l)[2],
                                          const CUtensorMap* tmap_o, int row0, int bh, int seqlen, int warp_in_wg,
                                          int lane) const {
        if (issuer) tma_store_wait_read<0>();  // the previous tile's store has read the staging tile
        named_bar_sync(bar_id, 128);
        if constexpr (kStmatrix)
            stmatrix_o_rows<Element, kHeadDim>(PStage<kHeadDim>(so_addr, warp_in_wg, lane), acc_o, inv_l);
        const int g = lane >> 2, t = lane & 3;
#pragma unroll
        for (int h = 0; h < (kStmatrix ? 0 : 2); ++h) {
            const int r = warp_in_wg * 16 + g + 8 * h;
#pragma unroll
            for (int j = 0; j < kDTiles; ++j)
                st_shared_b32(so_addr + 2 * sw128_offset<kTileRows>(r, 8 * j + 2 * t),
                              whowaits::common::pack2<Element>(acc_o[j][2 * h] * inv_l[h],
                                                               acc_o[j][2 * h + 1] * inv_l[h]));
        }
        fence_proxy_async_smem();  // the st.shared above, before the async proxy reads them
        named_bar_sync(bar_id, 128);
        if (issuer && row0 < seqlen) tma_store_tile<kTileRows, kHeadDim>(so, tmap_o, row0, bh);
        zero_o(acc_o);
    }

    // Before the CTA exits: the last store has finished reading (and writing) through the staging tile.
    __device__ __forceinline__ void drain() const {
        if (issuer) tma_store_wait_all<0>();
    }
};

}}  // namespace whowaits::sm90
