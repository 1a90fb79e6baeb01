// Stream-K over (query tile, key block) units (v40): the persistent grid's tail balanced.
//
// A persistent kernel that hands out whole tiles ends with a partial round: at b4_h16_s4096_d128 2,048 tiles on 132
// CTAs are 15.5 rounds, and in the 16th only 68 CTAs work (v34's PM timeline: the tail is 6.8% of the time at half
// the tensor activity). Here the units of work are the key blocks of all tiles in head-major order (tiles x
// key blocks), and CTA b takes the contiguous units [b U, (b + 1) U) with U = units / gridDim.x. Its range starts in
// the middle of a tile (the tile's tail, whose head the CTA before it computes) and ends in the middle of another
// (that tile's head). Because gridDim.x <= tiles, U >= the key blocks of one tile, so a tile is split between at most
// two CTAs, b and b + 1, and never twice in one CTA.
//
// Order: a CTA walks its tiles in descending order, so the head of its last tile (kv [0, e)) comes FIRST: it writes
// the unnormalised O, the row maxima and the row sums of those rows into its own slot of a workspace
// (write_partial) and publishes them with a flag holding the launch's %gridid. CTA b + 1 reaches the tail of that
// tile (kv [e, n)) LAST, waits for the flag of slot b, and merges (combine): m = max(m_a, m_b), O = O_a 2^((m_a - m)
// c) + O_b 2^((m_b - m) c), l likewise, then stores O / l as any tile. A CTA only ever waits for a lower blockIdx,
// which started before it, and only for work that CTA did first: no cycle, and no wait that a partial residency could
// turn into one. The flag is the launch's %gridid (unique per launch), so the workspace needs no reset and no
// zeroing, and a stale flag of an earlier launch never matches.
//
// Workspace (the kernel's last argument; kernels/launch.py allocates it on the launch's stream): per slot (= CTA)
// kConsumers x 128 threads x (kDTiles x 4 floats of O + 4 floats: m, m', l, l'), then one uint64 flag per consumer
// warp and slot. A thread reads back exactly what the same thread of the other CTA wrote (the same fragment layout).
#pragma once
#include <cstdint>

#include "common/sm80/softmax_math.cuh"

namespace whowaits { namespace sm90 {

// @region inherit

template <int kBlockM, int kBlockN>
struct StreamKScheduler {
    int seqlen, m_blocks, nb, num_tiles;
    int t_first, t_last, first_kv_begin, last_kv_end;  // this CTA's tiles, the first's key begin, the last's key end

    __device__ __forceinline__ StreamKScheduler(int seqlen_, int num_bh)
        : seqlen(seqlen_), m_blocks((seqlen_ + kBlockM - 1) / kBlockM), nb((seqlen_ + kBlockN - 1) / kBlockN),
          num_tiles(m_blocks * num_bh) {
        const long long units = static_cast<long long>(num_tiles) * nb;
        const long long u0 = units * blockIdx.x / gridDim.x, u1 = units * (blockIdx.x + 1) / gridDim.x;
        t_first = static_cast<int>(u0 / nb);
        t_last = static_cast<int>((u1 - 1) / nb);
        first_kv_begin = static_cast<int>(u0 - static_cast<long long>(t_first) * nb);
        last_kv_end = static_cast<int>(u1 - static_cast<long long>(t_last) * nb);
    }
    // The CTA's k-th tile, in descending order (>= num_tiles: none left).
    __device__ __forceinline__ int tile_at(int k) const { return t_last - k >= t_first ? t_last - k : num_tiles; }
    __device__ __forceinline__ int bh(int tile) const { return tile / m_blocks; }
    __device__ __forceinline__ int row0(int tile) const { return (tile % m_blocks) * kBlockM; }
    __device__ __forceinline__ int kv_blocks(int) const { return nb; }  // a whole tile's key blocks
    __device__ __forceinline__ int kv_begin(int tile) const { return tile == t_first ? first_kv_begin : 0; }
    __device__ __forceinline__ int kv_end(int tile) const { return tile == t_last ? last_kv_end : nb; }
    // The head of a tile the next CTA finishes: written to this CTA's slot.
    __device__ __forceinline__ bool writes_partial(int tile) const { return tile == t_last && last_kv_end < nb; }
    // The tail of a tile the previous CTA began: merged with its slot.
    __device__ __forceinline__ bool combines(int tile) const { return tile == t_first && first_kv_begin > 0; }
};

// v41: whole tiles in v34's strided order for the full rounds (CTA b's k-th tile b + k G: the CTAs of a round share
// ~4 heads' K/V in the L2, which v40's contiguous runs lost: DRAM 4 TB/s), and stream-K only over the tiles of the
// last, partial round: their R x nb key-block units split evenly, CTA b taking [b S / G, (b + 1) S / G) of them
// (S = R nb). Those pieces are shorter than a tile (R < G), so a tile may be split among several CTAs: every piece
// that does not end the tile (a head or a middle piece) goes to its CTA's slot, and the CTA whose piece ends it
// merges the slots of all lower CTAs with a piece of it (merge_from .. blockIdx.x - 1, skipping CTAs with no units).
// Each CTA's units lie in at most two tiles, the later one's piece (a partial) comes first in its order, so a CTA
// only waits for lower CTAs' first pieces. Split only where it shortens the busiest CTA (ceil(S / G) < nb); otherwise
// the last round's tiles stay whole (v34's schedule).
template <int kBlockM, int kBlockN>
struct StreamKTailScheduler {
    int seqlen, m_blocks, nb, num_tiles;
    int rounds;    // whole-tile rounds: tiles b + k G, k < rounds
    int base;      // the first split tile (rounds x G); split tiles base .. num_tiles - 1
    int units;     // S: key-block units of the split tiles (0: none split)
    int t_first, t_last, first_kv_begin, last_kv_end;  // this CTA's split pieces (t_first > t_last: none)

    __device__ __forceinline__ StreamKTailScheduler(int seqlen_, int num_bh)
        : seqlen(seqlen_), m_blocks((seqlen_ + kBlockM - 1) / kBlockM), nb((seqlen_ + kBlockN - 1) / kBlockN),
          num_tiles(m_blocks * num_bh) {
        const int g = static_cast<int>(gridDim.x), b = static_cast<int>(blockIdx.x);
        const int full = num_tiles / g, rest = num_tiles - full * g;
        const bool split = rest > 0 && (rest * nb + g - 1) / g < nb;
        rounds = split ? full : (num_tiles + g - 1) / g;
        base = full * g;
        units = split ? rest * nb : 0;
        t_first = 0;
        t_last = -1;
        first_kv_begin = 0;
        last_kv_end = nb;
        const int u0 = unit_begin(b), u1 = unit_begin(b + 1);
        if (u1 > u0) {
            t_first = base + u0 / nb;
            t_last = base + (u1 - 1) / nb;
            first_kv_begin = u0 - (t_first - base) * nb;
            last_kv_end = u1 - (t_last - base) * nb;
        }
    }
    // The first split unit of CTA c (c = gridDim.x: the end).
    __device__ __forceinline__ int unit_begin(int c) const {
        return static_cast<int>(static_cast<long long>(units) * c / static_cast<int>(gridDim.x));
    }
    __device__ __forceinline__ int tile_at(int k) const {
        if (k < rounds) {
            const int t = static_cast<int>(blockIdx.x) + k * static_cast<int>(gridDim.x);
            return t < num_tiles ? t : num_tiles;
        }
        const int t = t_last - (k - rounds);  // the split pieces, the later tile's first
        return t >= t_first ? t : num_tiles;
    }
    __device__ __forceinline__ int bh(int tile) const { return tile / m_blocks; }
    __device__ __forceinline__ int row0(int tile) const { return (tile % m_blocks) * kBlockM; }
    __device__ __forceinline__ int kv_blocks(int) const { return nb; }
    __device__ __forceinline__ int kv_begin(int tile) const { return tile == t_first ? first_kv_begin : 0; }
    __device__ __forceinline__ int kv_end(int tile) const { return tile == t_last ? last_kv_end : nb; }
    // A piece that does not end its tile: to this CTA's slot.
    __device__ __forceinline__ bool writes_partial(int tile) const { return tile >= base && kv_end(tile) < nb; }
    // A piece that ends a tile begun by a lower CTA: merge their slots.
    __device__ __forceinline__ bool combines(int tile) const {
        return tile >= base && kv_begin(tile) > 0 && kv_end(tile) == nb;
    }
    // The lowest CTA with a piece of split tile `tile` (the one holding its first unit).
    __device__ __forceinline__ int merge_from(int tile) const {
        const long long u = static_cast<long long>(tile - base) * nb;
        return static_cast<int>(((u + 1) * static_cast<int>(gridDim.x) - 1) / units);
    }
    __device__ __forceinline__ bool has_units(int c) const { return unit_begin(c + 1) > unit_begin(c); }
};

__device__ __forceinline__ uint64_t grid_id() {
    uint64_t g;
    asm volatile("mov.u64 %0, %%gridid;" : "=l"(g));
    return g;
}

// One slot's layout for kThreads consumer threads holding kDTiles x 4 floats of O each.
template <int kThreads, int kDTiles>
struct StreamKSlots {
    static constexpr int kSlotFloats = kThreads * (kDTiles * 4 + 4);
    float* ws;

    __device__ __forceinline__ float* o(int slot, int ct) const { return ws + slot * kSlotFloats + ct * kDTiles * 4; }
    __device__ __forceinline__ float* ml(int slot, int ct) const {
        return ws + slot * kSlotFloats + kThreads * kDTiles * 4 + ct * 4;
    }
    __device__ __forceinline__ uint64_t* flag(int slot, int warp) const {
        return reinterpret_cast<uint64_t*>(ws + static_cast<int>(gridDim.x) * kSlotFloats) + slot * (kThreads / 32) +
               warp;
    }

    // This warp's rows of a tile's head: O (unnormalised), the raw row maxima and the full row sums; then the
    // warp's flag = the launch's id, released after every lane's stores.
    __device__ __forceinline__ void write_partial(int slot, int ct, int warp, int lane, const float (&acc_o)[kDTiles][4],
                                                  const float (&m)[2], const float (&l)[2]) const {
        float4* dst = reinterpret_cast<float4*>(o(slot, ct));
#pragma unroll
        for (int j = 0; j < kDTiles; ++j) dst[j] = make_float4(acc_o[j][0], acc_o[j][1], acc_o[j][2], acc_o[j][3]);
        *reinterpret_cast<float4*>(ml(slot, ct)) = make_float4(m[0], m[1], l[0], l[1]);
        __threadfence();
        __syncwarp();
        if (lane == 0)
            asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(flag(slot, warp)), "l"(grid_id()) : "memory");
    }

    // v41: merge one lower CTA's piece of this tile into this warp's rows: acc_o, the raw row maxima m and the full
    // row sums l become those of both pieces.
    __device__ __forceinline__ void merge(int slot, int ct, int warp, float (&acc_o)[kDTiles][4], float (&m)[2],
                                          float (&l)[2], float scale_log2) const {
        float unused[2];
        merge_piece<false>(slot, ct, warp, acc_o, m, l, scale_log2, unused);
    }

    // Merge the previous CTA's head of this tile into this warp's tail (acc_o, raw row maxima m, full row sums l),
    // and return 1/l of the whole rows.
    __device__ __forceinline__ void combine(int slot, int ct, int warp, float (&acc_o)[kDTiles][4], const float (&m)[2],
                                            const float (&l)[2], float scale_log2, float (&inv_l)[2]) const {
        float mt[2] = {m[0], m[1]}, lt[2] = {l[0], l[1]};
        merge_piece<true>(slot, ct, warp, acc_o, mt, lt, scale_log2, inv_l);
    }

  private:
    // Wait for slot's flag, then rescale acc_o and the slot's O by 2^((m - max) c) and add them. kFinal: the merged
    // rows are finished, so only 1/l goes out (inv_l); otherwise m and l become the merged ones.
    template <bool kFinal>
    __device__ __forceinline__ void merge_piece(int slot, int ct, int warp, float (&acc_o)[kDTiles][4], float (&m)[2],
                                                float (&l)[2], float scale_log2, float (&inv_l)[2]) const {
        const uint64_t id = grid_id();
        uint64_t seen;
        do {
            asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(seen) : "l"(flag(slot, warp)) : "memory");
        } while (seen != id);
        // .cg loads (L2, not L1): an earlier launch on this SM may have left these lines in L1
        const float4 mlb = __ldcg(reinterpret_cast<const float4*>(ml(slot, ct)));
        const float mb[2] = {mlb.x, mlb.y}, lb[2] = {mlb.z, mlb.w};
        float fa[2], fb[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float mx = fmaxf(m[h], mb[h]);
            fa[h] = whowaits::common::fast_exp2((m[h] - mx) * scale_log2);
            fb[h] = whowaits::common::fast_exp2((mb[h] - mx) * scale_log2);
            const float lt = l[h] * fa[h] + lb[h] * fb[h];
            if constexpr (kFinal) {
                inv_l[h] = lt > 0.f ? __fdividef(1.f, lt) : 0.f;
            } else {
                l[h] = lt;
                m[h] = mx;
            }
        }
        const float4* src = reinterpret_cast<const float4*>(o(slot, ct));
#pragma unroll
        for (int j = 0; j < kDTiles; ++j) {
            const float4 b = __ldcg(src + j);
            acc_o[j][0] = acc_o[j][0] * fa[0] + b.x * fb[0];
            acc_o[j][1] = acc_o[j][1] * fa[0] + b.y * fb[0];
            acc_o[j][2] = acc_o[j][2] * fa[1] + b.z * fb[1];
            acc_o[j][3] = acc_o[j][3] * fa[1] + b.w * fb[1];
        }
    }
};

}}  // namespace whowaits::sm90
