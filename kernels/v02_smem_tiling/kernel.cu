// v02_smem_tiling: v01 plus one step: the CTA stages each kBlockN x kHeadDim tile of K and of V in shared
// memory once (16-byte vector loads, every thread helping, rows past seqlen zero-filled), and all its
// warps read the tile from there instead of each warp re-reading K and V from global memory.
//
// Compute is unchanged from v01: a warp owns kBlockM / kWarps query rows, lanes split the head dimension,
// dot products by shuffle reduction, online softmax per tile. CUDA cores only; kStages must be 1.
// Dynamic shared memory (smem_layout "kv"): K tile then V tile, kBlockN * kHeadDim elements each.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace whowaits {
namespace v02_smem_tiling {
namespace detail {

__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// Copy rows [n0, n0 + kBlockN) of a (seqlen x kHeadDim) matrix into smem, 16 bytes per thread per step.
template <typename Element, int kHeadDim, int kBlockN, int kThreads>
__device__ __forceinline__ void load_tile(Element* __restrict__ dst, const Element* __restrict__ src, int n0,
                                          int seqlen) {
  constexpr int kVec = 16 / sizeof(Element);  // elements per 16-byte vector
  constexpr int kVecsPerRow = kHeadDim / kVec;
  constexpr int kVecs = kBlockN * kVecsPerRow;
  for (int i = threadIdx.x; i < kVecs; i += kThreads) {
    const int row = i / kVecsPerRow, col = (i % kVecsPerRow) * kVec;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (n0 + row < seqlen) val = *reinterpret_cast<const uint4*>(src + (size_t)(n0 + row) * kHeadDim + col);
    *reinterpret_cast<uint4*>(dst + row * kHeadDim + col) = val;
  }
}

}  // namespace detail

template <typename Element, int kHeadDim, int kBlockM, int kBlockN, int kWarps, int kStages, bool kCausal>
__global__ void __launch_bounds__(32 * kWarps)
    flash_fwd(const Element* __restrict__ q, const Element* __restrict__ k, const Element* __restrict__ v,
              Element* __restrict__ o, int seqlen, float softmax_scale) {
  static_assert(kHeadDim % 32 == 0, "v02: head_dim must be a multiple of 32 (lanes split it)");
  static_assert(kBlockM % kWarps == 0, "v02: block_m must be a multiple of warps (rows per warp)");
  static_assert(kStages == 1, "v02: no pipeline, stages must be 1");
  constexpr int kRows = kBlockM / kWarps;
  constexpr int kPerLane = kHeadDim / 32;
  constexpr int kThreads = 32 * kWarps;
  const float kNegInf = __int_as_float(0xff800000);

  extern __shared__ __align__(16) unsigned char smem_raw[];
  Element* sK = reinterpret_cast<Element*>(smem_raw);
  Element* sV = sK + kBlockN * kHeadDim;

  // @region other
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const size_t head_base = ((size_t)blockIdx.z * gridDim.y + blockIdx.y) * (size_t)seqlen * kHeadDim;
  const Element* kh = k + head_base;
  const Element* vh = v + head_base;
  const int row0 = blockIdx.x * kBlockM + warp * kRows;  // may be past seqlen: the warp still helps load

  // @region load_q
  float qr[kRows][kPerLane], acc[kRows][kPerLane], m[kRows], l[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int row = row0 + r;
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      qr[r][t] = row < seqlen ? detail::to_float(q[head_base + (size_t)row * kHeadDim + lane + 32 * t]) : 0.f;
      acc[r][t] = 0.f;
    }
    m[r] = kNegInf;
    l[r] = 0.f;
  }

  // @region other
  // Keys the CTA needs; each warp masks per row.
  const int kv_end = kCausal ? min(seqlen, (int)(blockIdx.x + 1) * kBlockM) : seqlen;
  for (int n0 = 0; n0 < kv_end; n0 += kBlockN) {
    // @region load_kv
    detail::load_tile<Element, kHeadDim, kBlockN, kThreads>(sK, kh, n0, kv_end);
    detail::load_tile<Element, kHeadDim, kBlockN, kThreads>(sV, vh, n0, kv_end);
    __syncthreads();  // @region sync

    // @region qk
    float s[kRows][kBlockN];
#pragma unroll
    for (int j = 0; j < kBlockN; ++j) {
      const int key = n0 + j;
      float kf[kPerLane];
#pragma unroll
      for (int t = 0; t < kPerLane; ++t) kf[t] = detail::to_float(sK[j * kHeadDim + lane + 32 * t]);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float dot = 0.f;
#pragma unroll
        for (int t = 0; t < kPerLane; ++t) dot += qr[r][t] * kf[t];
        dot = detail::warp_sum(dot) * softmax_scale;
        const bool masked = key >= kv_end || (kCausal && key > row0 + r);
        s[r][j] = masked ? kNegInf : dot;
      }
    }
    // @region softmax
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float mx = m[r];
#pragma unroll
      for (int j = 0; j < kBlockN; ++j) mx = fmaxf(mx, s[r][j]);
      const float m_use = mx == kNegInf ? 0.f : mx;
      const float alpha = __expf(m[r] - m_use);
      l[r] *= alpha;
#pragma unroll
      for (int t = 0; t < kPerLane; ++t) acc[r][t] *= alpha;
#pragma unroll
      for (int j = 0; j < kBlockN; ++j) {
        s[r][j] = __expf(s[r][j] - m_use);
        l[r] += s[r][j];
      }
      m[r] = mx;
    }
    // @region pv
#pragma unroll
    for (int j = 0; j < kBlockN; ++j) {
#pragma unroll
      for (int t = 0; t < kPerLane; ++t) {
        const float vf = detail::to_float(sV[j * kHeadDim + lane + 32 * t]);  // zero past kv_end
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r][t] += s[r][j] * vf;
      }
    }
    __syncthreads();  // before the next tile overwrites sK / sV  // @region sync
  }

  // @region epilogue
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int row = row0 + r;
    if (row < seqlen) {
      const float inv = 1.f / l[r];
#pragma unroll
      for (int t = 0; t < kPerLane; ++t)
        o[head_base + (size_t)row * kHeadDim + lane + 32 * t] = detail::from_float<Element>(acc[r][t] * inv);
    }
  }
}

}  // namespace v02_smem_tiling
}  // namespace whowaits
