// 2^x on the FMA pipe (FlashAttention-4's MUFU relief, here on Hopper): for the softmax's exponentials, most of which
// stay on the MUFU (XU) pipe, one in kEvery is computed by this polynomial instead, so the XU queue sees shorter
// bursts. For x <= 0 (scores minus the row max): clamp at -127 (2^-127 flushes to 0 in the fp16/bf16 P anyway, and
// exp2(-inf) of a masked key must come out 0), split x = j + f with j = round(x) through the 1.5 x 2^23 trick (the
// integer lands in the low mantissa bits of t), 2^f on [-0.5, 0.5] by a degree-3 polynomial (relative error 7.5e-5
// by an iteratively reweighted fit, under the 4.9e-4 of fp16 P's rounding), and 2^j added to the exponent field.
// SASS: FMNMX, 3 FADD, 3 FFMA, 1 LEA (8 instructions on the FMA / ALU pipes for one MUFU.EX2); exp2_poly_fmul: 9.
#pragma once
#include <cstdint>

namespace whowaits { namespace sm90 {

// @region inherit

// The shared part: p = 2^f and t (t's low mantissa bits hold j = round(x)).
__device__ __forceinline__ float exp2_poly_parts(float x, float& t) {
    x = fmaxf(x, -127.f);
    t = x + 12582912.f;  // 1.5 x 2^23: t's low mantissa bits hold round(x)
    const float j = t - 12582912.f;
    const float f = x - j;  // in [-0.5, 0.5]
    float p = fmaf(0.05517823249101639f, f, 0.24261169135570526f);
    p = fmaf(p, f, 0.6932597756385803f);
    return fmaf(p, f, 0.9999279975891113f);
}

// v23: 2^j added to p's exponent field by an integer add, (bits(t) << 23) = j << 23 modulo 2^32 (bits(t) =
// 0x4B400000 + j). Written into a wgmma accumulator register (softmax exponentiates S in place) this integer result
// makes ptxas serialise the wgmma pipeline (C7511), whatever the register pressure (nvcc 13.0: one column tile in 16).
__device__ __forceinline__ float exp2_poly(float x) {
    float t;
    const float p = exp2_poly_parts(x, t);
    return __int_as_float(__float_as_int(p) + (__float_as_int(t) << 23));
}

// v28 on: the same 2^x ending in an FMUL, p x 2^j with 2^j = bits (j + 127) << 23 = (bits(t) << 23) + bits(1.0f):
// one instruction more than exp2_poly (9), and a floating-point result, which ptxas lets into a wgmma accumulator
// without serialising the pipeline (no C7511 at one column tile in 2, 4, 8 or 16; nvcc 13.0).
__device__ __forceinline__ float exp2_poly_fmul(float x) {
    float t;
    const float p = exp2_poly_parts(x, t);
    return p * __int_as_float((__float_as_int(t) << 23) + 0x3f800000);
}

}}  // namespace whowaits::sm90
