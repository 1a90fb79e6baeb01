// v01_naive: the starting rung. CUDA cores only, every operand read straight from global memory.
//
// One warp owns kBlockM / kWarps query rows; its 32 lanes split the head dimension (lane owns elements
// lane, lane + 32, ...). For each key the warp loads the key row from global memory, forms the kRows dot
// products with a butterfly shuffle reduction, and after every kBlockN keys applies the online-softmax
// update (running max m, running sum l, rescale of the fp32 accumulator) before reading the value rows,
// again from global memory. No shared memory, no tensor cores; kStages must be 1.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace whowaits {
namespace v01_naive {
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

}  // namespace detail

template <typename Element, int kHeadDim, int kBlockM, int kBlockN, int kWarps, int kStages, bool kCausal>
__global__ void __launch_bounds__(32 * kWarps)
    flash_fwd(const Element* __restrict__ q, const Element* __restrict__ k, const Element* __restrict__ v,
              Element* __restrict__ o, int seqlen, float softmax_scale) {
  static_assert(kHeadDim % 32 == 0, "v01: head_dim must be a multiple of 32 (lanes split it)");
  static_assert(kBlockM % kWarps == 0, "v01: block_m must be a multiple of warps (rows per warp)");
  static_assert(kStages == 1, "v01: no pipeline, stages must be 1");
  constexpr int kRows = kBlockM / kWarps;  // query rows per warp
  constexpr int kPerLane = kHeadDim / 32;  // head-dim elements per lane
  const float kNegInf = __int_as_float(0xff800000);  // -inf

  // @region other
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const size_t head_base = ((size_t)blockIdx.z * gridDim.y + blockIdx.y) * (size_t)seqlen * kHeadDim;
  const int row0 = blockIdx.x * kBlockM + warp * kRows;
  if (row0 >= seqlen) return;  // whole warp past the end (no block-level barriers in this kernel)

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
  // Keys this warp needs: all of them, or (causal) up to its last row.
  const int kv_end = kCausal ? min(seqlen, row0 + kRows) : seqlen;
  for (int n0 = 0; n0 < kv_end; n0 += kBlockN) {
    // @region qk
    float s[kRows][kBlockN];
#pragma unroll
    for (int j = 0; j < kBlockN; ++j) {
      const int key = n0 + j;
      if (key < kv_end) {
        float kf[kPerLane];
#pragma unroll
        for (int t = 0; t < kPerLane; ++t) kf[t] = detail::to_float(k[head_base + (size_t)key * kHeadDim + lane + 32 * t]);  // @region load_kv
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          float dot = 0.f;
#pragma unroll
          for (int t = 0; t < kPerLane; ++t) dot += qr[r][t] * kf[t];
          dot = detail::warp_sum(dot) * softmax_scale;
          s[r][j] = (kCausal && key > row0 + r) ? kNegInf : dot;
        }
      } else {
#pragma unroll
        for (int r = 0; r < kRows; ++r) s[r][j] = kNegInf;
      }
    }
    // @region softmax
    // Online softmax over this chunk of keys.
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float mx = m[r];
#pragma unroll
      for (int j = 0; j < kBlockN; ++j) mx = fmaxf(mx, s[r][j]);
      const float m_use = mx == kNegInf ? 0.f : mx;  // a row with no key yet: keep everything at zero
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
      const int key = n0 + j;
      if (key < kv_end) {
#pragma unroll
        for (int t = 0; t < kPerLane; ++t) {
          const float vf = detail::to_float(v[head_base + (size_t)key * kHeadDim + lane + 32 * t]);  // @region load_kv
#pragma unroll
          for (int r = 0; r < kRows; ++r) acc[r][t] += s[r][j] * vf;
        }
      }
    }
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

}  // namespace v01_naive
}  // namespace whowaits
