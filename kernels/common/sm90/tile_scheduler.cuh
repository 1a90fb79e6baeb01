// The static persistent tile scheduler of the warp-specialised rungs from v20 on (v13-v19 carry their own copy as
// lambdas): one CTA per SM walks tiles blockIdx.x, + gridDim.x, ... of the ceil(S / kBlockM) x (B·H) tiles. Tile t
// is (bh, query block): consecutive tiles share a head (its K/V stay in L2 while the CTAs of one round read them),
// and within a head the query blocks come last-first, so under a causal mask the heaviest tiles (the most key
// blocks) are handed out first and the light ones fill the tail.
#pragma once

namespace whowaits { namespace sm90 {

// @region inherit

template <int kBlockM, int kBlockN, bool kCausal>
struct StaticTileScheduler {
    int seqlen, m_blocks, num_tiles;

    __device__ __forceinline__ StaticTileScheduler(int seqlen_, int num_bh)
        : seqlen(seqlen_), m_blocks((seqlen_ + kBlockM - 1) / kBlockM), num_tiles(m_blocks * num_bh) {}

    // The (batch · head) index of a tile.
    __device__ __forceinline__ int bh(int tile) const { return tile / m_blocks; }
    // The first query row of a tile: the last query block of a head first.
    __device__ __forceinline__ int row0(int tile) const { return (m_blocks - 1 - tile % m_blocks) * kBlockM; }
    // Key blocks a tile starting at query row row0 reads: all of them, or under a causal mask those that hold a
    // key <= the tile's last row (the blocks above the diagonal are skipped, not masked).
    __device__ __forceinline__ int kv_blocks(int row0) const {
        const int nb = (seqlen + kBlockN - 1) / kBlockN;
        return kCausal ? min(nb, (row0 + kBlockM + kBlockN - 1) / kBlockN) : nb;
    }
};

}}  // namespace whowaits::sm90
