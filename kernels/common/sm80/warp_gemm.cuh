// The two per-warp tensor-core products of the FA2 forward, on fragments (FlashAttention-2 warp layout:
// a warp owns kMTiles x 16 query rows and all keys of the tile, so no cross-warp reduction is needed).
//
//   S[kMTiles][kBlockN/8][4]  += Q(warp rows, 16 dims at kk) . K(tile, 16 dims at kk)^T    (ldmatrix on K)
//   O[kMTiles][kHeadDim/8][4] += P(warp rows, 16 keys at kk) . V(16 keys at kk, all dims)    (ldmatrix.trans on V)
//
// P stays in registers: the fp32 S accumulators of n-tiles 2kk and 2kk+1 are exactly the A fragment of
// the k16 step kk once packed to 16 bits (see p_fragment).
#pragma once
#include <cstdint>

#include "common/sm80/ldmatrix.cuh"
#include "common/sm80/mma.cuh"
#include "common/sm80/softmax_math.cuh"
#include "common/sm80/swizzle.cuh"

namespace whowaits { namespace common {

// @region inherit
// Lane addresses of the three operands (see LdsmAddr): which row and which half of a 16-column step each
// lane points ldmatrix at.
//   Q (A operand, x4 = rows 0-7|8-15 x cols 0-7|8-15):  row lane & 15,                   chunk lane >> 4
//   K (B operand, x4 = keys 0-7 x 2 col halves, keys 8-15 x 2): row (lane & 7) + 8 (lane >> 4), chunk (lane >> 3) & 1
//   V (B operand via .trans, x4 = keys 0-7|8-15 x dims 0-7|8-15): row lane & 15,          chunk lane >> 4
template <int kHeadDim, bool kSwizzle>
__device__ __forceinline__ LdsmAddr<kHeadDim, kSwizzle> q_lane_addr(uint32_t sq, int warp_row0, int lane) {
    return LdsmAddr<kHeadDim, kSwizzle>(sq + 2u * warp_row0 * kHeadDim, lane & 15, lane >> 4);
}
template <int kHeadDim, bool kSwizzle>
__device__ __forceinline__ LdsmAddr<kHeadDim, kSwizzle> k_lane_addr(uint32_t sk, int lane) {
    return LdsmAddr<kHeadDim, kSwizzle>(sk, (lane & 7) + (lane >> 4) * 8, (lane >> 3) & 1);
}
template <int kHeadDim, bool kSwizzle>
__device__ __forceinline__ LdsmAddr<kHeadDim, kSwizzle> v_lane_addr(uint32_t sv, int lane) {
    return LdsmAddr<kHeadDim, kSwizzle>(sv, lane & 15, lane >> 4);
}

// A fragments of the warp's Q rows for dims [16kk, 16kk+16): one ldmatrix.x4 per m16 tile.
template <int kHeadDim, int kMTiles, bool kSwizzle>
__device__ __forceinline__ void load_q_fragment(uint32_t (&qa)[kMTiles][4], const LdsmAddr<kHeadDim, kSwizzle>& qaddr,
                                                int kk) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) ldmatrix_x4(qa[mt], qaddr.at(mt * 16, 2 * kk));
}

// @region qk
// S += Q_kk . K_kk^T over the whole key tile: one ldmatrix.x4 per 16 keys feeds 2*kMTiles MMAs.
template <typename Element, int kHeadDim, int kBlockN, int kMTiles, bool kSwizzle>
__device__ __forceinline__ void gemm_qk_step(float (&s)[kMTiles][kBlockN / 8][4], const uint32_t (&qa)[kMTiles][4],
                                             const LdsmAddr<kHeadDim, kSwizzle>& kaddr, int kk) {
#pragma unroll
    for (int np = 0; np < kBlockN / 16; ++np) {
        uint32_t b[4];
        ldmatrix_x4(b, kaddr.at(np * 16, 2 * kk));
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
            mma_16816<Element>(s[mt][2 * np], qa[mt], b[0], b[1]);
            mma_16816<Element>(s[mt][2 * np + 1], qa[mt], b[2], b[3]);
        }
    }
}

// @region pv
// A fragment of P for keys [16kk, 16kk+16) from the (already exponentiated) fp32 S accumulators.
template <typename Element, int kBlockN, int kMTiles>
__device__ __forceinline__ void p_fragment(uint32_t (&pa)[kMTiles][4], const float (&s)[kMTiles][kBlockN / 8][4],
                                           int kk) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
        pa[mt][0] = pack2<Element>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        pa[mt][1] = pack2<Element>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        pa[mt][2] = pack2<Element>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        pa[mt][3] = pack2<Element>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
    }
}

// O += P . V over the whole key tile: one ldmatrix.x4.trans per (16 keys, 16 dims) feeds 2*kMTiles MMAs.
template <typename Element, int kHeadDim, int kBlockN, int kMTiles, bool kSwizzle>
__device__ __forceinline__ void gemm_pv(float (&o)[kMTiles][kHeadDim / 8][4], const float (&s)[kMTiles][kBlockN / 8][4],
                                        const LdsmAddr<kHeadDim, kSwizzle>& vaddr) {
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
        uint32_t pa[kMTiles][4];
        p_fragment<Element, kBlockN, kMTiles>(pa, s, kk);
#pragma unroll
        for (int dp = 0; dp < kHeadDim / 16; ++dp) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, vaddr.at(kk * 16, 2 * dp));
#pragma unroll
            for (int mt = 0; mt < kMTiles; ++mt) {
                mma_16816<Element>(o[mt][2 * dp], pa[mt], b[0], b[1]);
                mma_16816<Element>(o[mt][2 * dp + 1], pa[mt], b[2], b[3]);
            }
        }
    }
}

}}  // namespace whowaits::common
