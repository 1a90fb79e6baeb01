// Masking of one S tile in accumulator layout: keys past `seqlen` (tail) and, when causal, keys after the
// query (key > query). Masked scores become -inf, so exp() gives exactly 0.
#pragma once
#include <math_constants.h>

namespace whowaits { namespace common {

// @region softmax
// Does key tile [key0, key0 + kBlockN) need any masking for the CTA's rows [cta_row0, cta_row0 + kBlockM)?
template <int kBlockM, int kBlockN, bool kCausal>
__device__ __forceinline__ bool tile_needs_mask(int key0, int cta_row0, int seqlen) {
    return key0 + kBlockN > seqlen || (kCausal && key0 + kBlockN - 1 > cta_row0);
}

// s[mt][j][e] holds row warp_row0 + 16mt + g + 8(e >> 1), key key0 + 8j + 2t + (e & 1); rows are CTA-relative.
template <int kBlockN, int kMTiles, bool kCausal>
__device__ __forceinline__ void apply_mask(float (&s)[kMTiles][kBlockN / 8][4], int key0, int query0, int seqlen,
                                           int lane) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int j = 0; j < kBlockN / 8; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int key = key0 + j * 8 + 2 * t + (e & 1);
                const int query = query0 + mt * 16 + g + (e >> 1) * 8;
                if (key >= seqlen || (kCausal && key > query)) s[mt][j][e] = -CUDART_INF_F;
            }
        }
    }
}

}}  // namespace whowaits::common
