// A persistent tile order for clusters of kCluster CTAs that share each K/V tile by multicast (v26 on).
//
// The CTAs of a cluster must walk the same key blocks in the same order, so they take the query blocks
// kCluster j, ..., kCluster j + kCluster - 1 of one head together: a "group". Cluster c (= blockIdx.x / kCluster,
// of gridDim.x / kCluster) takes groups c, c + G', c + 2 G', ... of the head-major order, and the CTA of rank r the
// group's block kCluster j + r. With a number of query blocks per head that is not a multiple of kCluster, the last
// group of a head has ranks without a block of their own: such a CTA still runs the group (row0 past the sequence:
// TMA fills its Q with zeros, the epilogue's store is skipped for rows >= seqlen), so it loads its slices of every
// K/V tile and releases every stage like its peers; its work is wasted, never wrong. Non-causal only (under a causal
// mask the blocks of a group read different numbers of key blocks).
//
// Interface (PairedTileScheduler's): m_blocks, tile_at(k) = the group of the CTA's k-th tile (>= num_tiles: none left),
// bh(group), row0(group) (this CTA's block), kv_blocks(row0).
#pragma once

namespace whowaits { namespace sm90 {

// @region inherit

template <int kBlockM, int kBlockN, int kCluster>
struct ClusterTileScheduler {
    int seqlen, m_blocks, groups_per_head, num_tiles;  // m_blocks: query blocks per head

    __device__ __forceinline__ ClusterTileScheduler(int seqlen_, int num_bh)
        : seqlen(seqlen_), m_blocks((seqlen_ + kBlockM - 1) / kBlockM),
          groups_per_head((m_blocks + kCluster - 1) / kCluster), num_tiles(groups_per_head * num_bh) {}

    __device__ __forceinline__ int tile_at(int k) const {
        const int clusters = static_cast<int>(gridDim.x) / kCluster;
        return static_cast<int>(blockIdx.x) / kCluster + k * clusters;
    }
    __device__ __forceinline__ int bh(int group) const { return group / groups_per_head; }
    __device__ __forceinline__ int row0(int group) const {
        const int rank = static_cast<int>(blockIdx.x) % kCluster;
        return ((group % groups_per_head) * kCluster + rank) * kBlockM;
    }
    __device__ __forceinline__ int kv_blocks(int) const { return (seqlen + kBlockN - 1) / kBlockN; }
};

}}  // namespace whowaits::sm90
