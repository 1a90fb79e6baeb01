// Thread-block clusters on sm_90 (v26 on): the cluster barrier, arrivals on a peer CTA's mbarrier, and TMA loads
// multicast to every CTA of the cluster.
//
// A cluster of kCluster CTAs along x (`__cluster_dims__(kCluster, 1, 1)`, so a plain cuLaunchKernel launches whole
// clusters and gridDim.x is a multiple of kCluster) is co-scheduled on one GPC, and each CTA may reach the others'
// shared memory through shared::cluster addresses (mapa). With a 1-D grid the CTAs of a cluster are consecutive
// blockIdx.x, so a CTA's rank in its cluster is blockIdx.x % kCluster.
//
// Multicast: one thread of one CTA issues cp.async.bulk.tensor ... .multicast::cluster with a CTA mask; the box
// lands at the same shared-memory offset in every CTA of the mask, and each of them gets the complete_tx of the
// box's bytes on its mbarrier at the same offset. So when each of kCluster CTAs loads one kRows / kCluster-row slice
// of a tile with the full mask, every CTA's full barrier receives the whole tile's bytes: its own producer announces
// them all (arrive.expect_tx of the tile), and the peers' complete_tx may reach the barrier before that announcement
// (the tx-count may go negative within a phase; the phase cannot complete before the local arrival).
//
// A stage written by multicast may be refilled only when the consumers of every CTA of the cluster have released it:
// each consumer warp arrives on that stage's empty barrier in every CTA (mbar_arrive_cluster), so an empty barrier
// counts kCluster x its CTA's consumer warps. A CTA must not exit while a peer may still arrive on its barriers or
// write its shared memory: every thread ends with cluster_arrive() + cluster_wait().
#pragma once
#include <cstdint>
#include <cuda.h>

#include "common/sm90/mbarrier.cuh"

namespace whowaits { namespace sm90 {

// @region inherit

// All threads of the CTA, warp-converged (the .aligned form): the cluster-wide barrier after mbarrier init, which
// also orders the init (fence.mbarrier_init.release.cluster) before any peer's multicast complete_tx or arrive.
__device__ __forceinline__ void cluster_sync_aligned() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// The exit barrier, from divergent code (a warp's lanes may arrive at different times): every thread of the
// cluster arrives once and waits for all the others.
__device__ __forceinline__ void cluster_arrive_wait() {
    asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
}

// One arrival on the mbarrier at `bar`'s offset in the shared memory of CTA `cta_rank` of the cluster (this CTA's
// own rank included). Release at cluster scope: the arriving warp's reads of the stage happen before the peer's
// producer overwrites it.
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t cta_rank) {
    asm volatile(
        "{\n"
        ".reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
        "}\n" ::"r"(smem_addr(bar)),
        "r"(cta_rank)
        : "memory");
}

// A 3-D box load that lands in the shared memory of every CTA in `cta_mask` (same offset as smem_dst here) and
// completes `bytes of the box` on each one's mbarrier at bar's offset.
__device__ __forceinline__ void tma_load_3d_multicast(void* smem_dst, const CUtensorMap* map, uint64_t* bar, int c0,
                                                      int c1, int c2, uint16_t cta_mask) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%2, %3, %4}], [%5], %6;\n"
        ::"r"(smem_addr(smem_dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2),
        "r"(smem_addr(bar)), "h"(cta_mask)
        : "memory");
}

// This CTA's slice of a [kRows][kD] tile (tma.cuh's layout, kD / 64 sub-tiles of [kRows][64]) multicast to all
// kCluster CTAs: rows rank x kRows / kCluster ... of each sub-tile. The tensor map's box is (64, kRows / kCluster);
// a slice starts on a 1024-byte swizzle atom (kRows / kCluster a multiple of 8), so the swizzle of each row is the
// one it has in the whole tile.
template <int kRows, int kD, int kCluster, typename Element>
__device__ __forceinline__ void tma_load_tile_slice_multicast(Element* smem_dst, const CUtensorMap* map, uint64_t* bar,
                                                              int row0, int bh, int rank) {
    constexpr int kSlice = kRows / kCluster;
    static_assert(kRows % kCluster == 0 && kSlice % 8 == 0, "slices of whole 8-row swizzle atoms");
    constexpr uint16_t kMask = static_cast<uint16_t>((1u << kCluster) - 1u);
#pragma unroll
    for (int sub = 0; sub < kD / 64; ++sub)
        tma_load_3d_multicast(smem_dst + sub * kRows * 64 + rank * kSlice * 64, map, bar, sub * 64,
                              row0 + rank * kSlice, bh, kMask);
}

}}  // namespace whowaits::sm90
