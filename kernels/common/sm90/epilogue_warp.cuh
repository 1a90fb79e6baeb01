// A warp-local TMA-store epilogue (v35): each consumer warp writes its own 16 finished O rows, scaled by 1/l and
// packed to 16 bits, into its part of the warpgroup's staging tile with stmatrix, and its lane 0 TMA-stores them as
// kHeadDim / 64 boxes of [16 rows][64 columns]. No warp waits for another: TmaStoreEpilogue (epilogue.cuh, v17-v34)
// syncs the warpgroup's 128 threads twice per tile (before writing, for the previous store's reads, and after, for
// the issuer) and writes 2 kHeadDim / 8 st.shared.b32 per thread with their swizzled addresses computed per element.
// In v34's SASS ptxas interleaves those two bar.syncs with the next tile's first softmax, which runs out of the
// tensor core's turn at every tile boundary (docs/ladder-iv.md, v35).
//
// Layout (tma.cuh's, the one TmaStoreEpilogue writes): the warpgroup's tile is kHeadDim / 64 sub-tiles of
// [64 rows][128 bytes], 1024-byte aligned, with the 128-byte swizzle (16-byte chunk c of row r at chunk c ^ (r & 7)).
// Warp w's rows 16 w .. 16 w + 15 of a sub-tile are 2048 contiguous bytes at 2048 w, 1024-byte aligned, and their
// swizzle is that of a [16][64] box of their own (16 w is a multiple of the 8-row atom): so one box of 16 rows per
// sub-tile stores them (the O map of ABI tensor_maps_persistent_o16 has boxes of 16 rows, kernels/launch.py).
// stmatrix.x4 takes the mma accumulator fragment as it is (thread 4g + t: row g, columns 2t, 2t + 1 of each 8 x 8
// matrix), so a warp's 16 x kHeadDim rows are kHeadDim / 16 stmatrix.x4 (p_smem.cuh's PStage addressing).
//
// Protocol (per warp; bulk-async groups belong to the thread that commits them): lane 0 waits until its previous
// store has read its rows (tma_store_wait_read: one tile ago, long done) and __syncwarp hands that on; every lane
// writes, fences for the async proxy, __syncwarp; lane 0 issues the boxes and commits. kZeroO: O restarts from zero
// here, as in TmaStoreEpilogue (v36); without it the tile's first PV wgmma must start from zero itself (scale-d 0,
// v35). Before the CTA exits each lane 0 calls drain().
#pragma once
#include <cstdint>
#include <cuda.h>

#include "common/sm90/epilogue.cuh"
#include "common/sm90/p_smem.cuh"
#include "common/sm90/tma.cuh"
#include "common/sm90/tma_store.cuh"

namespace whowaits { namespace sm90 {

// @region inherit

template <typename Element, int kHeadDim, bool kZeroO>
struct WarpStoreEpilogue {
    static constexpr int kDTiles = kHeadDim / 8;
    static constexpr uint32_t kSubTileBytes = 64 * 128;  // one 64-column sub-tile of the warpgroup's 64 rows
    const Element* warp_rows;  // this warp's 16 rows in sub-tile 0 (generic pointer, for the TMA source)
    PStage<kHeadDim> stage;    // stmatrix addressing of the warpgroup's tile (PStage: any 64 x (64 k) tile)
    bool issuer;               // lane 0

    __device__ __forceinline__ WarpStoreEpilogue(Element* wg_tile, uint32_t wg_tile_addr, int warp_in_wg, int lane)
        : warp_rows(wg_tile + warp_in_wg * 16 * 64), stage(wg_tile_addr, warp_in_wg, lane), issuer(lane == 0) {}

    // acc_o[j][e]: row g + 8 (e >> 1) of the warp's 16, column 8 j + 2 t + (e & 1). row0 = the warp's first global
    // query row, bh = the tile's batch · head. Rows past seqlen are clipped by the map; a warp wholly past it skips.
    __device__ __forceinline__ void store(float (&acc_o)[kDTiles][4], const float (&inv_l)[2],
                                          const CUtensorMap* tmap_o, int row0, int bh, int seqlen) const {
        if (issuer) tma_store_wait_read<0>();  // this warp's previous store has read its rows
        __syncwarp();
        stmatrix_o_rows<Element, kHeadDim>(stage, acc_o, inv_l);
        fence_proxy_async_smem();  // the stmatrix above, before the async proxy reads them
        __syncwarp();
        if (issuer && row0 < seqlen) {
#pragma unroll
            for (int sub = 0; sub < kHeadDim / 64; ++sub)
                tma_store_3d(warp_rows + sub * (kSubTileBytes / sizeof(Element)), tmap_o, sub * 64, row0, bh);
            asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
        }
        if constexpr (kZeroO) zero_o(acc_o);
    }
    // Before the CTA exits: this warp's last store has finished reading (and writing) its rows.
    __device__ __forceinline__ void drain() const {
        if (issuer) tma_store_wait_all<0>();
    }
};

}}  // namespace whowaits::sm90
