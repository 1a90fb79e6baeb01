// 2^x on the FMA pipe (FlashAttention-4's MUFU relief, here on Hopper): for the softmax's exponentials, most of which
// stay on the MUFU (XU) pipe, one in kEvery is computed by this polynomial instead, so the XU queue sees shorter
// bursts. For x <= 0 (scores minus the row max): clamp at -127 (2^-127 flushes to 0 in the fp16/bf16 P anyway, and
// exp2(-inf) of a masked key must come out 0), split x = j + f with j = round(x) through the 1.5 x 2^23 trick (the
// integer lands in the low mantissa bits of t), 2^f on [-0.5, 0.5] by a degree-3 polynomial (relative error 7.5e-5
// by an iteratively reweighted fit, under the 4.9e-4 of fp16 P's rounding), and 2^j added to the exponent field.
// SASS: FMNMX, 3 FADD, 3 FFMA, 1 LEA (8 instructions on the FMA / ALU pipes for one MUFU.EX2).
#pragma once
#include <cstdint>

namespace whowaits { namespace sm90 {

// @region inherit

__device__ __forceinline__ float exp2_poly(float x) {
    x = fmaxf(x, -127.f);
    const float t = x + 12582912.f;  // 1.5 x 2^23: t's low mantissa bits hold round(x)
    const float j = t - 12582912.f;
    const float f = x - j;           // in [-0.5, 0.5]
    float p = fmaf(0.05517823249101639f, f, 0.24261169135570526f);
    p = fmaf(p, f, 0.6932597756385803f);
    p = fmaf(p, f, 0.9999279975891113f);
    // exponent += j: (bits(t) << 23) is j << 23 modulo 2^32 (bits(t) = 0x4B400000 + j)
    return __int_as_float(__float_as_int(p) + (__float_as_int(t) << 23));
}

}}  // namespace whowaits::sm90
