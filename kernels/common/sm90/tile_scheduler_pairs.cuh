// A persistent tile order for causal attention that evens out the CTAs' work (v21 on): heavy and light query
// blocks of one head go to the same CTA as a pair.
//
// Under a causal mask query block m of a head reads m + 1 key blocks. StaticTileScheduler (tile_scheduler.cuh)
// hands CTA b the tiles b, b + G, b + 2G, ... (G = gridDim.x) of the head-major, last-block-first order, so the
// blocks a CTA gets depend on b mod (blocks per head): at b4_h16_s4096_d128 (32 blocks a head, G = 132) CTA 0 draws
// blocks of 32, 28, ..., 4 key blocks and CTA 3 blocks of 29, 25, ..., 1, and the busiest CTA has 12% more key
// blocks than the mean (the kernel ends with it). Here each head's blocks are ordered heavy, light, heavy, light
// (m_blocks - 1, 0, m_blocks - 2, 1, ...) and CTA b takes positions 2b and 2b + 1 of every chunk of 2G positions:
// with an even number of blocks per head each pair is one head's blocks m_blocks - 1 - j and j, m_blocks + 1 key
// blocks together, so every CTA's pairs weigh the same and only the last, partial round is uneven (3% at that
// shape). Consecutive positions stay within a head, so a round still reads the K/V of only ~G / m_blocks x 2 heads
// (L2-resident). Without a causal mask, or with fewer than two tiles per CTA, the order is StaticTileScheduler's.
//
// Interface: tile_at(k) = the position of the CTA's k-th tile (increasing in k; >= num_tiles: none left),
// bh(position), row0(position), kv_blocks(row0).
#pragma once
// v44 (WHOWAITS_PARTIAL_SPREAD 1): without a causal mask, where S is no multiple of kBlockM, each head's partial last
// query block (its upper consumers' rows lie beyond S and, with WHOWAITS_IDLE_ROWS, do no work) is moved within its
// head's window of consecutive positions onto a CTA that takes one tile more than the others (b < tiles mod G), one
// head per such CTA in turn. The order of the other query blocks is the window rotated; consecutive positions stay
// within a head. 0 (default): every rung's order as before.
#ifndef WHOWAITS_PARTIAL_SPREAD
#define WHOWAITS_PARTIAL_SPREAD 0
#endif

namespace whowaits { namespace sm90 {

// @region inherit

template <int kBlockM, int kBlockN, bool kCausal>
struct PairedTileScheduler {
    int seqlen, m_blocks, num_tiles;
    bool paired;

    __device__ __forceinline__ PairedTileScheduler(int seqlen_, int num_bh)
        : seqlen(seqlen_), m_blocks((seqlen_ + kBlockM - 1) / kBlockM), num_tiles(m_blocks * num_bh),
          paired(kCausal && num_tiles >= 2 * static_cast<int>(gridDim.x)) {}

    __device__ __forceinline__ int tile_at(int k) const {
        const int g = static_cast<int>(gridDim.x), b = static_cast<int>(blockIdx.x);
        return paired ? (k >> 1) * 2 * g + 2 * b + (k & 1) : b + k * g;
    }
    __device__ __forceinline__ int bh(int pos) const { return pos / m_blocks; }
    __device__ __forceinline__ int row0(int pos) const {
        const int r = pos % m_blocks;
#if WHOWAITS_PARTIAL_SPREAD
        if (!kCausal && seqlen % kBlockM != 0) {  // the partial block (m_blocks - 1) at position partial_at(head)
            const int m = (m_blocks - 1 - r + partial_at(pos / m_blocks)) % m_blocks;
            return m * kBlockM;
        }
#endif
        const int m = !paired ? m_blocks - 1 - r : (r & 1) ? (r >> 1) : m_blocks - 1 - (r >> 1);
        return m * kBlockM;
    }
#if WHOWAITS_PARTIAL_SPREAD
    // Where head h's partial block goes in its window [h m_blocks, (h + 1) m_blocks): onto a CTA b < heavy (the CTAs
    // with one tile more), spread over them head by head; 0 (its first position, the usual order) where the window
    // reaches none of them.
    __device__ __forceinline__ int partial_at(int h) const {
        const int g = static_cast<int>(gridDim.x), heavy = num_tiles % g;
        const int base = static_cast<int>((static_cast<long long>(h) * m_blocks) % g);
        if (heavy == 0 || base >= heavy) return 0;
        const int span = min(heavy - base, m_blocks), per_round = max(1, g / m_blocks);
        return (h / per_round) % span;
    }
#endif
    __device__ __forceinline__ int kv_blocks(int row0) const {
        const int nb = (seqlen + kBlockN - 1) / kBlockN;
        return kCausal ? min(nb, (row0 + kBlockM + kBlockN - 1) / kBlockN) : nb;
    }
};

}}  // namespace whowaits::sm90
